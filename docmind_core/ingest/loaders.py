"""Turn a file into plain text: .txt .md .html/.htm .pdf .docx .csv.

Every failure a user can cause (a corrupt PDF, an empty file, a binary file
named .txt, an unsupported extension, a file that is too large) raises
:class:`IngestError` with a message that names the file and the reason.
"""

from __future__ import annotations

import codecs
import csv
import hashlib
import io
import itertools
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from docmind_core.errors import IngestError
from docmind_core.ingest.pdf_text import read_pdf
from docmind_core.ingest.tables import docx_table_text, markdown_tables, replace_html_tables
from docmind_core.text.table_rows import row_statement
from docmind_core.ingest.budget import DEFAULT_MAX_TEXT_CHARS, TextBudget

MAX_FILE_BYTES = 50 * 1024 * 1024

MIME_TYPES = {
    ".txt": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".html": "text/html",
    ".htm": "text/html",
    ".pdf": "application/pdf",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".csv": "text/csv",
}
SUPPORTED_EXTENSIONS = tuple(MIME_TYPES)


@dataclass(frozen=True)
class LoadedDocument:
    text: str
    mime: str
    page_starts: tuple[int, ...] = ()  # a PDF: the offset in ``text`` where each page begins


def mime_for(path: Path | str) -> str:
    return MIME_TYPES.get(Path(path).suffix.lower(), "application/octet-stream")


def load_document(path: Path | str, data: bytes | None = None, max_bytes: int = MAX_FILE_BYTES,
                  name: str = "", max_text_chars: int = DEFAULT_MAX_TEXT_CHARS) -> LoadedDocument:
    """Read ``path`` (or the given bytes of it) and extract its text; ``name`` (default: the file's name)
    is what messages call it.  Extraction stops with an :class:`IngestError` once the text passes
    ``max_text_chars`` (ingest.max_text_mb), counted as each page, paragraph or row comes out."""
    path = Path(path)
    name = name or path.name
    ext = path.suffix.lower()
    parser = _PARSERS.get(ext)
    if parser is None:
        supported = ", ".join(sorted(set(MIME_TYPES)))
        raise IngestError(f"{name}: unsupported file type {ext or '(no extension)'!r}; supported: {supported}")
    if data is None:
        data = read_limited(path, max_bytes, name)
    refusal = too_large(name, len(data), max_bytes)
    if refusal:
        raise IngestError(refusal)
    if not data.strip():
        raise IngestError(f"{name}: the file is empty")
    if ext == ".docx":
        _check_unpacked_size(name, data, max_bytes)
    page_starts: tuple[int, ...] = ()
    budget = TextBudget(name, max_text_chars)
    if ext == ".pdf":  # its text comes tidy, with the offsets of its pages (tidying would move them)
        read = read_pdf(name, data, budget)
        text, page_starts = read.text, read.page_starts
    else:
        text = _tidy(parser(name, data, budget))
    if not text.strip():
        raise IngestError(f"{name}: no text could be extracted (scanned images or an empty document?)")
    return LoadedDocument(text=text, mime=MIME_TYPES[ext], page_starts=page_starts)


def read_limited(path: Path, max_bytes: int, name: str) -> bytes:
    """The bytes of a regular file, refusing an unreadable or too large one; never more than ``max_bytes`` + 1
    are read, so a file that grows while it is read cannot take the memory."""
    checked_size(path, max_bytes, name)
    try:
        with path.open("rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise IngestError(f"{name}: cannot read the file ({exc.strerror or exc})") from None
    refusal = too_large(name, len(data), max_bytes)
    if refusal:
        raise IngestError(refusal)
    return data


def too_large(name: str, size: int, max_bytes: int) -> str | None:
    """Why a file of ``size`` bytes is refused (None when it fits): the one wording of the size limit."""
    if size <= max_bytes:
        return None
    return (f"{name}: file is too large ({size / 1048576:.1f} MB; the limit is {max_bytes / 1048576:g} MB, "
            f"ingest.max_file_mb)")


def checked_size(path: Path, max_bytes: int, name: str) -> int:
    """The file's size, refusing an unreadable or too large file (before reading it) with an IngestError."""
    try:
        status = path.stat()
    except OSError as exc:
        raise IngestError(f"{name}: cannot read the file ({exc.strerror or exc})") from None
    if not stat.S_ISREG(status.st_mode):  # a FIFO would block the read forever, /dev/zero never ends
        raise IngestError(f"{name}: not a regular file (a device, pipe or socket), so it is not read")
    size = status.st_size
    refusal = too_large(name, size, max_bytes)
    if refusal:
        raise IngestError(refusal)
    return size


STREAMED_EXTENSIONS = (".txt", ".md", ".markdown", ".csv")  # text and CSV: read and decoded in pieces
_HASH_BLOCK = 1 << 20
PIECE_BYTES = 1 << 16


@dataclass(frozen=True)
class TextFile:
    """A plain-text file checked in one pass (hash, size, encoding), its text read again on demand in pieces.

    ``"".join(pieces())`` is what :func:`load_document` returns for the file; no piece holds more than
    about ``piece_bytes`` of it, so a file of any size is read in bounded memory.
    """

    path: Path
    name: str
    digest: str
    size: int
    encoding: str
    mime: str
    piece_bytes: int = PIECE_BYTES
    max_text_chars: int = DEFAULT_MAX_TEXT_CHARS  # ingest.max_text_mb: the text of a CSV can outgrow its file

    def pieces(self) -> Iterator[str]:
        tidier = _PieceTidier()
        budget = TextBudget(self.name, self.max_text_chars)
        for text in self._texts():
            out = budget.text(tidier.feed(text))
            if out:
                yield out
        if not tidier.started:
            raise IngestError(f"{self.name}: no text could be extracted (scanned images or an empty document?)")

    def _decoded(self) -> Iterator[str]:
        """The file's text as decoded blocks of at most ``piece_bytes`` bytes each (the last one may be "")."""
        decoder = codecs.getincrementaldecoder(self.encoding)("strict")
        left = self.size  # the bytes that were hashed and checked, never more (a log being appended to grows)
        with self.path.open("rb") as handle:
            while True:
                block = handle.read(min(self.piece_bytes, left))
                left -= len(block)
                try:
                    yield decoder.decode(block, final=not block)
                except UnicodeDecodeError:
                    raise IngestError(f"{self.name}: the file changed while it was being read") from None
                if not block:
                    break

    def _texts(self) -> Iterator[str]:
        """What :func:`load_document`'s parser makes of the file, in pieces, before tidying."""
        return self._decoded()


@dataclass(frozen=True)
class CsvFile(TextFile):
    """A CSV file read as :class:`TextFile` is: its rows are parsed and rendered as they are read, so neither
    the file, its text nor its rows are held whole (one cell is, as the csv module reads it)."""

    def _texts(self) -> Iterator[str]:
        lines = _lines(self._decoded())
        # the dialect is sniffed from the first 4096 characters, as the whole-file parser does
        head: list[str] = []
        seen = 0
        for line in lines:
            head.append(line)
            seen += len(line)
            if seen >= 4096:
                break
        dialect = _sniff("".join(head)[:4096])
        # a cell may be as long as the file (the csv module's default cap is 128 KiB); the cap only ever grows
        csv.field_size_limit(max(csv.field_size_limit(), self.size + 1))
        reader = csv.reader(itertools.chain(head, lines), dialect)
        rows = _csv_rows(reader, self.name)
        header = next(rows, None)
        if header is None:
            return
        first = next(rows, None)
        if first is None:
            yield " | ".join(header)
            return
        yield from _cut(_csv_line(header, first), self.piece_bytes)
        for row in rows:
            yield "\n"
            yield from _cut(_csv_line(header, row), self.piece_bytes)


def _lines(blocks: Iterator[str]) -> Iterator[str]:
    """The text of ``blocks`` cut after each "\n" (how ``io.StringIO`` hands lines to the csv module)."""
    tail = ""
    for block in blocks:
        if not block:
            continue
        parts = (tail + block).split("\n")
        tail = parts.pop()
        for part in parts:
            yield part + "\n"
    if tail:
        yield tail


def _cut(text: str, size: int) -> Iterator[str]:
    """``text`` in slices of ``size`` characters (a cell of megabytes reaches the chunker in pieces)."""
    for start in range(0, len(text), max(1, size)):
        yield text[start:start + size]


def open_text_file(path: Path, name: str, max_bytes: int = MAX_FILE_BYTES,
                   piece_bytes: int = PIECE_BYTES, max_text_chars: int = DEFAULT_MAX_TEXT_CHARS) -> TextFile | None:
    """Hash and check a .txt/.md/.csv file reading it block by block (never whole); None when it is not
    UTF-8 or BOM-marked text (then only :func:`load_document`'s encoding detection, on the whole file, reads it).
    A .csv file comes back as a :class:`CsvFile`, whose pieces are its rendered rows.

    Refuses what :func:`load_document` refuses, with the same messages: too large, empty, binary, a
    byte-order mark the bytes do not follow.
    """
    ext = path.suffix.lower()
    if ext not in STREAMED_EXTENSIONS:
        raise ValueError(f"{path.name}: not a plain-text file")
    size = checked_size(path, max_bytes, name)
    digest = hashlib.sha256()
    decoder = None
    encoding = "utf-8"
    blank = binary = True
    read = 0
    with path.open("rb") as handle:
        while True:
            block = handle.read(_HASH_BLOCK)
            read += len(block)
            if read > size:  # it grew since its size was checked: what would be hashed is not what was checked
                raise IngestError(f"{name}: the file changed while it was being read; try again once it is written")
            if decoder is None:  # the first block (or an empty file)
                bom = _bom_encoding(block)
                binary = bom is None and _looks_binary(block)
                encoding = bom or "utf-8"
                decoder = codecs.getincrementaldecoder(encoding)("strict")
            digest.update(block)
            blank = blank and not block.strip()
            try:
                decoder.decode(block, final=not block)
            except UnicodeDecodeError:
                if encoding != "utf-8":
                    raise _bad_bom(name, encoding) from None
                return None
            if not block:
                break
    if blank:
        raise IngestError(f"{name}: the file is empty")
    if binary:
        raise _binary_refusal(name)
    kind = CsvFile if ext == ".csv" else TextFile
    return kind(path=path, name=name, digest=digest.hexdigest(), size=size, encoding=encoding,
                mime=MIME_TYPES[ext], piece_bytes=piece_bytes, max_text_chars=max_text_chars)


# --------------------------------------------------------------------------
# Text encodings
# --------------------------------------------------------------------------


_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))  # UTF-32 LE before UTF-16 LE: a prefix


def _bom_encoding(head: bytes) -> str | None:
    return next((encoding for bom, encoding in _BOMS if head.startswith(bom)), None)


def _bad_bom(name: str, encoding: str) -> IngestError:
    return IngestError(f"{name}: starts with a {encoding} byte-order mark but is not valid {encoding}")


def _binary_refusal(name: str) -> IngestError:
    return IngestError(f"{name}: looks like a binary file, not text (wrong extension?)")


def decode_text(name: str, data: bytes) -> str:
    """Decode text bytes: BOMs first, then strict UTF-8, then charset-normalizer (GBK/GB18030, Big5 ...)."""
    encoding = _bom_encoding(data)
    if encoding is not None:
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            raise _bad_bom(name, encoding) from None
    if _looks_binary(data):
        raise _binary_refusal(name)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes

    best = from_bytes(data).best()
    if best is None:
        raise IngestError(f"{name}: could not detect the text encoding (tried UTF-8, GBK/GB18030, UTF-16 ...)")
    return str(best)


def _looks_binary(data: bytes) -> bool:
    sample = data[:8192]
    if b"\x00" in sample:  # UTF-16 without a BOM is rare in practice; NULs almost always mean binary
        return True
    control = sum(1 for b in sample if b < 32 and b not in (9, 10, 12, 13, 27))
    return control > len(sample) * 0.05


def _tidy(text: str) -> str:
    return _tidy_lines(text).strip()


def _tidy_lines(text: str) -> str:
    """Line ends to \\n, NULs out, no blanks before a line end, at most one empty line in a row, and a blank
    run of over :data:`_MAX_BLANK_RUN` characters cut short (megabytes of spaces would otherwise be one chunk
    of two words).

    Each step reads only whitespace and NULs around what it changes, so text cut after a character
    that is neither comes out the same in pieces as whole (:class:`_PieceTidier`).
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    text = _BLANKS_BEFORE_BREAK_RE.sub("\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return _LONG_BLANK_RE.sub(_short_blank, text)


# Each run is tried once, from its first character, and never given back: "[ \t]+\n" tried from every
# character of a run of spaces that no line break ends, and read the rest of it each time (n² steps).
_BLANKS_BEFORE_BREAK_RE = re.compile(r"(?<![ \t\u00a0])[ \t\u00a0]++\n")


_MAX_BLANK_RUN = 64
_LONG_BLANK_RE = re.compile(r"(?<!\s)\s{%d,}" % (_MAX_BLANK_RUN + 1))


def _short_blank(run: re.Match[str]) -> str:
    """A long blank run as the break it makes: a paragraph, a line, or its first characters."""
    lines = run.group(0).count("\n")
    return "\n\n" if lines >= 2 else "\n" if lines else run.group(0)[:_MAX_BLANK_RUN]


# The last character that is neither blank nor NUL, with the blanks after it: tried only at such characters,
# so finding it reads each blank once ("[\s\x00]*\Z" re-read a blank run from every one of its characters: a
# 64 KB run of spaces took minutes).
_LAST_INKED_RE = re.compile(r"[^\s\x00][\s\x00]*\Z")


class _PieceTidier:
    """:func:`_tidy` of a text that arrives in pieces: ``"".join(map(feed, pieces)) == _tidy("".join(pieces))``.

    A piece's trailing whitespace and NULs are held back: they may join the next piece (\\r then \\n, a
    run of blank lines), or end the text, where they are stripped.
    """

    def __init__(self) -> None:
        self.held = ""
        self.blank_parts: list[str] = []  # blank pieces after ``held``, joined once (not re-joined per piece)
        self.started = False  # something has been given out (the leading strip is done)

    def feed(self, piece: str) -> str:
        last = _LAST_INKED_RE.search(piece)
        if last is None:
            self.blank_parts.append(piece)  # all blank: it joins what is held
            return ""
        cut = len(self.held) + sum(map(len, self.blank_parts)) + last.start() + 1
        piece = self.held + "".join(self.blank_parts) + piece
        self.blank_parts.clear()
        self.held = piece[cut:]
        out = _tidy_lines(piece[:cut])
        if not self.started:
            out = out.lstrip()
            self.started = bool(out)
        return out


# --------------------------------------------------------------------------
# Parsers
# --------------------------------------------------------------------------


def _parse_text(name: str, data: bytes, budget: TextBudget) -> str:
    return budget.text(decode_text(name, data))


def _parse_markdown(name: str, data: bytes, budget: TextBudget) -> str:
    return budget.text(markdown_tables(decode_text(name, data)))  # a pipe table: one statement per row


def _parse_html(name: str, data: bytes, budget: TextBudget) -> str:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(decode_text(name, data), "html.parser")
    title = soup.title.get_text(strip=True) if soup.title else ""
    replace_html_tables(soup)  # a table becomes one statement per row
    text = _html_text(soup)
    text = re.sub(r"[ \t]+", " ", text)
    text = "\n".join(line.strip() for line in text.split("\n"))
    if title and title not in text[:200]:
        text = f"# {title}\n\n{text}"
    return budget.text(text)  # no more than the page's own text: its size is bounded by the file's


_HTML_DROPPED = frozenset(["script", "style", "noscript", "template", "head"])
# Block elements end with a newline so sentences and headings stay apart; cells end with " | ".
_HTML_AFTER = {**dict.fromkeys(["p", "div", "li", "tr", "br", "h1", "h2", "h3", "h4", "h5", "h6", "section",
                                "article", "table", "pre", "blockquote"], "\n"), "td": " | ", "th": " | "}


def _html_text(soup) -> str:
    """The page's strings in document order, a Markdown mark before each heading (kept for chunking) and a
    break after each block, in one walk: inserting those marks into the tree cost a scan of the parent's
    children each (n² for a page of n sibling paragraphs: 15,000 took minutes)."""
    from bs4 import CData, NavigableString, Tag

    parts: list[str] = []
    stack: list[tuple[object, bool]] = [(soup, False)]
    while stack:
        node, leaving = stack.pop()
        if leaving:
            parts.append(_HTML_AFTER[node.name])
        elif isinstance(node, Tag):
            if node.name in _HTML_DROPPED:
                continue
            if node.name in ("h1", "h2", "h3", "h4", "h5", "h6"):
                parts.append("\n" + "#" * int(node.name[1]) + " ")
            if node.name in _HTML_AFTER:
                stack.append((node, True))
            stack.extend((child, False) for child in reversed(node.contents))
        elif type(node) in (NavigableString, CData):  # what get_text() reads: no comments or doctypes
            parts.append(str(node))
    return "".join(parts)


def _parse_pdf(name: str, data: bytes, budget: TextBudget) -> str:
    return read_pdf(name, data, budget).text  # load_document also keeps its page offsets (pdf_text.read_pdf)


def _check_unpacked_size(name: str, data: bytes, max_bytes: int) -> None:
    """Refuse a .docx whose parts unpack to more than the file limit: python-docx reads every part whole,
    so a small zip of one huge XML part (a zip bomb) would otherwise take gigabytes."""
    import zipfile

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            unpacked = sum(max(0, info.file_size) for info in archive.infolist())
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise IngestError(f"{name}: corrupt or unreadable DOCX ({exc})") from None
    if unpacked > max_bytes:
        raise IngestError(f"{name}: unpacks to {unpacked / 1048576:.1f} MB, over the limit of "
                          f"{max_bytes / 1048576:g} MB (ingest.max_file_mb)")


def _parse_docx(name: str, data: bytes, budget: TextBudget) -> str:
    import zipfile

    try:
        import docx
        from docx.table import Table

        document = docx.Document(io.BytesIO(data))
    except (zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise IngestError(f"{name}: corrupt or unreadable DOCX ({exc})") from None
    except Exception as exc:
        raise IngestError(f"{name}: corrupt or unreadable DOCX ({type(exc).__name__}: {exc})") from None
    lines: list[str] = []
    for block in document.iter_inner_content():  # paragraphs and tables in the order they stand
        if isinstance(block, Table):
            table = docx_table_text(block)
            if table:
                lines.append(budget.text(table))
            continue
        text = block.text.strip()
        if not text:
            continue
        style = (block.style.name if block.style is not None else "") or ""
        match = re.match(r"Heading (\d)", style)
        if match:
            text = "#" * int(match.group(1)) + " " + text
        elif style == "Title":
            text = "# " + text
        lines.append(budget.text(text))
    return "\n\n".join(lines)


def _parse_csv(name: str, data: bytes, budget: TextBudget) -> str:
    text = decode_text(name, data)
    dialect = _sniff(text[:4096])
    # A cell may be as long as the file (the csv module's default cap is 128 KiB); the cap only ever grows.
    csv.field_size_limit(max(csv.field_size_limit(), len(text) + 1))
    rows = list(_csv_rows(csv.reader(io.StringIO(text), dialect), name))
    if not rows:
        return ""
    header, body = rows[0], rows[1:]
    if not body:
        return " | ".join(header)
    return "\n".join(budget.text(_csv_line(header, row)) for row in body)  # each row repeats the column names


def _sniff(head: str) -> type[csv.Dialect] | csv.Dialect:
    try:
        return csv.Sniffer().sniff(head, delimiters=",;\t|")
    except csv.Error:
        return csv.excel


def _csv_rows(reader, name: str) -> Iterator[list[str]]:
    """The rows of ``reader`` that hold something, a csv error named with its file and line."""
    try:
        for row in reader:
            if any(c.strip() for c in row):
                yield row
    except csv.Error as exc:
        raise IngestError(f"{name}: line {reader.line_num}: not readable as CSV ({exc})") from None


def _csv_line(header: list[str], row: list[str]) -> str:
    """One line per row with its column names ("product: Aurora · price: 1200"), so a row read alone still
    says what its values are; a row longer than the header keeps its extra values under "column N"."""
    return row_statement(header, row)


_PARSERS: dict[str, Callable[[str, bytes, TextBudget], str]] = {
    ".txt": _parse_text,
    ".md": _parse_markdown,
    ".markdown": _parse_markdown,
    ".html": _parse_html,
    ".htm": _parse_html,
    ".pdf": _parse_pdf,
    ".docx": _parse_docx,
    ".csv": _parse_csv,
}
