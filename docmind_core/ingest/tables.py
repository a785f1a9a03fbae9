"""Tables of DOCX, HTML and Markdown files as text: one line per row, each a statement of its cells under
its column's name (``text/table_rows.py``), so a row read alone in any chunk still says what its values are.

The first row is the header (an HTML table's row of ``<th>`` cells, when it has one); a table of one row
states its cells as they are.
"""

from __future__ import annotations

import re
from typing import Sequence

from docmind_core.text.table_rows import row_statement


def table_text(rows: Sequence[Sequence[str]]) -> str:
    """The rows of a table (its first row the header) as row statements, one a line."""
    rows = [[" ".join(c.split()) for c in row] for row in rows if any(c.strip() for c in row)]
    if not rows:
        return ""
    header, body = rows[0], rows[1:]
    if not body:
        return " | ".join(c for c in header if c)
    return "\n".join(line for line in (row_statement(header, row) for row in body) if line)


# --------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------


def replace_html_tables(soup) -> None:
    """Put each ``<table>`` of the parsed page (innermost first) as row statements in its place."""
    for table in reversed(soup.find_all("table")):
        rows = []
        for tr in table.find_all("tr"):
            cells = []
            for cell in tr.find_all(["td", "th"], recursive=False):
                span = _span(cell.get("colspan"))
                cells.extend([cell.get_text(" ", strip=True)] * span)
            if cells:
                rows.append((cells, all(c.name == "th" for c in tr.find_all(["td", "th"], recursive=False))))
        header_at = next((i for i, (_, is_header) in enumerate(rows) if is_header), 0)
        ordered = [rows[header_at][0]] + [cells for i, (cells, _) in enumerate(rows) if i != header_at] if rows else []
        table.replace_with("\n" + table_text(ordered) + "\n")


def _span(value) -> int:
    try:
        return max(1, min(int(value), 50))
    except (TypeError, ValueError):
        return 1


# --------------------------------------------------------------------------
# DOCX
# --------------------------------------------------------------------------


def docx_table_text(table) -> str:
    """A python-docx table as row statements (a merged cell, which python-docx repeats, is stated once)."""
    rows = []
    for row in table.rows:
        cells: list[str] = []
        seen: set[int] = set()
        for cell in row.cells:
            if id(cell._tc) in seen:  # a horizontally merged cell comes back once per grid column
                cells.append("")
                continue
            seen.add(id(cell._tc))
            cells.append(cell.text.strip())
        rows.append(cells)
    return table_text(rows)


# --------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------

_PIPE_ROW_RE = re.compile(r"^\s*\|?(.+\|.+?)\|?\s*$")
_RULE_RE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*$")


def markdown_tables(text: str) -> str:
    """``text`` with each Markdown pipe table (a header row, a ``|---|`` rule, its rows) as row statements."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        if i + 1 < len(lines) and _PIPE_ROW_RE.match(lines[i]) and _RULE_RE.match(lines[i + 1]):
            end = i + 2
            while end < len(lines) and _PIPE_ROW_RE.match(lines[end]) and lines[end].strip():
                end += 1
            rows = [_pipe_cells(line) for line in [lines[i], *lines[i + 2:end]]]
            out.append(table_text(rows))
            i = end
            continue
        out.append(lines[i])
        i += 1
    return "\n".join(out)


def _pipe_cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
