"""Issue 34: each answered value read where its source states it (answer/target_match.py): an answer quoting
the neighbouring fact is not HIGH, the evidence grade is not HIGH, and the offline reader says what the sources
state instead.  Small fixtures, no index."""

from __future__ import annotations

from docmind_core.answer.citations import confidence_from, parse_citations
from docmind_core.answer.grade import CragGrader, judged_grade
from docmind_core.answer.target_match import check_target, evidence_target_misses
from docmind_core.backends.offline.extractive import extractive_answer
from docmind_core.settings import CitationSettings, GraderSettings
from docmind_core.values import EvidenceVerdict, RetrievedChunk, StageScores, Tier

PRICING = RetrievedChunk(chunk_id="pricing", document="pricing_comparison.html", text=(
    "## Nimbus appliances\n\nModel | Price | CPU | Memory | Storage | Maximum power draw |\n\n"
    "Nimbus N1 | 1,490 USD | 4-core ARM | 16 GB | 1 TB SSD | 28 W |\n\n"
    "Nimbus N2 | 2,390 USD | 8-core x86 | 32 GB | 2 TB NVMe | see the N2 datasheet |"),
    scores=StageScores(rerank=0.97))
DATASHEET = RetrievedChunk(chunk_id="datasheet", document="nimbus_n2_datasheet.pdf", text=(
    "Nimbus N2 Edge Appliance - Datasheet\nPower and environment\nThe maximum power draw of the Nimbus N2 is 45 W "
    "at full load; typical draw while idle is 18 W.\nDimensions\nSize: 210 x 180 x 52 mm. Weight: 1.9 kg."),
    scores=StageScores(rerank=0.95))
PLANS = RetrievedChunk(chunk_id="plans", document="pricing_comparison.html", text=(
    "## Aurora plans\n\nPlan | Price | Storage | Connectors |\n\nTeam | 12 USD per user per month | 100 GB | 3 |\n\n"
    "Business | 29 USD per user per month | 2 TB | all |\n\n"
    "Enterprise | custom quote, minimum 200 users | unlimited | all, plus custom connectors |"),
    scores=StageScores(rerank=0.9))
SOURCES = [PRICING, DATASHEET]
IDLE_N1 = "What is the idle power draw of the Nimbus N1?"


def band(question: str, answer: str, sources=SOURCES, tier: Tier = Tier.HIGH):
    return confidence_from(parse_citations(answer, sources), 0.97, tier, CitationSettings(), question=question,
                           sources=sources)


def test_the_neighbouring_facts_quoted_word_for_word_are_not_high():
    # what the offline reader answered before issue 34: both claims supported, band HIGH
    answer = ("According to the sources:\nNimbus N1: Maximum power draw 28 W [1].\n"
              "The maximum power draw of the Nimbus N2 is 45 W at full load; typical draw while idle is 18 W [2].")
    confidence = band(IDLE_N1, answer)
    assert confidence.band == "LOW" and confidence.target_matched is False, confidence
    assert "qualifier idle" in confidence.target_misses
    assert confidence.target_note == "The sources state the Nimbus N1's maximum power draw (28 W), not its idle power draw."
    assert "not about what was asked" in confidence.reason


def test_the_right_value_with_a_labelled_neighbour_stays_high():
    answer = "The maximum power draw of the Nimbus N2 is 45 W at full load; typical draw while idle is 18 W [2]."
    confidence = band("What is the maximum power draw of the Nimbus N2?", answer)
    assert confidence.band == "HIGH" and confidence.target_matched is True, confidence


def test_a_value_of_another_product_beside_the_right_one_caps_at_medium():
    hardware = RetrievedChunk(chunk_id="hw", document="nimbus_n2_datasheet.pdf",
                              text="Nimbus N2 Edge Appliance - Datasheet\nHardware\nMemory: 32 GB ECC RAM.")
    sources = [PRICING, DATASHEET, hardware]
    question = "How much memory does the Nimbus N1 have?"
    # the N2's memory, in words that do not say it is the N2's, may be read as the answer
    confidence = band(question, "Nimbus N1: Memory 16 GB [1]. Memory: 32 GB ECC RAM [3].", sources)
    assert confidence.band == "MEDIUM" and confidence.target_matched is False, confidence
    # the same value, said to be the N2's, misleads no one
    assert band(question, "Nimbus N1: Memory 16 GB [1]. Nimbus N2: Memory 32 GB [1].", sources).band == "HIGH"


def test_the_weight_of_the_n2_is_no_answer_for_the_n1():
    check = check_target("Nimbus N1 的重量是多少？", parse_citations("Weight: 1.9 kg [2].", SOURCES).claims, SOURCES)
    assert check.matched is False and not check.partial
    assert "Nimbus N2" in check.note and "1.9 kg" in check.note


def test_a_comparison_with_one_side_missing_is_not_high():
    question = "Compare the price of the Nimbus N1 and the Nimbus N2."
    assert band(question, "Nimbus N1: Price 1,490 USD [1]. Nimbus N2: Price 2,390 USD [1].").band == "HIGH"
    one_side = band(question, "Nimbus N1: Price 1,490 USD [1].")
    assert one_side.band == "MEDIUM" and "side N2" in one_side.target_misses, one_side
    assert "N2" in one_side.target_note


def test_the_evidence_grade_is_not_high_when_no_statement_holds_the_target():
    grader = GraderSettings()
    assert evidence_target_misses(IDLE_N1, SOURCES) == ("qualifier idle",)
    graded = CragGrader().grade(IDLE_N1, SOURCES, grader)
    assert graded.tier is Tier.AMBIGUOUS and graded.reason.startswith("high_but_asked_target_not_in_evidence")
    # a model judge's "yes" never lifts it back
    lifted = judged_grade(graded, EvidenceVerdict(verdict="answers"), grader)
    assert lifted.tier is Tier.AMBIGUOUS and "asked entity and qualifier" in lifted.reason
    assert CragGrader().grade(IDLE_N1, SOURCES, GraderSettings(require_asked_target=False)).tier is Tier.HIGH
    assert evidence_target_misses("What is the idle power draw of the Nimbus N2?", SOURCES) == ()


def test_the_offline_reader_says_what_is_stated_instead():
    answer = extractive_answer(IDLE_N1, SOURCES, "en")
    assert answer.startswith("The sources state the Nimbus N1's maximum power draw (28 W), not its idle power draw")
    assert "18 W" not in answer
    lite = extractive_answer("What is the maximum power draw of the Nimbus N1 Lite?", SOURCES, "en")
    assert "28 W" in lite and "not for Nimbus N1 Lite" in lite


def test_the_offline_reader_compares_from_both_rows():
    answer = extractive_answer("Compare the Aurora Team and Business plans", [PLANS], "en")
    assert "Team: Price 12 USD per user per month" in answer and "Business: Price 29 USD per user per month" in answer
    assert "Enterprise" not in answer
    memory = extractive_answer("N1 和 N2 的内存和存储有什么区别？", [PRICING], "zh")
    assert "Nimbus N1: Memory 16 GB, Storage 1 TB SSD" in memory and "Nimbus N2: Memory 32 GB, Storage 2 TB NVMe" in memory


def test_the_offline_reader_names_a_missing_side():
    answer = extractive_answer("Compare the Aurora Team and Premium plans", [PLANS], "en")
    assert "Team: Price 12 USD" in answer and "do not state it for Premium" in answer


def test_a_model_answer_about_something_else_gives_way_to_what_the_sources_state():
    from docmind_core.answer.answer_check import second_opinion

    model_answer = "The idle power draw of the Nimbus N1 is 28 W [1]."  # the N1's maximum, given as its idle draw
    opinion = second_opinion(IDLE_N1, model_answer, SOURCES, 8, Tier.AMBIGUOUS,
                             lambda: extractive_answer(IDLE_N1, SOURCES, "en"))
    assert opinion.model.off_target and "another product, version or condition" in opinion.reason
    assert "not its idle power draw" in opinion.replacement
    right = "The maximum power draw of the Nimbus N2 is 45 W [2]."
    assert not second_opinion("What is the maximum power draw of the Nimbus N2?", right, SOURCES, 8, Tier.HIGH,
                              lambda: "").replacement


def test_a_made_up_value_on_evidence_about_something_else_gives_way_too():
    from docmind_core.answer.answer_check import second_opinion

    # Qwen2.5-Coder 1.5B on the demo KB: the N2's idle figure given as the N1's "typical" draw
    question = "What is the typical power draw of the Nimbus N1?"
    made_up = "The typical power draw of the Nimbus N1 is 18 W at idle [2]."
    opinion = second_opinion(question, made_up, SOURCES, 8, Tier.AMBIGUOUS,
                             lambda: extractive_answer(question, SOURCES, "en"))
    assert opinion.model.unsupported or opinion.model.off_target
    assert opinion.replacement and "not its typical" in opinion.replacement, opinion
