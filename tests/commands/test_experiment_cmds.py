"""A tuning session on the command line, end to end, on a tiny fixture KB with the offline engine:
import a labelled set, run two variants (with leave-gold-out questions), read the differences with
intervals, sweep the thresholds, apply them, re-run; plus resume after an interrupted run and cancel."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from docmind_core.cli import cli
from docmind_core.engine import Engine
from docmind_core.accounts.users import LOCAL_USER
from docmind_core.workbench import Workbench
from tests.paths import FIXTURES as ALL_FIXTURES

pytestmark = pytest.mark.slow  # experiments run through the CLI on a real engine: not in make test-fast

FIXTURES = ALL_FIXTURES / "experiment"


def _run(home: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--home", str(home), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def _json(home: Path, *args: str):
    return json.loads(_run(home, *args, "--json"))


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("experiment-cli") / "home"
    _run(home, "ingest", str(FIXTURES / "kb"), "--kb", "orion")
    made = _json(home, "dataset", "import", str(FIXTURES / "set.jsonl"), "--name", "orion-set", "--kb", "orion")
    assert made["item_count"] == 4
    return home


def test_import_run_show_sweep_apply_rerun(home):
    run = _json(home, "experiment", "run", "--dataset", "orion-set", "--variant", "rule:rule",
                "--variant", "strict:rule:grader.high_threshold=0.95", "--leave-gold-out")
    exp_id = run["experiment_id"]
    # 4 questions + 3 asked again without their gold documents, for each of the two variants
    assert run["progress"] == {**run["progress"], "total": 14, "done": 14, "failed": 0, "state": "done"}

    report = _json(home, "experiment", "show", str(exp_id))
    rule, strict = report["variants"]
    assert (rule["name"], strict["name"]) == ("rule", "strict")
    recall = rule["metrics"]["gold_recall"]
    assert recall["n"] == 3 and recall["mean"] == 1.0 and recall["low"] <= recall["mean"] <= recall["high"]
    assert rule["metrics"]["abstention_accuracy"]["n"] == 4  # t4 plus the three leave-gold-out questions
    assert rule["metrics"]["answer_containment"]["mean"] >= 2 / 3
    assert sum(rule["confusion"]["unanswerable"].values()) == 4
    assert sum(rule["confusion"]["answerable, gold in context"].values()) == 3
    assert rule["routes"] == {"RULE_PLANNER": 7}
    # the same retrieval, a stricter HIGH: the paired difference of "HIGH on unanswerable" is <= 0, with an interval
    diff = next(d for d in report["differences"] if d["metric"] == "high_on_unanswerable")
    assert diff["a"] == "rule" and diff["b"] == "strict" and diff["difference"]["n"] == 4
    assert diff["difference"]["mean"] <= 0 and diff["difference"]["low"] <= diff["difference"]["mean"]
    assert strict["confusion"]["answerable, gold in context"]["HIGH"] <= \
        rule["confusion"]["answerable, gold in context"]["HIGH"]
    text = _run(home, "experiment", "show", str(exp_id))
    assert "Paired differences" in text and "[" in text

    # drill-down: the two variants' runs of one question, step by step
    item = report["questions"][0]["item_id"]
    cmp = _json(home, "experiment", "show", str(exp_id), "--compare", str(item), "--a", "rule", "--b", "strict")
    assert cmp["type"] == "docmind.comparison" and cmp["steps"]
    assert any(c["key"] == "grader.high_threshold" for c in cmp["config_differences"])
    # a labelled question: the pair verdict counts the gold sources each side found (issue 38 item 3)
    gold = next(a for a in cmp["verdict"]["aspects"] if a["name"] == "gold sources found")
    assert gold["a"].endswith(" of 1") and gold["b"].endswith(" of 1")
    # the text names the question it compares and whether its gold was left out
    question = report["questions"][0]["question"]
    text = _run(home, "experiment", "show", str(exp_id), "--compare", str(item), "--a", "rule", "--b", "strict")
    assert f"question (item #{item}): {question}" in text and "gold left out: no" in text
    left_out = next(q for q in report["questions"] if q["gold_left_out"])
    text = _run(home, "experiment", "show", str(exp_id), "--compare", str(left_out["item_id"]), "--gold-left-out")
    assert f"question (item #{left_out['item_id']}): {left_out['question']}" in text
    assert "gold left out: yes" in text
    cmp_out = _json(home, "experiment", "show", str(exp_id), "--compare", str(left_out["item_id"]), "--gold-left-out")
    assert all(a["name"] != "gold sources found" for a in cmp_out["verdict"]["aspects"])

    # runs are ordinary traces, tagged with the experiment
    engine = Engine.open(home, warm=False)
    tagged = engine.traces.list(label=f"experiment:{exp_id}", limit=100)
    assert len(tagged) == 14

    # sweep without model calls, apply the recommendation, re-run with it
    calls_before = len(engine.traces.list(limit=1000))
    sweep = _json(home, "experiment", "sweep", str(exp_id), "--variant", "rule", "--objective", "balanced",
                  "--floor", "0.5", "--apply")
    assert len(engine.traces.list(limit=1000)) == calls_before  # no run was made
    assert sweep["runs"] == 7 and sweep["positives"] == 3 and sweep["unanswerable"] == 4
    live = next(p for p in sweep["points"] if p["live"])
    best = sweep["recommended"]
    assert (live["high"], live["low"], live["mode"]) == (0.9, 0.25, "coverage_first")
    assert sweep["floor"] == 0.5 and best["unanswerable_not_high"] >= 0.5
    assert sweep["change"]["unanswerable: not HIGH"] == {"live": live["unanswerable_not_high"],
                                                         "recommended": best["unanswerable_not_high"]}
    assert sweep["applied"]
    assert _run(home, "config", "get", "grader.high_threshold").strip() == repr(best["high"])
    assert _run(home, "config", "get", "grader.gray_zone_mode").strip() == repr(best["mode"])
    again = _json(home, "experiment", "run", "--dataset", "orion-set", "--variant", "tuned:rule", "--leave-gold-out")
    assert again["progress"]["done"] == 7
    rerun = engine.traces.list(label=f"experiment:{again['experiment_id']}", limit=10)[0]
    assert engine.traces.get(rerun.run_id).config["grader.high_threshold"] == best["high"]
    # the re-run's "HIGH on unanswerable" is what the sweep predicted at the applied point
    tuned = _json(home, "experiment", "show", str(again["experiment_id"]))["variants"][0]
    assert tuned["metrics"]["high_on_unanswerable"]["mean"] == pytest.approx(1 - best["unanswerable_not_high"])
    _run(home, "config", "reset", "--all")

    listed = _json(home, "experiment", "list")
    assert {e["id"] for e in listed} >= {exp_id, again["experiment_id"]}
    exported = json.loads(_run(home, "experiment", "export", str(exp_id)))
    assert exported["format"] == "docmind-experiment" and len(exported["runs"]) == 14


def test_an_interrupted_experiment_resumes_where_it_stopped(home):
    first = _json(home, "experiment", "run", "--dataset", "orion-set", "--variant", "a:rule", "--max-runs", "2")
    exp_id = first["experiment_id"]
    assert first["progress"]["done"] == 2 and first["progress"]["pending"] == 2
    assert first["progress"]["state"] == "pending"
    # a crash mid-run leaves a row "running" with a dead runner: the next run takes it over
    engine = Engine.open(home, warm=False)
    engine.db.db.execute("UPDATE experiment_runs SET state = 'running' WHERE experiment_id = ? AND state = 'pending' "
                         "AND id = (SELECT MIN(id) FROM experiment_runs WHERE experiment_id = ? AND state = 'pending')",
                         [exp_id, exp_id])
    engine.db.db.execute("UPDATE experiments SET state = 'running', runner = 'elsewhere:1', heartbeat_at = 0 "
                         "WHERE id = ?", [exp_id])
    engine.db.db.conn.commit()
    resumed = _json(home, "experiment", "run", str(exp_id))
    assert resumed["progress"] == {**resumed["progress"], "done": 4, "pending": 0, "running": 0, "state": "done"}
    assert len(engine.traces.list(label=f"experiment:{exp_id}", limit=100)) == 4  # no finished row was asked again


def test_a_live_runner_is_not_taken_over_and_cancel_stops_it(home):
    import time

    engine = Engine.open(home, warm=False)
    bench = Workbench(engine, LOCAL_USER, "cli")
    from docmind_core.experiments.records import ExperimentError, Variant

    made = bench.create_experiment("cancel me", bench.get_dataset("orion-set").id, [Variant(name="a", mode="rule")])
    engine.db.db.execute("UPDATE experiments SET state = 'running', runner = 'elsewhere:2', heartbeat_at = ? "
                         "WHERE id = ?", [time.time(), made.id])
    engine.db.db.conn.commit()
    with pytest.raises(ExperimentError, match="already being run"):
        bench.run_experiment(made.id)
    assert bench.cancel_experiment(made.id) == "cancelling"  # the live runner stops at its next heartbeat
    engine.db.db.execute("UPDATE experiments SET heartbeat_at = 0 WHERE id = ?", [made.id])
    engine.db.db.conn.commit()
    assert bench.cancel_experiment(made.id) == "cancelled"  # a dead runner: cancelled at once
    # a cancel during a run: rows in flight go back to pending, the rest are never started
    import threading

    stop = threading.Event()
    seen = []

    def on_progress(p):
        seen.append(p)
        stop.set()

    result = bench.run_experiment(made.id, progress=on_progress, cancel=stop, parallel=1)
    assert result.state == "cancelled" and result.done >= 1 and result.pending >= 1
    assert bench.run_experiment(made.id).state == "done"  # and it resumes


def test_sweep_keeps_the_safety_floor_and_applies_nothing_below_it(home):
    """The f1 recommendation made HIGH less safe without saying so: 'not HIGH on unanswerable' fell below
    the 0.90 the README promises.  On this set no point reaches 0.90 (a leave-gold-out question finds its
    answer in another document): nothing is recommended, --apply changes nothing and says why.  (The asked-value
    check, which is not swept, is off for this variant: with it that evidence is no longer HIGH.)"""
    run = _json(home, "experiment", "run", "--dataset", "orion-set", "--variant",
                "r:rule:grader.require_asked_value=false,grader.require_asked_target=false", "--leave-gold-out")
    exp_id = str(run["experiment_id"])
    points = _json(home, "experiment", "sweep", exp_id, "--floor", "0")["points"]
    top = max(p["unanswerable_not_high"] for p in points)
    assert top < 0.9
    for objective in ("f1", "safe_recall", "balanced"):
        swept = _json(home, "experiment", "sweep", exp_id, "--objective", objective)
        assert swept["floor"] == 0.9 and swept["recommended"] is None, objective
        assert swept["safest"]["unanswerable_not_high"] == top
        assert "nothing is recommended" in swept["reason"]
        assert swept["objective_help"]
    before = _run(home, "config", "get", "grader.high_threshold")
    refused = CliRunner().invoke(cli, ["--home", str(home), "experiment", "sweep", exp_id, "--apply"])
    assert refused.exit_code != 0 and "nothing applied" in refused.output
    assert "objective f1: F1 of HIGH" in refused.output and "safety floor" in refused.output
    assert "safest (below floor)" in refused.output
    assert _run(home, "config", "get", "grader.high_threshold") == before
    # a floor the set can meet: every objective's point keeps it, and the text shows both rates' change
    text = _run(home, "experiment", "sweep", exp_id, "--floor", str(top), "--objective", "f1")
    assert "predicted answerable with gold in context: HIGH:" in text
    assert "predicted unanswerable: not HIGH:" in text
    for objective in ("f1", "safe_recall", "balanced"):
        best = _json(home, "experiment", "sweep", exp_id, "--floor", str(top), "--objective", objective)
        assert best["recommended"]["unanswerable_not_high"] >= top
    bad = CliRunner().invoke(cli, ["--home", str(home), "experiment", "sweep", exp_id, "--floor", "1.5"])
    assert bad.exit_code == 2 and "1.5" in bad.output


def test_modes_are_named_as_everywhere_else_and_experiments_have_names_and_descriptions(home):
    """`rp:RULE_PLANNER` was refused (the page spoke rule/agentic, everything else RULE_PLANNER/AGENTIC), and
    every experiment was named "experiment on dataset #1" with nothing about its variants or thresholds."""
    run = _json(home, "experiment", "run", "--dataset", "orion-set", "--name", "planner baseline",
                "--variant", "rp:RULE_PLANNER", "--variant", "ag:agentic:agentic.max_iterations=2",
                "--variant", "au:Auto", "--limit", "1")
    exp_id = run["experiment_id"]
    assert run["progress"]["done"] == 3
    made = next(e for e in _json(home, "experiment", "list") if e["id"] == exp_id)
    assert made["name"] == "planner baseline"
    assert [v["mode"] for v in made["variants"]] == ["rule", "agentic", "auto"]
    assert made["description"] == (
        "Variants: rp: RULE_PLANNER; ag: AGENTIC, agentic.max_iterations=2; au: AUTO. "
        "Thresholds: grader.high_threshold=0.9, grader.low_threshold=0.25, grader.gray_zone_mode=coverage_first. "
        "Questions: the first 1 questions of orion-set.")
    listed = _run(home, "experiment", "list")
    assert "planner baseline" in listed and made["description"] in listed
    shown = _run(home, "experiment", "show", str(exp_id))
    assert "== rp (mode RULE_PLANNER)" in shown and "== ag (mode AGENTIC" in shown and "== au (mode AUTO)" in shown
    assert made["description"] in shown
    # no name: one made from the dataset and the variants
    unnamed = _json(home, "experiment", "run", "--dataset", "orion-set", "--variant", "x:AGENTIC", "--limit", "1")
    assert next(e for e in _json(home, "experiment", "list")
                if e["id"] == unnamed["experiment_id"])["name"] == "orion-set: x"
    wrong = CliRunner().invoke(cli, ["--home", str(home), "experiment", "run", "--dataset", "orion-set",
                                     "--variant", "x:SIDEWAYS"])
    assert wrong.exit_code != 0 and "AUTO, RULE_PLANNER or AGENTIC" in wrong.output
