"""Ids that come from outside (MCP arguments, CLI arguments), parsed once where they enter.

A record id is a whole number from 1 to 2**63-1, what SQLite can store; a larger one used to reach a query and
crash it (``OverflowError``: a traceback in the server log for every request).  A text id (a run, a
conversation) is a short run of letters, digits and ``_.:-``, as DocMind writes them.  An id outside that is
refused here with :class:`InvalidId`, before any lookup, with words that name the argument and the valid form
and never quote more than the start of what was sent.

Every edge uses these parsers: the MCP tools (:data:`RecordIdArgument` puts the range into the tool schema
an agent reads; the service parses the values), the CLI's parameter types (``commands/__init__.py``), and the
Workbench for the ids its callers pass; the access guard treats an id no KB can have as an unknown one.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Iterable

from pydantic import Field, TypeAdapter, ValidationError, WithJsonSchema

from docmind_core.errors import InvalidId

MAX_RECORD_ID = 2**63 - 1  # SQLite's largest INTEGER
_TEXT_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
_LONGEST_ID_TEXT = 30  # characters of a record id sent as text ("42"): more than any id in range has
_SHOWN_CHARS = 40  # of a refused id in a message: enough to recognise it, never a whole blob

RecordId = Annotated[int, Field(ge=1, le=MAX_RECORD_ID)]
_RECORD_ID = TypeAdapter(RecordId)
# An MCP tool argument: its schema states RecordId's range to the agent, while the SDK only checks that it is a
# whole number, so record_id refuses the rest in DocMind's words (not pydantic's, with its links).
RecordIdArgument = Annotated[int, WithJsonSchema(_RECORD_ID.json_schema())]



def _shown(value: Any) -> str:
    """What was sent, briefly: a number as its digits (a huge one by its size: Python will not even print a
    number of more than 4,300 digits), a text quoted and cut, anything else by its type."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value) if value.bit_length() <= 256 else f"a {value.bit_length():,}-bit number"
    if isinstance(value, str):
        return repr(value[:_SHOWN_CHARS] + ("…" if len(value) > _SHOWN_CHARS else ""))
    return f"a {type(value).__name__}"


def is_record_id(value: Any) -> bool:
    """Whether ``value`` is an int any record could have (a lookup may run on it)."""
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_RECORD_ID


def record_id(value: Any, what: str) -> int:
    """``value`` (an int, or the digits of one) as a record id; :class:`InvalidId` otherwise."""
    try:
        if isinstance(value, bool) or (isinstance(value, str) and len(value) > _LONGEST_ID_TEXT):
            raise ValueError("not an id")
        return _RECORD_ID.validate_python(value)
    except (ValidationError, ValueError):
        raise InvalidId(f"{what}: {_shown(value)} is not a valid id (ids are whole numbers from 1 to "
                        f"{MAX_RECORD_ID})") from None


def record_ids(values: Iterable[Any] | None, what: str) -> list[int] | None:
    """Each of ``values`` through :func:`record_id` (None stays None: "not given")."""
    if values is None:
        return None
    return [record_id(v, what) for v in values]


def text_id(value: Any, what: str) -> str:
    """``value`` as a run or conversation id: 1-128 letters, digits and ``_.:-``; :class:`InvalidId` otherwise."""
    if isinstance(value, str) and _TEXT_ID_RE.fullmatch(value):
        return value
    raise InvalidId(f"{what}: {_shown(value)} is not a valid id (1 to 128 letters, digits and _.:- "
                    "starting with a letter or digit)")
