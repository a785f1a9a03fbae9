"""A process killed (SIGKILL) while it records a run: the run is listed as incomplete, never as finished."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from docmind_core.store.db import Database
from docmind_core.store.traces import TraceStore
from tests.paths import ROOT

pytestmark = pytest.mark.slow  # a subprocess

RECORD_THEN_DIE = textwrap.dedent("""
    import os, signal, sys
    from docmind_core.store.db import Database
    from docmind_core.store.traces import TraceStore
    from tests.fakes.sample_events import sample_events
    store = TraceStore(Database(sys.argv[1]))
    recorder = store.recorder(run_id="killed-run", question="what is the lease timeout?", config={})
    for event in [e for e in sample_events("killed-run") if e.kind != "done"][:5]:
        recorder.record(event)
    os.kill(os.getpid(), signal.SIGKILL)  # no finish(), no flush: the process is gone mid-run
""")


def test_a_run_killed_while_recording_is_listed_as_incomplete(tmp_path):
    path = tmp_path / "docmind.db"
    Database(path)  # migrated before the child starts
    proc = subprocess.run([sys.executable, "-c", RECORD_THEN_DIE, str(path)], cwd=ROOT, timeout=60,
                          capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    store = TraceStore(Database(path))
    [summary] = store.list()
    assert summary.run_id == "killed-run"
    assert summary.stop_reason == "incomplete" and summary.mode == "" and summary.tier == ""
    assert [s.run_id for s in store.list(stop_reason="incomplete")] == ["killed-run"]
    assert store.get("killed-run").done is None
