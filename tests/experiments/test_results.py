"""An experiment's results (docmind_core/experiments/results.py): loaded once and handed back, a rerun loads
only the runs that are new; the threshold sweep re-grades each stored run with the grader settings that run
was recorded with: only the swept keys (high / low threshold, gray-zone mode) come from the grid."""

from __future__ import annotations


import pytest

from docmind_core.engine import Engine
from docmind_core.experiments.records import Variant
from docmind_core.accounts.users import LOCAL_USER
from docmind_core.workbench import Workbench
from tests.paths import FIXTURES as ALL_FIXTURES

pytestmark = pytest.mark.slow  # a real engine ingests the fixture KB and runs the experiment

FIXTURES = ALL_FIXTURES / "experiment"


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    engine = Engine.open(tmp_path_factory.mktemp("experiment-sweep") / "home", env={}, warm=False)
    kb = engine.create_kb("orion")
    assert all(o.status == "added" for o in engine.ingest(kb.id, sorted((FIXTURES / "kb").iterdir())))
    bench = Workbench(engine, LOCAL_USER, "cli")
    dataset = bench.import_dataset("orion-set", FIXTURES / "set.jsonl", kb="orion")
    # the same questions, the same retrieval; the runs differ only in a grader key the sweep does not sweep:
    # in the blend gray zone, "strict" can never reach HIGH (blended top-and-coverage < 1 below the high
    # threshold) and "loose" reaches it easily
    made = bench.create_experiment("recorded grader settings", dataset.id, [
        Variant(name="loose", mode="rule", overrides={"grader.blend_high": 0.3, "grader.blend_low": 0.05}),
        Variant(name="strict", mode="rule", overrides={"grader.blend_high": 1.0})])
    assert bench.run_experiment(made.id).done == 8
    yield engine, bench, made.id


def test_sweep_uses_each_runs_recorded_grader_settings_for_the_keys_it_does_not_sweep(swept):
    engine, bench, exp_id = swept
    loose = bench.sweep_experiment(exp_id, "loose")
    strict = bench.sweep_experiment(exp_id, "strict")
    assert loose.runs == strict.runs >= 3
    assert engine.settings.grader.blend_high == 0.75  # the live value, between the two recorded ones
    by_point = {(p.high, p.low, p.mode): p for p in strict.points}
    fewer = 0
    for p in loose.points:
        other = by_point[(p.high, p.low, p.mode)]
        if p.mode != "blend":  # the runs differ in a blend key only: every other mode grades them alike
            assert (other.high_count, other.precision, other.recall) == (p.high_count, p.precision, p.recall)
        else:
            assert other.high_count <= p.high_count
            fewer += other.high_count < p.high_count
    assert fewer > 0, "with blend_high 1.0 recorded, no blend gray-zone run of 'strict' may be HIGH"


def test_sweep_of_all_variants_grades_each_run_with_its_own_settings(swept):
    _engine, bench, exp_id = swept
    both = bench.sweep_experiment(exp_id)
    loose = bench.sweep_experiment(exp_id, "loose")
    strict = bench.sweep_experiment(exp_id, "strict")
    assert both.runs == loose.runs + strict.runs
    for p in both.points:
        assert p.high_count == loose.point(p.high, p.low, p.mode).high_count + \
            strict.point(p.high, p.low, p.mode).high_count


def test_results_handed_back_load_only_new_runs(swept, monkeypatch):
    engine, bench, _exp_id = swept
    from docmind_core.store.traces import TraceStore

    loaded: list[str] = []
    many = TraceStore.iter_many

    def counting(self, run_ids, *args, **kwargs):
        for record in many(self, run_ids, *args, **kwargs):
            loaded.append(record.run_id)
            yield record

    monkeypatch.setattr(TraceStore, "iter_many", counting)
    one = TraceStore.get
    monkeypatch.setattr(TraceStore, "get", lambda self, run_id: loaded.append(f"get {run_id}") or one(self, run_id))
    made = bench.create_experiment("in steps", bench.get_dataset("orion-set").id, [Variant(name="rule", mode="rule")])
    bench.run_experiment(made.id, max_runs=2)
    loaded.clear()
    first = bench.experiment_results(made.id)
    assert len(loaded) == len(first.runs) == 2 and first.report.variants[0].runs == 2
    assert bench.experiment_results(made.id, reuse=first) is first  # nothing new: the same object, no load
    bench.run_experiment(made.id)
    loaded.clear()
    second = bench.experiment_results(made.id, reuse=first)
    assert len(loaded) == 2 and set(loaded).isdisjoint(r for _, r in first.runs)  # only the two new runs
    assert second.report.variants[0].runs == 4 and second.progress.state == "done"
    assert '"runs": 4' in second.export_json()
    # a deleted trace no longer counts, and nothing else is loaded again
    gone = next(iter(second.runs))[1]
    engine.traces.delete(gone)
    loaded.clear()
    third = bench.experiment_results(made.id, reuse=second)
    assert loaded == [] and third.report.variants[0].runs == 3 and all(r != gone for _, r in third.runs)
