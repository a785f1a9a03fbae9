"""A PDF page rendered as an image, with a cited span marked from the text layer's character boxes.

Rendering uses pypdfium2 (PDFium), an optional extra (``pip install 'docmind[pages]'``): without it a source
card says how to get page images and everything else works.  The span is found in the page's text with
spaces, line breaks and hyphens ignored (a quote joins what the page wraps), and every character of it is
marked: the boxes of one line are merged into one band.
"""

from __future__ import annotations

import io
import re
import unicodedata
from dataclasses import dataclass

from docmind_core.errors import IngestError, PageImagesUnavailable

HIGHLIGHT_RGBA = (255, 214, 0, 110)
_SKIPPED_RE = re.compile(r"[\s\-\u00ad\u2010\u2011]")



@dataclass(frozen=True)
class PageImage:
    png: bytes
    page: int  # 1-based
    marked: bool  # the span was found on the page and marked


def render_page(data: bytes, page: int, span: str = "", scale: float = 1.5, name: str = "the PDF") -> PageImage:
    """Page ``page`` (1-based) of the PDF ``data`` as a PNG, with ``span`` marked where the page's text holds it."""
    try:
        import pypdfium2 as pdfium
    except ImportError:
        raise PageImagesUnavailable("page images need the pypdfium2 package: pip install 'docmind[pages]'") from None
    from PIL import Image, ImageDraw

    try:
        document = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        raise IngestError(f"{name}: cannot be opened for a page image ({exc})") from None
    try:
        if not 1 <= page <= len(document):
            raise IngestError(f"{name} has {len(document)} pages, not a page {page}")
        pdf_page = document[page - 1]
        image = pdf_page.render(scale=scale).to_pil().convert("RGBA")
        bands = _span_bands(pdf_page, span) if span.strip() else []
        if bands:
            _, height = pdf_page.get_size()
            layer = Image.new("RGBA", image.size, (0, 0, 0, 0))
            draw = ImageDraw.Draw(layer)
            for left, bottom, right, top in bands:
                draw.rectangle([left * scale - 1, (height - top) * scale - 1, right * scale + 1,
                                (height - bottom) * scale + 1], fill=HIGHLIGHT_RGBA)
            image = Image.alpha_composite(image, layer)
        out = io.BytesIO()
        image.convert("RGB").save(out, format="PNG", optimize=True)
        return PageImage(png=out.getvalue(), page=page, marked=bool(bands))
    finally:
        document.close()


def _normal(ch: str) -> str:
    return unicodedata.normalize("NFKC", ch).lower()


def _runs(textpage) -> list[tuple[str, list[int]]]:
    """The page's characters cut into runs of one line of one column: (their text, normalised, without
    spaces and hyphens; their indexes in the text layer).  A run ends at a line break, a change of line or
    a gap wider than a few characters (a gutter between columns, a table's cell boundary)."""
    count = textpage.count_chars()
    text = textpage.get_text_range(0, count)
    runs: list[tuple[str, list[int]]] = []
    chars: list[str] = []
    indexes: list[int] = []
    last: tuple[float, float, float, float] | None = None
    for index, ch in enumerate(text[:count]):
        if ch in "\r\n":
            last = None
            if chars:
                runs.append(("".join(chars), indexes))
                chars, indexes = [], []
            continue
        box = textpage.get_charbox(index, loose=True)  # the font's line box: a "g" reaches no lower than an "a"
        size = max(1.0, box[3] - box[1])
        if last is not None and chars and (abs(box[1] - last[1]) > 0.5 * size or box[0] - last[2] > 2.5 * size):
            runs.append(("".join(chars), indexes))
            chars, indexes = [], []
        if not ch.isspace():
            last = box
        if not _SKIPPED_RE.match(ch):
            chars.append(_normal(ch))
            indexes.append(index)
    if chars:
        runs.append(("".join(chars), indexes))
    return runs


def _span_bands(pdf_page, span: str) -> list[tuple[float, float, float, float]]:
    """The boxes (PDF points: left, bottom, right, top) of ``span`` on the page, one per line it covers.

    The span is followed from run to run (a line of a column), whatever order the text layer holds the runs
    in: a page written line by line across two columns holds each column's lines apart."""
    textpage = pdf_page.get_textpage()
    try:
        runs = _runs(textpage)
        needle = "".join(_normal(ch) for ch in span if not _SKIPPED_RE.match(ch))
        found = _follow(runs, needle) or (_follow(runs, needle[:40]) if len(needle) > 40 else [])
        bands = []
        for run, start, end in found:
            boxes = [textpage.get_charbox(i, loose=True) for i in runs[run][1][start:end]]
            bands.append((min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes),
                          max(b[3] for b in boxes)))
        return bands
    finally:
        textpage.close()


def _follow(runs: list[tuple[str, list[int]]], needle: str) -> list[tuple[int, int, int]]:
    """(run, start, end) pieces that spell ``needle``: it starts inside one run and goes on at the start
    of other runs; [] when the page does not hold it."""
    if not needle:
        return []
    for first, (text, _) in enumerate(runs):
        at = text.find(needle)
        if at >= 0:
            return [(first, at, at + len(needle))]
    for first, (text, _) in enumerate(runs):
        for at in range(len(text)):
            head = text[at:]
            if len(head) < 4 or not needle.startswith(head):
                continue
            pieces, done, used = [(first, at, len(text))], len(head), {first}
            while done < len(needle):
                rest = needle[done:]
                # the run that goes on with the most of what is left (a long run that agrees is no accident)
                fits = [r for r, (t, _) in enumerate(runs) if r not in used and t and (rest.startswith(t)
                                                                                     or t.startswith(rest))]
                if not fits:
                    break
                nxt = max(fits, key=lambda r: min(len(runs[r][0]), len(rest)))
                taken = min(len(runs[nxt][0]), len(rest))
                pieces.append((nxt, 0, taken))
                used.add(nxt)
                done += taken
            if done >= len(needle):
                return pieces
    return []
