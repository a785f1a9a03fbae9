"""Side by side answers "which did better?" (issue 38 item 3): names for the two sides, a verdict line that
weighs gold hits, verdict, supported claims, evidence grade, latency and tokens, a sentence-aligned answer diff
that falls back to two columns, and "not recorded" in place of blanks, "None" and uncounted zeros."""

from __future__ import annotations

from docmind_core.events import Done, RunStarted, Verdict
from docmind_core.reports.compare import answer_diff, compare_runs
from docmind_core.settings import Settings
from docmind_core.values import Tier
from tests.reports.test_compare import SOURCES, _chunk, sample_run

LABELS = {"supported": "Supported by the sources", "partly_supported": "Partly supported",
          "not_supported": "Not supported by the sources"}


def _run(run_id, mode, requested="auto", level="partly_supported", score=0.6, supported=2, checked=3,
         tier=Tier.HIGH, total_ms=1000.0, prompt_tokens=500, config=None, sources=SOURCES, answer=None,
         timings=None):
    events = sample_run(run_id, mode, tier=tier, sources=sources, prompt_tokens=prompt_tokens,
                        timings={**(timings or {}), "total": total_ms},
                        **({"answer": answer} if answer is not None else {}))
    started, done = events[0], events[-1]
    assert isinstance(started, RunStarted) and isinstance(done, Done)
    verdict = Verdict(level=level, label=LABELS[level], meaning="", score=score, supported_claims=supported,
                      checked_claims=checked, evidence_grade=tier.value)
    events[0] = started.model_copy(update={"requested_mode": requested})
    events[-1] = done.model_copy(update={"verdict": verdict})
    return {"meta": {"run_id": run_id}, "config": config or Settings().flat(), "events": events}


def test_labels_name_the_path_asked_for_and_the_one_run_and_settings_when_paths_match():
    cmp = compare_runs(_run("ra", "AGENTIC", requested="RULE_PLANNER"), _run("rb", "AGENTIC", requested="AGENTIC"))
    assert (cmp.label_a, cmp.label_b) == ("rule planner (ran agentic)", "agentic")
    as_stored = compare_runs(_run("ra", "RULE_PLANNER", requested="rule"), _run("rb", "AGENTIC", requested="auto"))
    assert (as_stored.label_a, as_stored.label_b) == ("rule planner", "auto → agentic")  # "rule": RequestedMode
    other = Settings().with_overrides({"grader.high_threshold": 0.7}).flat()
    same_path = compare_runs(_run("ra", "AGENTIC", requested="AGENTIC"),
                             _run("rb", "AGENTIC", requested="AGENTIC", config=other))
    assert same_path.label_a != same_path.label_b
    assert same_path.label_a == "agentic · grader.high_threshold 0.9"
    assert same_path.label_b == "agentic · grader.high_threshold 0.7"
    twins = compare_runs(_run("run-a", "AGENTIC"), _run("run-b", "AGENTIC"))
    assert (twins.label_a, twins.label_b) == ("auto → agentic · run run-a", "auto → agentic · run run-b")


def test_verdict_line_says_the_better_supported_answer_did_better_and_what_the_other_saved():
    a = _run("ra", "RULE_PLANNER", level="partly_supported", score=0.6, total_ms=800, prompt_tokens=300)
    b = _run("rb", "AGENTIC", level="supported", score=0.9, supported=3, total_ms=4000, prompt_tokens=2000)
    cmp = compare_runs(a, b)
    assert cmp.verdict.winner == "B"
    line = cmp.verdict.line
    assert line.startswith("B (auto → agentic) did better: verdict Supported by the sources 0.90 against "
                           "Partly supported 0.60"), line
    assert "but A took less time (0.80 s against 4.00 s) and used fewer tokens" in line
    better = {x.name: x.better for x in cmp.verdict.aspects}
    assert better == {"verdict": "B", "supported claims": "B", "evidence grade": "tie", "latency": "A",
                      "tokens": "A"}


def test_gold_hits_decide_before_the_verdict_when_the_question_is_labelled():
    from docmind_core.reports.pair_verdict import GoldLabel  # here: the page tests borrow _run from this module

    a = _run("ra", "RULE_PLANNER", level="supported", score=0.9, supported=3)
    b = _run("rb", "AGENTIC", sources=[_chunk("g1", "gold text", 0.7), SOURCES[1]])
    cmp = compare_runs(a, b, gold=GoldLabel(chunk_ids=["g1"]))
    assert cmp.verdict.winner == "B"
    assert "gold sources found 1 of 1 against 0 of 1" in cmp.verdict.line
    unlabelled = compare_runs(a, b)
    assert unlabelled.verdict.winner == "A"
    assert "gold" not in " ".join(x.name for x in unlabelled.verdict.aspects)


def test_equal_answers_are_decided_by_cost_and_equal_everything_is_a_tie():
    a = _run("ra", "RULE_PLANNER", total_ms=900)
    b = _run("rb", "AGENTIC", total_ms=3000)
    cmp = compare_runs(a, b)
    assert cmp.verdict.winner == "A"
    assert cmp.verdict.line.startswith("A (auto → rule planner) did better on cost: equally good answers (same "
                                       "verdict, supported claims, evidence grade); it took less time")
    tie = compare_runs(_run("ra", "RULE_PLANNER", total_ms=1000), _run("rb", "AGENTIC", total_ms=1050))
    assert tie.verdict.winner == "tie" and tie.verdict.line.startswith("Tie: equally good answers")


def test_a_stopped_run_is_not_weighed_on_its_verdict_and_grade():
    a = _run("ra", "RULE_PLANNER", level="supported", score=0.9, supported=3)
    b = _run("rb", "AGENTIC")
    stopped_done = b["events"][-1].model_copy(update={"cancelled": True, "verdict": Verdict(
        level="stopped", label="Stopped: no verdict", meaning="")})
    b["events"][-1] = stopped_done
    cmp = compare_runs(a, b)
    better = {x.name: x.better for x in cmp.verdict.aspects}
    assert better["verdict"] == "unknown" and better["evidence grade"] == "unknown"
    assert cmp.verdict.winner == "A"
    assert cmp.verdict.line.startswith("A (auto → rule planner) did better: run finished against stopped by you")


def test_summary_says_not_recorded_instead_of_blank_none_or_an_uncounted_zero():
    a = _run("ra", "RULE_PLANNER", prompt_tokens=0)  # an engine that reports no usage
    b = _run("rb", "AGENTIC", prompt_tokens=120)
    rows = {r["metric"]: (r["A"], r["B"]) for r in compare_runs(a, b).summary_rows()}
    assert rows["prompt tokens"] == ("not recorded", "120")
    assert rows["tokens"] == ("not recorded", "130 tokens")
    assert rows["stop reason"][0] == "not recorded"  # a rule-planner run records none
    assert rows["path"] == ("auto → rule planner", "auto → agentic")
    cells = [c for r in compare_runs(a, b).summary_rows() for c in (r["A"], r["B"])]
    assert all(c and c != "None" for c in cells)
    token_aspect = next(x for x in compare_runs(a, b).verdict.aspects if x.name == "tokens")
    assert token_aspect.better == "unknown"  # an uncounted side is not "cheaper"


def test_diff_aligns_sentences_with_a_word_diff_inside_each_changed_one():
    a = "The battery lasts 18 hours [1]. The camera has 12 MP. It weighs 300 g [2]."
    b = "The camera has 12 MP [1]. It weighs 300 g. The battery lasts 20 hours [2]. It is waterproof."
    diff = answer_diff(a, b)
    assert diff.layout == "sentences"
    ops = [(r.op, r.a, r.b) for r in diff.rows]
    assert ("equal", "The camera has 12 MP.", "The camera has 12 MP.") in ops
    assert ("equal", "It weighs 300 g.", "It weighs 300 g.") in ops
    assert ("only_b", "", "It is waterproof.") in ops
    # the moved battery sentence is removed on A's side and added on B's, never interleaved word by word
    battery = [r for r in diff.rows if "battery" in r.a + r.b]
    assert all(r.op in ("only_a", "only_b", "changed") for r in battery)
    assert all("18" not in r.b and "20" not in r.a for r in battery)

    changed = answer_diff("The battery lasts 18 hours [1]. It charges fast.", "The battery lasts 20 hours [3]. "
                                                                            "It charges fast.")
    row = changed.rows[0]
    assert (row.op, row.a, row.b) == ("changed", "The battery lasts 18 hours.", "The battery lasts 20 hours.")
    assert [p.text for p in row.pieces if p.op == "delete"] == ["18"]
    assert [p.text for p in row.pieces if p.op == "insert"] == ["20"]


def test_answers_that_share_little_fall_back_to_two_columns():
    a = "Aurora X2 has a battery life of 18 hours [1]. It charges over USB-C."
    b = "The sources do not say how long the battery lasts; the warranty covers two years [2]."
    diff = answer_diff(a, b)
    assert diff.layout == "columns" and diff.similarity < 0.5
    assert diff.answer_a == "Aurora X2 has a battery life of 18 hours. It charges over USB-C."
    assert diff.answer_b.endswith("two years.")
    assert answer_diff("Same [1].", "Same [2].").layout == "same"
