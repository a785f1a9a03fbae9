"""The Experiments page through AppTest: metrics with intervals, paired differences, tier confusion, the
sweep's heatmap and curves, applying the recommended thresholds, creating and running an experiment."""

from __future__ import annotations

import time

import pytest
from streamlit.testing.v1 import AppTest

from docmind_core.experiments.runner import Variant
from docmind_core.users import LOCAL_USER
from docmind_core.workbench import Workbench
from tests.paths import ROOT

pytestmark = pytest.mark.slow  # whole app runs (AppTest) or the demo KB ingested: not in make test-fast
FIXTURES = ROOT / "tests" / "fixtures" / "experiment"
TIMEOUT = 90


@pytest.fixture(scope="module")
def engine(app_engine):
    engine = app_engine
    kb = engine.create_kb("orion")
    assert all(o.status == "added" for o in engine.ingest(kb.id, sorted((FIXTURES / "kb").iterdir())))
    bench = Workbench(engine, LOCAL_USER, "cli")
    dataset = bench.import_dataset("orion-set", FIXTURES / "set.jsonl", kb="orion")
    made = bench.create_experiment("rule vs agentic", dataset.id,
                                   [Variant(name="rule", mode="rule"), Variant(name="agentic", mode="agentic")],
                                   leave_gold_out=True)
    assert bench.run_experiment(made.id).done == 14
    yield engine


def _page() -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.run()
    at.switch_page("pages/experiments.py").run()
    assert not at.exception, at.exception
    return at


def _frame(at: AppTest, key: str):
    return next(df.value for df in at.dataframe if df.key == key) if any(df.key == key for df in at.dataframe) \
        else next(df.value for df in at.dataframe if key in df.value.columns)


def test_page_shows_metrics_differences_confusion_and_sweep(engine):
    at = _page()
    metrics = _frame(at, "metric")
    assert {"rule", "agentic"} <= set(metrics.columns)
    recall = metrics.loc[metrics["metric"] == "gold-in-context recall", "rule"].iloc[0]
    assert recall.startswith("1.000 [1.000, 1.000]") and "(n=3)" in recall
    diffs = _frame(at, "B − A")
    assert set(diffs["A"]) == {"rule"} and set(diffs["B"]) == {"agentic"} and len(diffs) >= 5
    confusion = _frame(at, "answerability")
    assert {"HIGH", "AMBIGUOUS", "LOW", "none"} <= set(confusion.columns)
    assert len(at.get("plotly_chart")) == 2  # heatmap and curves
    assert any(p.proto.text.startswith("done: 14 of 14 runs") for p in at.get("progress")), \
        [p.proto.text for p in at.get("progress")]
    best = _frame(at, "not HIGH on unanswerable")
    assert list(best[""]) == ["live", "recommended"]
    # apply: the recommended point becomes the (admin's: global) thresholds
    recommended = best.iloc[1]
    next(b for b in at.button if b.label.startswith("Apply recommended thresholds")).click().run()
    assert not at.exception, at.exception
    assert engine.settings.grader.high_threshold == pytest.approx(float(recommended["high"]))
    assert engine.settings.grader.gray_zone_mode == recommended["mode"]
    engine.config.reset_all(by="test")


@pytest.fixture
def trace_loads(monkeypatch):
    """Every stored run the trace store rebuilds (one by one or in a batch), by run id."""
    from docmind_core.store.traces import TraceStore

    loads: list[str] = []
    one = TraceStore.get

    def get(self, run_id):
        loads.append(run_id)
        return one(self, run_id)

    monkeypatch.setattr(TraceStore, "get", get)
    many = getattr(TraceStore, "iter_many", None)
    if many is not None:
        def iter_many(self, run_ids, *args, **kwargs):
            for record in many(self, run_ids, *args, **kwargs):
                loads.append(record.run_id)
                yield record

        monkeypatch.setattr(TraceStore, "iter_many", iter_many)
    return loads


def test_page_loads_each_run_once_and_reruns_load_none(engine, trace_loads):
    """The page scored every run three times per rerun (report, export and sweep each loaded every trace)."""
    at = _page()
    bench = Workbench(engine, LOCAL_USER, "cli")
    picked = at.selectbox(key="dm_ex_pick").value
    done = bench.experiment_progress(picked).done
    assert done >= 4 and trace_loads, "the page shows the experiment's runs"
    assert len(trace_loads) == len(set(trace_loads)) == done  # each stored run loaded once
    trace_loads.clear()
    at.selectbox(key="dm_ex_objective").set_value("balanced").run()  # a rerun with nothing new: from the cache
    assert not at.exception, at.exception
    at.run()
    assert not at.exception, at.exception
    assert trace_loads == []
    assert _frame(at, "metric") is not None and len(at.get("plotly_chart")) == 2


def test_one_page_run_reads_the_experiment_once(engine, monkeypatch):
    """A page run fetched the picked experiment five times (get_experiment, experiment_results twice,
    experiment_progress twice) and listed the experiments one by one."""
    from docmind_core.experiments.runner import ExperimentStore

    at = _page()
    calls: list[str] = []
    for name in ("get", "list", "progress"):
        def counted(self, *args, _name=name, _original=getattr(ExperimentStore, name), **kwargs):
            calls.append(_name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(ExperimentStore, name, counted)
    at.run()
    assert not at.exception, at.exception
    assert sorted(calls) == ["get", "list", "progress"], calls
    assert any(p.proto.text.startswith("done: ") for p in at.get("progress"))


def test_page_creates_and_runs_an_experiment(engine):
    at = _page()
    at.text_area(key="dm_ex_variants").set_value("only-rule:rule")
    at.checkbox(key="dm_ex_lgo").set_value(False)
    next(b for b in at.button if b.label == "Create and run").click().run()
    assert not at.exception, at.exception
    assert any("started" in s.value for s in at.success)
    bench = Workbench(engine, LOCAL_USER, "cli")
    made = max(bench.list_experiments(), key=lambda e: e.id)
    deadline = time.monotonic() + 60
    while bench.experiment_progress(made.id).state != "done" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert bench.experiment_progress(made.id).done == 4
    at.run()
    assert not at.exception, at.exception
    assert at.selectbox(key="dm_ex_pick").value == made.id
    assert "only-rule" in _frame(at, "metric").columns


def test_traces_page_labels_a_run_into_a_dataset(engine):
    bench = Workbench(engine, LOCAL_USER, "cli")
    kb = bench.kb_by_name("orion")
    events = list(bench.ask("How long is the Orion warranty?", [kb.id], mode="rule"))
    run_id, sources = events[-1].run_id, events[-1].sources
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.run()
    at.switch_page("pages/traces.py").run()
    row = next(i for i, s in enumerate(bench.list_traces(limit=500)) if s.run_id == run_id)
    at.session_state["dm_tr_table"] = {"selection": {"rows": [row], "columns": []}}
    at.run()
    assert not at.exception, at.exception
    at.radio(key="dm_tr_verdict").set_value("correct")
    at.multiselect(key="dm_tr_gold").set_value([sources[0].chunk_id])
    next(b for b in at.button if b.label == "Save label").click().run()
    assert not at.exception, at.exception
    assert any("Labelled correct" in s.value for s in at.success)
    label = bench.run_label(run_id)
    assert label.verdict == "correct" and label.gold_chunk_ids == [sources[0].chunk_id]
    item = next(i for i in bench.dataset_items(bench.get_dataset("labelled runs of local").id)
                if i.source_run_id == run_id) if bench.list_datasets() else None
    assert item is not None and item.answerable and item.kb == "orion" and item.gold_chunk_ids
