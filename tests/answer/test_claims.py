"""Claim-level support, offline (docmind_core.answer.claims): one sentence, table row or small window of one source."""

from __future__ import annotations

import pytest

from docmind_core.answer.claims import check_claim, check_claims, split_claims, values_in
from docmind_core.values import RetrievedChunk

PRICING = RetrievedChunk(chunk_id="p", document="pricing_comparison.html", text=(
    "## Nimbus appliances\n\nModel | Price | CPU | Memory | Storage | Maximum power draw |\n\n"
    "Nimbus N1 | 1,490 USD | 4-core ARM | 16 GB | 1 TB SSD | 28 W |\n\n"
    "Nimbus N2 | 2,390 USD | 8-core x86 | 32 GB | 2 TB NVMe | see the N2 datasheet |"))
SHEET = RetrievedChunk(chunk_id="s", document="nimbus_n2_datasheet.pdf", text=(
    "Nimbus N2 Edge Appliance - Datasheet\nHardware\nProcessor: 8-core x86 CPU at 2.4 GHz. Memory: 32 GB ECC RAM. "
    "Storage: 2 TB NVMe SSD.\nPower and environment\nThe maximum power draw of the Nimbus N2 is 45 W at full load; "
    "typical draw while idle is 18 W."))
MANUAL = RetrievedChunk(chunk_id="m", document="nimbus_manual_zh.docx", text=(
    "# 安装步骤\n\n第一步：把设备放在通风良好的位置。\n\n第二步：用电脑连接管理口，在浏览器中打开默认管理地址 192.168.50.1。"))
CSV_ROWS = RetrievedChunk(chunk_id="c", document="fleet.csv", text=(
    "vehicle: Truck 7; depot: Ningbo; payload: 12 t; range: 480 km.\n"
    "vehicle: Truck 9; depot: Suzhou; payload: 8 t; range: 650 km."))


def status(claim: str, sources, cited=()) -> str:
    return check_claim(claim, list(sources), list(cited)).status


@pytest.mark.parametrize("claim, expected", [
    ("The Nimbus N2 costs 2,390 USD.", "supported"),
    ("Nimbus N2 的价格是 2,390 美元。", "supported"),  # another language: its names and values are read
    ("The Nimbus N2 has 2 TB NVMe storage.", "supported"),
    ("The maximum power draw of the Nimbus N2 is 2 TB NVMe.", "unsupported"),  # a cell under another column
    ("The maximum power draw of the Nimbus N1 is 45 W.", "contradicted"),  # the N1 row says 28 W
    ("The Nimbus N1 costs 2,390 USD.", "contradicted"),  # the value of the other row
    ("The memory of the Nimbus N1 is 28 W.", "unsupported"),
])
def test_a_table_row_supports_only_the_values_under_the_column_the_claim_names(claim, expected):
    assert status(claim, [PRICING], [1]) == expected


def test_a_row_of_an_ingested_csv_names_its_columns():
    assert status("Truck 7 has a range of 480 km.", [CSV_ROWS], [1]) == "supported"
    assert status("Truck 7 has a range of 650 km.", [CSV_ROWS], [1]) == "contradicted"
    assert status("Truck 9 is based in Ningbo.", [CSV_ROWS], [1]) == "unsupported"


def test_a_sentence_supports_and_contradicts_with_the_title_line_naming_the_subject():
    assert status("The Nimbus N2 idles at 18 W.", [SHEET], [1]) == "supported"
    assert status("The Nimbus N2 has a 2.4 GHz processor.", [SHEET], [1]) == "supported"
    check = check_claim("The maximum power draw of the Nimbus N2 is 9,999 W.", [SHEET], [1])
    assert check.status == "contradicted" and "45 W" in check.evidence and check.source_index == 1


def test_chinese_values_with_units_and_addresses():
    assert status("Nimbus 的默认管理地址是 192.168.50.1。", [MANUAL], [1]) == "supported"
    assert status("Nimbus 的默认管理地址是 192.168.1.1。", [MANUAL], [1]) == "contradicted"
    assert status("Nimbus N2 的最大功耗为 45 瓦。", [SHEET], [1]) == "supported"  # 瓦 is W
    assert [(v.key, v.kind) for v in values_in("全长290公里，45 瓦，1,490 美元，$9,999")] == [
        ("290", "km"), ("45", "w"), ("1490", "usd"), ("9999", "usd")]


def test_words_spread_over_two_sources_support_nothing():
    """Nimbus N1 is in the pricing table, 45 W in the datasheet: together they state no N1 fact."""
    check = check_claim("The Nimbus N1 draws 45 W at full load.", [PRICING, SHEET])
    assert check.status != "supported" and not check.inferred


@pytest.mark.parametrize("claim", [
    "Based on the sources [1], the answer is in the documents.",
    "（1）[1][2]nimbus_admin_guide_zh.md",
    "根据资料[1]，答案在文档中。",
])
def test_content_free_text_is_unsupported(claim):
    [check] = check_claims(claim, [PRICING, SHEET])
    assert check.status == "unsupported" and "nothing checkable" in check.reason


def test_a_claim_about_the_sources_is_not_checkable():
    [check] = check_claims("The sources do not mention the idle power draw of the Nimbus N1 [1].", [PRICING])
    assert check.status == "not_checkable" and check.source_index is None


def test_an_uncited_claim_gets_the_source_that_states_it_and_a_cited_one_only_its_own():
    uncited = check_claim("The maximum power draw of the Nimbus N2 is 45 W.", [PRICING, SHEET])
    assert (uncited.status, uncited.source_index, uncited.inferred) == ("supported", 2, True)
    miscited = check_claim("The maximum power draw of the Nimbus N2 is 45 W [1].", [PRICING, SHEET], [1])
    assert miscited.status == "unsupported" and "[2] states it" in miscited.reason


def test_claims_are_sentences_list_items_table_rows_and_marked_parts():
    answer = ("According to the sources:\n- The N1 draws 28 W [1] and the N2 draws 45 W [2].\n"
              "| Model | Power |\n|---|---|\n| Nimbus N1 | 28 W |\n45 W [2].")
    texts = [answer[s.start:s.end].strip() for s in split_claims(answer)]
    assert texts == ["- The N1 draws 28 W [1]", "and the N2 draws 45 W [2].", "| Nimbus N1 | 28 W |", "45 W [2]."]
    numbers = [s.numbers for s in split_claims(answer)]
    assert numbers == [(1,), (2,), (), (2,)]


def test_a_judge_verdict_replaces_the_offline_status_and_the_counts_follow():
    """The model judge re-rates claims (via="llm"); with_claims recomputes coverage, counts and inferred chips."""
    from docmind_core.answer.citations import confidence_from, parse_citations, with_claims
    from docmind_core.values import Tier
    from docmind_core.settings import CitationSettings

    answer = "The maximum power draw of the Nimbus N2 is 45 W. The Nimbus N2 weighs 1.9 kg [2]."
    offline = parse_citations(answer, [PRICING, SHEET], 8)
    assert [c.status for c in offline.claims] == ["supported", "unsupported"]
    judged = [offline.claims[0].model_copy(update={"status": "contradicted", "via": "llm", "reason": "judge"}),
              offline.claims[1]]
    result = with_claims(offline, answer, judged, [PRICING, SHEET])
    assert (result.supported_claims, result.unsupported_claims, result.contradicted_claims) == (0, 1, 1)
    assert result.coverage == 0.0 and not any(o.inferred for o in result.occurrences)  # no chip on it now
    assert result.claims[0].via == "llm"
    assert confidence_from(result, 0.9, Tier.HIGH, CitationSettings()).band == "LOW"


TROUBLE = RetrievedChunk(chunk_id="t", document="troubleshooting_zh.md", text=(
    "## AUR-4012：许可证已过期\n\n原因：租户的订阅许可证已经到期。"))
WARRANTY = RetrievedChunk(chunk_id="w", document="pricing_comparison.html", text=(
    "Each appliance includes one year of firmware updates. Extended warranty costs 290 USD per year for the N1 "
    "and 390 USD per year for the N2."))


def test_one_sentence_comparing_two_rows_is_read_clause_by_clause():
    for answer in ("The N1 costs 1,490 USD and the N2 costs 2,390 USD.",
                   "Nimbus N1 的价格是 1,490 美元，N2 的价格是 2,390 美元。"):
        checks = check_claims(answer, [WARRANTY, PRICING])
        assert [c.status for c in checks] == ["supported", "supported"], checks
        assert all(c.source_index == 2 for c in checks)


def test_a_sentence_with_two_values_of_the_kind_contradicts_nothing():
    """"290 USD for the N1 and 390 USD for the N2" is about the warranty: it is no price to contradict."""
    assert status("The Nimbus N1 costs 1,490 USD.", [WARRANTY], [1]) == "unsupported"


def test_a_heading_naming_a_code_supports_what_it_says_of_it():
    assert status("错误代码 AUR-4012 表示许可证已过期。", [TROUBLE], [1]) == "supported"
    assert status("AUR-4012 表示索引服务超时。", [TROUBLE], [1]) == "unsupported"


def test_a_cited_line_that_states_nothing_after_its_colon_is_an_unsupported_claim():
    """Measured with a real 1.5B model (agentic, demo q04): "- Released: [1]" ended an answer that never gave
    the release date, and the lead-in rule read it as an introduction, so the answer kept band HIGH."""
    notes = RetrievedChunk(chunk_id="n", kb_id=1, doc_id=1, document="release_notes.md",
                           text="## Nimbus firmware 3.2.1\nReleased: 2026-02-10\n- Fixed: the web console "
                                "reported wrong disk usage on 2 TB drives.")
    answer = "- Fixed: the web console reported wrong disk usage on 2 TB drives.\n- Released: [1]"
    statuses = [(c.text.strip(), c.status) for c in check_claims(answer, [notes])]
    assert statuses == [("- Fixed: the web console reported wrong disk usage on 2 TB drives.", "supported"),
                        ("- Released: [1]", "unsupported")]
    # a lead-in without a marker still introduces what follows
    assert [c.status for c in check_claims("The notes say:\n- Released: 2026-02-10 [1]", [notes])] == ["supported"]


def test_an_answer_with_an_unsupported_claim_is_never_in_band_high():
    """The q04 answer above scored 2 of 3 claims x top score 0.98 = 0.65, band HIGH, while ungrounded."""
    from docmind_core.answer.citations import confidence_from, parse_citations
    from docmind_core.values import Tier
    from docmind_core.settings import CitationSettings

    notes = RetrievedChunk(chunk_id="n", kb_id=1, doc_id=1, document="release_notes.md",
                           text="## Nimbus firmware 3.2.1\nReleased: 2026-02-10\n- Fixed: the fan controller could "
                                "stop the fan after waking from standby.\n- Fixed: the web console reported wrong "
                                "disk usage on 2 TB drives.")
    answer = ("- Fixed: the fan controller could stop the fan after waking from standby.\n- Fixed: the web console "
              "reported wrong disk usage on 2 TB drives.\n- Released: [1]")
    confidence = confidence_from(parse_citations(answer, [notes]), 0.98, Tier.HIGH, CitationSettings())
    assert confidence.ungrounded and confidence.band == "MEDIUM", confidence


@pytest.mark.parametrize("answer", [
    # Qwen2.5-Coder 1.5B's answer to demo q05 (three modes): one sentence, a lead-in and two rows
    "根据[1]中的信息，Nimbus N1 的价格是 1,490 USD，Nimbus N2 的价格是 2,390 USD。",
    "According to [1], the Nimbus N1 costs 1,490 USD, and the Nimbus N2 costs 2,390 USD.",
])
def test_a_lead_in_clause_does_not_keep_two_supported_rows_from_being_read_apart(answer):
    checks = check_claims(answer, [PRICING])
    assert [c.status for c in checks] == ["supported", "supported"], checks
    wrong = answer.replace("2,390", "2,990")
    assert "supported" not in [c.status for c in check_claims(wrong, [PRICING])][1:]
