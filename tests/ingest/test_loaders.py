"""Loaders: every supported format, text encodings, and clear errors for bad files."""

from __future__ import annotations

import codecs

import pytest

from docmind_core.errors import IngestError
from docmind_core.ingest.loaders import decode_text, load_document

ZH = "Nimbus N2 的最大功耗为 45 瓦。错误代码 AUR-4012 表示许可证已过期。"


def make_pdf(path, lines):
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=12)
    for line in lines:
        pdf.multi_cell(0, 8, line, new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(path))
    return path


def make_docx(path, heading, paragraphs, table=None):
    import docx

    document = docx.Document()
    document.add_heading(heading, level=1)
    for para in paragraphs:
        document.add_paragraph(para)
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, value in enumerate(row):
                grid.cell(r, c).text = value
    document.save(str(path))
    return path


def test_plain_text_and_markdown(tmp_path):
    (tmp_path / "a.txt").write_text("Hello from a text file.\r\nSecond line.", encoding="utf-8")
    (tmp_path / "b.md").write_text("# Title\n\nSome *markdown* text.\n\n\n\n\nEnd.", encoding="utf-8")
    txt = load_document(tmp_path / "a.txt")
    assert txt.mime == "text/plain"
    assert txt.text == "Hello from a text file.\nSecond line."
    md = load_document(tmp_path / "b.md")
    assert md.mime == "text/markdown"
    assert md.text == "# Title\n\nSome *markdown* text.\n\nEnd."  # runs of blank lines collapsed


@pytest.mark.parametrize("encoding", ["gbk", "gb18030", "utf-8", "utf-8-sig", "utf-16", "utf-16-be"])
def test_text_encodings(tmp_path, encoding):
    data = ZH.encode(encoding)
    if encoding == "utf-16-be":
        data = codecs.BOM_UTF16_BE + data
    path = tmp_path / f"{encoding}.txt"
    path.write_bytes(data)
    assert load_document(path).text == ZH


def test_html_drops_script_and_style_and_keeps_headings(tmp_path):
    html = """<html><head><title>Nimbus FAQ</title><style>p{color:red}</style></head>
    <body><script>var secret = 'do not index';</script>
    <h2>Power</h2><p>The N2 draws at most <b>45 W</b>.</p><ul><li>one</li><li>two</li></ul>
    <table><tr><td>model</td><td>N2</td></tr></table></body></html>"""
    path = tmp_path / "faq.html"
    path.write_text(html, encoding="utf-8")
    doc = load_document(path)
    assert doc.mime == "text/html"
    assert "do not index" not in doc.text and "color" not in doc.text
    assert "## Power" in doc.text
    assert "The N2 draws at most 45 W." in doc.text
    assert "one\ntwo" in doc.text.replace("\n\n", "\n")
    assert doc.text.startswith("# Nimbus FAQ")


def test_gbk_html(tmp_path):
    path = tmp_path / "zh.htm"
    path.write_bytes(f"<html><body><p>{ZH}</p></body></html>".encode("gbk"))
    assert ZH in load_document(path).text


def test_pdf(tmp_path):
    path = make_pdf(tmp_path / "spec.pdf", ["Nimbus N2 datasheet.", "Maximum power draw: 45 W."])
    doc = load_document(path)
    assert doc.mime == "application/pdf"
    assert "Maximum power draw: 45 W." in doc.text


def test_docx_with_heading_and_table(tmp_path):
    path = make_docx(tmp_path / "notes.docx", "Release notes", ["Firmware 3.2.1 was released on 2026-02-10."],
                     table=[["version", "date"], ["3.2.1", "2026-02-10"]])
    doc = load_document(path)
    assert doc.text.startswith("# Release notes")
    assert "Firmware 3.2.1 was released on 2026-02-10." in doc.text
    assert "version: 3.2.1 · date: 2026-02-10" in doc.text


def test_csv_rows_carry_their_column_names(tmp_path):
    path = tmp_path / "prices.csv"
    path.write_text("product,price\nAurora,1200\nNimbus N2,899\n", encoding="utf-8")
    assert load_document(path).text == "product: Aurora · price: 1200\nproduct: Nimbus N2 · price: 899"


@pytest.mark.parametrize("name, data, reason", [
    ("broken.pdf", b"%PDF-1.4\n1 0 obj garbage without xref\n", "corrupt or unreadable PDF"),
    ("fake.pdf", b"this is plain text pretending to be a pdf", "not a valid PDF"),
    ("empty.txt", b"", "empty"),
    ("blank.md", b"  \n\n \t", "empty"),
    ("image.txt", bytes(range(256)) * 20, "binary"),
    ("broken.docx", b"PK\x03\x04 not really a zip", "corrupt or unreadable DOCX"),
    ("archive.zip", b"PK\x03\x04", "unsupported file type '.zip'"),
])
def test_bad_files_fail_with_a_clear_reason(tmp_path, name, data, reason):
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(IngestError) as err:
        load_document(path)
    assert reason in str(err.value)
    assert name in str(err.value)


def test_too_large(tmp_path):
    path = tmp_path / "big.txt"
    path.write_text("word " * 1000, encoding="utf-8")
    with pytest.raises(IngestError, match="too large"):
        load_document(path, max_bytes=1000)


def test_decode_prefers_utf8_then_detects():
    assert decode_text("x", "naïve café".encode("utf-8")) == "naïve café"
    long_zh = (ZH * 4).encode("gb18030")
    assert decode_text("x", long_zh) == ZH * 4


def test_pdf_soft_wrapped_lines_are_joined(tmp_path):
    long_sentence = ("The appliance accepts 100-240 V AC through the supplied adapter and keeps working on battery "
                     "power for ten minutes after a power cut so that it can shut down cleanly.")
    path = make_pdf(tmp_path / "wrap.pdf", ["Power", long_sentence])
    text = load_document(path).text
    assert long_sentence in text  # one line again, although the PDF wrapped it
    assert text.startswith("Power\n")  # a heading line stays on its own


PLANS = [["Plan", "Price per seat", "Seats"], ["Team", "12 EUR", "5-50"], ["Business", "29 EUR", "50-500"]]
PLAN_ROWS = ("Plan: Team · Price per seat: 12 EUR · Seats: 5-50\n"
             "Plan: Business · Price per seat: 29 EUR · Seats: 50-500")


def test_a_docx_table_is_one_statement_per_row_where_it_stands(tmp_path):
    import docx

    document = docx.Document()
    document.add_heading("Aurora plans", level=1)
    document.add_paragraph("Prices are per seat and month.")
    grid = document.add_table(rows=len(PLANS), cols=3)
    for r, row in enumerate(PLANS):
        for c, value in enumerate(row):
            grid.cell(r, c).text = value
    document.add_paragraph("Prices exclude VAT.")
    document.save(str(tmp_path / "plans.docx"))
    text = load_document(tmp_path / "plans.docx").text
    assert PLAN_ROWS in text
    assert text.index("per seat and month") < text.index("Plan: Team") < text.index("exclude VAT")


def test_an_html_table_is_one_statement_per_row_under_its_header_cells(tmp_path):
    cells = "".join(f"<tr>{''.join(f'<td>{v}</td>' for v in row)}</tr>" for row in PLANS[1:])
    head = "".join(f"<th>{v}</th>" for v in PLANS[0])
    path = tmp_path / "plans.html"
    path.write_text(f"<html><body><h2>Aurora plans</h2><table><thead><tr>{head}</tr></thead>"
                    f"<tbody>{cells}</tbody></table><p>Prices exclude VAT.</p></body></html>", encoding="utf-8")
    text = load_document(path).text
    assert PLAN_ROWS in text and "## Aurora plans" in text and "Prices exclude VAT." in text


def test_a_markdown_pipe_table_is_one_statement_per_row(tmp_path):
    path = tmp_path / "plans.md"
    path.write_text("# Aurora plans\n\n| Plan | Price per seat | Seats |\n|---|:---:|---|\n| Team | 12 EUR | 5-50 |\n"
                    "| Business | 29 EUR | 50-500 |\n\nPrices exclude VAT.\n", encoding="utf-8")
    text = load_document(path).text
    assert text == f"# Aurora plans\n\n{PLAN_ROWS}\n\nPrices exclude VAT."
