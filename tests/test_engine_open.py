"""Opening the engine in the background (the UI's first page needs only the stores): stores at once, backends,
start-up repairs and ingest jobs once built; no Python source parsed outside the main thread meanwhile."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import docmind_core.engine as engine_module
from docmind_core.engine import Engine
from docmind_core.users import LOCAL_USER
from docmind_core.workbench import Workbench

pytestmark = pytest.mark.slow  # real engines with the bundled encoder

ROOT = Path(__file__).resolve().parent.parent


def test_background_open_serves_the_stores_at_once_and_the_backends_once_built(tmp_path, monkeypatch):
    release = threading.Event()
    real_build = engine_module.build_embedder

    def slow_build(settings):  # the encoder's load, held until the test lets it go
        assert release.wait(30)
        return real_build(settings)

    monkeypatch.setattr(engine_module, "build_embedder", slow_build)
    started = time.perf_counter()
    engine = Engine.open(tmp_path / "home", env={}, warm=False, background=True)
    bench = Workbench(engine, LOCAL_USER)
    assert bench.list_kbs() == [] and bench.list_conversations() == []  # the stores answer before the backends
    assert bench.list_jobs() == []  # the KB page's job panel does not wait either
    statuses = bench.backends()  # the sidebar asks at every run: it must not wait for the encoder
    assert statuses and all(not s.live and "starting" in s.name for s in statuses)
    assert time.perf_counter() - started < 20 and not release.is_set()
    release.set()
    kb = bench.create_kb("k")  # waits for the backends
    path = tmp_path / "a.txt"
    path.write_text("The Nimbus N2 draws at most 45 W.", encoding="utf-8")
    assert [o.status for o in bench.ingest(kb.id, [path])] == ["added"]
    assert bench.search("Nimbus N2 power", [kb.id]).chunks
    assert engine.start_report == []
    assert {s.role for s in bench.backends()} >= {"embedder", "vector_store"}


def test_a_failed_background_open_is_raised_to_whoever_needs_the_backends(tmp_path, monkeypatch):
    def broken(settings):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(engine_module, "build_embedder", broken)
    engine = Engine.open(tmp_path / "home", env={}, warm=False, background=True)
    with pytest.raises(RuntimeError, match="disk on fire"):
        engine.retriever  # noqa: B018 - the attribute access is the call under test
    assert Workbench(engine, LOCAL_USER).list_kbs() == []


OPEN_IN_THE_BACKGROUND = """
import ast, sys, threading
parsed_in = []
real_parse = ast.parse
def recording(*args, **kwargs):
    parsed_in.append(threading.current_thread().name)
    return real_parse(*args, **kwargs)
ast.parse = recording
from docmind_core.engine import Engine
engine = Engine.open(sys.argv[1], env={}, warm=False, background=True)
# chromadb's import parses (attrs reads builtin signatures with ast): done by the caller, before the opener
# starts; the opener spends its first seconds on the encoder, so it cannot have imported it yet
print("chromadb imported by the caller:", "chromadb" in sys.modules and not engine.wait_open(0))
kb = engine.create_kb("k")  # waits for the opener
assert engine.jobs is not None
print(sorted(set(parsed_in)))
"""


def test_opening_in_the_background_parses_no_python_source_outside_the_main_thread(tmp_path):
    """Python 3.11 before 3.11.9: two threads in ast.parse at once can fail, and Streamlit parses pages in its
    script thread.  A fresh interpreter, so every import the opener makes happens in it (chromadb's included)."""
    out = subprocess.run([sys.executable, "-c", OPEN_IN_THE_BACKGROUND, str(tmp_path / "home")], cwd=ROOT,
                         capture_output=True, text=True, timeout=300,
                         env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False",
                              "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr[-3000:]
    assert "chromadb imported by the caller: True" in out.stdout, out.stdout
    assert out.stdout.strip().splitlines()[-1] in ("[]", "['MainThread']"), out.stdout
