"""Generated PDFs for the ingest tests (fpdf2): memos with running headers and footers, wrapped lines, a
sentence across a page break, two columns and a table."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence


def _memo_class(header: str, footer: str):
    from fpdf import FPDF

    class Memo(FPDF):
        def header(self) -> None:
            if header:
                self.set_font("Helvetica", size=9)
                self.cell(0, 6, header, new_x="LMARGIN", new_y="NEXT", align="C")
                self.ln(4)

        def footer(self) -> None:
            self.set_y(-15)
            self.set_font("Helvetica", size=9)
            self.cell(0, 8, footer.format(page=self.page_no()), align="C")

    return Memo


def memo_pdf(path: Path, pages: Sequence[Sequence[str]], header: str = "Northwind Ltd - internal memo",
             footer: str = "Page {page}", width_mm: float = 0) -> Path:
    """A PDF whose pages hold these paragraphs (each wrapped to the page width, or ``width_mm``); a
    paragraph that does not fit goes on on the next page."""
    pdf = _memo_class(header, footer)()
    pdf.set_auto_page_break(True, margin=22)
    pdf.add_page()
    for number, paragraphs in enumerate(pages):
        if number:
            pdf.add_page()
        pdf.set_font("Helvetica", size=11)
        for paragraph in paragraphs:
            if paragraph.startswith("# "):
                pdf.set_font("Helvetica", style="B", size=13)
                pdf.multi_cell(0, 7, paragraph[2:], new_x="LMARGIN", new_y="NEXT")
                pdf.set_font("Helvetica", size=11)
            else:
                pdf.multi_cell(width_mm, 6, paragraph, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(3)
    pdf.output(str(path))
    return path


def flowing_pdf(path: Path, before: Sequence[str], crossing: str, after: Sequence[str]) -> Path:
    """One flow of paragraphs over two pages: ``crossing`` starts near the end of page 1 and ends on page 2."""
    pdf = _memo_class("Quarterly report", "- {page} -")()
    pdf.set_auto_page_break(True, margin=22)
    pdf.add_page()
    pdf.set_font("Helvetica", size=11)
    for paragraph in before:
        pdf.multi_cell(0, 6, paragraph, new_x="LMARGIN", new_y="NEXT")
        pdf.ln(3)
    pdf.set_y(pdf.h - 22 - 12)  # two lines left on the page: the paragraph runs on over the break
    pdf.multi_cell(0, 6, crossing, new_x="LMARGIN", new_y="NEXT")
    pdf.ln(3)
    for paragraph in after:
        pdf.multi_cell(0, 6, paragraph, new_x="LMARGIN", new_y="NEXT")
        pdf.ln(3)
    pdf.output(str(path))
    return path


def two_column_pdf(path: Path, title: str, left: str, right: str) -> Path:
    """A page with a full-width title over two columns of prose, written line by line across both
    columns (as many generators do: the text stream interleaves the columns)."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", style="B", size=14)
    pdf.multi_cell(0, 8, title, new_x="LMARGIN", new_y="NEXT")
    pdf.ln(4)
    pdf.set_font("Helvetica", size=11)
    top = pdf.get_y()
    column = (pdf.w - pdf.l_margin - pdf.r_margin - 10) / 2
    left_lines = pdf.multi_cell(column, 6, left, dry_run=True, output="LINES")
    right_lines = pdf.multi_cell(column, 6, right, dry_run=True, output="LINES")
    for row in range(max(len(left_lines), len(right_lines))):
        y = top + 6 * row
        if row < len(left_lines):
            pdf.set_xy(pdf.l_margin, y)
            pdf.cell(column, 6, left_lines[row])
        if row < len(right_lines):
            pdf.set_xy(pdf.l_margin + column + 10, y)
            pdf.cell(column, 6, right_lines[row])
    pdf.output(str(path))
    return path


def table_pdf(path: Path, intro: str, rows: Sequence[Sequence[str]]) -> Path:
    """A paragraph, then a table drawn with cell borders (its first row the header)."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=11)
    pdf.multi_cell(0, 6, intro, new_x="LMARGIN", new_y="NEXT")
    pdf.ln(4)
    widths = [45, 35, 35, 45][:len(rows[0])]
    for row in rows:
        for width, cell in zip(widths, row):
            pdf.cell(width, 8, cell, border=1)
        pdf.ln(8)
    pdf.output(str(path))
    return path
