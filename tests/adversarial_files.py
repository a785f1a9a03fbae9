"""Files a hostile member could upload, built in a few lines each (shared by the ingest-bound tests and
bench/adversarial_ingest.py): a PDF compression bomb, one giant word, a CSV cell of megabytes."""

from __future__ import annotations

import random
import string
import zlib
from pathlib import Path


def text_content(text_bytes: int, string_chars: int = 1000, seed: int | None = None) -> bytes:
    """A page content stream that shows about ``text_bytes`` of words, in strings of ``string_chars``: one
    phrase over and over (it deflates ~200 times), or with ``seed``, random words (~3 times, like real text)."""
    if seed is None:
        lines = [(b"lorem ipsum dolor sit amet " * (string_chars // 27 + 1))[:string_chars]]
    else:
        rng = random.Random(seed)
        vocabulary = ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 9)))
                      for _ in range(3000)]
        lines = [" ".join(rng.choice(vocabulary) for _ in range(string_chars // 4)).encode()[:string_chars]
                 for _ in range(64)]
    count = max(1, text_bytes // string_chars)
    shows = b"".join(b"(" + lines[i % len(lines)] + b") Tj T*\n" for i in range(count))
    return b"BT /F1 9 Tf 12 TL 36 800 Td\n" + shows + b"ET\n"


def pdf_sharing_one_stream(pages: int, content: bytes, distinct: bool = False) -> bytes:
    """A PDF of ``pages`` pages whose content is ``content`` (FlateDecode): one stream object that every page
    draws (a compression bomb: it is stored once, compressed), or with ``distinct``, one copy per page."""
    packed = zlib.compress(content, 9)
    streams = pages if distinct else 1
    font = 3 + pages + streams  # object numbers: 1 catalog, 2 page tree, pages, streams, the font
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               b"<< /Type /Pages /Kids [" + b" ".join(b"%d 0 R" % (3 + i) for i in range(pages))
               + b"] /Count %d >>" % pages]
    for i in range(pages):
        stream = 3 + pages + (i if distinct else 0)
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents %d 0 R "
                       b"/Resources << /Font << /F1 %d 0 R >> >> >>" % (stream, font))
    for _ in range(streams):
        objects.append(b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(packed) + packed + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def write_giant_word(path: Path, letters: int) -> None:
    """``A <letters y's> end``: one word of ``letters`` characters, no space or stop in it."""
    with path.open("w", encoding="ascii") as out:
        out.write("A ")
        block = "y" * (1 << 20)
        left = letters
        while left > 0:
            out.write(block[:left])
            left -= len(block)
        out.write(" end")
