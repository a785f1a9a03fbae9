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
from docmind_core.users import LOCAL_USER
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

    # runs are ordinary traces, tagged with the experiment
    engine = Engine.open(home, warm=False)
    tagged = engine.traces.list(label=f"experiment:{exp_id}", limit=100)
    assert len(tagged) == 14

    # sweep without model calls, apply the recommendation, re-run with it
    calls_before = len(engine.traces.list(limit=1000))
    sweep = _json(home, "experiment", "sweep", str(exp_id), "--variant", "rule", "--objective", "balanced",
                  "--apply")
    assert len(engine.traces.list(limit=1000)) == calls_before  # no run was made
    assert sweep["runs"] == 7 and sweep["positives"] == 3 and sweep["unanswerable"] == 4
    live = next(p for p in sweep["points"] if p["live"])
    best = sweep["recommended"]
    assert (live["high"], live["low"], live["mode"]) == (0.9, 0.25, "coverage_first")
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
    from docmind_core.experiments.runner import ExperimentError, Variant

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
