"""Sentence-aware parent/child chunking for Chinese and English text.

The text is cut into *units*: sentences (``text.split_sentences``), with any
sentence longer than a child chunk cut again at token boundaries.  Units are
grouped into *parent blocks* of up to ``parent_tokens`` (a Markdown heading
starts a new block), and each parent is packed into *child chunks* of up to
``child_tokens`` with about ``overlap`` tokens of whole trailing sentences
repeated at the start of the next child.  Children never cross a parent
boundary, so every child lies inside exactly one parent.

Ids hash (kb, document name, kind, offsets, text): re-ingesting unchanged
text yields the same ids, so citations and traces stay valid.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from docmind_core.ingest.places import PlaceReader
from docmind_core.values import ChunkPlace, ChunkRecord
from docmind_core.text.tokens import NONBLANK_RE, SentenceScanner, count_tokens, iter_token_spans

_HEADING_RE = re.compile(r"#{1,6}\s")


@dataclass(frozen=True)
class TextChunk:
    """A chunk cut from a document's text, before it has a document id."""

    id: str
    index: int
    is_parent: bool
    parent_id: str | None
    text: str
    token_count: int
    start: int
    end: int
    terms: str | None = None  # keyword tokens (see ChunkRecord.terms); set by the Ingestor for children
    place: ChunkPlace = field(default_factory=ChunkPlace)  # pages, heading path or rows (given a PlaceReader)

    def to_record(self, kb_id: int, doc_id: int) -> ChunkRecord:
        return ChunkRecord(id=self.id, kb_id=kb_id, doc_id=doc_id, index=self.index, is_parent=self.is_parent,
                           parent_id=self.parent_id, text=self.text, token_count=self.token_count,
                           start=self.start, end=self.end, terms=self.terms, place=self.place)


@dataclass(frozen=True)
class _Unit:
    start: int
    end: int
    tokens: int
    heading: bool  # starts with a Markdown heading


def chunk_id(kb_id: int, doc_name: str, kind: str, start: int, end: int, text: str) -> str:
    digest = hashlib.sha1(f"{kb_id}\x1f{doc_name}\x1f{kind}\x1f{start}\x1f{end}\x1f{text}".encode("utf-8"))
    return digest.hexdigest()


def chunk_document(kb_id: int, doc_name: str, text: str, child_tokens: int, overlap: int,
                   parent_tokens: int, places: PlaceReader | None = None) -> tuple[list[TextChunk], list[TextChunk]]:
    """Cut ``text`` into (parents, children); offsets index into ``text``; ``places`` says where each one sits."""
    parents: list[TextChunk] = []
    children: list[TextChunk] = []
    for parent, kids in iter_chunk_blocks(kb_id, doc_name, text, child_tokens, overlap, parent_tokens, places):
        parents.append(parent)
        children.extend(kids)
    return parents, children


def iter_chunk_blocks(kb_id: int, doc_name: str, text: str, child_tokens: int, overlap: int,
                      parent_tokens: int, places: PlaceReader | None = None
                      ) -> Iterator[tuple[TextChunk, list[TextChunk]]]:
    """:func:`chunk_document` one parent block at a time, with that block's children."""
    return iter_stream_blocks(kb_id, doc_name, [text], child_tokens, overlap, parent_tokens, places)


def iter_stream_blocks(kb_id: int, doc_name: str, pieces: Iterable[str], child_tokens: int, overlap: int,
                       parent_tokens: int, places: PlaceReader | None = None
                       ) -> Iterator[tuple[TextChunk, list[TextChunk]]]:
    """The blocks of the text ``"".join(pieces)``, reading the pieces as they are needed.

    Only the current block and the text not yet cut are held, so a document of any size is chunked in
    bounded memory; the chunks (offsets into the joined text) are the same whatever the pieces.
    """
    if child_tokens <= 0:
        raise ValueError("child_tokens must be positive")
    overlap = max(0, min(overlap, child_tokens // 2))  # an overlap near the chunk size would barely advance
    parent_tokens = max(parent_tokens, child_tokens)
    units = _UnitStream(pieces, child_tokens)
    parent_count = child_count = 0
    page_at = places.page_at if places is not None and places.kind == "pages" else None
    for group in _parent_groups(units, parent_tokens, page_at):
        parent = _make_chunk(kb_id, doc_name, units.slice, "parent", group[0].start, group[-1].end,
                             parent_count, None, places)
        units.release(group[-1].end)
        if parent is None:
            continue
        parent_count += 1
        kids: list[TextChunk] = []
        for first, last in _child_windows(group, child_tokens, overlap):
            child = _make_chunk(kb_id, doc_name, units.slice, "child", group[first].start, group[last].end,
                                child_count, parent.id, places)
            if child is not None:
                kids.append(child)
                child_count += 1
        yield parent, kids


def _make_chunk(kb_id: int, doc_name: str, text_between: Callable[[int, int], str], kind: str, start: int,
                end: int, index: int, parent_id: str | None, places: PlaceReader | None) -> TextChunk | None:
    if places is not None and kind == "parent":
        places.read_block(text_between, end)  # the parent comes first, so its children are inside what it read
    piece = text_between(start, end)
    stripped = piece.strip()
    if not stripped:
        return None
    start += len(piece) - len(piece.lstrip())
    end = start + len(stripped)
    return TextChunk(id=chunk_id(kb_id, doc_name, kind, start, end, stripped), index=index,
                     is_parent=kind == "parent", parent_id=parent_id, text=stripped,
                     token_count=count_tokens(stripped), start=start, end=end,
                     place=places.place(start, end) if places is not None else ChunkPlace())


@dataclass
class _Cut:
    """An over-long sentence being cut at token boundaries into units of at most ``max_tokens``."""

    heading: bool
    piece_start: int  # where the unit being filled began
    token_pos: int  # tokens before this offset are counted
    used: int = 0
    first: bool = True


class _UnitStream:
    """Units of ``"".join(pieces)``: sentences, with over-long ones cut at token boundaries.

    A sentence longer than a child chunk is cut while it is still arriving (a text without
    punctuation is one sentence), so neither a sentence nor the text is ever held whole.
    """

    def __init__(self, pieces: Iterable[str], max_tokens: int):
        self.pieces = pieces
        self.max_tokens = max_tokens
        self.scanner = SentenceScanner()
        self.cut: _Cut | None = None  # of the open sentence, cut before its end is known
        self.cut_start = -1  # the open sentence's start
        self.released = 0  # the consumer needs no text before this offset

    def slice(self, start: int, end: int) -> str:
        return self.scanner.slice(start, end)

    def release(self, offset: int) -> None:
        self.released = max(self.released, offset)

    def __iter__(self) -> Iterator[_Unit]:
        for piece in self.pieces:
            if not piece:
                continue
            self.scanner.feed(piece)
            yield from self._drain()
            keep = min(self.released, self.cut.piece_start if self.cut is not None else self.scanner.piece_start)
            self.scanner.discard_before(keep)
        self.scanner.finish()
        yield from self._drain()

    def _drain(self) -> Iterator[_Unit]:
        for start, end in self.scanner.spans():
            yield from self._sentence_units(start, end)
        open_piece = self.scanner.open_piece()
        if open_piece is None:
            return
        start, scanned = open_piece
        if self.cut is None or self.cut_start != start:
            if scanned - start <= self.max_tokens:
                return  # it may still fit one unit
            first = NONBLANK_RE.search(self.scanner.text, start - self.scanner.base, scanned - self.scanner.base)
            if first is None or scanned - (first.start() + self.scanner.base) < 8:
                return  # not enough of it to tell a heading yet
            self.cut = _Cut(heading=self._heading(start, scanned), piece_start=start, token_pos=start)
            self.cut_start = start
        yield from self._cut_units(self.cut, scanned, None)

    def _heading(self, start: int, end: int) -> bool:
        text, base = self.scanner.text, self.scanner.base
        first = NONBLANK_RE.search(text, start - base, end - base)
        return first is not None and _HEADING_RE.match(text, first.start(), end - base) is not None

    def _sentence_units(self, start: int, end: int) -> Iterator[_Unit]:
        if self.cut is not None and self.cut_start == start:
            cut, self.cut, self.cut_start = self.cut, None, -1
            yield from self._cut_units(cut, end, end)
            return
        text, base = self.scanner.text, self.scanner.base
        if NONBLANK_RE.search(text, start - base, end - base) is None:
            return
        heading = self._heading(start, end)
        if end - start <= self.max_tokens:  # a token is at least one character: it fits
            yield _Unit(start, end, count_tokens(text[start - base:end - base]), heading)
            return
        yield from self._cut_units(_Cut(heading=heading, piece_start=start, token_pos=start), end, end)

    def _cut_units(self, cut: _Cut, upto: int, end: int | None) -> Iterator[_Unit]:
        """Cut at the tokens before ``upto``; with the sentence's ``end``, also yield its last unit.

        Without it, a token reaching ``upto`` may go on in the next piece: it waits.
        """
        base = self.scanner.base
        for tok_start, tok_end, cost in iter_token_spans(self.scanner.text, cut.token_pos - base, upto - base):
            if end is None and tok_end + base >= upto:
                break
            if cut.used + cost > self.max_tokens and cut.used > 0:
                yield _Unit(cut.piece_start, tok_start + base, cut.used, cut.heading and cut.first)
                cut.piece_start, cut.used, cut.first = tok_start + base, 0, False
            cut.used += cost
            cut.token_pos = tok_end + base
        if end is not None:
            yield _Unit(cut.piece_start, end, cut.used, cut.heading and cut.first)


def _parent_groups(units: Iterable[_Unit], parent_tokens: int,
                   page_at: Callable[[int], int] | None = None) -> Iterator[list[_Unit]]:
    current: list[_Unit] = []
    used = 0
    for unit in units:
        # A heading opens a new block, unless the block so far holds only headings (a title over a section).
        starts_section = unit.heading and any(not u.heading for u in current)
        # So does a new page (a sentence across the break stays in the block it starts in): a citation
        # then names one page, or two when its passage crosses a break.
        starts_page = page_at is not None and current and page_at(unit.start) != page_at(current[0].start)
        if current and (used + unit.tokens > parent_tokens or starts_section or starts_page):
            yield current
            current, used = [], 0
        current.append(unit)
        used += unit.tokens
    if current:
        yield current


def _child_windows(group: list[_Unit], child_tokens: int, overlap: int) -> list[tuple[int, int]]:
    """(first, last) unit indexes of each child; consecutive children share trailing units up to ``overlap``."""
    windows: list[tuple[int, int]] = []
    first, used = 0, 0
    i = 0
    while i < len(group):
        tokens = group[i].tokens
        if used + tokens <= child_tokens or i == first:
            used += tokens
            i += 1
            continue
        windows.append((first, i - 1))
        # Start the next child with the previous child's last units, up to the overlap budget,
        # but never so many that unit i would not fit beside them.
        new_first, carried = i, 0
        while (new_first - 1 > first and carried + group[new_first - 1].tokens <= overlap
               and carried + group[new_first - 1].tokens + tokens <= child_tokens):
            new_first -= 1
            carried += group[new_first].tokens
        first, used = new_first, carried
    if first < len(group):
        windows.append((first, len(group) - 1))
    return windows
