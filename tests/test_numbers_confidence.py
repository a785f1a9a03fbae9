"""The answer's confidence (citations.confidence_from over parse_citations) checked against its definition:
coverage x top rerank score, in [0, 1], and never a high band for an answer that claims no evidence."""

from __future__ import annotations

import pytest

from docmind_core.answer.citations import confidence_from, parse_citations
from docmind_core.values import RetrievedChunk, StageScores, Tier
from docmind_core.settings import CitationSettings

SOURCES = [RetrievedChunk(chunk_id="c1", document="orion_specs.md", scores=StageScores(rerank=0.9),
                          text="The Orion O3 sensor samples at 250 Hz. The Orion O3 battery lasts 36 hours.")]


def _confidence(answer: str, top: float = 0.9, tier: Tier = Tier.HIGH):
    return confidence_from(parse_citations(answer, SOURCES), top, tier, CitationSettings())


def test_a_cited_grounded_answer_is_coverage_times_top_score():
    conf = _confidence("The Orion O3 battery lasts 36 hours [1].", top=0.9)
    assert (conf.score, conf.band) == (0.9, "HIGH")  # coverage 1 x 0.9
    half = _confidence("The Orion O3 battery lasts 36 hours [1]. It also comes in a lovely red colour.", top=0.9)
    assert half.score == pytest.approx(0.45)  # one of two substantive sentences cited


def test_a_nothing_relevant_answer_with_a_marker_is_not_high():
    # "the sources do not mention X [1]" claims no evidence: its marker grounds nothing (it was 0.9 / HIGH)
    conf = _confidence("The sources do not mention the colour options of the Orion O3 [1].")
    assert conf.band == "LOW" and conf.score == 0.0


def test_an_answer_without_a_substantive_sentence_claims_no_evidence_unless_it_cites():
    # "Sorry." has no sentence long enough to count: coverage is unknown, and confidence was the top score
    assert _confidence("Sorry.").band == "LOW"
    assert _confidence("Sorry.").score == 0.0
    cited = _confidence("Yes [1].")  # a marker on a claim that states nothing checkable grounds nothing
    assert cited.score == 0.0 and cited.band == "LOW"


@pytest.mark.parametrize("top", [-0.5, 0.0, 0.3, 1.0, 7.0])
def test_confidence_is_bounded_and_monotone_in_coverage(top):
    answers = ["It comes in a lovely red colour. It comes in a lovely blue colour.",
               "The Orion O3 battery lasts 36 hours [1]. It comes in a lovely blue colour.",
               "The Orion O3 battery lasts 36 hours [1]. The Orion O3 sensor samples at 250 Hz [1]."]
    scores = [_confidence(a, top=top).score for a in answers]
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert scores == sorted(scores)


FACTS_THAT_HOLD_SUCH_WORDS = [  # cited facts about the world, not claims about the sources
    ("Identity documents do not expire for citizens over 70 [1].", "Identity documents do not expire for citizens over 70."),
    ("In this context the server does not retry failed uploads [1].", "In this context the server does not retry failed uploads."),
    ("The error page gives no details about the cause [1].", "The error page gives no details about the cause."),
    ("Minors are not listed in the register [1].", "Minors are not listed in the register."),
]


@pytest.mark.parametrize(("answer", "source"), FACTS_THAT_HOLD_SUCH_WORDS)
def test_a_cited_fact_that_holds_words_like_documents_or_no_details_stays_cited(answer, source):
    """Only a sentence whose subject is the sources and whose verb is one of saying claims no evidence: these
    facts were counted uncited (coverage 0, confidence 0, band LOW) while their source says exactly that."""
    chunk = SOURCES[0].model_copy(update={"text": source})
    conf = confidence_from(parse_citations(answer, [chunk]), 0.95, Tier.HIGH, CitationSettings())
    assert (conf.score, conf.band) == (0.95, "HIGH")


@pytest.mark.parametrize("answer", [
    "The sources do not mention the colour options.",
    "The retrieved sources (aurora.md, nimbus.md) do not contain an answer to this question.",  # the offline engine's
    "The provided documents don't say when it was released.",
    "There is no information about the warranty in the provided sources.",
    "The warranty period is not mentioned in the documents.",
    "The documents contain no information about pricing.",
    "This cannot be determined from the provided sources.",
    "资料中没有提及颜色选项。",
])
def test_claims_about_the_sources_are_recognised(answer):
    from docmind_core.answer.citations import ABSENCE_RE

    assert ABSENCE_RE.search(answer)
