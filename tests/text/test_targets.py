"""What a question is about, and whether a statement holds it where its value stands (text/targets.py)."""

from __future__ import annotations

import pytest

from docmind_core.text.targets import Statement, match_statement, read_target, stated_instead
from docmind_core.text.value_kinds import values_in

PRICING_ROW = Statement(
    body="Nimbus N1 | 1,490 USD | 4-core ARM | 16 GB | 1 TB SSD | 28 W",
    context="## Nimbus appliances \npricing comparison",
    cells=("Nimbus N1", "1,490 USD", "4-core ARM", "16 GB", "1 TB SSD", "28 W"),
    headers=("Model", "Price", "CPU", "Memory", "Storage", "Maximum power draw"),
    row_keys=("Nimbus N1", "Nimbus N2"))
DATASHEET = Statement(
    body="The maximum power draw of the Nimbus N2 is 45 W at full load; typical draw while idle is 18 W.",
    context="Nimbus N2 Edge Appliance - Datasheet \nnimbus n2 datasheet")
WEIGHT = Statement(body="Weight: 1.9 kg.", context="Nimbus N2 Edge Appliance - Datasheet \nnimbus n2 datasheet")
PROFILE = Statement(body="海岚数据成立于 2019 年，总部位于杭州，在法兰克福和旧金山设有办事处，目前员工约 240 人。")
PLANS = ("Team", "Business", "Enterprise")


def value(text: str):
    return values_in(text)[0]


def plan_row(key: str, price: str) -> Statement:
    return Statement(body=f"{key} | {price} | 100 GB | 3", context="## Aurora plans", cells=(key, price, "100 GB", "3"),
                     headers=("Plan", "Price", "Storage", "Connectors"), row_keys=PLANS)


def test_the_question_names_entity_variant_qualifier_and_sides():
    idle = read_target("What is the idle power draw of the Nimbus N1?")
    assert [e.key for e in idle.entities] == ["n1"] and idle.qualifiers == ("idle",)
    assert [e.key for e in read_target("What is the maximum power draw of the Nimbus N1 Lite?").entities] == ["n1 lite"]
    assert [e.key for e in read_target("What did firmware 3.3.0 fix?").entities] == ["3.3.0"]
    assert [e.key for e in read_target("What was new in Aurora 4.3?").entities][0] == "4.3"
    assert read_target("Nimbus N1 的待机功耗是多少？").qualifiers == ("idle",)
    assert read_target("Aurora 默认的数据保留期是多久？").qualifiers == ("default",)
    assert [s.text for s in read_target("Compare the Aurora Team and Business plans").sides] == ["Team", "Business"]
    assert [s.text for s in read_target("N1 和 N2 的内存和存储有什么区别？").sides] == ["N1", "N2"]


def test_a_qualifier_describing_what_is_asked_about_is_not_required():
    # "the largest airport" says which airport; it conditions no measured value
    assert read_target("What airport is the largest airport in the New England region?").qualifiers == ()


@pytest.mark.parametrize("question, statement, stated, ok", [
    ("What is the idle power draw of the Nimbus N1?", PRICING_ROW, "28 W", False),  # maximum, not idle
    ("What is the idle power draw of the Nimbus N1?", DATASHEET, "18 W", False),  # the N2's idle draw
    ("What is the idle power draw of the Nimbus N2?", DATASHEET, "18 W", True),
    ("What is the idle power draw of the Nimbus N2?", DATASHEET, "45 W", False),  # the clause says full load
    ("What is the maximum power draw of the Nimbus N2?", DATASHEET, "45 W", True),
    ("What is the peak power draw of the Nimbus N2?", DATASHEET, "45 W", True),  # same group, other word
    ("What is the maximum power draw of the Nimbus N1?", PRICING_ROW, "28 W", True),  # the column header says so
    ("What is the maximum power draw of the Nimbus N1 Lite?", PRICING_ROW, "28 W", False),
    ("Nimbus N1 的重量是多少？", WEIGHT, "1.9 kg", False),  # the datasheet is the N2's
    ("Nimbus N2 的重量是多少？", WEIGHT, "1.9 kg", True),
    ("法兰克福办事处有多少员工？", PROFILE, "240 人", False),  # the company's head count
    ("海岚数据有多少员工？", PROFILE, "240 人", True),
])
def test_a_statement_holds_the_target_where_its_value_stands(question, statement, stated, ok):
    assert match_statement(read_target(question), statement, value(stated)).ok is ok


def test_a_table_row_is_its_key_cell_and_the_columns_header():
    target = read_target("How much does the Aurora Team plan cost?")
    assert match_statement(target, plan_row("Team", "12 USD per user per month"), value("12 USD")).ok
    business = match_statement(target, plan_row("Business", "29 USD per user per month"), value("29 USD"))
    assert not business.ok and business.stated_entity == "Business"


def test_n1_is_not_read_inside_n1_lite():
    lite = Statement(body="New: support for the Nimbus N1 Lite hardware revision.", context="### Firmware 3.1.0")
    assert not match_statement(read_target("What did firmware 3.1.0 add for the Nimbus N1?"), lite).ok
    assert match_statement(read_target("What did firmware 3.1.0 add for the Nimbus N1 Lite?"), lite).ok


def test_a_version_stands_in_the_heading_of_its_section():
    fixed = Statement(body="- Fixed: the web console reported wrong disk usage on 2 TB drives.",
                      context="Release Notes \n### Firmware 3.2.1 — 2026-02-10 \nrelease notes")
    assert match_statement(read_target("What did firmware 3.2.1 fix?"), fixed).ok
    miss = match_statement(read_target("What did firmware 3.3.0 fix?"), fixed)
    assert not miss.ok and miss.stated_entity == "3.2.1"


def test_what_the_sources_state_instead_is_said_in_words():
    question = "What is the idle power draw of the Nimbus N1?"
    target = read_target(question)
    match = match_statement(target, PRICING_ROW, value("28 W"))
    assert stated_instead(question, target, match, "28 W") == \
        "The sources state the Nimbus N1's maximum power draw (28 W), not its idle power draw."
    zh = "Nimbus N1 的重量是多少？"
    text = stated_instead(zh, read_target(zh), match_statement(read_target(zh), WEIGHT, value("1.9 kg")), "1.9 kg")
    assert "Nimbus N2" in text and "Nimbus N1" in text and "1.9 kg" in text


def test_a_rewritten_query_listing_two_models_names_each():
    """A model's rewrite lists names one after the other ("Nimbus N1 Nimbus N2 maximum power draw"): that is two
    entities, not one "Nimbus N1 Nimbus N2" that no statement names (it kept a right comparison from HIGH)."""
    assert [e.text for e in read_target("Nimbus N1 Nimbus N2 maximum power draw").entities] == ["Nimbus N1", "Nimbus N2"]
    assert [e.text for e in read_target("What is the idle draw of the Nimbus N1 Lite?").entities] == ["Nimbus N1 Lite"]
