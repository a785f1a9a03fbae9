"""CRAG grader: thresholds, two-signal corrections, gray-zone modes, web compensation."""

from __future__ import annotations

import inspect

import pytest

from docmind_core.answer.grade import CragGrader, lexical_coverage
from docmind_core.values import RetrievedChunk, StageScores, Tier
from docmind_core.settings import GRAY_ZONE_MODES, GraderSettings, Settings

QUERY = "DM-3000 电池续航"
FULL = "DM-3000 的电池续航为 12 小时。"  # coverage 1.0
NONE = "本公司提供一年保修服务。"  # coverage 0.0
MID = "电池续航表现不错。"  # coverage ~0.26, no rare entity
ENTITY_ONLY = "DM-3000 是一款投影仪。"  # coverage ~0.74, rare entity hit


def chunk(text: str, rerank: float | None, fused: float | None = None, cid: str = "c1") -> RetrievedChunk:
    return RetrievedChunk(chunk_id=cid, document="doc.md", text=text, scores=StageScores(rerank=rerank, fused=fused))


def grade(text: str, score: float, mode: str = "coverage_first", **overrides):
    # the thresholds alone: MID and ENTITY_ONLY leave out DM-3000 or what is asked of it, which the target check
    # (grader.require_asked_target, tests/answer/test_target_match.py) would hold against them
    overrides.setdefault("require_asked_target", False)
    settings = GraderSettings(gray_zone_mode=mode, **overrides)
    return CragGrader().grade(QUERY, [chunk(text, score)], settings)


@pytest.mark.parametrize("score, text, mode, tier, reason", [
    # high threshold 0.9 (fitted by bench/fit_grader.py): at, just above, just below
    (0.9, FULL, "rerank_only", Tier.HIGH, "rerank_high"),
    (0.91, FULL, "rerank_only", Tier.HIGH, "rerank_high"),
    (0.89, FULL, "rerank_only", Tier.AMBIGUOUS, "gray_zone_rerank_only"),
    # low threshold 0.25: at, just below, just above
    (0.25, NONE, "rerank_only", Tier.LOW, "rerank_low"),
    (0.24, NONE, "rerank_only", Tier.LOW, "rerank_low"),
    (0.26, NONE, "rerank_only", Tier.AMBIGUOUS, "gray_zone_rerank_only"),
    (1.0, FULL, "coverage_first", Tier.HIGH, "rerank_high"),
    (0.0, NONE, "coverage_first", Tier.LOW, "rerank_low"),
])
def test_tiers_at_and_around_thresholds(score, text, mode, tier, reason):
    result = grade(text, score, mode)
    assert (result.tier, result.reason) == (tier, reason)
    assert result.top_score == pytest.approx(score)
    assert result.gray_zone_mode == mode


def test_high_rerank_without_coverage_is_demoted():
    result = grade(NONE, 0.9)
    assert result.tier is Tier.AMBIGUOUS
    assert result.reason == "high_rerank_but_no_coverage"
    assert result.lex_coverage == 0.0 and result.kb_entity_weak


def test_low_rerank_with_rare_entity_is_rescued():
    result = grade(ENTITY_ONLY, 0.1)
    assert result.tier is Tier.AMBIGUOUS
    assert result.reason == "low_rerank_but_rare_entity_hit"


def test_low_rerank_with_common_words_only_stays_low():
    assert grade(MID, 0.1).tier is Tier.LOW


@pytest.mark.parametrize("mode, text, score, tier", [
    ("coverage_first", FULL, 0.5, Tier.HIGH),  # coverage 1.0 >= 0.8
    ("coverage_first", ENTITY_ONLY, 0.5, Tier.AMBIGUOUS),  # 0.74 between 0.2 and 0.8
    ("coverage_first", MID, 0.5, Tier.AMBIGUOUS),  # 0.26
    ("coverage_first", NONE, 0.5, Tier.LOW),  # 0.0 <= 0.2
    ("rerank_only", FULL, 0.5, Tier.AMBIGUOUS),
    ("rerank_only", NONE, 0.5, Tier.AMBIGUOUS),
    ("blend", FULL, 0.7, Tier.HIGH),  # 0.5 * (0.45 / 0.65) + 0.5 * 1.0 = 0.85
    ("blend", FULL, 0.3, Tier.AMBIGUOUS),  # 0.5 * (0.05 / 0.65) + 0.5 = 0.54
    ("blend", NONE, 0.7, Tier.AMBIGUOUS),  # 0.35
    ("blend", NONE, 0.3, Tier.LOW),  # 0.04
])
def test_gray_zone_modes(mode, text, score, tier):
    assert grade(text, score, mode).tier is tier


def test_gray_zone_coverage_thresholds_follow_settings():
    assert grade(ENTITY_ONLY, 0.5, coverage_high=0.7).tier is Tier.HIGH
    assert grade(MID, 0.5, coverage_low=0.3).tier is Tier.LOW


def test_arbitration_failure_is_ambiguous_with_reason():
    def broken(*_):
        raise ZeroDivisionError("boom")

    grader = CragGrader(arbiters={"coverage_first": broken})
    result = grader.grade(QUERY, [chunk(FULL, 0.5)], GraderSettings())
    assert result.tier is Tier.AMBIGUOUS
    assert result.reason == "gray_zone_error:ZeroDivisionError"


def test_no_chunks_is_low_with_zero_score():
    result = CragGrader().grade(QUERY, [], GraderSettings())
    assert (result.tier, result.top_score, result.reason) == (Tier.LOW, 0.0, "no_evidence")
    assert result.web_compensation_needed


@pytest.mark.parametrize("text, score, overrides, needed", [
    (NONE, 0.1, {}, True),  # LOW and web_compensation_on_low
    (NONE, 0.1, {"retrieval.web_compensation_on_low": False}, False),
    (MID, 0.5, {}, True),  # AMBIGUOUS and entity-weak (0.26 < 0.5)
    (MID, 0.5, {"grader.web_fallback_on_ambiguous": False}, False),
    (ENTITY_ONLY, 0.5, {}, False),  # AMBIGUOUS but the entity is in the KB (0.74 >= 0.5)
    (ENTITY_ONLY, 0.5, {"grader.entity_weak_below": 0.8}, True),
    (FULL, 0.9, {}, False),  # HIGH
])
def test_web_compensation_needed(text, score, overrides, needed):
    settings = Settings().with_overrides(overrides)
    result = CragGrader().grade(QUERY, [chunk(text, score)], settings.grader,
                                settings.retrieval.web_compensation_on_low)
    assert result.web_compensation_needed is needed


def test_the_grader_reads_the_grader_settings_only():
    # one type, no isinstance choice between Settings.grader and the whole Settings: a run passes
    # settings.grader and its retrieval.web_compensation_on_low
    parameters = inspect.signature(CragGrader.grade).parameters
    assert parameters["grader"].annotation == "GraderSettings"
    assert parameters["web_compensation_on_low"].annotation == "bool"


def test_explicit_flag_overrides_settings():
    result = CragGrader().grade(QUERY, [chunk(NONE, 0.1)], GraderSettings(), web_compensation_on_low=False)
    assert result.tier is Tier.LOW and not result.web_compensation_needed


def test_top_score_is_the_best_rerank_and_coverage_uses_top_three():
    chunks = [chunk(NONE, 0.9, cid="a"), chunk(NONE, 0.8, cid="b"), chunk(MID, 0.7, cid="c"),
              chunk(FULL, 0.1, cid="d")]  # the full match is 4th by score: not counted
    coverage, rare = lexical_coverage(QUERY, chunks)
    assert coverage == pytest.approx(0.2632, abs=1e-3) and not rare
    result = CragGrader().grade(QUERY, chunks, GraderSettings())
    assert result.top_score == pytest.approx(0.9)


def test_fused_score_stands_in_when_rerank_is_missing():
    result = CragGrader().grade(QUERY, [chunk(FULL, None, fused=0.7)], GraderSettings())
    assert result.tier is Tier.HIGH and result.top_score == pytest.approx(0.7)


def test_coverage_handles_english_stems_and_cjk_segmentation():
    english = [chunk("The batteries of the Nova X2 last ten hours.", 0.5)]
    coverage, rare = lexical_coverage("How long does the Nova X2 battery last?", english)
    assert coverage > 0.8 and rare
    chinese = [chunk("向量数据库支持多种索引。", 0.5)]
    assert lexical_coverage("向量数据库 索引", chinese)[0] == pytest.approx(1.0)


def test_every_gray_zone_mode_the_setting_allows_has_an_arbiter():
    for mode in GRAY_ZONE_MODES:
        result = CragGrader().grade(QUERY, [chunk(FULL, 0.5)], GraderSettings(gray_zone_mode=mode))
        assert not result.reason.startswith("gray_zone_error"), (mode, result.reason)


def test_blend_cut_offs_and_the_near_zero_coverage_are_settings():
    assert grade(FULL, 0.3, "blend").tier is Tier.AMBIGUOUS  # blended 0.54
    assert grade(FULL, 0.3, "blend", blend_high=0.5).tier is Tier.HIGH
    assert grade(NONE, 0.7, "blend", blend_low=0.4).tier is Tier.LOW  # blended 0.35
    assert grade(MID, 0.9, high_min_coverage=0.2).tier is Tier.HIGH  # coverage 0.26 is not near zero
    assert grade(MID, 0.9, near_zero_coverage=0.3).reason == "high_rerank_but_no_coverage"
    with pytest.raises(ValueError, match="grader.blend_low"):
        GraderSettings(blend_low=0.8, blend_high=0.7)


@pytest.mark.parametrize("mode", GRAY_ZONE_MODES)
def test_a_question_without_salient_terms_is_never_high(mode):
    # "hello, who are you?" rewritten to "who are you": nothing the evidence could cover
    settings = GraderSettings(gray_zone_mode=mode, blend_high=0.3, blend_low=0.1)
    for score in (0.99, 0.5):
        result = CragGrader().grade("who are you", [chunk(FULL, score)], settings)
        assert result.tier is not Tier.HIGH, (mode, score, result)
    assert CragGrader().grade("who are you", [chunk(FULL, 0.99)], settings).reason == \
        "high_but_no_salient_term_in_evidence"


@pytest.mark.parametrize("mode", GRAY_ZONE_MODES)
def test_evidence_without_any_salient_term_is_never_high(mode):
    settings = GraderSettings(gray_zone_mode=mode, blend_high=0.3, blend_low=0.1, high_min_coverage=0.0,
                              coverage_high=0.3, coverage_low=0.0)
    for score in (0.99, 0.5):
        result = CragGrader().grade(QUERY, [chunk(NONE, score)], settings)
        assert result.lex_coverage == 0.0 and result.tier is not Tier.HIGH, (mode, score, result)


def test_a_high_score_needs_the_fitted_coverage():
    assert grade(MID, 0.99, high_min_coverage=0.2).tier is Tier.HIGH  # coverage ~0.26
    result = grade(MID, 0.99, high_min_coverage=0.3)
    assert (result.tier, result.reason) == (Tier.AMBIGUOUS, "high_rerank_but_low_coverage")
    assert grade(NONE, 0.99, high_min_coverage=0.3).reason == "high_rerank_but_no_coverage"


# -- issue 36: the vector side missing --------------------------------------------------------------------

def _found_by(source: str, cid: str = "c1") -> RetrievedChunk:
    scores = StageScores(rerank=0.95, keyword=3.0, keyword_rank=1) if source == "keyword" else \
        StageScores(rerank=0.95, vector=0.8, vector_rank=1)
    return RetrievedChunk(chunk_id=cid, document="doc.md", text=FULL, scores=scores, found_by=[source])


def test_keyword_only_evidence_of_an_incomplete_retrieval_is_never_high():
    from docmind_core.answer.grade import judged_grade
    from docmind_core.values import EvidenceVerdict

    settings = GraderSettings()
    missing = ["doc_search failed (vector search failed: Cannot reach the Chroma server)"]
    complete = CragGrader().grade(QUERY, [_found_by("keyword")], settings)
    assert complete.tier is Tier.HIGH  # keyword-only by design (no vector of this encoder): no cap
    capped = CragGrader().grade(QUERY, [_found_by("keyword")], settings, incomplete=missing)
    assert capped.tier is Tier.AMBIGUOUS and "high_but_keyword_only" in capped.reason
    assert capped.reason.startswith("retrieval_incomplete: doc_search failed")
    # a judge that reads the passage as an answer does not lift it back
    judged = judged_grade(capped, EvidenceVerdict(verdict="answers", p_yes=0.95), settings)
    assert judged.tier is Tier.AMBIGUOUS and "not lifted" in judged.reason
    # with vector evidence, what failed elsewhere (the web, a keyword worker) leaves HIGH alone
    other = CragGrader().grade(QUERY, [_found_by("vector")], settings, incomplete=["web_search timed out"])
    assert other.tier is Tier.HIGH
