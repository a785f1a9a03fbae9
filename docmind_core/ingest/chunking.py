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
from dataclasses import dataclass
from typing import Iterable, Iterator

from docmind_core.models import ChunkRecord
from docmind_core.text import count_tokens, iter_sentence_spans, iter_token_spans

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

    def to_record(self, kb_id: int, doc_id: int) -> ChunkRecord:
        return ChunkRecord(id=self.id, kb_id=kb_id, doc_id=doc_id, index=self.index, is_parent=self.is_parent,
                           parent_id=self.parent_id, text=self.text, token_count=self.token_count,
                           start=self.start, end=self.end, terms=self.terms)


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
                   parent_tokens: int) -> tuple[list[TextChunk], list[TextChunk]]:
    """Cut ``text`` into (parents, children); offsets index into ``text``."""
    parents: list[TextChunk] = []
    children: list[TextChunk] = []
    for parent, kids in iter_chunk_blocks(kb_id, doc_name, text, child_tokens, overlap, parent_tokens):
        parents.append(parent)
        children.extend(kids)
    return parents, children


def iter_chunk_blocks(kb_id: int, doc_name: str, text: str, child_tokens: int, overlap: int,
                      parent_tokens: int) -> Iterator[tuple[TextChunk, list[TextChunk]]]:
    """:func:`chunk_document` one parent block at a time, with that block's children.

    Nothing but the current block is held, so a document of any size is chunked in bounded memory
    (besides its text); the chunks are the same as :func:`chunk_document`'s.
    """
    if child_tokens <= 0:
        raise ValueError("child_tokens must be positive")
    overlap = max(0, min(overlap, child_tokens // 2))  # an overlap near the chunk size would barely advance
    parent_tokens = max(parent_tokens, child_tokens)
    parent_count = child_count = 0
    for group in _parent_groups(_units(text, child_tokens), parent_tokens):
        parent = _make_chunk(kb_id, doc_name, text, "parent", group[0].start, group[-1].end, parent_count, None)
        if parent is None:
            continue
        parent_count += 1
        kids: list[TextChunk] = []
        for first, last in _child_windows(group, child_tokens, overlap):
            child = _make_chunk(kb_id, doc_name, text, "child", group[first].start, group[last].end,
                                child_count, parent.id)
            if child is not None:
                kids.append(child)
                child_count += 1
        yield parent, kids


def _make_chunk(kb_id: int, doc_name: str, text: str, kind: str, start: int, end: int, index: int,
                parent_id: str | None) -> TextChunk | None:
    piece = text[start:end]
    stripped = piece.strip()
    if not stripped:
        return None
    start += len(piece) - len(piece.lstrip())
    end = start + len(stripped)
    return TextChunk(id=chunk_id(kb_id, doc_name, kind, start, end, stripped), index=index,
                     is_parent=kind == "parent", parent_id=parent_id, text=stripped,
                     token_count=count_tokens(stripped), start=start, end=end)


def _units(text: str, max_tokens: int) -> Iterator[_Unit]:
    """Sentences, with over-long ones cut at token boundaries into pieces of at most ``max_tokens``."""
    for start, end in iter_sentence_spans(text):
        sentence = text[start:end]
        if not sentence.strip():
            continue
        heading = bool(_HEADING_RE.match(sentence.lstrip()))
        if len(sentence) <= max_tokens:  # a token is at least one character: it fits
            yield _Unit(start, end, count_tokens(sentence), heading)
            continue
        piece_start, used, first_piece = 0, 0, True
        for tok_start, _tok_end, cost in iter_token_spans(sentence):
            if used + cost > max_tokens and used > 0:
                yield _Unit(start + piece_start, start + tok_start, used, heading and first_piece)
                piece_start, used, first_piece = tok_start, 0, False
            used += cost
        yield _Unit(start + piece_start, end, used, heading and first_piece)


def _parent_groups(units: Iterable[_Unit], parent_tokens: int) -> Iterator[list[_Unit]]:
    current: list[_Unit] = []
    used = 0
    for unit in units:
        # A heading opens a new block, unless the block so far holds only headings (a title over a section).
        starts_section = unit.heading and any(not u.heading for u in current)
        if current and (used + unit.tokens > parent_tokens or starts_section):
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
