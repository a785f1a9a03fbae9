"""A table row as ingested text: one line stating each cell under its column's name.

"Plan: Team · Price per seat: 12 EUR · Seats: 5–50" — every row of a table (CSV, DOCX, HTML, Markdown, a
table found in a PDF) is written this way, so a row read alone, in any chunk, still says what each value
is; the claim checks and the offline reader parse it back with :func:`parse_row_statement` (the row's
entity is its first cell, each attribute a column).
"""

from __future__ import annotations

import re
from typing import Sequence

CELL_SEPARATOR = " · "
_PAIR_RE = re.compile(r"^\s*([^:：]{1,80}?)\s*[:：]\s*(.*?)\s*$")
_SPACE_RE = re.compile(r"\s+")


def row_statement(headers: Sequence[str], cells: Sequence[str]) -> str:
    """The row as one line: "Header: cell" pairs joined by " · " (a cell without a header is named
    "column N"; empty cells are left out)."""
    pairs = []
    for index, cell in enumerate(cells):
        value = _clean(cell)
        if not value:
            continue
        name = _clean(headers[index]) if index < len(headers) else ""
        pairs.append(f"{name or f'column {index + 1}'}: {value}")
    return CELL_SEPARATOR.join(pairs)


def parse_row_statement(line: str) -> tuple[list[str], list[str]] | None:
    """(column names, cells) of a row statement; None for a line that is not one (fewer than two pairs)."""
    parts = line.strip().split(CELL_SEPARATOR)  # spaced: "莱昂德罗·内托" is one name, not two cells
    if len(parts) < 2:
        return None
    headers, cells = [], []
    for part in parts:
        match = _PAIR_RE.match(part)
        if match is None or not match.group(2):
            return None
        headers.append(match.group(1))
        cells.append(match.group(2))
    return headers, cells


def _clean(cell: str) -> str:
    """A cell on one line, without the separator inside it."""
    return _SPACE_RE.sub(" ", cell.replace(CELL_SEPARATOR, " / ")).strip()
