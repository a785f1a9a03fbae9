"""The grader reads what kind of value the question asks for: evidence about the right product that states no
value of that kind (the pricing row that says "see the N2 datasheet" for a power-draw question) is not HIGH,
whatever its score and coverage, and a judge's "yes" does not lift it (issue 20: q01 / q05 left out)."""

from __future__ import annotations

import pytest

from docmind_core.answer.grade import CragGrader, judge_can_move, judged_grade, unstated_kinds
from docmind_core.text.reasons import describe_reason
from docmind_core.settings import GraderSettings
from docmind_core.values import EvidenceVerdict, RetrievedChunk, StageScores, Tier
from tests.agentic_world import drain

POWER = "What is the maximum power draw of the Nimbus N2?"
PRICING_ROW = ("Nimbus N2 | 2,390 USD | 32 GB | 2 TB NVMe | maximum power draw: see the N2 datasheet")
DATASHEET = "Nimbus N2 datasheet. Maximum power draw: 45 W at full load; typical idle draw 18 W."
RETENTION = "Aurora 默认的数据保留期是多久？"
RETENTION_ZH = "Aurora 默认的数据保留期是 90 天，可在设置中修改。"
RETENTION_NO_VALUE = "Aurora 默认的数据保留期可以在“设置 → 数据保留”中修改，详见管理员手册。"


def chunk(text: str, score: float, cid: str = "c1") -> RetrievedChunk:
    return RetrievedChunk(chunk_id=cid, document="doc.md", text=text, scores=StageScores(rerank=score))


def grade(question: str, *texts: str, score: float = 0.99, **settings):
    chunks = [chunk(t, score - 0.01 * i, f"c{i}") for i, t in enumerate(texts)]
    return CragGrader().grade(question, chunks, GraderSettings(**settings))


def test_the_pricing_row_that_defers_to_the_datasheet_is_not_high():
    result = grade(POWER, PRICING_ROW)
    assert result.lex_coverage >= 0.7  # every word of the question is there: coverage alone said HIGH
    assert (result.tier, result.reason) == (Tier.AMBIGUOUS, "high_but_asked_value_not_in_evidence:quantity")
    assert result.unstated_kinds == ["quantity"]
    words = describe_reason(result.reason)
    assert "a quantity in the asked units" in words and "_" not in words


def test_the_datasheet_that_states_the_watts_is_high():
    result = grade(POWER, PRICING_ROW, DATASHEET)
    assert (result.tier, result.reason, result.unstated_kinds) == (Tier.HIGH, "rerank_high", [])


@pytest.mark.parametrize("text, tier", [(RETENTION_ZH, Tier.HIGH), (RETENTION_NO_VALUE, Tier.AMBIGUOUS)])
def test_a_chinese_duration_question_needs_a_duration(text, tier):
    assert grade(RETENTION, text).tier is tier


def test_the_check_can_be_switched_off_and_open_questions_never_trigger_it():
    assert grade(POWER, PRICING_ROW, require_asked_value=False).tier is Tier.HIGH
    assert unstated_kinds("How do I reset the Nimbus N2?", [chunk("Hold the button for ten seconds.", 0.9)]) == ()
    assert unstated_kinds("Is the Nimbus N2 rack-mountable?", [chunk(PRICING_ROW, 0.9)]) == ()
    assert unstated_kinds("When was firmware 3.2.1 released?", [chunk("Firmware 3.2.1 fixes the fan.", 0.9)]) == \
        ("date",)


TABLE = """| Model | Price | Maximum power draw |
|---|---|---|
| Nimbus N1 | 1,490 USD | 28 W |
| Nimbus N2 | 2,390 USD | see the N2 datasheet |"""


def test_the_watts_of_the_other_row_do_not_answer_for_the_n2():
    """issue 20, q01 with the datasheet left out: the table's only watts are the N1's"""
    result = grade(POWER, TABLE)
    assert (result.tier, result.unstated_kinds) == (Tier.AMBIGUOUS, ["quantity"])
    assert grade("What is the maximum power draw of the Nimbus N1?", TABLE).tier is Tier.HIGH
    # each code named needs its own value: the two rows state the two prices
    assert unstated_kinds("Nimbus N1 和 N2 的价格分别是多少？", [chunk(TABLE, 0.9)]) == ()
    # the title names the product for a sentence that does not
    titled = chunk("# Nimbus N2 datasheet\n\nMaximum power draw: 45 W at full load.", 0.9)
    assert unstated_kinds(POWER, [titled]) == ()


def test_a_judges_yes_does_not_lift_evidence_without_the_asked_value():
    settings = GraderSettings()
    capped = grade(POWER, PRICING_ROW)
    lifted = judged_grade(capped, EvidenceVerdict(verdict="answers", p_yes=0.9), settings)
    assert lifted.tier is Tier.AMBIGUOUS and "no top passage states the value" in lifted.reason
    assert not judge_can_move(capped, settings)  # so a run does not ask the judge at all
    # the same gray-zone evidence with the value is lifted as before
    gray = grade(POWER, DATASHEET, score=0.6, gray_zone_mode="rerank_only")
    assert gray.tier is Tier.AMBIGUOUS and judge_can_move(gray, settings)
    assert judged_grade(gray, EvidenceVerdict(verdict="answers", p_yes=0.9), settings).tier is Tier.HIGH


def test_a_run_says_why_the_judge_was_not_asked():
    from docmind_core.answer.judge import evidence_step
    from docmind_core.answer.run_context import RunContext
    from docmind_core.settings import Settings

    class NoCalls:  # the judge must not be called at all
        def judge_evidence(self, *args, **kwargs):
            raise AssertionError("the judge was asked")

    capped = grade(POWER, PRICING_ROW)
    events, graded = drain(evidence_step(NoCalls(), POWER, capped, [chunk(PRICING_ROW, 0.99)],
                                         RunContext.start(Settings())))
    assert graded.tier is Tier.AMBIGUOUS
    [judged] = events
    assert judged.via == "skipped" and "no top passage states the value the question asks for" in judged.reason


def test_with_lifts_off_the_judge_only_caps_and_gray_zone_runs_do_not_ask_it():
    from docmind_core.settings import Settings

    settings = GraderSettings(judge_lifts=False)
    gray = grade(POWER, DATASHEET, score=0.6, gray_zone_mode="rerank_only")
    lifted = judged_grade(gray, EvidenceVerdict(verdict="answers", p_yes=0.9), settings)
    assert lifted.tier is Tier.AMBIGUOUS and "judge_lifts is off" in lifted.reason
    assert not judge_can_move(gray, settings)  # nothing to ask
    high = grade(POWER, DATASHEET)
    assert judge_can_move(high, settings)  # a HIGH is still read, and a "no" still caps it
    assert judged_grade(high, EvidenceVerdict(verdict="no", p_yes=0.1), settings).tier is Tier.AMBIGUOUS
    assert Settings().with_overrides({"llm.profile": "local_small"}).grader.judge_lifts is False
    assert Settings().grader.judge_lifts is True


def test_a_sentence_under_a_markdown_heading_states_that_section_s_value():
    """The demo's release note: the version is the section's heading, the N2 is in the bullet under it. Before,
    the check read the bullet alone and q13's tier hung on whether the datasheet ("firmware 3.2.x") was kept."""
    from docmind_core.answer.grade import unstated_kinds
    from docmind_core.values import RetrievedChunk

    question = "Which firmware version first let the N2 join an Aurora tenant, and what known issue did it have?"

    def chunk(text: str) -> RetrievedChunk:
        return RetrievedChunk(chunk_id="x", document="release_notes.md", text=text)

    assert unstated_kinds(question, [chunk("### Firmware 3.2.0 — 2025-11-04\n\n"
                                           "- New: the N2 can join an Aurora tenant as a local indexing node.")]) == ()
    # a short plain first line may be a title, not the subject of what follows; a heading without the value
    # states nothing; the N1's section says nothing of the N2
    for text in ("Firmware 3.2.0 — 2025-11-04\n\n- New: the N2 can join an Aurora tenant.",
                 "### Installation\n\n- The N2 can join an Aurora tenant.",
                 "### Firmware 3.2.0\n\n- The N1 can join an Aurora tenant."):
        assert unstated_kinds(question, [chunk(text)]) == ("version",), text
