"""Table rows as ingested ("Plan: Team · Price per seat: 12 EUR") are read back as rows: the claim checks
read a value under its column in the named row, and the offline reader quotes the asked rows only."""

from __future__ import annotations

from docmind_core.answer.claims import check_claim
from docmind_core.backends.offline.extractive import extractive_answer
from docmind_core.text.table_rows import parse_row_statement, row_statement
from docmind_core.values import RetrievedChunk

PLANS = RetrievedChunk(chunk_id="t", document="plans.docx", text=(
    "Aurora plans\nPlan: Team · Price per seat: 12 EUR · Seats: 5-50\n"
    "Plan: Business · Price per seat: 29 EUR · Seats: 50-500\n"
    "Plan: Enterprise · Price per seat: 45 EUR · Seats: 500+"))


def test_a_row_statement_reads_back_as_its_columns_and_cells():
    line = row_statement(["Plan", "Price · list", ""], ["Team", "12\nEUR", "extra"])
    assert line == "Plan: Team · Price / list: 12 EUR · column 3: extra"
    assert parse_row_statement(line) == (["Plan", "Price / list", "column 3"], ["Team", "12 EUR", "extra"])
    assert parse_row_statement("莱昂德罗·内托: 前锋") is None  # a name with a middle dot is no row


def test_the_claim_checks_read_a_value_under_its_column_in_the_named_row():
    assert check_claim("The Business plan costs 29 EUR per seat.", [PLANS], [1]).status == "supported"
    assert check_claim("The Business plan costs 12 EUR per seat.", [PLANS], [1]).status == "contradicted"


def test_the_offline_reader_quotes_the_rows_asked_about():
    answer = extractive_answer("What is the price per seat of the Business plan?", [PLANS], "en")
    assert "Business: Price per seat 29 EUR" in answer and "Team" not in answer and "Enterprise" not in answer
    compared = extractive_answer("Compare the Aurora Team and Business plans", [PLANS], "en")
    assert "Team: Price per seat 12 EUR" in compared and "Business: Price per seat 29 EUR" in compared
    assert "Enterprise" not in compared
