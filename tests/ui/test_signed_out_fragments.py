"""Issue 19 item 6 (AppTest on app.py, sign-in on): a page's self-refreshing part (an ``st.fragment`` with
``run_every``) kept running after its session ended.  With a job on the Knowledge bases page, signing the same
user out in another tab (or switching sign-in on) made the job panel show ``SignInRequired`` with a traceback
(jobs_view.py), and the server logged one traceback per refresh.  Now a fragment that finds its session gone
hands over to the sign-in screen, and nothing is logged.

AppTest runs whole scripts only; :func:`run_fragments` asks for a fragment-scoped run, as the browser's timer
does, through the same ``RerunData`` the runner builds.
"""

from __future__ import annotations

import functools
import logging
from unittest import mock

import pytest
from streamlit.runtime.scriptrunner_utils.script_requests import RerunData
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.util import patch_config_options

from docmind_core.ingest.jobs import JobInput
from docmind_core.accounts.users import LOCAL_USER, UserStore
from docmind_core.workbench import Workbench
from docmind_ui.auth import TOKEN_KEY
from tests.access_world import FAST_HASHER, PASSWORD
from tests.paths import ROOT

pytestmark = pytest.mark.slow  # whole app runs (AppTest) with a background ingest job
APP = str(ROOT / "app.py")


@pytest.fixture(scope="module")
def engine(app_engine):
    users = UserStore(app_engine.db, hasher=FAST_HASHER)
    alice = users.add("alice", PASSWORD, department="research")
    as_alice = Workbench(app_engine, alice)
    kb = as_alice.create_kb("alice-notes", visibility="private")
    text = " ".join(f"Sentence {i} of the Orion plan names budget line {i}." for i in range(400))
    as_alice.enqueue_ingest(kb.id, [JobInput(f"plan-{i}.txt", data=text.encode()) for i in range(6)])
    Workbench(app_engine, LOCAL_USER).set_config({"auth.enabled": True})
    yield app_engine
    app_engine.config.reset_all(by="test")


def signed_in_kb_page(engine, username: str = "alice") -> AppTest:
    _, token = engine.sign_in(username, PASSWORD)
    at = AppTest.from_file(APP, default_timeout=90)
    at.session_state[TOKEN_KEY] = token
    at.run()
    assert not at.exception, at.exception
    at.switch_page("pages/knowledge_bases.py").run()
    assert not at.exception, at.exception
    assert any("Ingest jobs" in m.value for m in at.markdown), "the job panel is drawn"
    return at


def run_fragments(at: AppTest) -> AppTest:
    """A run of the page's registered fragments only, as the browser's ``run_every`` timer asks for."""
    ids = list(at._fragment_storage._fragments)
    assert ids, "the page registered no fragment"
    scoped = functools.partial(RerunData, fragment_id_queue=ids)
    with mock.patch("streamlit.testing.v1.local_script_runner.RerunData", scoped):
        return at.run()


def is_sign_in_screen(at: AppTest) -> bool:
    return [t.label for t in at.text_input] == ["User name", "Password"]


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def clear(self) -> None:
        self.records.clear()


@pytest.fixture
def logged():
    """What the server would log: the root logger's records and Streamlit's (its loggers do not propagate;
    with rich tracebacks on, as under AppTest, an app's traceback is printed instead of logged)."""
    handler = _Records()
    loggers = [logging.getLogger(), logging.getLogger("streamlit"), logging.getLogger("streamlit.error_util")]
    for logger in loggers:
        logger.addHandler(handler)
    with patch_config_options({"logger.enableRich": False}):
        yield handler
    for logger in loggers:
        logger.removeHandler(handler)


def _errors_logged(handler: _Records) -> list[str]:
    return [r.getMessage() for r in handler.records if r.levelno >= logging.ERROR or r.exc_info]


def test_the_job_panel_goes_to_the_sign_in_screen_after_a_sign_out_elsewhere(engine, logged):
    at = signed_in_kb_page(engine)
    run_fragments(at)  # while signed in, a refresh of the panel draws it again
    assert not at.exception, at.exception

    Workbench(engine, engine.account("alice")).sign_out_everywhere()  # another tab signs alice out
    logged.clear()
    for _ in range(3):  # three timer ticks
        run_fragments(at)
        assert not at.exception, [e.value for e in at.exception]
        assert is_sign_in_screen(at)
    assert not any("SignInRequired" in str(e.value) for e in at.error)
    assert not _errors_logged(logged), _errors_logged(logged)


def test_the_job_panel_goes_to_the_sign_in_screen_when_sign_in_is_switched_on(engine, logged):
    Workbench(engine, LOCAL_USER).set_config({"auth.enabled": False})
    try:
        at = AppTest.from_file(APP, default_timeout=90).run()
        at.switch_page("pages/knowledge_bases.py").run()
        assert not at.exception, at.exception
        Workbench(engine, LOCAL_USER, channel="cli").set_config({"auth.enabled": True})
        logged.clear()
        run_fragments(at)
        assert not at.exception, [e.value for e in at.exception]
        assert is_sign_in_screen(at)
        assert not _errors_logged(logged), _errors_logged(logged)
    finally:
        Workbench(engine, LOCAL_USER).set_config({"auth.enabled": True})


def test_a_callback_after_a_sign_out_elsewhere_acts_as_nobody(engine):
    """A button's callback runs before the page: it must not act as the user the page was drawn for."""
    at = signed_in_kb_page(engine)
    at.switch_page("pages/config.py").run()
    Workbench(engine, engine.account("alice")).sign_out_everywhere()
    at.number_input(key="cfg::grader.low_threshold").set_value(0.3)
    next(b for b in at.button if b.label.startswith("Apply grader")).click().run()
    assert not at.exception, at.exception
    assert is_sign_in_screen(at)
    assert engine.config.personal_overrides(engine.account("alice").id) == {}
