"""Where a chunk sits in its file: PDF pages, the heading path, or CSV rows (``values.ChunkPlace``).

The chunker (``chunking.py``) hands each parent block's text to a :class:`PlaceReader` as it cuts it, in
order, and asks the place of the block and of each child inside it; the reader keeps only what the current
block needs (the headings open at its start, the lines before it), so a streamed document of any size is
read in bounded memory.
"""

from __future__ import annotations

import bisect
import re
from typing import Callable, Literal, Sequence

from docmind_core.values import ChunkPlace

PlaceKind = Literal["pages", "sections", "rows"]

_HEADING_LINE_RE = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
SECTION_JOIN = " › "


def place_kind(mime: str) -> PlaceKind:
    """How a file of this type is cited: PDFs by page, CSV by row, the rest by heading path."""
    if mime == "application/pdf":
        return "pages"
    if mime == "text/csv":
        return "rows"
    return "sections"


class PlaceReader:
    """The places of chunks cut from one text, read block by block.

    ``page_starts``: for a PDF, the offset in the text where each page begins (page 1 at index 0).
    CSV rows: the text holds one data row per line, so row N (the header being row 1) is line N - 2.
    """

    def __init__(self, kind: PlaceKind, page_starts: Sequence[int] = ()):
        self.kind = kind
        self.page_starts = list(page_starts)
        self.pos = 0  # the text before this offset has been read
        self.lines_before = 0  # line breaks before ``pos``
        self.open_headings: list[tuple[int, str]] = []  # (level, title) open at ``pos``
        self.block_start = 0
        self.block_text = ""
        self.block_lines = 0  # line breaks before ``block_start``
        self.block_headings: list[tuple[int, tuple[tuple[int, str], ...]]] = []  # (offset, headings open there)

    def read_block(self, text_between: Callable[[int, int], str], end: int) -> None:
        """Read the text up to ``end`` (the end of the parent block about to be placed)."""
        if end <= self.pos:
            return
        text = text_between(self.pos, end)
        self.block_start, self.block_text = self.pos, text
        self.block_lines = self.lines_before
        self.block_headings = [(self.pos, tuple(self.open_headings))]
        if self.kind == "sections":
            for match in _HEADING_LINE_RE.finditer(text):
                level = len(match.group(1))
                while self.open_headings and self.open_headings[-1][0] >= level:
                    self.open_headings.pop()
                self.open_headings.append((level, match.group(2).strip()))
                self.block_headings.append((self.pos + match.start(), tuple(self.open_headings)))
        self.lines_before += text.count("\n")
        self.pos = end

    def page_at(self, offset: int) -> int:
        """The page (1-based) the character at ``offset`` is on; 0 when the pages are unknown."""
        return max(1, bisect.bisect_right(self.page_starts, offset)) if self.page_starts else 0

    def place(self, start: int, end: int) -> ChunkPlace:
        """The place of the text ``[start, end)`` inside the block last read."""
        if self.kind == "pages":
            if not self.page_starts:
                return ChunkPlace()
            return ChunkPlace(page_first=self.page_at(start), page_last=self.page_at(max(start, end - 1)))
        if self.kind == "rows":
            offset = self.block_start
            first = self.block_lines + self.block_text.count("\n", 0, max(0, start - offset))
            last = self.block_lines + self.block_text.count("\n", 0, max(0, end - offset))
            return ChunkPlace(row_first=first + 2, row_last=last + 2)
        at = bisect.bisect_right([o for o, _ in self.block_headings], start) - 1
        headings = self.block_headings[max(0, at)][1]
        return ChunkPlace(section=SECTION_JOIN.join(title for _, title in headings))
