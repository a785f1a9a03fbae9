"""bench/judge_tiers.py --replay / --sweep: a dumped run's judged tier recomputed under other thresholds."""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import grader_tiers  # noqa: E402
import judge_tiers  # noqa: E402

from docmind_core.values import EvidenceVerdict, GradeResult, Tier  # noqa: E402
from docmind_core.answer.grade import judge_can_move  # noqa: E402
from docmind_core.settings import Settings  # noqa: E402


def record(answerable: bool, tier: Tier, p_yes: float | None, top: float = 0.8, coverage: float = 0.6) -> dict:
    grade = GradeResult(tier=tier, top_score=top, lex_coverage=coverage, kb_entity_weak=False,
                        web_compensation_needed=False, reason="gray_zone_coverage_mid")
    row = grader_tiers.RunRow("demo", "report", "q", answerable, answerable, tier.value, grade.reason, top,
                              coverage, True, [], 0.0, answerable)
    verdict = None if p_yes is None else EvidenceVerdict(verdict="partly", p_yes=p_yes, scored_by="logprobs")
    return {"run": asdict(row), **judge_tiers.replayable(grade, verdict)}


def test_a_dumped_p_yes_is_read_against_the_thresholds_of_the_replay():
    grader = Settings().with_overrides({"grader.judge_yes_low": 0.55, "grader.judge_yes_high": 0.6}).grader
    high_unanswerable = record(False, Tier.HIGH, 0.5)
    offline, judged = judge_tiers.replay(high_unanswerable, grader)
    assert (offline.tier, judged.tier) == ("HIGH", "AMBIGUOUS")  # "no" caps it
    loose = grader.model_copy(update={"judge_yes_low": 0.25})
    assert judge_tiers.replay(high_unanswerable, loose)[1].tier == "HIGH"  # "partly" moves nothing
    assert judge_tiers.replay(record(True, Tier.AMBIGUOUS, 0.62), grader)[1].tier == "HIGH"  # lifted
    assert judge_tiers.replay(record(True, Tier.AMBIGUOUS, None), grader)[1].tier == "AMBIGUOUS"  # not judged


def test_the_sweep_ranks_pairs_that_keep_the_floor_first():
    records = [record(False, Tier.HIGH, 0.45), record(False, Tier.AMBIGUOUS, 0.58),
               record(True, Tier.AMBIGUOUS, 0.7), record(True, Tier.HIGH, 0.65)]
    best = judge_tiers.sweep(records, Settings().grader)[0]
    assert best["keeps_floor"] and best["unanswerable_not_high"] == 1.0 and best["gold_in_context_high"] == 1.0
    assert 0.45 <= best["judge_yes_low"] < 0.65 and 0.58 < best["judge_yes_high"] <= 0.7


def test_only_runs_whose_tier_a_verdict_can_change_are_decisive():
    grader = Settings().grader
    low = GradeResult(tier=Tier.LOW, top_score=0.1, lex_coverage=0.1, kb_entity_weak=False,
                      web_compensation_needed=False, reason="")
    assert not judge_can_move(low, grader)
    assert judge_can_move(low.model_copy(update={"tier": Tier.HIGH, "top_score": 0.95}), grader)


def test_a_dump_with_the_shown_passages_checks_the_quote_again_under_the_replays_coverage():
    from tests.agentic_world import chunk

    question = "Nimbus 的默认管理地址是什么？"
    shown = [chunk("m1", "设备通电后，在浏览器中打开默认管理地址 https://192.168.50.1 ，使用初始账号 admin 登录。")]
    grade = GradeResult(tier=Tier.AMBIGUOUS, top_score=0.8, lex_coverage=0.65, kb_entity_weak=False,
                        web_compensation_needed=False, reason="gray_zone_coverage_mid")
    row = grader_tiers.RunRow("demo", "report", "q07", True, True, "AMBIGUOUS", grade.reason, 0.8, 0.65, True, [],
                              0.0, True)

    def dumped(reason: str) -> dict:
        verdict = EvidenceVerdict(verdict="partly", p_yes=0.51, scored_by="logprobs", reason=reason, stated="yes")
        return {"run": asdict(row), **judge_tiers.replayable(grade, verdict, question, shown)}

    grader = Settings().grader
    assert judge_tiers.replay(dumped('[1] "192.168.50.1"'), grader)[1].tier == "HIGH"  # its quote is in place
    assert judge_tiers.replay(dumped("[1] the manual gives an address"), grader)[1].tier == "AMBIGUOUS"
    strict = grader.model_copy(update={"judge_quote_min_coverage": 1.0})
    assert judge_tiers.replay(dumped('[1] "192.168.50.1"'), strict)[1].tier == "AMBIGUOUS"
    table = judge_tiers.sweep_quote([dumped('[1] "192.168.50.1"')], grader)
    assert table[0]["gold_in_context_high"] == 1.0 and len(table) == 12
