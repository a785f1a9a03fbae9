"""Each chunk knows where it sits in its file: PDF pages, the heading path, CSV rows (as a spreadsheet
numbers them), read the same whether the text comes whole or in pieces."""

from __future__ import annotations

from docmind_core.ingest.chunking import chunk_document, iter_stream_blocks
from docmind_core.ingest.places import PlaceReader
from docmind_core.values import ChunkPlace


def _children(text, reader, child_tokens=40):
    return chunk_document(1, "doc", text, child_tokens, 0, 80, reader)[1]


def test_a_chunk_names_the_headings_it_sits_under():
    text = ("# Guide\n\nIntro sentence one.\n\n## Install\n\nStep one is to unpack the box carefully.\n\n"
            "### Cables\n\nUse the grey cable for power.\n\n## Support\n\nCall us on weekdays.")
    places = {c.text.split("\n")[-1]: c.place.label for c in _children(text, PlaceReader("sections"))}
    assert places["Use the grey cable for power."] == "Guide › Install › Cables"
    assert places["Call us on weekdays."] == "Guide › Support"


def test_csv_rows_are_numbered_as_the_spreadsheet_shows_them():
    rows = [f"id: {n} · note: row number {n} of the sheet" for n in range(2, 42)]  # the header is row 1
    children = _children("\n".join(rows), PlaceReader("rows"))
    assert len(children) > 3
    for child in children:
        first, last = child.place.row_first, child.place.row_last
        assert child.text.startswith(f"id: {first} ·") and child.text.endswith(f"row number {last} of the sheet")
    assert ChunkPlace(row_first=2, row_last=9).label == "rows 2–9"


def test_rows_read_in_pieces_are_those_of_the_whole_text():
    text = "\n".join(f"id: {n} · note: {'word ' * (n % 7)}end" for n in range(2, 300))
    whole = [c.place for c in _children(text, PlaceReader("rows"))]
    pieces = [text[i:i + 97] for i in range(0, len(text), 97)]
    streamed = [c.place for _, kids in iter_stream_blocks(1, "doc", pieces, 40, 0, 80, PlaceReader("rows"))
                for c in kids]
    assert streamed == whole


def test_pdf_blocks_start_at_each_page_and_a_chunk_across_a_break_names_both():
    page_one = "First page sentence. The sentence that crosses the break"
    text = page_one + " ends on the second page. Second page sentence."
    reader = PlaceReader("pages", (0, len(page_one) + 1))
    parents, children = chunk_document(1, "memo.pdf", text, 200, 0, 400, reader)
    assert [p.place.label for p in parents] == ["pp. 1–2", "p. 2"]
    assert "crosses the break ends on the second page." in parents[0].text
    assert [c.place.label for c in children] == ["pp. 1–2", "p. 2"]
