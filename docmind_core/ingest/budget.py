"""How much text one file may unpack to, counted while it is extracted.

A small file can unpack to far more text than it holds: a PDF whose pages share one compressed 70 MB
content stream, a CSV whose every value is rendered under a long column name.  The parsers charge a
:class:`TextBudget` as they go (each page, paragraph, row or piece), so such a file is refused as soon as
it passes ``ingest.max_text_mb``, long before its text (or the parsed PDF operators behind it) fills the
memory, and never only after the whole text exists.

A PDF page's content streams are measured before pypdf parses them (a bounded inflate that keeps
nothing): pypdf parses a page's whole content into Python objects before any text comes out, at ~10-20 s
and up to ~45 MB per MB of content on a loaded host.  A page is refused when its content is over 1/16 of
the text limit, at least 1 MB (4 MB by default; a dense page of text needs under 100 KB), and the file when all the content
it has made pypdf parse is over 1 MB and over 32 times what its distinct content streams store (a compression
bomb: text deflates 3-6 times, and a stream that many pages draw is stored once but parsed for each).  Then the page's text is charged.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any

from docmind_core.errors import IngestError

MB = 1024 * 1024
# The default of ingest.max_text_mb, for callers without settings: the same as the default file limit.
DEFAULT_MAX_TEXT_CHARS = 64 * MB
# Decoded page content one PDF may have pypdf parse, whatever its size: ~10-20 s on a loaded host.
PDF_CONTENT_FLOOR_BYTES = 1 * MB
# ... and beyond that floor, at most this many times what the distinct content streams store (deflate packs
# text 3-6 times).
PDF_CONTENT_EXPANSION = 32
_INFLATE_STEP = 1 << 20  # decoded bytes per zlib call while counting


@dataclass
class TextBudget:
    """Characters one file's extraction may still produce; :meth:`take` refuses the file once they run out."""

    name: str  # the document name messages use
    max_chars: int
    used: int = 0
    content_used: int = 0  # decoded PDF page content handed to pypdf so far
    stored_bytes: int = 0  # the stored (compressed) size of the distinct content streams met so far
    met_streams: set[object] = field(default_factory=set)

    @classmethod
    def of_megabytes(cls, name: str, megabytes: float) -> "TextBudget":
        return cls(name, max(1, int(megabytes * MB)))

    @property
    def left(self) -> int:
        return max(0, self.max_chars - self.used)

    @property
    def page_content_limit(self) -> int:
        return max(MB, self.max_chars // 16)

    @property
    def content_limit(self) -> int:
        return max(PDF_CONTENT_FLOOR_BYTES, PDF_CONTENT_EXPANSION * self.stored_bytes)

    def take(self, chars: int) -> None:
        """Count ``chars`` more characters of extracted text; raises :class:`IngestError` past the limit."""
        self.used += chars
        if self.used > self.max_chars:
            raise IngestError(f"{self.name}: its text unpacks to more than {self.max_chars / MB:g} MB "
                              f"(ingest.max_text_mb); extraction stopped there. Split the file or raise the limit")

    def text(self, text: str) -> str:
        """``text``, counted."""
        self.take(len(text))
        return text

    def measure_pdf_page(self, page: Any, number: int) -> None:
        """Refuse the file before pypdf parses page ``number`` when its content unpacks past the limits."""
        streams = page_streams(page)
        for stream in streams:  # a stream many pages draw is stored once but parsed for each
            key = _stream_key(stream)
            if key not in self.met_streams:
                self.met_streams.add(key)
                self.stored_bytes += len(getattr(stream, "_data", b"") or b"")
        page_limit = self.page_content_limit
        file_left = self.content_limit - self.content_used
        size = content_size(streams, min(page_limit, file_left))
        if size > page_limit:
            raise IngestError(f"{self.name}: page {number} unpacks to more than {page_limit / MB:g} MB of page "
                              f"content (a compression bomb?; the page limit is 1/16 of ingest.max_text_mb, at "
                              f"least 1 MB); the PDF is not read")
        self.content_used += size
        if self.content_used > self.content_limit:
            raise IngestError(f"{self.name}: by page {number} its pages unpack to more than "
                              f"{self.content_limit / MB:g} MB of content, {PDF_CONTENT_EXPANSION} times what their "
                              f"content streams store (a compression bomb?); the PDF is not read")


def page_streams(page: Any) -> list[Any]:
    """A pypdf page's content streams and the form XObjects it can draw (whose text pypdf extracts too)."""
    from pypdf.generic import ArrayObject, StreamObject

    streams: list[Any] = []
    contents = page.get("/Contents")
    if contents is not None:
        contents = contents.get_object()
        streams = [item.get_object() for item in contents] if isinstance(contents, ArrayObject) else [contents]
    return [s for s in streams if isinstance(s, StreamObject)] + _form_xobjects(page)


def content_size(streams: list[Any], limit: int) -> int:
    """The decoded size of ``streams``, counted up to just past ``limit`` without keeping them.

    A FlateDecode stream (what a bomb uses) is inflated a step at a time and dropped; a stream under any other
    filter is decoded by pypdf, whose own caps bound it.
    """
    total = 0
    for stream in streams:
        total += _stream_size(stream, limit - total)
        if total > limit:
            break
    return total


def _stream_key(stream: Any) -> object:
    ref = getattr(stream, "indirect_reference", None)
    return (ref.idnum, ref.generation) if ref is not None else id(stream)


def _form_xobjects(holder: Any, seen: set[object] | None = None) -> list[Any]:
    """The form XObjects reachable from ``holder``'s resources (forms drawing forms), each once."""
    from pypdf.generic import DictionaryObject, IndirectObject, StreamObject

    seen = set() if seen is None else seen
    found: list[Any] = []
    resources = holder.get("/Resources")
    resources = resources.get_object() if resources is not None else None
    xobjects = resources.get("/XObject") if isinstance(resources, DictionaryObject) else None
    xobjects = xobjects.get_object() if xobjects is not None else None
    if not isinstance(xobjects, DictionaryObject):
        return found
    for ref in xobjects.values():
        form = ref.get_object()
        key = (ref.idnum, ref.generation) if isinstance(ref, IndirectObject) else id(form)
        if not isinstance(form, StreamObject) or form.get("/Subtype") != "/Form" or key in seen:
            continue
        seen.add(key)
        found.append(form)
        found += _form_xobjects(form, seen)
    return found


def _stream_size(stream: Any, limit: int) -> int:
    filters = stream.get("/Filter")
    names = [str(f) for f in filters] if isinstance(filters, list) else ([str(filters)] if filters else [])
    raw = getattr(stream, "_data", None)  # the encoded bytes as stored in the file
    if names in (["/FlateDecode"], ["/Fl"]) and isinstance(raw, bytes) and stream.get("/DecodeParms") is None:
        return _inflated_size(raw, limit)
    return len(stream.get_data() or b"")


def _inflated_size(raw: bytes, limit: int) -> int:
    """Bytes ``raw`` inflates to, counted up to just past ``limit``; a damaged stream counts what came out
    before the damage (pypdf's own decoding then decides what it gives)."""
    inflater = zlib.decompressobj(zlib.MAX_WBITS | 32)  # a zlib or gzip header, as pypdf reads it
    size = 0
    data = raw
    try:
        while size <= limit:
            out = inflater.decompress(data, _INFLATE_STEP)
            size += len(out)
            data = inflater.unconsumed_tail
            if inflater.eof or (not out and not data):
                break
    except zlib.error:
        pass
    return size
