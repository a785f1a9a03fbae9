"""Experiment metrics checked against their definitions on hand-made cases (values written from the
definitions in metrics.py's docstring, not from the code)."""

from __future__ import annotations

import pytest

from docmind_core.experiments.metrics import RunScore, bootstrap_interval, build_report, paired_difference


def _run(item: int, variant: str, failed: bool = False, **values) -> RunScore:
    return RunScore(item_id=item, variant=variant, gold_left_out=False, answerable=True, question=f"q{item}",
                    failed=failed, **values)


def test_one_value_gives_its_mean_and_no_interval():
    one = bootstrap_interval([0.8])
    assert (one.mean, one.n) == (0.8, 1)
    assert one.low is None and one.high is None  # was [0.8, 0.8]: certainty from a single question
    assert one.text() == "0.800 (n=1, no interval)"


def test_a_failed_run_is_counted_as_failed_never_as_a_zero():
    # rule: q1 failed, q2 contains the answer; agentic: q1 no, q2 yes
    rule = [_run(1, "rule", failed=True), _run(2, "rule", answer_containment=1.0, gold_recall=1.0, tool_calls=1)]
    agentic = [_run(1, "agentic", answer_containment=0.0, gold_recall=0.0, tool_calls=3),
               _run(2, "agentic", answer_containment=1.0, gold_recall=0.5, tool_calls=5)]
    report = build_report(1, "x", [("rule", "rule", {}), ("agentic", "agentic", {})], rule + agentic)
    base, other = report.variants
    assert (base.runs, base.failed) == (2, 1)
    assert base.metrics["answer_containment"].mean == 1.0 and base.metrics["answer_containment"].n == 1
    assert base.tool_calls_mean == 1.0  # the failed run's 0 tool calls are not averaged in
    assert other.metrics["gold_recall"].mean == 0.25 and other.tool_calls_mean == 4.0
    # differences are B - A against the first variant, on the questions both measured (q2 only)
    recall = next(d for d in report.differences if d.metric == "gold_recall")
    assert (recall.a, recall.b) == ("rule", "agentic")
    assert recall.difference.mean == pytest.approx(-0.5) and recall.difference.n == 1
    assert not recall.significant and recall.difference.low is None
    assert next(d for d in report.differences if d.metric == "ndcg10").difference.text() == "n/a"


def test_paired_difference_sign_and_reproducible_interval():
    a = [_run(i, "a", answer_containment=v) for i, v in enumerate([0.0, 0.0, 1.0, 0.0])]
    b = [_run(i, "b", answer_containment=v) for i, v in enumerate([1.0, 1.0, 1.0, 0.0])]
    first = paired_difference("answer_containment", a, b, "a", "b")
    assert first.difference.mean == 0.5  # (1 + 1 + 0 + 0) / 4, B - A
    assert paired_difference("answer_containment", a, b, "a", "b") == first
    assert 0.0 <= first.difference.low <= 0.5 <= first.difference.high <= 1.0
