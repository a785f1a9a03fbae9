"""Small pure helpers of the Knowledge bases page: the true upload limit and scores for a table."""

from __future__ import annotations

import math

import streamlit as st


def upload_limit(max_file_mb: float, server_cap_mb: int | None = None) -> tuple[int, str]:
    """(the uploader's limit in whole MB, its help text) from ``ingest.max_file_mb``.

    The uploader states its limit under the drop zone; Streamlit's default is ``server.maxUploadSize``, which
    is not the limit DocMind applies.  The server's cap still bounds what a browser can send, so the smaller
    of the two is the true limit.
    """
    cap = int(server_cap_mb if server_cap_mb is not None else st.get_option("server.maxUploadSize"))
    limit_mb = min(float(max_file_mb), float(cap))
    help_text = f"Up to {limit_mb:g} MB per file (ingest.max_file_mb"
    help_text += f"; the server accepts at most {cap} MB: server.maxUploadSize)." if max_file_mb > cap else ")."
    return max(1, math.ceil(limit_mb)), help_text


def score_3(value: float | None) -> float | None:
    """A score rounded to 3 decimals for a table (None stays None: the stage did not score it)."""
    return None if value is None else round(float(value), 3)
