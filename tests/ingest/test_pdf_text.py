"""PDF text as a reader sees it: wraps joined, running headers and footers dropped, columns in order,
tables as row statements, and the offset of each page kept for citations."""

from __future__ import annotations

import bisect

from docmind_core.ingest.loaders import _tidy, load_document
from docmind_core.ingest.pdf_text import Fragment, assemble
from tests.pdf_docs import flowing_pdf, memo_pdf, table_pdf, two_column_pdf

BUDGET = ("Project Falcon moves the billing service to the new platform over the next year. The approved "
          "budget is 412,000 EUR for the full year, including contractors, licences and the hardware of "
          "the second data centre.")
LEAD = ("The steering group met on 14 March and confirmed who runs the work day to day. Project Falcon "
        "is led by Dr. Mireille Okafor, head of platform engineering, who reports to the board each month.")


def page_of(doc, needle: str) -> int:
    return bisect.bisect_right(doc.page_starts, doc.text.index(needle))


def test_wrapped_lines_are_joined_whatever_the_next_line_starts_with(tmp_path):
    doc = load_document(memo_pdf(tmp_path / "memo.pdf", [["# Budget", BUDGET], ["# Lead", LEAD]]))
    assert BUDGET in doc.text  # "budget is" / "412,000" and "Project Falcon" / "is led" were wrapped
    assert LEAD in doc.text
    assert "Budget\n" in doc.text  # a heading keeps its line


def test_running_headers_footers_and_page_numbers_are_dropped(tmp_path):
    doc = load_document(memo_pdf(tmp_path / "memo.pdf", [[BUDGET], [LEAD], ["The end of the memo."]]))
    assert "internal memo" not in doc.text
    assert "Page" not in doc.text
    assert doc.text.startswith("Project Falcon moves")


def test_each_page_start_is_kept(tmp_path):
    doc = load_document(memo_pdf(tmp_path / "memo.pdf", [[BUDGET], [LEAD], ["The end of the memo."]]))
    assert len(doc.page_starts) == 3
    assert [page_of(doc, "412,000"), page_of(doc, "Okafor"), page_of(doc, "end of the memo")] == [1, 2, 3]
    assert _tidy(doc.text) == doc.text  # nothing left for the loader's tidying to move


def test_a_sentence_across_a_page_break_stays_whole(tmp_path):
    crossing = ("Revenue for the year rose to 17.2 million EUR, driven by the flagship launch in the spring "
                "and by renewals in the public sector, which grew faster than in any year before and now "
                "make up nearly a third of all contracts signed by the company in the region.")
    before = ["Opening remarks of the quarterly report, which sums up the year for the shareholders."]
    doc = load_document(flowing_pdf(tmp_path / "report.pdf", before, crossing, ["Outlook follows."]))
    assert crossing in doc.text
    start = doc.text.index(crossing)
    assert bisect.bisect_right(doc.page_starts, start) == 1
    assert bisect.bisect_right(doc.page_starts, start + len(crossing) - 1) == 2
    assert "Quarterly report" not in doc.text and "- 1 -" not in doc.text


def test_two_columns_are_read_one_after_the_other(tmp_path):
    left = ("The flagship launch of the year was the Aurora appliance, which shipped in April to the first "
            "customers in Germany and France.")
    right = ("Revenue of the services unit rose to 17.2 million EUR, helped by three large contracts signed "
             "with hospitals in the north.")
    doc = load_document(two_column_pdf(tmp_path / "cols.pdf", "Annual review", left, right))
    assert left in doc.text and right in doc.text
    assert doc.text.index("Annual review") < doc.text.index(left) < doc.text.index(right)


def test_a_table_becomes_one_statement_per_row(tmp_path):
    rows = [["Plan", "Price per seat", "Seats"], ["Team", "12 EUR", "5-50"], ["Business", "29 EUR", "50-500"]]
    doc = load_document(table_pdf(tmp_path / "plans.pdf", "Aurora plans and their prices.", rows))
    assert "Plan: Team · Price per seat: 12 EUR · Seats: 5-50" in doc.text
    assert "Plan: Business · Price per seat: 29 EUR · Seats: 50-500" in doc.text
    assert "Aurora plans and their prices." in doc.text


def _line(text: str, y: float, x1: float = 500.0) -> Fragment:
    return Fragment(x0=50.0, x1=x1, y=y, height=11.0, text=text)


def test_chinese_wrapped_lines_join_without_a_space():
    # fpdf2 cannot draw CJK text without a CJK font, so the reading is checked on the fragments it gets
    page = [_line("公司二〇二五年度经营情况良好，全年实现营业收入", 700.0),
            _line("9.84亿元，同比增长12%。", 684.0, 180.0), _line("第二段从这里开始。", 660.0, 150.0)]
    text = assemble([page]).text
    assert text.startswith("公司二〇二五年度经营情况良好，全年实现营业收入9.84亿元，同比增长12%。")  # no space
    assert text.endswith("\n\n第二段从这里开始。")


def test_hyphenated_words_are_joined_but_short_lines_keep_their_break():
    page = [_line("The committee approved the infra-", 700.0), _line("structure plan in May.", 684.0, 200.0),
            _line("Next Steps", 668.0, 120.0), _line("Work starts in June.", 652.0, 180.0)]
    assert assemble([page]).text == ("The committee approved the infrastructure plan in May.\nNext Steps\n"
                                     "Work starts in June.")


def test_a_year_alone_at_the_top_of_a_one_page_letter_is_no_page_number():
    page = [_line("2026", 760.0, 80.0), _line("Annual letter to the shareholders.", 700.0, 250.0),
            _line("1", 60.0, 56.0)]
    assert assemble([page]).text == "2026\nAnnual letter to the shareholders."  # the footer "1" goes


def test_pages_whose_body_lines_repeat_keep_them():
    """Only short lines at a page's ends are headers or footers: two pages of the same three long body lines
    (a form printed twice, or the bench's shared-stream PDF) were read as nothing but running lines."""
    body = ("The reserve fund holds enough for eighteen months of operations at the current rate of spending, "
            "and the board reviews it every quarter against the plan.")
    page = [Fragment(x0=0, x1=900, y=800 - 12 * i, height=9, text=f"{body} Line {i}.") for i in range(3)]
    text = assemble([page, list(page)]).text
    assert text.count("Line 0.") == 2 and text.count("Line 2.") == 2


def test_a_short_page_loses_only_its_repeated_header_line():
    pages = [[Fragment(x0=0, x1=200, y=800, height=9, text="ACME quarterly memo"),
              Fragment(x0=0, x1=500, y=780, height=9, text=f"Body of page {n} states its own figure {n}0 EUR."),
              Fragment(x0=0, x1=500, y=760, height=9, text=text)]
             for n, text in ((1, "Spending stayed within the plan."), (2, "The reserve is reviewed in May."))]
    text = assemble(pages).text
    assert "ACME quarterly memo" not in text and "figure 10 EUR" in text and "reviewed in May" in text
