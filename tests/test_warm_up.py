"""Warm once per server: the engine's warm-up pays the first question's one-off costs (jieba's dictionary and
part-of-speech tables, a whole search), and the UI warms plotly once, so the first chart comes with its answer.
No timing here (bench/page_speed.py measures); these check that the work is done, and done once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import json, sys
from docmind_core.engine import Engine
engine = Engine.open(sys.argv[1], env={}, warm=False)
import jieba
before = {"jieba": jieba.dt.initialized, "posseg": "jieba.posseg" in sys.modules}
calls = []
real_search = engine.retriever.search
engine.retriever.search = lambda *a, **k: calls.append(a[1]) or real_search(*a, **k)
engine.warm_up()
after = {"jieba": jieba.dt.initialized, "posseg": "jieba.posseg" in sys.modules}
print(json.dumps({"before": before, "after": after, "searched": calls}))
"""


@pytest.mark.slow  # a real engine ingests and warms up
def test_engine_warm_up_initialises_jieba_and_runs_one_search(tmp_path):
    from docmind_core.engine import Engine

    home = tmp_path / "home"
    engine = Engine.open(home, env={}, warm=False)
    kb = engine.create_kb("notes")
    doc = tmp_path / "notes.txt"
    doc.write_text("The Nimbus N2 draws at most 45 W.", encoding="utf-8")
    assert all(o.status == "added" for o in engine.ingest(kb.id, [doc]))
    # the cap only ends a probe that hangs: at a load average of 21 the whole test took 186 s
    out = subprocess.run([sys.executable, "-c", PROBE, str(home)], cwd=ROOT, capture_output=True, text=True,
                         timeout=280, env={"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
                                           "PATH": "/usr/bin:/bin", "ANONYMIZED_TELEMETRY": "False"})
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["before"] == {"jieba": False, "posseg": False}  # a fresh process has paid nothing yet
    assert result["after"] == {"jieba": True, "posseg": True}
    assert result["searched"] == [[kb.id]]  # one whole search on the first KB


@pytest.mark.slow  # a real engine ingests and warms up
def test_the_warm_up_searches_once_even_when_its_budget_ran_out(tmp_path):
    """A busy machine (load average ~14) spent the warm-up's whole time budget before its search, which it then
    skipped: the budget bounds the per-KB index loads only, never the one search.  A budget of 0 s is what any
    load looks like to the warm-up, without needing the load."""
    from docmind_core.engine import Engine

    engine = Engine.open(tmp_path / "home", env={}, warm=False)
    kb = engine.create_kb("notes")
    doc = tmp_path / "notes.txt"
    doc.write_text("The Nimbus N2 draws at most 45 W.", encoding="utf-8")
    assert all(o.status == "added" for o in engine.ingest(kb.id, [doc]))
    searched: list[list[int]] = []
    real_search = engine.retriever.search
    engine.retriever.search = lambda *a, **k: searched.append(a[1]) or real_search(*a, **k)
    engine.warm_up(budget_s=0.0)
    assert searched == [[kb.id]]


def test_warm_charts_builds_the_figures_the_pages_draw():
    pytest.importorskip("plotly")
    from docmind_ui.charts import warm_charts

    warm_charts()  # raises if a figure cannot be built, validated or serialised


@pytest.mark.slow
def test_the_ui_warms_the_server_once_after_the_first_page(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("DOCMIND_HOME", str(tmp_path / "home"))
    from docmind_ui import session

    from docmind_core.engine import Engine

    warmed = []
    real_warm_up = Engine.warm_up
    monkeypatch.setattr(Engine, "warm_up", lambda self, *a, **k: warmed.append(self) or real_warm_up(self, *a, **k))
    session.warm_server_once.clear()
    session.engine_for.clear()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    at.run()
    assert not at.exception, at.exception
    first = session.warm_server_once()
    at.switch_page("pages/config.py").run()
    AppTest.from_file(str(ROOT / "app.py"), default_timeout=90).run()  # a second browser session
    assert session.warm_server_once() is first  # the same thread: started once, not per session or page
    first.join(90)
    assert not first.is_alive()
    assert len(warmed) == 1 and warmed[0] is session.get_engine()  # the engine was warmed once, by that thread


@pytest.mark.slow  # a real engine ingests and warms up
def test_the_warm_up_never_runs_the_keyword_tokeniser(tmp_path, monkeypatch):
    """A warm-up thread beside a search must not add to what that search tokenised (a search counts its jieba
    calls in tests/backends/test_chunk_terms.py, and a fresh-clone `make test` once saw the warm-up's own
    "预热中文分词" there): the warm-up loads jieba through the tagger and searches in English, so the keyword
    tokeniser never sees a text of its own."""
    import jieba

    import docmind_core.text.tokens as text_module
    from docmind_core.engine import Engine

    engine = Engine.open(tmp_path / "home", env={}, warm=False)
    kb = engine.create_kb("notes")
    doc = tmp_path / "notes.txt"
    doc.write_text("X5 净水器的滤芯每六个月更换一次。The Nimbus N2 draws at most 45 W.", encoding="utf-8")
    assert all(o.status == "added" for o in engine.ingest(kb.id, [doc]))
    seen: list[str] = []
    real = jieba.lcut
    monkeypatch.setattr(jieba, "lcut", lambda segment, *a, **k: seen.append(segment) or real(segment, *a, **k))
    text_module.forget_cached_tokens()  # nothing tokenised earlier in this process hides a call
    engine.warm_up(budget_s=120)
    assert seen == []


def test_page_activity_waits_for_a_quiet_moment():
    """The warm-up's steps wait until no page has run for a while, and never longer than their cap."""
    import threading

    from docmind_ui.session import PageActivity

    pages = PageActivity()
    with pages.running():
        assert pages.wait_quiet(0.0, 0.2) is False  # a run in progress: the cap ran out first
    assert pages.wait_quiet(0.0, 0.0) is True  # none in progress, none needed to be quiet for long
    assert pages.wait_quiet(5.0, 0.2) is False  # a run just ended: not quiet for 5 s yet
    done: list[bool] = []
    release = threading.Event()

    def page_run() -> None:
        with pages.running():
            release.wait(10)

    run = threading.Thread(target=page_run)
    run.start()
    held = pages.holds
    waiter = threading.Thread(target=lambda: done.append(pages.wait_quiet(0.1, 600)))
    waiter.start()
    assert pages.wait_held(held + 1, 60)  # the waiter looked, and waits on
    with pages.running():  # another run begins and ends: the waiter looks again, the first run still goes on
        pass
    assert pages.wait_held(held + 2, 60)
    assert done == []  # still waiting while the run goes on
    release.set()
    run.join(60)
    waiter.join(60)
    assert done == [True]  # quiet once the run ended, long before the cap


@pytest.mark.slow  # an engine's backends are built
def test_the_warm_up_builds_nothing_while_a_page_runs(tmp_path, monkeypatch):
    """The once-per-server warm-up (the encoder's build, jieba, pandas: seconds of CPU in the server's
    interpreter) takes its steps only between page runs, so a page opened meanwhile is not slowed by it."""
    from docmind_ui import session

    monkeypatch.setenv("DOCMIND_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(session, "WARM_UP_QUIET_S", 0.2)
    monkeypatch.setattr(session, "WARM_UP_MAX_WAIT_S", 600.0)  # however slow the machine, the run ends first
    from docmind_core.engine import Engine

    began: list[str] = []
    real_open = Engine._open_backends
    monkeypatch.setattr(Engine, "_open_backends", lambda self: began.append("build") or real_open(self))
    session.engine_for.clear()
    session.warm_server_once.clear()
    engine = session.get_engine()
    pages = session._pages
    with pages.running():  # a page's run, as app.py's frame_run() marks it
        held = pages.holds
        thread = session.warm_server_once()
        assert pages.wait_held(held + 1, 120)  # the warm-up's first step waits behind the run
        with pages.running():  # a second run begins and ends: the step looks again and waits on for the first
            pass
        assert pages.wait_held(held + 2, 120)
        assert began == []  # no build began beside the run
    thread.join(280)
    assert not thread.is_alive()
    assert began == ["build"] and not any("starting" in s.name for s in engine.backends())  # built after it


@pytest.mark.slow  # an engine's backends are built
def test_engine_warm_up_calls_its_step_hook_before_the_build_and_between_steps(tmp_path):
    from docmind_core.backends.factory import backend_libraries
    from docmind_core.engine import Engine

    engine = Engine.open(tmp_path / "home", env={}, warm=False, background=True, open_on_demand=True)
    engine.create_kb("notes")
    built_at_step: list[bool] = []
    engine.warm_up(before_step=lambda: built_at_step.append(engine._opened.is_set()))
    before_build = len(backend_libraries(engine.settings)) + 1  # a step per heavy library's import, then the build
    assert built_at_step[:before_build] == [False] * before_build
    # after the build: the encoder's first call, the KB's indexes, jieba's dictionary and tagger, the name
    # readings (two steps), the entity tagger and one search, each its own step
    assert all(built_at_step[before_build:]) and len(built_at_step) >= before_build + 7
