"""How many SQL statements the experiment methods of the Workbench issue (docmind_core/experiments/facade.py
and the ExperimentStore in runner.py): the listing is a fixed number of queries however many experiments
there are, and one call reads the experiment's row once (the Experiments page calls them on every rerun)."""

from __future__ import annotations

import pytest

from docmind_core.engine import Engine
from docmind_core.experiments.records import Variant
from docmind_core.accounts.users import LOCAL_USER
from docmind_core.workbench import Workbench
from tests.paths import FIXTURES

SET = FIXTURES / "experiment" / "set.jsonl"


@pytest.fixture
def engine(tmp_path):
    return Engine.open(tmp_path / "home", env={}, warm=False)


@pytest.fixture
def bench(engine):
    bench = Workbench(engine, LOCAL_USER, "cli")
    bench.import_dataset("orion-set", SET)
    return bench


def _create(bench: Workbench, count: int) -> list[int]:
    dataset = bench.get_dataset("orion-set")
    return [bench.create_experiment(f"e{i}", dataset.id, [Variant(name="rule", mode="rule"),
                                                          Variant(name="agentic", mode="agentic")]).id
            for i in range(count)]


def _statements(engine: Engine, call) -> list[str]:
    """The SQL statements ``call`` runs on this thread's connection (the facade runs in the caller's thread)."""
    seen: list[str] = []
    conn = engine.db.db.conn
    conn.set_trace_callback(seen.append)
    try:
        call()
    finally:
        conn.set_trace_callback(None)
    return seen


def _experiment_reads(statements: list[str]) -> list[str]:
    return [s for s in statements if " FROM experiments " in s]


def test_listing_is_a_fixed_number_of_queries(engine, bench):
    _create(bench, 1)
    one = _statements(engine, bench.list_experiments)
    _create(bench, 5)
    six = _statements(engine, bench.list_experiments)
    assert len(bench.list_experiments()) == 6
    assert len(six) == len(one) <= 2, six  # the experiments, then every variant of them in one query
    listed = bench.list_experiments()
    assert [e.id for e in listed] == sorted((e.id for e in listed), reverse=True)
    assert all([v.name for v in e.variants] == ["rule", "agentic"] for e in listed)


def test_results_handed_back_read_the_experiment_once(engine, bench):
    exp_id = _create(bench, 1)[0]
    first = bench.experiment_results(exp_id)
    statements = _statements(engine, lambda: bench.experiment_results(exp_id, reuse=first))
    assert len(_experiment_reads(statements)) == 1, statements
    # the access check's read (experiment and variants), the items, the settings, the progress, the revision
    assert len(statements) == 6, statements


def test_progress_reads_the_experiment_once(engine, bench):
    exp_id = _create(bench, 1)[0]
    statements = _statements(engine, lambda: bench.experiment_progress(exp_id))
    assert len(_experiment_reads(statements)) == 1, statements
    assert len(statements) == 4, statements  # experiment, variants, settings, row counts
    progress = bench.experiment_progress(exp_id)
    runs = 2 * len(bench.dataset_items(bench.get_dataset("orion-set").id))  # two variants, nothing left out
    assert (progress.state, progress.total, progress.pending, progress.done) == ("pending", runs, runs, 0)
