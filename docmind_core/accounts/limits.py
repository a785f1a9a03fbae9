"""Size caps on what enters DocMind from outside (``limits.*``), and the refusal of empty input, checked before
any work is done.

An oversize question or ``kbIds`` list is refused with a message naming the
config key, instead of costing seconds of tokenising or one database lookup
per id (and a log line listing them all).
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from docmind_core.errors import EmptyInput, InputTooLarge
from docmind_core.settings import Settings



def require_text(text: str, what: str = "question") -> str:
    """``text`` when it has something to read; an empty or whitespace-only question or query is refused here, at
    the edge (CLI, MCP, the pages' Workbench), rather than run: it failed half-way as "retrieval incomplete"."""
    if not isinstance(text, str) or not text.strip():
        raise EmptyInput(f"the {what} is empty: type a {what} with at least one word")
    return text


def check_question(text: str, settings: Settings, what: str = "question") -> None:
    limit = settings.limits.max_question_chars
    if len(text) > limit:
        raise InputTooLarge(f"the {what} is {len(text):,} characters long; at most {limit:,} are accepted "
                            "(limits.max_question_chars)")


def check_kb_ids(kb_ids: Sequence[Any] | None, settings: Settings) -> None:
    limit = settings.limits.max_kb_ids
    if kb_ids is not None and len(kb_ids) > limit:
        raise InputTooLarge(f"kbIds names {len(kb_ids):,} knowledge bases; at most {limit:,} are accepted per "
                            "request (limits.max_kb_ids)")


def check_argument_text(text: str, settings: Settings, what: str) -> None:
    limit = settings.limits.max_tool_argument_bytes
    size = len(text.encode("utf-8", "replace"))
    if size > limit:
        raise InputTooLarge(f"{what} is {size:,} bytes; at most {limit:,} are accepted "
                            "(limits.max_tool_argument_bytes)")


def tool_arguments_problem(arguments: Mapping[str, Any], raw: str, settings: Settings) -> str:
    """Why a model's tool-call arguments are too large, or "" when they fit."""
    limit = settings.limits.max_tool_argument_bytes
    text = raw or json.dumps(arguments, ensure_ascii=False, default=str)
    size = len(text.encode("utf-8", "replace"))
    if size > limit:
        return f"arguments are {size:,} bytes; at most {limit:,} are accepted (limits.max_tool_argument_bytes)"
    chars = settings.limits.max_question_chars
    for key, value in arguments.items():
        if key in ("query", "text") and isinstance(value, str) and len(value) > chars:
            return (f"{key} is {len(value):,} characters long; at most {chars:,} are accepted "
                    "(limits.max_question_chars)")
    return ""


def clipped_arguments(arguments: Mapping[str, Any], keep: int = 200) -> dict[str, Any]:
    """Arguments with long strings cut, for the trace of a refused call."""
    return {str(k)[:keep]: (v[:keep] + f"… ({len(v):,} characters)" if isinstance(v, str) and len(v) > keep
                            else v if isinstance(v, (int, float, bool)) or v is None
                            else str(v)[:keep])
            for k, v in list(arguments.items())[:20]}


def check_tool_call(arguments: Mapping[str, Any], settings: Settings) -> None:
    """InputTooLarge when a direct tool call (MCP, one-shot workers) carries an oversize query or text."""
    for key, value in arguments.items():
        if not isinstance(value, str):
            continue
        if key == "query":
            check_question(value, settings, what="query")
        else:
            check_argument_text(value, settings, what=key)
