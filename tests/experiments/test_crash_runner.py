"""An experiment runner killed (SIGKILL) mid-run: the next run resumes at once, each row counted once."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

from docmind_core.experiments.datasets import DatasetItem, DatasetStore
from docmind_core.experiments.experiment_store import ExperimentStore
from docmind_core.experiments.records import Variant
from docmind_core.store.db import Database
from tests.paths import ROOT

pytestmark = pytest.mark.slow  # a subprocess

TAKE_OVER_THEN_DIE = textwrap.dedent("""
    import os, signal, sys
    from docmind_core.experiments.experiment_store import ExperimentStore, runner_identity
    from docmind_core.store.db import Database
    store = ExperimentStore(Database(sys.argv[1]))
    store.take_over(int(sys.argv[2]), runner_identity(), retry_failed=False)
    first = store.runs(int(sys.argv[2]), ["pending"])[0]
    store.mark_running(first.id)
    store.mark_finished(store.runs(int(sys.argv[2]), ["pending"])[0].id, "done", "run-that-finished")
    os.kill(os.getpid(), signal.SIGKILL)  # mid-run: one row running, one done, the heartbeat still fresh
""")


def _experiment(tmp_path):
    db = Database(tmp_path / "docmind.db")
    datasets = DatasetStore(db)
    dataset = datasets.create("d", [DatasetItem(question=f"question {i}?") for i in range(3)])
    store = ExperimentStore(db)
    made = store.create("e", dataset.id, [Variant(name="rule", mode="rule")], datasets.items(dataset.id), None)
    proc = subprocess.run([sys.executable, "-c", TAKE_OVER_THEN_DIE, str(tmp_path / "docmind.db"), str(made.id)],
                          cwd=ROOT, timeout=60, capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    return store, made.id


def test_a_killed_runner_on_this_host_does_not_block_the_resume(tmp_path):
    store, exp_id = _experiment(tmp_path)
    # the dead runner's heartbeat is seconds old, but its process is gone: shown as waiting for a resume
    assert store.get(exp_id).state == "pending" and store.list()[0].state == "pending"
    store.take_over(exp_id, "the-resuming-runner", retry_failed=False)  # refused for 30 s before
    states = sorted(r.state for r in store.runs(exp_id))
    assert states == ["done", "pending", "pending"]  # the row in flight is asked again; the done one is not
    assert [r.run_id for r in store.runs(exp_id, ["done"])] == ["run-that-finished"]


def test_cancelling_an_experiment_whose_runner_was_killed_cancels_it(tmp_path):
    store, exp_id = _experiment(tmp_path)
    assert store.request_cancel(exp_id) == "cancelled"  # no live runner would ever see "cancelling"
