"""Opening the engine in the background (the UI's first page needs only the stores): stores at once, backends,
start-up repairs and ingest jobs once built; no Python source parsed outside the main thread meanwhile."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import docmind_core.backends.factory as factory
from docmind_core.engine import Engine
from docmind_core.accounts.users import LOCAL_USER
from docmind_core.workbench import Workbench

pytestmark = pytest.mark.slow  # real engines with the bundled encoder

ROOT = Path(__file__).resolve().parent.parent


def test_background_open_serves_the_stores_at_once_and_the_backends_once_built(tmp_path, monkeypatch):
    release = threading.Event()
    real_build = factory.build_embedder

    def slow_build(settings):  # the encoder's load, held until the test lets it go (the cap: a test that hangs)
        assert release.wait(280)
        return real_build(settings)

    monkeypatch.setattr(factory, "build_embedder", slow_build)
    engine = Engine.open(tmp_path / "home", env={}, warm=False, background=True)
    bench = Workbench(engine, LOCAL_USER)
    assert bench.list_kbs() == [] and bench.list_conversations() == []  # the stores answer before the backends
    assert bench.list_jobs() == []  # the KB page's job panel does not wait either
    statuses = bench.backends()  # the sidebar asks at every run: it must not wait for the encoder
    # all of that answered while the build is held (no stopwatch: a loaded machine is slow, not wrong)
    assert statuses and all(not s.live and "starting" in s.name for s in statuses)
    assert not engine.wait_ready(0.2)  # readiness is asked for, never implied by reading an attribute:
    with pytest.raises(AttributeError):
        engine.retriever  # noqa: B018 - not there yet, and reading it does not wait
    release.set()
    assert engine.wait_ready(60) and engine.retriever is not None
    kb = bench.create_kb("k")
    path = tmp_path / "a.txt"
    path.write_text("The Nimbus N2 draws at most 45 W.", encoding="utf-8")
    assert [o.status for o in bench.ingest(kb.id, [path])] == ["added"]
    assert bench.search("Nimbus N2 power", [kb.id]).chunks
    assert engine.start_report == []
    assert {s.role for s in bench.backends()} >= {"embedder", "vector_store"}


def test_a_failed_background_open_is_raised_to_whoever_needs_the_backends(tmp_path, monkeypatch):
    def broken(settings):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(factory, "build_embedder", broken)
    engine = Engine.open(tmp_path / "home", env={}, warm=False, background=True)
    with pytest.raises(RuntimeError, match="disk on fire"):
        engine.wait_ready(60)
    with pytest.raises(RuntimeError, match="disk on fire"):  # an operation that needs the backends asks too
        engine.search("anything", [], engine.settings)
    assert Workbench(engine, LOCAL_USER).list_kbs() == []


def test_an_engine_opened_on_demand_builds_nothing_until_asked(tmp_path, monkeypatch):
    """The web app's engine: its first page runs with no encoder build beside it; the build starts when the app
    asks (after that page) or when something needs the backends, once."""
    builds: list[str] = []
    real_build = factory.build_embedder

    def counted_build(settings):
        builds.append(threading.current_thread().name)
        return real_build(settings)

    monkeypatch.setattr(factory, "build_embedder", counted_build)
    engine = Engine.open(tmp_path / "home", env={}, warm=False, background=True, open_on_demand=True)
    bench = Workbench(engine, LOCAL_USER)
    assert bench.list_kbs() == [] and bench.list_jobs() == []
    assert all("starting" in s.name for s in bench.backends())
    assert builds == [] and not any(t.name == "docmind-open" for t in threading.enumerate())  # no opener at all
    engine.start_opening()
    engine.start_opening()  # a second ask starts no second opener
    assert engine.wait_ready(60) and builds == ["docmind-open"]
    assert {s.role for s in bench.backends()} >= {"embedder"} and all(s.name != "starting…" for s in bench.backends())

    kb = bench.create_kb("k")
    later = Engine.open(tmp_path / "home", env={}, warm=False, background=True, open_on_demand=True)
    assert [k.name for k in Workbench(later, LOCAL_USER).list_kbs()] == ["k"]  # the stores only: nothing built
    assert len(builds) == 1
    path = tmp_path / "a.txt"
    path.write_text("The Nimbus N2 draws at most 45 W.", encoding="utf-8")
    # what needs the backends starts the opener itself and waits for it
    assert [o.status for o in Workbench(later, LOCAL_USER).ingest(kb.id, [path])] == ["added"]
    assert builds == ["docmind-open", "docmind-open"]


OPEN_IN_THE_BACKGROUND = """
import ast, sys, threading, time
threads_parsing, most_at_once, parsed_in = [0], [0], set()
real_parse = ast.parse
def counting(*args, **kwargs):
    threads_parsing[0] += 1
    most_at_once[0] = max(most_at_once[0], threads_parsing[0])
    parsed_in.add(threading.current_thread().name)
    try:
        time.sleep(0.0005)  # hand the GIL over mid-parse, as a real parse of a long page may
        return real_parse(*args, **kwargs)
    finally:
        threads_parsing[0] -= 1
ast.parse = counting
from docmind_core.engine import Engine
from docmind_core.process import prepare_process
prepare_process()  # what app.py does first
stop = threading.Event()
def script_thread():  # what Streamlit does on every script run: parse the page
    while not stop.is_set():
        ast.parse("x = 1\\n" * 200)
threading.Thread(target=script_thread, name="ScriptRunner.scriptThread", daemon=True).start()
engine = Engine.open(sys.argv[1], env={}, warm=False, background=True)
engine.wait_ready(120)
stop.set()
kb = engine.create_kb("k")
print("chromadb imported:", "chromadb" in sys.modules)
print("opener parsed:", "docmind-open" in parsed_in)
print("most threads in ast.parse at once:", most_at_once[0])
"""


def test_opening_in_the_background_never_parses_beside_another_thread(tmp_path):
    """Python 3.11: two threads in ast.parse at once can fail, and Streamlit parses pages in its script thread
    while the opener imports chromadb (which parses builtin signatures).  A fresh interpreter, so every import the
    opener makes happens in it; a thread parses without pause meanwhile, as a script run would."""
    out = subprocess.run([sys.executable, "-c", OPEN_IN_THE_BACKGROUND, str(tmp_path / "home")], cwd=ROOT,
                         capture_output=True, text=True, timeout=300,
                         env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False",
                              "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr[-3000:]
    assert "chromadb imported: True" in out.stdout, out.stdout
    assert "opener parsed: True" in out.stdout, out.stdout  # the case the lock is for did happen
    assert "most threads in ast.parse at once: 1" in out.stdout, out.stdout
