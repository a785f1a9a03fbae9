"""Score distribution of a run (compare.score_distribution) against the candidates it describes, and the
threshold sweep's tier at every grid point against a fresh CragGrader().grade with the same settings."""

from __future__ import annotations

import pytest

from docmind_core.answer.grade import CragGrader
from docmind_core.reports.compare import score_distribution
from docmind_core.reports.regrade import regrade_settings
from docmind_core.experiments.sweep import sweep, sweep_input
from docmind_core.values import RetrievedChunk, StageScores, Tier
from docmind_core.settings import GraderPatch, GraderSettings
from tests.reports.test_compare import sample_run


def _c(cid: str, rerank: float | None, kept: bool, origin: str = "kb") -> RetrievedChunk:
    return RetrievedChunk(chunk_id=cid, document="d", text="t", origin=origin, kept=kept,
                          scores=StageScores(rerank=rerank, fused=0.1))


def test_score_distribution_counts_the_candidates_it_draws():
    # two kept KB, one cut KB, one cut web; one web and one KB cut before the rerank (no score, not drawn)
    cands = [_c("a", 0.9, True), _c("b", 0.5, True), _c("c", 0.2, False), _c("w", 0.4, False, "web"),
             _c("x", None, False, "web"), _c("y", None, False)]
    dist = score_distribution(cands)
    assert dist.scores == [0.9, 0.5, 0.4, 0.2]
    assert (dist.top, dist.median) == (0.9, pytest.approx(0.45))
    assert dist.mean == pytest.approx(0.5)
    assert (dist.kept, dist.web) == (2, 1)  # web counted 2 before: the unscored, undrawn one too


@pytest.mark.parametrize("recorded", [{}, {"blend_high": 0.5, "blend_low": 0.1, "high_min_coverage": 0.3}])
def test_every_sweep_point_is_the_tier_a_fresh_grade_gives(recorded):
    record = {"events": sample_run(), "config": {f"grader.{k}": v for k, v in recorded.items()}}
    live = GraderSettings()
    x = sweep_input(record, "v", positive=True, unanswerable=False)
    result = sweep([x], live)
    from docmind_core.reports.regrade import graded_input
    query, chunks = graded_input(record)
    assert sum(p.live for p in result.points) == 1
    live_point = next(p for p in result.points if p.live)
    assert (live_point.high, live_point.low, live_point.mode) == (0.9, 0.25, "coverage_first")
    for p in result.points:
        settings = regrade_settings(GraderPatch.of(recorded), live, p.patch)
        fresh = CragGrader().grade(query, chunks, settings).tier
        assert p.high_count == (1 if fresh is Tier.HIGH else 0), (p, fresh)
        assert p.recall == (1.0 if fresh is Tier.HIGH else 0.0)  # one positive run
        assert p.unanswerable_not_high is None  # no unanswerable run: n/a, not 0 or 1
