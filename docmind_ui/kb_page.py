"""Small pure helpers of the Knowledge bases page: the true upload limit, scores for a table, and the KB the
page opens on."""

from __future__ import annotations

import math
from typing import Iterable, Sequence

from docmind_core.ingest.job_types import IngestJob

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


def kb_of_active_job(jobs: Iterable[IngestJob], kb_ids: Sequence[int], user_id: int | None) -> int | None:
    """The KB of the newest queued or running ingest job among ``kb_ids``, one ``user_id`` enqueued first: the
    page returns to it when the user comes back (a job of another KB is otherwise out of sight)."""
    active = [j for j in jobs if not j.finished and j.kb_id in kb_ids]
    if not active:
        return None
    return min(active, key=lambda j: (j.user_id != user_id, -j.id)).kb_id


def score_3(value: float | None) -> float | None:
    """A score rounded to 3 decimals for a table (None stays None: the stage did not score it)."""
    return None if value is None else round(float(value), 3)
