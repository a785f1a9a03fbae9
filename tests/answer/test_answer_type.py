"""Issue 20: an answer whose every claim is supported can still leave the question unanswered.  The question's
asked kind of value (version, date, price, count, quantity, name, address) must be stated by a supported
claim, or the band is at most MEDIUM and the confidence reason says why."""

from __future__ import annotations

import pytest

from docmind_core.answer.answer_type import check_answer_type, kind_of, question_parts
from docmind_core.answer.citations import confidence_from, parse_citations
from docmind_core.values import RetrievedChunk, Tier
from docmind_core.settings import CitationSettings
from tests.paths import ROOT

SETTINGS = CitationSettings()
RELEASE_NOTES = RetrievedChunk(chunk_id="rn-1", document="release_notes.md",
                               text=(ROOT / "data" / "demo" / "release_notes.md").read_text(encoding="utf-8"))
Q13 = "Which firmware version first let the N2 join an Aurora tenant, and what known issue did it have?"
# Qwen2.5-Coder 1.5B, agentic mode: band HIGH, tier HIGH, every claim supported, and no version stated
Q13_AGENTIC = ("The firmware version that first let the N2 join an Aurora tenant is [1][1], which states \"New: the "
               "N2 can join an Aurora tenant as a local indexing node.\" The known issue is that the fan controller "
               "problem occurred after standby (fixed in 3.2.1).")
Q13_RIGHT = ("Firmware 3.2.0 first let the N2 join an Aurora tenant [1]. Its known issue was a fan controller "
             "problem after standby (fixed in 3.2.1) [1].")


def confidence(question: str, answer: str, sources=(RELEASE_NOTES,), top: float = 0.95, tier=Tier.HIGH):
    citations = parse_citations(answer, list(sources))
    return citations, confidence_from(citations, top, tier, SETTINGS, question=question)


def test_q13_the_version_asked_for_is_never_stated_so_the_answer_is_not_high():
    citations, conf = confidence(Q13, Q13_AGENTIC)
    assert citations.unsupported_claims == 0 and citations.contradicted_claims == 0  # every claim is supported
    assert conf.band == "MEDIUM" and conf.answers_question is False
    assert conf.asks_for == ["version"]
    assert "does not answer the question: it asks for a version" in conf.reason
    assert not conf.ungrounded  # nothing made up: the claims hold, the answer just misses the point


def test_q13_the_right_answer_keeps_high():
    citations, conf = confidence(Q13, Q13_RIGHT)
    assert citations.unsupported_claims == 0
    assert conf.band == "HIGH" and conf.answers_question is True
    assert "does not answer" not in conf.reason


def test_a_version_given_only_for_the_other_part_of_the_question_does_not_answer_it():
    """3.2.1 is in the claim about the known issue: it says nothing about which version let the N2 join."""
    claims = parse_citations(Q13_AGENTIC, [RELEASE_NOTES]).claims
    assert check_answer_type(Q13, claims).missing == ("version",)


def test_a_value_the_question_already_states_does_not_answer_it():
    question = "What did Nimbus firmware 3.2.1 fix, and when was it released?"
    restated = "Nimbus firmware 3.2.1 fixed the fan controller stopping the fan after waking from standby."
    _, conf = confidence(question, restated)
    assert conf.band == "MEDIUM" and "asks for a date or time" in conf.reason
    _, right = confidence(question, restated + " It was released on 2026-02-10.")
    assert right.band == "HIGH" and right.answers_question is True


def test_without_a_question_the_band_is_as_before():
    citations = parse_citations(Q13_AGENTIC, [RELEASE_NOTES])
    conf = confidence_from(citations, 0.95, Tier.HIGH, SETTINGS)
    assert conf.band == "HIGH" and conf.answers_question is None


def test_the_check_never_raises_the_band():
    _, conf = confidence(Q13, Q13_RIGHT, tier=Tier.AMBIGUOUS)
    assert conf.band == "MEDIUM"
    _, low = confidence(Q13, "The known issue is unrelated to anything stated here.", tier=Tier.LOW)
    assert low.band == "LOW"


@pytest.mark.parametrize("question, kinds", [
    (Q13, ["version", None]),
    ("What version of the firmware fixed NIM-201?", ["version"]),
    ("Nimbus 哪个版本修复了风扇问题？", ["version"]),
    ("When did Aurora Cloud complete its SOC 2 Type II audit?", ["date"]),
    ("What did Nimbus firmware 3.2.1 fix, and when was it released?", [None, "date"]),
    ("固件 3.2.1 是什么时候发布的？", ["date"]),
    ("How much does the Nimbus N2 cost?", ["money"]),
    ("Nimbus N1 和 N2 的价格分别是多少？", ["money"]),
    ("How many employees does Halcyon Data have?", ["count"]),
    ("海岚数据总部在哪里？有多少员工？", ["name", "count"]),
    ("What is the maximum power draw of the Nimbus N2?", ["quantity"]),
    ("What uptime does Aurora Cloud guarantee?", ["quantity"]),
    ("Aurora 默认的数据保留期是多久？", ["quantity"]),
    ("如何修改 Aurora 的数据保留期？允许的范围是多少？", [None, "quantity"]),
    ("Who founded Halcyon Data?", ["name"]),
    ("Nimbus 的默认管理地址是什么？", ["address"]),
    ("What command restarts the indexer?", ["address"]),
    # asks for no specific value
    ("Is there an Aurora mobile app for iOS or Android?", [None]),
    ("Aurora 支持 SSO 吗？", [None]),
    ("错误代码 AUR-4012 是什么意思？怎么处理？", [None, None]),
    ("Nimbus 报 NIM-201 错误应该怎么办？", [None]),
    ("How do I reset the Nimbus when the light flashes red?", [None]),
    ("Why does the fan stop after standby?", [None]),
    ("What does a flashing red light on a Nimbus appliance mean?", [None]),
    ("What is Aurora?", [None]),
    # measured on the shared sets (bench/answer_type_recall.py): alternatives, "why", and words inside names
    ("Who had the best singles ranking, Roberta Vinci or Jorge Lozano?", [None]),
    ("黑额鸣冠雉的数量为什么变少？", [None]),
    ("马特·理查德·史东从科罗拉多大学获得了什么学位？", [None]),
    ("鹤岗－哈尔滨高速公路在中国国家高速公路网的编号是多少？", ["name"]),
    ("卫视卡式台共分为几个地区播放版本？", ["count"]),
])
def test_the_kind_of_value_each_part_of_a_question_asks_for(question, kinds):
    assert [p.kind for p in question_parts(question)] == kinds


@pytest.mark.parametrize("question, answer", [
    ("Nimbus N1 和 N2 的价格分别是多少？", "Nimbus N1 的价格是 1,490 美元，Nimbus N2 的价格是 2,390 美元。"),
    ("海岚数据总部在哪里？有多少员工？", "海岚数据总部位于杭州。目前员工约 240 人。"),
    ("如何修改 Aurora 的数据保留期？允许的范围是多少？",
     "数据保留期可以设置为 30 天到 720 天之间的任意天数。修改方法：进入“设置 → 数据保留”，输入新的天数并保存。"),
    ("When did Aurora Cloud complete its SOC 2 Type II audit?",
     "Aurora Cloud completed its SOC 2 Type II audit in August 2025."),
    ("What uptime does Aurora Cloud guarantee?", "The SLA is 99.9% monthly uptime."),
    ("Nimbus 的默认管理地址是什么？", "Nimbus 的默认管理地址是 192.168.50.1。"),
    ("Who founded Halcyon Data?", "Halcyon Data was founded by Lin Wei."),
    ("What command restarts the indexer?", "Run `docmind kb reindex demo`."),
    ("How long does the warranty last?", "The warranty lasts three years."),
])
def test_answers_that_state_the_asked_value_answer_the_question(question, answer):
    from docmind_core.values import ClaimCheck

    claims = [ClaimCheck(text=answer, char_start=0, char_end=len(answer), status="supported")]
    assert check_answer_type(question, claims).answers is True


def test_only_supported_claims_count():
    from docmind_core.values import ClaimCheck

    answer = "The Nimbus N2 costs $9,999."
    for status in ("unsupported", "contradicted", "not_checkable"):
        claims = [ClaimCheck(text=answer, char_start=0, char_end=len(answer), status=status)]
        assert check_answer_type("How much does the Nimbus N2 cost?", claims).missing == ("money",)


def test_kind_of_reads_english_and_chinese_forms():
    assert kind_of("how long is data kept") == "quantity"
    assert kind_of("数据保留多少天") == "quantity"
    assert kind_of("what is the name of the admin tool") == "name"


def test_a_number_in_another_unit_does_not_answer_a_named_measure_or_a_price():
    """Gold left out, the offline answers to q01 and q05 stated numbers, none of the asked measure."""
    from docmind_core.values import ClaimCheck

    def missing(question: str, answer: str):
        claims = [ClaimCheck(text=answer, char_start=0, char_end=len(answer), status="supported")]
        return check_answer_type(question, claims).missing

    row = "Nimbus N2 | 2,390 USD | 8-core x86 | 32 GB | 2 TB NVMe | see the N2 datasheet | [1]."
    assert missing("What is the maximum power draw of the Nimbus N2?", row) == ("quantity",)
    assert missing("What is the maximum power draw of the Nimbus N2?", "The N2 draws up to 45 W.") == ()
    watts = "The maximum power draw of the Nimbus N2 is 45 W at full load [4];"
    assert missing("Nimbus N1 和 N2 的价格分别是多少？", watts) == ("money",)
    assert missing("Aurora 默认的数据保留期是多久？", "Aurora 的数据保留期默认为 180 天。") == ()
    assert missing("Aurora 默认的数据保留期是多久？", "Aurora 有 3 个区域。") == ("quantity",)


@pytest.mark.parametrize("answer, answered", [
    ("The warranty lasts three years.", True),
    ("保修期为两年。", True),
    ("Nimbus 目前有 N1 和 N2 两个型号。", False),  # a count of models is no duration
])
def test_a_number_in_words_answers_a_named_measure_only_in_its_unit(answer, answered):
    from docmind_core.values import ClaimCheck

    claims = [ClaimCheck(text=answer, char_start=0, char_end=len(answer), status="supported")]
    assert check_answer_type("What is the warranty period?", claims).answers is answered
