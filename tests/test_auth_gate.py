"""The Streamlit sign-in gate (pages/_auth.py), driven by AppTest without a browser."""

from __future__ import annotations

import types

import pytest
from streamlit.testing.v1 import AppTest

from docmind_core.settings import Settings
from docmind_core.store.db import Database
from docmind_core.users import UserStore
from tests.access_world import FAST_HASHER

SECRET = "page content only for signed-in users"


def _gated_page(engine) -> None:
    """A stand-in for app.py: gate first, then the page."""
    import streamlit as st

    from pages._auth import require_user, sign_out_button

    user = require_user(engine)
    sign_out_button(user)
    st.markdown("page content only for signed-in users")
    st.write(f"user: {user.username}")


def _engine(tmp_path, auth: bool):
    db = Database(tmp_path / "docmind.db")
    users = UserStore(db, hasher=FAST_HASHER)
    users.add("alice", "alice-password", department="research")
    settings = Settings().with_overrides({"auth.enabled": auth})
    return types.SimpleNamespace(db=db, settings=settings), users


def _texts(app: AppTest) -> str:
    parts = [m.value for m in app.markdown] + [str(t.value) for t in app.title]
    return "\n".join(parts)


def _sign_in(app: AppTest, username: str, password: str) -> AppTest:
    app.text_input[0].input(username)
    app.text_input[1].input(password)
    app.button[0].click()  # the form's submit button
    return app.run()


@pytest.fixture
def gated(tmp_path):
    engine, users = _engine(tmp_path, auth=True)
    app = AppTest.from_function(_gated_page, args=(engine,), default_timeout=30)
    return app.run(), users


def test_no_page_content_before_sign_in(gated):
    app, _ = gated
    assert not app.exception
    assert SECRET not in _texts(app)
    assert [t.label for t in app.text_input] == ["User name", "Password"]
    assert "dm_user_id" not in app.session_state


def test_wrong_password_keeps_the_page_hidden(gated):
    app, _ = gated
    app = _sign_in(app, "alice", "not-her-password")
    assert SECRET not in _texts(app)
    assert any("Wrong user name or password" in e.value for e in app.error)
    assert "dm_user_id" not in app.session_state


def test_content_after_sign_in_and_gone_after_sign_out(gated):
    app, users = gated
    app = _sign_in(app, "alice", "alice-password")
    assert not app.exception
    assert SECRET in _texts(app)
    assert app.session_state["dm_user_id"] == users.find("alice").id
    assert "user: alice" in _texts(app)
    assert not app.text_input  # the form is gone
    app.button(key="dm_sign_out").click()
    app = app.run()
    assert SECRET not in _texts(app)
    assert "dm_user_id" not in app.session_state


def test_removed_account_is_signed_out(gated):
    app, users = gated
    app = _sign_in(app, "alice", "alice-password")
    assert SECRET in _texts(app)
    users.remove(users.find("alice").id)
    app = app.run()
    assert SECRET not in _texts(app)


def test_single_user_mode_shows_content_as_local_user(tmp_path):
    engine, _ = _engine(tmp_path, auth=False)
    app = AppTest.from_function(_gated_page, args=(engine,), default_timeout=30).run()
    assert not app.exception
    assert SECRET in _texts(app)
    assert "user: local" in _texts(app)
    assert not app.text_input


def test_guessing_one_name_is_throttled_across_sessions(tmp_path, monkeypatch):
    import pages._auth as gate
    from docmind_core.rate_limit import SlidingWindowLimiter

    monkeypatch.setattr(gate, "_attempts_by_name", SlidingWindowLimiter(window_s=300.0))
    monkeypatch.setattr(gate, "ATTEMPTS_PER_NAME", 2)
    monkeypatch.setattr(gate, "_SLOW_DOWN_AFTER", 100)
    engine, _ = _engine(tmp_path, auth=True)
    for _ in range(2):  # each attempt from a fresh session
        app = _sign_in(AppTest.from_function(_gated_page, args=(engine,), default_timeout=30).run(), "alice", "guess")
        assert any("Wrong user name" in e.value for e in app.error)
    app = AppTest.from_function(_gated_page, args=(engine,), default_timeout=30).run()
    app = _sign_in(app, "alice", "alice-password")  # even the right password waits
    assert any("Too many sign-in attempts" in e.value for e in app.error)
    assert SECRET not in _texts(app)
