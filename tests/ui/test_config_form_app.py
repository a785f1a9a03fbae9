"""Issue 19 item 5 (AppTest on app.py, sign-in on): the Config page silently undid a change made elsewhere.

An admin's page drawn with high_threshold at its old value, then alice's 0.8 promoted to global in another
session; changing only low_threshold and applying wrote the stale high_threshold back ("0.8 -> 0.9 boss
(web)").  Now the page writes only the keys changed in the form, and a key changed elsewhere since the form
was drawn is refused, naming who changed it, with nothing of that submit written.  Also: a stored value that
is not readable is named on the page with its reset (item 4, the page's side).
"""

from __future__ import annotations

import sqlite3

import pytest
from streamlit.testing.v1 import AppTest

from docmind_core.settings import Settings
from docmind_core.accounts.users import LOCAL_USER, UserStore
from docmind_core.workbench import Workbench
from docmind_ui.auth import TOKEN_KEY
from tests.access_world import FAST_HASHER, PASSWORD
from tests.markdown_probe import text_of
from tests.paths import ROOT

pytestmark = pytest.mark.slow  # whole app runs (AppTest)
APP = str(ROOT / "app.py")
HIGH, LOW = "grader.high_threshold", "grader.low_threshold"


@pytest.fixture(scope="module")
def engine(app_engine):
    users = UserStore(app_engine.db, hasher=FAST_HASHER)
    users.add("alice", PASSWORD, department="research")
    users.add("boss", PASSWORD, role="admin")
    users.add("root", PASSWORD, role="admin")
    Workbench(app_engine, LOCAL_USER).set_config({"auth.enabled": True})
    return app_engine


@pytest.fixture(autouse=True)
def clean_config(engine):
    yield
    for name in ("alice", "boss", "root"):
        Workbench(engine, engine.account(name)).reset_config(None, scope="personal")
    engine.config.reset_all(by="test")
    engine.config.set("auth.enabled", True, by="test")


def config_page(engine, username: str) -> AppTest:
    _, token = engine.sign_in(username, PASSWORD)
    at = AppTest.from_file(APP, default_timeout=90)
    at.session_state[TOKEN_KEY] = token
    at.run()
    assert not at.exception, at.exception
    at.switch_page("pages/config.py").run()
    assert not at.exception, at.exception
    return at


def apply_grader(at: AppTest) -> AppTest:
    next(b for b in at.button if b.label.startswith("Apply grader")).click().run()
    assert not at.exception, at.exception
    return at


def history_rows(engine, key: str) -> list[tuple]:
    return [(h.old_value, h.new_value, h.changed_by) for h in engine.config.history(key=key)]


def test_a_stale_form_does_not_undo_a_promoted_value(engine):
    default_high = Settings().grader.high_threshold
    Workbench(engine, engine.account("alice")).set_config({HIGH: 0.8})  # alice's personal value
    at = config_page(engine, "boss")
    assert at.number_input(key="cfg::" + HIGH).value == default_high  # the form is drawn
    # another session promotes alice's 0.8 to global while boss's page stays open
    Workbench(engine, engine.account("root"), channel="cli").promote_config("alice", [HIGH])
    assert engine.settings.grader.high_threshold == 0.8

    at.number_input(key="cfg::" + LOW).set_value(0.3)  # boss changes only low_threshold
    apply_grader(at)
    assert engine.settings.grader.low_threshold == 0.3
    assert engine.settings.grader.high_threshold == 0.8, "the stale 0.9 in the form was written back"
    assert not [row for row in history_rows(engine, HIGH) if row[2] == "boss (web)"]
    assert at.number_input(key="cfg::" + HIGH).value == 0.8  # the form now shows the promoted value


def test_a_key_changed_elsewhere_since_the_form_was_drawn_is_refused(engine):
    at = config_page(engine, "boss")
    Workbench(engine, engine.account("root"), channel="cli").set_config({HIGH: 0.85})
    before = history_rows(engine, HIGH), history_rows(engine, LOW)

    at.number_input(key="cfg::" + HIGH).set_value(0.7)
    at.number_input(key="cfg::" + LOW).set_value(0.3)
    apply_grader(at)
    errors = " ".join(text_of(e.value) for e in at.error)
    assert "grader.high_threshold was changed by root (cli) since you opened this page" in errors, errors
    assert engine.settings.grader.high_threshold == 0.85
    assert engine.settings.grader.low_threshold == Settings().grader.low_threshold  # nothing of that submit
    assert (history_rows(engine, HIGH), history_rows(engine, LOW)) == before
    assert at.number_input(key="cfg::" + HIGH).value == 0.85  # the form shows what is stored now

    at.number_input(key="cfg::" + HIGH).set_value(0.7)  # boss, having seen 0.85, replaces it
    apply_grader(at)
    assert not at.error, [e.value for e in at.error]
    assert engine.settings.grader.high_threshold == 0.7
    assert engine.settings.grader.low_threshold == 0.3  # still in the form, written with this submit


def test_a_members_personal_form_is_refused_after_an_admin_changed_the_key(engine):
    at = config_page(engine, "alice")
    Workbench(engine, engine.account("boss"), channel="cli").set_config({LOW: 0.2})  # the global value moves

    at.number_input(key="cfg::" + LOW).set_value(0.35)
    apply_grader(at)
    errors = " ".join(text_of(e.value) for e in at.error)
    assert "grader.low_threshold was changed by boss (cli) since you opened this page" in errors, errors
    alice = engine.account("alice")
    assert engine.config.personal_overrides(alice.id) == {}
    at.number_input(key="cfg::" + LOW).set_value(0.35)
    apply_grader(at)
    assert engine.config.personal_overrides(alice.id) == {LOW: 0.35}


def test_an_unreadable_stored_value_is_named_on_the_page_and_reset_there(engine):
    with sqlite3.connect(engine.home / "docmind.db") as con:
        con.execute("INSERT OR REPLACE INTO config (key, value, updated_at) VALUES (?, ?, '2024-01-01')",
                    [HIGH, "{0.8"])
    at = config_page(engine, "boss")
    warnings = " ".join(text_of(w.value) for w in at.warning)
    assert "grader.high_threshold is ignored" in warnings and "not readable" in warnings, warnings
    assert at.number_input(key="cfg::" + HIGH).value == Settings().grader.high_threshold
    next(b for b in at.button if b.label == f"Reset {HIGH}").click().run()
    assert not at.exception, at.exception
    assert engine.config.overrides() == {"auth.enabled": True}
    assert "not readable" not in " ".join(text_of(w.value) for w in at.warning)


def test_promote_refuses_a_value_changed_since_the_page_showed_it(engine):
    alice = Workbench(engine, engine.account("alice"), channel="cli")
    alice.set_config({HIGH: 0.8})
    at = config_page(engine, "boss")
    alice.set_config({HIGH: 0.6})  # alice changes her value while boss's page shows 0.8
    next(b for b in at.button if b.label.startswith("Promote alice")).click().run()
    assert not at.exception, at.exception
    errors = " ".join(text_of(e.value) for e in at.error)
    assert "grader.high_threshold was changed by alice (cli) since you opened this page" in errors, errors
    assert engine.settings.grader.high_threshold == Settings().grader.high_threshold  # nothing promoted
    next(b for b in at.button if b.label.startswith("Promote alice")).click().run()  # now showing 0.6
    assert engine.settings.grader.high_threshold == 0.6
