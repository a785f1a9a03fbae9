"""Something meaningful on screen before the engine is there (issue 23 item 7), driven through app.py.

The engine is held: its construction waits on an Event the test releases at the end, as a loaded machine
importing the stages and opening the stores would make it wait.
- the sign-in form is drawn anyway: it needs the accounts only (``SignInGate``), never the engine;
- signing in while the engine is still held shows the frame (the list of pages, who is signed in) and a
  loading notice; the run waits and draws the page once the engine is there, with no timer fragment (a
  ``run_every`` fragment kept the browser busy after it was gone); a wait past ``ENGINE_WAIT_S`` ends with a
  "Try again" button, and the next run draws the page.
How fast each of these comes is measured in bench/page_speed.py, not here.
"""

from __future__ import annotations

import threading

import pytest
from streamlit.testing.v1 import AppTest

from docmind_core.accounts.sessions import SessionStore
from docmind_core.accounts.users import UserStore
from docmind_core.engine import Engine
from docmind_core.store.config_store import ConfigStore
from docmind_core.store.db import Database
from docmind_ui.auth import TOKEN_KEY
from tests.access_world import FAST_HASHER, PASSWORD
from tests.ui.app_support import APP

pytestmark = pytest.mark.slow  # whole app runs (AppTest)

RUN_TIMEOUT = 60  # s per script run: a run that waits for the held engine times out instead of passing


@pytest.fixture
def held_engine(tmp_path, monkeypatch):
    """A home with sign-in on and one account; every Engine built while the test runs waits for ``release``."""
    from docmind_ui import session

    home = tmp_path / "home"
    db = Database(home / "docmind.db")
    users = UserStore(db, hasher=FAST_HASHER)
    users.add("alice", PASSWORD, department="research")
    ConfigStore(db).set("auth.enabled", True, by="test")
    monkeypatch.setenv("DOCMIND_HOME", str(home))
    release = threading.Event()
    release.session_token = lambda: SessionStore(db, users).create(users.find("alice"), 1)
    built: list[Engine] = []
    real_init = Engine.__init__

    def held_init(self, *args, **kwargs):
        assert release.wait(RUN_TIMEOUT * 3), "the test never released the engine"
        real_init(self, *args, **kwargs)
        built.append(self)

    monkeypatch.setattr(Engine, "__init__", held_init)
    monkeypatch.setattr(session, "warm_server", lambda: None)  # no warm-up thread outlives the test
    yield release
    release.set()
    start = getattr(session, "_starts", {}).get(str(home.resolve()))
    if start is not None:
        start.join(RUN_TIMEOUT)
    for engine in built:
        engine.wait_ready(90)  # its opener thread is done before the next test


def _texts(at: AppTest) -> str:
    return "\n".join([*(m.value for m in at.markdown), *(str(t.value) for t in at.title),
                      *(i.value for i in at.info), *(c.value for c in at.caption)])


def test_the_sign_in_form_is_drawn_while_the_engine_is_held(held_engine):
    at = AppTest.from_file(APP, default_timeout=RUN_TIMEOUT).run()
    assert not at.exception, at.exception
    assert [t.label for t in at.text_input] == ["User name", "Password"]
    assert any(b.label == "Sign in" for b in at.button)
    assert not held_engine.is_set()  # drawn with the engine still held


def _signed_in(at: AppTest, held_engine) -> AppTest:
    """What the form leaves in the session (the form itself is driven in test_auth_gate.py: AppTest gives its
    widgets other ids at every run of app.py, see test_navigation._sign_in)."""
    at.session_state[TOKEN_KEY] = held_engine.session_token()
    return at


def test_a_page_asked_for_while_the_engine_loads_waits_in_its_run_and_then_draws(held_engine, monkeypatch):
    from docmind_ui import session

    monkeypatch.setattr(session, "ENGINE_WAIT_S", RUN_TIMEOUT)
    at = AppTest.from_file(APP, default_timeout=RUN_TIMEOUT).run()  # the form; the engine starts behind it
    assert [t.label for t in at.text_input] == ["User name", "Password"]
    timer = threading.Timer(2.0, held_engine.set)  # the engine comes while the signed-in run waits for it
    timer.start()
    try:
        _signed_in(at, held_engine).run()
    finally:
        timer.cancel()
    assert not at.exception, at.exception
    assert "Chat" in [t.value for t in at.title]  # the same run drew the page
    assert "Loading DocMind" not in _texts(at)
    assert not at.warning and not [b for b in at.button if b.label == "Try again"]


def test_signing_in_while_the_engine_loads_shows_the_frame_then_the_page(held_engine, monkeypatch):
    from docmind_ui import session

    monkeypatch.setattr(session, "ENGINE_WAIT_S", 1.0)  # the run gives up waiting while the engine is held
    at = AppTest.from_file(APP, default_timeout=RUN_TIMEOUT).run()
    assert [t.label for t in at.text_input] == ["User name", "Password"]
    _signed_in(at, held_engine).run()
    assert not at.exception, at.exception
    texts = _texts(at)
    assert "Signed in as **alice**" in texts  # the frame: who is signed in, and the list of pages
    assert "still loading" in " ".join(w.value for w in at.warning)  # a visible state where the page will be
    assert [b.label for b in at.button if b.label == "Try again"]
    assert "Chat" not in [t.value for t in at.title]  # the page itself waits for the engine
    assert not at.text_input  # the form is gone
    assert len(at.sidebar.get("page_link")) == 5  # every page is listed already

    held_engine.set()
    session._starts[session._home()].join(RUN_TIMEOUT)
    at.run()
    assert not at.exception, at.exception
    assert "Chat" in [t.value for t in at.title]
    assert "Loading DocMind" not in _texts(at) and not at.warning


def _backends_built(engine: Engine, within_s: float) -> bool:
    """Whether the engine's backends are built within ``within_s``, asked without starting them (never wait_ready:
    it would build them itself)."""
    import time

    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not any("starting" in s.name for s in engine.backends()):
            return True
        time.sleep(0.2)
    return False


def test_the_sign_in_form_starts_building_the_backends_behind_it(held_engine):
    from docmind_ui import session

    at = AppTest.from_file(APP, default_timeout=RUN_TIMEOUT).run()
    assert [t.label for t in at.text_input] == ["User name", "Password"]
    held_engine.set()
    session._starts[session._home()].join(RUN_TIMEOUT)
    # the visitor is typing: nothing else runs, and the models load meanwhile without being asked for
    assert _backends_built(session.get_engine(), 90)


def test_the_first_page_runs_with_no_backend_build_beside_it(tmp_path, monkeypatch):
    """Sign-in off, a fresh server: the first page needs only the stores, and the encoder's build (seconds of
    CPU in the same interpreter) waits until it is drawn; warm_server(), after the page, starts it."""
    from docmind_ui import session

    home = tmp_path / "home"
    monkeypatch.setenv("DOCMIND_HOME", str(home))
    monkeypatch.setattr(session, "warm_server", lambda: None)  # the run's last step, called by hand below
    opened: list[str] = []
    real_open = Engine._open_backends
    monkeypatch.setattr(Engine, "_open_backends",
                        lambda self: opened.append("opener") or real_open(self))  # its first step, at once
    session.engine_for.clear()
    session.warm_server_once.clear()
    at = AppTest.from_file(APP, default_timeout=RUN_TIMEOUT).run()
    assert not at.exception, at.exception
    assert "Chat" in [t.value for t in at.title]
    engine = session.get_engine()
    assert opened == [] and not _backends_built(engine, 0.5)  # the page was drawn and nothing started the build
    thread = session.warm_server_once()  # what app.py does once the page is drawn
    thread.join(120)
    assert opened == ["opener"] and _backends_built(engine, 1.0)


def test_models_asked_for_after_the_head_start_are_built(tmp_path, monkeypatch):
    """The server's head start (docmind_ui.serve) opens the engine without its models; the sign-in form, drawn
    later, asks for them: that request must start the build, not be dropped because the engine's start thread
    already ran."""
    from docmind_ui import session

    monkeypatch.setenv("DOCMIND_HOME", str(tmp_path / "home"))
    session.engine_for.clear()
    home = session._home()
    session.preload(home)  # returns once the engine is open
    engine = session.get_engine()
    assert not _backends_built(engine, 0.5)  # the head start builds no model
    session.start_engine(home, build_backends=True)  # what the sign-in form does
    assert _backends_built(engine, 90)
    engine.wait_ready(90)
