"""Cutting text for display without cutting a word in half.

Every place that shortens a chunk, a question or a title for a person to read goes through
:func:`clip_words` (or :func:`word_window` for a slice inside a longer text): an English word is never
cut in the middle, and a cut is marked with an ellipsis.  CJK text has no spaces between words, so
there any character boundary is a fine place to cut.
"""

from __future__ import annotations

ELLIPSIS = "…"

# How far back (in characters) a cut may move to reach a word boundary before it gives up and cuts
# the over-long "word" (a URL, a hash) where it stands.
_MAX_BACKTRACK = 40


def _is_cjk(ch: str) -> bool:
    code = ord(ch)
    return (0x3000 <= code <= 0x30FF or 0x3400 <= code <= 0x4DBF or 0x4E00 <= code <= 0x9FFF
            or 0xF900 <= code <= 0xFAFF or 0xFF00 <= code <= 0xFFEF or 0xAC00 <= code <= 0xD7AF)


def _boundary_at(text: str, i: int) -> bool:
    """True when a cut between ``text[i-1]`` and ``text[i]`` splits no word."""
    if i <= 0 or i >= len(text):
        return True
    before, after = text[i - 1], text[i]
    if before.isspace() or after.isspace():
        return True
    if _is_cjk(before) or _is_cjk(after):
        return True
    # punctuation ends a word (a comma, a closing bracket), but "3.5" or "NIM-201" stays whole
    return not before.isalnum() and not after.isalnum()


def end_boundary(text: str, end: int) -> int:
    """The nearest position at or before ``end`` where a cut splits no word."""
    end = max(0, min(end, len(text)))
    for i in range(end, max(0, end - _MAX_BACKTRACK) - 1, -1):
        if _boundary_at(text, i):
            return i if i > 0 else end
    return end


def start_boundary(text: str, start: int) -> int:
    """The nearest position at or after ``start`` where a cut splits no word."""
    start = max(0, min(start, len(text)))
    for i in range(start, min(len(text), start + _MAX_BACKTRACK) + 1):
        if _boundary_at(text, i):
            return i
    return start


def clip_words(text: str, limit: int, flatten: bool = False) -> str:
    """``text`` in at most ``limit`` characters (ellipsis included), cut between words.

    ``flatten`` folds runs of whitespace (line breaks included) into single spaces first, for one-line labels.
    """
    if flatten:
        text = " ".join(text.split())
    if len(text) <= limit:
        return text
    if limit <= 1:
        return ELLIPSIS[:limit]
    cut = end_boundary(text, limit - 1)
    return text[:cut].rstrip() + ELLIPSIS


def word_window(text: str, start: int, end: int) -> tuple[int, int]:
    """The slice ``[start, end)`` widened/narrowed to word boundaries (``start`` moves forward, ``end`` back)."""
    new_start = start_boundary(text, start) if start > 0 else 0
    new_end = end_boundary(text, end) if end < len(text) else len(text)
    if new_end <= new_start:  # one enormous token: keep the requested slice rather than nothing
        return start, end
    return new_start, new_end
