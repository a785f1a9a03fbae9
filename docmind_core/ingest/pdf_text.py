"""A PDF's text as a reader sees it, with the offset where each page begins.

pypdf's layout reading gives every line of text with its position and width (``text_show_operations``,
the layout-mode extractor's first step).  From those:

* a running header or footer (the same line at the top or bottom of most pages, page numbers aside) and a
  bare page number are dropped;
* a two-column page is read column by column: a gutter that many lines stop before and as many start
  after, which no line crosses (a title across both columns is read where it stands);
* a table (lines of two or more narrow cells in the same columns) becomes one line per row, each a
  statement of its cells under the first row's headers ("Plan: Team · Price per seat: 12 EUR");
* a line that leaves no room at its column's right edge for the next line's first word was wrapped: it
  is joined to the next line (a hyphen at its end dropped before a lower-case letter), with a space, or
  with nothing between CJK characters.  A line that stops short (a heading, a paragraph's last line)
  keeps its break;
* the same holds across a page break, so a sentence that crosses it stays one sentence.

When the layout cannot be read (a font pypdf cannot measure), the page's plain text is used, its
wrapped lines joined by punctuation and case alone.
"""

from __future__ import annotations

import io
import logging
import re
from collections import Counter
from dataclasses import dataclass, replace

from docmind_core.errors import IngestError
from docmind_core.ingest.budget import DEFAULT_MAX_TEXT_CHARS, TextBudget
from docmind_core.text.table_rows import row_statement

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PdfText:
    """The text of a PDF and, for each page, the offset in it where the page begins (page 1 first)."""

    text: str
    page_starts: tuple[int, ...]


@dataclass(frozen=True)
class Fragment:
    """A run of text on one line of a page: x from its left to its right end, y its baseline (up)."""

    x0: float
    x1: float
    y: float
    height: float
    text: str


@dataclass(frozen=True)
class Line:
    """A line in reading order: its text, where it stands and the right edge of the column it is in."""

    text: str
    x0: float
    x1: float
    y: float
    height: float
    right: float  # the column's right edge: a line reaching it was wrapped
    block: int  # lines of one column region share it; a table row is a block of its own
    row: bool = False  # a table row statement: never joined to a neighbour


# --------------------------------------------------------------------------
# Reading the file
# --------------------------------------------------------------------------


def read_pdf(name: str, data: bytes, budget: TextBudget | None = None) -> PdfText:
    """The text of the PDF ``data`` (named ``name`` in messages), pages in order, with their start offsets.
    ``budget`` measures each page's content before it is parsed and counts its text (a compression bomb stops
    at the page that passes the limit, not after all of them)."""
    budget = budget if budget is not None else TextBudget(name, DEFAULT_MAX_TEXT_CHARS)
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    if not data.lstrip().startswith(b"%PDF"):
        raise IngestError(f"{name}: not a valid PDF (the file does not start with %PDF)")
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            try:
                reader.decrypt("")
            except Exception:
                raise IngestError(f"{name}: the PDF is password-protected") from None
        pages = [_budgeted_page(budget, page, number) for number, page in enumerate(reader.pages, 1)]
    except IngestError:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError, OSError) as exc:
        raise IngestError(f"{name}: corrupt or unreadable PDF ({exc})") from None
    except Exception as exc:  # pypdf raises many internal types on damaged files
        raise IngestError(f"{name}: corrupt or unreadable PDF ({type(exc).__name__}: {exc})") from None
    return assemble(pages)


def _budgeted_page(budget: TextBudget, page, number: int) -> list[Fragment] | str:
    """Page ``number``'s fragments (or plain text): its content measured before it is parsed, its characters
    counted against the file's text budget after."""
    budget.measure_pdf_page(page, number)
    read = _page_fragments(page)
    budget.take(len(read) if isinstance(read, str) else sum(len(f.text) for f in read))
    return read


def _page_fragments(page) -> list[Fragment] | str:
    """The page's text fragments with their positions; its plain text when its layout cannot be read."""
    try:
        fragments = _layout_fragments(page)
    except (ImportError, AttributeError, KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        # the layout reader is pypdf's own (a private module): a font it cannot measure, or a pypdf
        # that moved it, leaves the plain text, joined by punctuation and case alone
        log.info("PDF page read without its layout (%s: %s)", type(exc).__name__, exc)
        return page.extract_text() or ""
    if not fragments:
        return page.extract_text() or ""  # a page whose text pypdf's plain reader finds but its layout does not
    return fragments


_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f\s]+")  # control characters and blank runs: one space


def _layout_fragments(page) -> list[Fragment]:
    from pypdf.generic import ArrayObject, ContentStream, StreamObject
    from pypdf._text_extraction import _layout_mode

    contents = page.get("/Contents")
    if contents is not None:
        contents = contents.get_object()
    if not isinstance(contents, (ArrayObject, StreamObject)):
        return []
    ops = iter(ContentStream(contents, page.pdf, "bytes").operations)
    groups = _layout_mode.text_show_operations(ops, page._layout_mode_fonts(), True, None)
    out = []
    for group in groups:
        text = _CONTROL_RE.sub(" ", group["text"]).strip()
        if text:
            out.append(Fragment(x0=float(group["tx"]), x1=float(group["displaced_tx"]),
                                y=float(group["ty"]) * group["flip_sort"],
                                height=float(group["font_height"] or group["font_size"] or 10.0), text=text))
    return out


# --------------------------------------------------------------------------
# Assembling the pages
# --------------------------------------------------------------------------


def assemble(pages: list[list[Fragment] | str]) -> PdfText:
    """The document's text from each page's fragments (or plain text), headers and footers dropped."""
    laid = [_visual_lines(p) if isinstance(p, list) else p for p in pages]
    repeated = _running_lines(laid)
    parts: list[str] = []
    starts: list[int] = []
    length = 0
    previous: Line | None = None  # the last line of the previous page, when it may go on here
    for page in laid:
        if isinstance(page, str):
            text, last = _unwrap_plain(page.strip()), None
            drop, first_join = 0, "\n\n"
        else:
            lines = _reading_order(_drop_running(page, repeated, len(laid)))
            text = _join_lines(lines)
            last = lines[-1] if lines else None
            drop, first_join = _page_join(previous, lines[0]) if previous is not None and lines else (0, "\n\n")
        if not text:
            starts.append(length)
            continue
        if parts:
            if drop:  # the hyphen that split a word across the page break
                parts[-1] = parts[-1][:-drop]
                length -= drop
            parts.append(first_join)
            length += len(first_join)
        starts.append(length)
        parts.append(text)
        length += len(text)
        previous = last
    return PdfText(text="".join(parts), page_starts=tuple(starts))


def _visual_lines(fragments: list[Fragment]) -> list[list[Fragment]]:
    """The fragments grouped into lines (same baseline), top to bottom, each line's fragments left to right;
    fragments close enough to read as one run of text are merged."""
    rows: list[list[Fragment]] = []
    for frag in sorted(fragments, key=lambda f: (-f.y, f.x0)):
        if rows and abs(rows[-1][0].y - frag.y) <= 0.3 * max(frag.height, rows[-1][0].height):
            rows[-1].append(frag)
        else:
            rows.append([frag])
    merged: list[list[Fragment]] = []
    for row in rows:
        row.sort(key=lambda f: f.x0)
        out = [row[0]]
        for frag in row[1:]:
            prev = out[-1]
            gap = frag.x0 - prev.x1
            if gap < 1.2 * prev.height:  # a word gap, not a gutter or a cell boundary
                text = prev.text + ("" if gap < 0.15 * prev.height or _cjk_join(prev.text, frag.text) else " ")
                out[-1] = replace(prev, x1=max(prev.x1, frag.x1), text=text + frag.text)
            else:
                out.append(frag)
        merged.append(out)
    return merged


_PAGE_NUMBER_RE = re.compile(r"^(?:page|p\.|seite|第)?\s*[-–—]?\s*(\d{1,4})\s*(?:(?:/|of|von|共)\s*\d{1,4})?\s*"
                             r"[-–—]?\s*(?:页)?$", re.IGNORECASE)


def _line_key(row: list[Fragment]) -> str:
    """A line as a running header or footer is recognised: digits (page numbers, dates) left out."""
    return re.sub(r"\s+", " ", re.sub(r"\d+", "#", " ".join(f.text for f in row))).strip().lower()


_RUNNING_LINE_MAX_CHARS = 120  # a header or footer is a short line; a body line repeated on every page is text


def _edge_rows(page: list[list[Fragment]]) -> list[list[Fragment]]:
    """The lines a header or footer can be: two at each end, one on a short page, none on a page of two lines
    (whose lines are its body, however often they repeat)."""
    if len(page) > 4:
        return page[:2] + page[-2:]
    return page[:1] + page[-1:] if len(page) > 2 else []


def _running_lines(pages: list[list[list[Fragment]] | str]) -> set[str]:
    """The keys of lines at the top or bottom of at least half the pages (and two): headers and footers."""
    laid = [p for p in pages if not isinstance(p, str)]
    if len(laid) < 2:
        return set()
    counts = Counter(key for page in laid for key in {_line_key(row) for row in _edge_rows(page)
                                                      if len(_line_key(row)) <= _RUNNING_LINE_MAX_CHARS})
    need = max(2, (len(laid) + 1) // 2)
    return {key for key, n in counts.items() if n >= need and key.strip("# ")}


def _drop_running(page: list[list[Fragment]], repeated: set[str], pages: int) -> list[list[Fragment]]:
    """The page without its running headers and footers, nor a bare page number at its top or bottom (a
    number no larger than the document's page count: "2026" alone over a one-page letter stays)."""
    edges = {id(row) for row in _edge_rows(page)}
    kept = []
    for row in page:
        if id(row) in edges:
            text = " ".join(f.text for f in row).strip()
            number = _PAGE_NUMBER_RE.match(text)
            if _line_key(row) in repeated or (number and int(number.group(1)) <= pages + 1):
                continue
        kept.append(row)
    return kept


# --------------------------------------------------------------------------
# Reading order: columns and tables
# --------------------------------------------------------------------------


def _reading_order(page: list[list[Fragment]]) -> list[Line]:
    """The page's lines in the order they are read: tables as row statements, two columns one after the other."""
    if not page:
        return []
    left = min(f.x0 for row in page for f in row)
    right = max(f.x1 for row in page for f in row)
    width = max(1.0, right - left)
    table_rows = _table_rows(page, width)
    gutter = _gutter(page, width, table_rows)
    lines: list[Line] = []
    block = 0
    region: list[list[Fragment]] = []  # rows of a two-column region, waiting to be read column by column

    def flush_region() -> None:
        nonlocal block
        if not region:
            return
        for side in (0, 1):
            frags = [f for row in region for f in row if (f.x0 >= gutter) == bool(side)]
            if not frags:
                continue
            block += 1
            edge = max(f.x1 for f in frags)
            for row in _visual_lines(frags):
                lines.append(_line(row, edge, block))
        region.clear()

    i = 0
    while i < len(page):
        row = page[i]
        if i in table_rows:
            flush_region()
            end = table_rows[i]
            headers = [f.text for f in page[i]]
            starts = [f.x0 for f in page[i]]
            for body in page[i + 1:end]:
                block += 1
                cells = _cells_under(body, starts)
                lines.append(Line(text=row_statement(headers, cells), x0=body[0].x0, x1=body[-1].x1,
                                  y=body[0].y, height=body[0].height, right=right, block=block, row=True))
            i = end
            continue
        crosses = gutter is None or any(f.x0 < gutter - 1 < f.x1 - 2 for f in row)
        if not crosses and (region or any(f.x0 >= gutter for f in row)):  # from the first line of two columns
            region.append(row)
        else:
            if region or not lines or lines[-1].row or lines[-1].right != right:
                flush_region()
                block += 1  # full-width lines after a table or two columns: a new flow
            lines.append(_line(row, right, block))
        i += 1
    flush_region()
    return lines


def _line(row: list[Fragment], right: float, block: int) -> Line:
    return Line(text=" ".join(f.text for f in row), x0=row[0].x0, x1=row[-1].x1, y=row[0].y,
                height=max(f.height for f in row), right=right, block=block)


def _gutter(page: list[list[Fragment]], width: float, table_rows: dict[int, int]) -> float | None:
    """The x where a second column starts, when the page has two: fragments start there on lines that
    hold text to its left too, the text to its left is wide (prose, not a table's cells), and at least
    three lines do so."""
    in_table = {j for start, end in table_rows.items() for j in range(start, end)}
    starts: Counter[int] = Counter()
    for j, row in enumerate(page):
        if j in in_table or len(row) < 2:
            continue
        for prev, frag in zip(row, row[1:]):
            if prev.x1 - row[0].x0 >= 0.3 * width:
                starts[round(frag.x0 / 2)] += 1
    if not starts:
        return None
    key, count = starts.most_common(1)[0]
    if count < 3:
        return None
    return key * 2 - 2.0  # a little before the column's first character (rounding)


def _table_rows(page: list[list[Fragment]], width: float) -> dict[int, int]:
    """Tables: {first row index: end index} for runs of two or more lines whose two or more cells are narrow
    and start where the first line's cells start.  The first line is the header."""
    found: dict[int, int] = {}
    i = 0
    while i < len(page):
        head = page[i]
        if len(head) < 2 or any(f.x1 - f.x0 > 0.4 * width for f in head):
            i += 1
            continue
        starts = [f.x0 for f in head]
        end = i + 1
        while end < len(page) and _fits_columns(page[end], starts, width):
            end += 1
        if end - i >= 2:
            found[i] = end
            i = end
        else:
            i += 1
    return found


def _fits_columns(row: list[Fragment], starts: list[float], width: float) -> bool:
    if len(row) < 2 or any(f.x1 - f.x0 > 0.4 * width for f in row):
        return False
    return all(any(abs(f.x0 - s) <= 3.0 or _within(f, starts, s) for s in starts) for f in row)


def _within(frag: Fragment, starts: list[float], start: float) -> bool:
    """A right-aligned cell (a number) starts after its column's header but before the next column."""
    later = [s for s in starts if s > start]
    return start <= frag.x0 < (min(later) if later else frag.x0 + 1)


def _cells_under(row: list[Fragment], starts: list[float]) -> list[str]:
    cells = [""] * len(starts)
    for frag in row:
        column = max((k for k, s in enumerate(starts) if frag.x0 >= s - 3.0), default=0)
        cells[column] = f"{cells[column]} {frag.text}".strip()
    return cells


# --------------------------------------------------------------------------
# Joining lines
# --------------------------------------------------------------------------

_CJK_RE = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")
_SENTENCE_END_RE = re.compile(r"[.!?。！？:：;；][\"'”’)）]*$")
_LIST_ITEM_RE = re.compile(r"^(?:[-•*·▪◦]\s|\(?\d{1,3}[.)]\s|\(?[a-z][.)]\s)")


def _cjk_join(before: str, after: str) -> bool:
    """No space between these: one of the two characters at the join is CJK (text or punctuation)."""
    return bool(before and after and (_CJK_RE.match(before[-1]) or _CJK_RE.match(after[0])))


def _wrapped(line: Line, after: Line) -> bool:
    """``line`` was wrapped before ``after``: the first word of ``after`` would not have fitted in the room
    left at its end (how a typesetter breaks lines, ragged or justified).  A heading or a paragraph's last
    line leaves more room than that."""
    if line.row or after.row:
        return False
    word = after.text.split(maxsplit=1)[0] if after.text.strip() else ""
    if word and _CJK_RE.match(word[0]):
        word = word[0]  # CJK text breaks between any two characters
    char_width = (after.x1 - after.x0) / max(1, len(after.text))
    room = line.right - line.x1
    return room < char_width * (len(word) + 1) + 0.5 * line.height


def _glue(before: str, after: str) -> tuple[int, str]:
    """How a wrapped line joins the next: (characters dropped from its end, what goes between): the hyphen
    that split a word goes, nothing goes between CJK characters, else a space."""
    if re.search(r"[A-Za-z]-$", before) and after[:1].islower():
        return 1, ""
    return 0, "" if _cjk_join(before, after) else " "


def _line_step(lines: list[Line]) -> float:
    """The distance between two lines of a paragraph on this page (its line spacing): a low quantile of the
    steps, so the wider gaps before paragraphs do not count."""
    steps = sorted(a.y - b.y for a, b in zip(lines, lines[1:]) if a.block == b.block and a.y > b.y)
    return steps[len(steps) // 4] if steps else 0.0


def _join_lines(lines: list[Line]) -> str:
    """The lines as text: wrapped lines joined, a paragraph (a wider gap above it, or a new block) after an
    empty line, any other line after a line break."""
    step = _line_step(lines)
    out = ""
    for prev, line in zip([None, *lines], lines):
        if prev is None:
            out = line.text
            continue
        gap = prev.y - line.y
        limit = max(1.3 * step, 1.2 * max(prev.height, line.height))
        new_paragraph = prev.block != line.block or not 0 < gap <= limit
        if not new_paragraph and _wrapped(prev, line) and not _LIST_ITEM_RE.match(line.text):
            drop, glue = _glue(out, line.text)
            out = out[:len(out) - drop] + glue + line.text
        else:
            out += ("\n\n" if new_paragraph and not (prev.row and line.row) else "\n") + line.text
    return out


def _page_join(last: Line, first: Line) -> tuple[int, str]:
    """Between two pages: the last line of one goes on in the first of the next when it was wrapped and
    does not end a sentence (a full last line ending with a full stop more likely ends its paragraph)."""
    if _wrapped(last, first) and not _SENTENCE_END_RE.search(last.text) and not _LIST_ITEM_RE.match(first.text):
        return _glue(last.text, first.text)
    return 0, "\n\n"


# --------------------------------------------------------------------------
# Plain text (no layout)
# --------------------------------------------------------------------------

_SOFT_WRAP_EN = re.compile(r"(?<=[A-Za-z0-9,;)])[ \t]*\n(?=[a-z(])")
_SOFT_WRAP_ZH = re.compile(r"(?<=[\u4e00-\u9fff，、])[ \t]*\n(?=[\u4e00-\u9fff])")


def _unwrap_plain(text: str) -> str:
    """Join lines that the PDF layout wrapped mid-sentence, judged by punctuation and case alone (the line
    widths are unknown): a break is kept when the next line starts with a capital or the line ends a sentence."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    text = re.sub(r"\n{3,}", "\n\n", re.sub(r"[ \t\u00a0]+\n", "\n", text))  # as loaders tidy any text
    text = re.sub(r"(?<=[a-z])-\n(?=[a-z])", "", text)  # hyphenated word split across lines
    text = _SOFT_WRAP_EN.sub(" ", text)
    return _SOFT_WRAP_ZH.sub("", text)

