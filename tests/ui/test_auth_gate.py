"""The Streamlit sign-in gate (docmind_ui/auth.py), driven by AppTest without a browser.

The gate runs here in a small stand-in for app.py: resolve the acting user, draw the form when
signed out, otherwise the page.  Sessions are the real ones (docmind_core/accounts/sessions.py).
The browser-only parts (the cookie surviving a refresh, the deep link) are in test_browser_auth.py.
"""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from docmind_core.engine import Engine
from docmind_core.accounts.users import LOCAL_USER, UserStore
from docmind_core.workbench import Workbench
from docmind_ui.auth import TOKEN_KEY
from tests.access_world import FAST_HASHER

pytestmark = pytest.mark.slow  # whole app runs (AppTest): not in make test-fast

SECRET = "page content only for signed-in users"


def _gated_page(engine) -> None:
    """A stand-in for app.py: the gate first, then the page."""
    import streamlit as st

    from docmind_ui.auth import apply_cookie, current_user, draw_sign_in, sign_out_button

    user = current_user(engine)
    if not user.is_signed_in:
        draw_sign_in(engine)
        st.stop()
    apply_cookie()
    sign_out_button(user, engine.gate)
    st.markdown("page content only for signed-in users")
    st.write(f"user: {user.username}")


def _engine(tmp_path, auth: bool) -> Engine:
    engine = Engine.open(tmp_path / "home", env={})
    UserStore(engine.db, hasher=FAST_HASHER).add("alice", "alice-password", department="research")
    Workbench(engine, LOCAL_USER).set_config({"auth.enabled": auth})
    return engine


def _texts(app: AppTest) -> str:
    parts = [m.value for m in app.markdown] + [str(t.value) for t in app.title]
    return "\n".join(parts)


def _session(engine) -> AppTest:
    return AppTest.from_function(_gated_page, args=(engine,), default_timeout=30).run()


def _sign_in(app: AppTest, username: str, password: str) -> AppTest:
    app.text_input[0].input(username)
    app.text_input[1].input(password)
    app.button[0].click()  # the form's submit button
    return app.run()


@pytest.fixture
def engine(tmp_path):
    return _engine(tmp_path, auth=True)


def test_no_page_content_before_sign_in(engine):
    app = _session(engine)
    assert not app.exception
    assert SECRET not in _texts(app)
    assert [t.label for t in app.text_input] == ["User name", "Password"]
    assert TOKEN_KEY not in app.session_state


def test_wrong_password_keeps_the_page_hidden(engine):
    app = _sign_in(_session(engine), "alice", "not-her-password")
    assert SECRET not in _texts(app)
    assert any("Wrong user name or password" in e.value for e in app.error)
    assert TOKEN_KEY not in app.session_state


def test_sign_in_holds_an_opaque_server_validated_token(engine):
    app = _sign_in(_session(engine), "alice", "alice-password")
    assert not app.exception
    assert SECRET in _texts(app) and "user: alice" in _texts(app)
    assert not app.text_input  # the form is gone
    token = app.session_state[TOKEN_KEY]
    alice = engine.account("alice")
    assert "alice" not in token and "alice-password" not in token and str(alice.id) != token.split(".")[0]
    assert engine.user_for_session(token) == alice
    # the cookie that keeps a refresh signed in is written once, with the lifetime from config
    scripts = [h.proto.body for h in app.get("html")]
    max_age = f"Max-Age={int(engine.settings.auth.session_hours * 3600)}"
    assert any(f"docmind_session={token}" in s and max_age in s for s in scripts), scripts


def test_sign_out_ends_every_session_of_the_user(engine):
    first = _sign_in(_session(engine), "alice", "alice-password")
    second = _sign_in(_session(engine), "alice", "alice-password")  # another browser
    assert SECRET in _texts(second)
    first.button(key="dm_sign_out").click()
    first = first.run()
    assert SECRET not in _texts(first) and TOKEN_KEY not in first.session_state
    assert any("Max-Age=0" in h.proto.body for h in first.get("html"))  # the cookie is cleared
    second = second.run()  # the other browser's next interaction
    assert SECRET not in _texts(second)
    assert [t.label for t in second.text_input] == ["User name", "Password"]


def test_a_forged_or_expired_token_is_refused(engine, monkeypatch):
    app = _sign_in(_session(engine), "alice", "alice-password")
    token = app.session_state[TOKEN_KEY]
    session_id, signature = token.split(".")
    assert engine.user_for_session(f"{session_id}.{signature[:-2]}xx") is None
    assert engine.user_for_session(f"{session_id[:-2]}xx.{signature}") is None
    assert engine.user_for_session("") is None and engine.user_for_session("a.b.c") is None
    engine.db.db.execute("UPDATE auth_sessions SET expires_at = '2000-01-01T00:00:00.000+00:00'")
    engine.db.db.conn.commit()
    assert SECRET not in _texts(app.run())


def test_a_new_password_or_a_removed_account_signs_out(engine):
    app = _sign_in(_session(engine), "alice", "alice-password")
    Workbench(engine, LOCAL_USER).set_password("alice", "a-new-password")
    assert SECRET not in _texts(app.run())
    app = _sign_in(_session(engine), "alice", "a-new-password")
    assert SECRET in _texts(app)
    Workbench(engine, LOCAL_USER).remove_user("alice")
    assert SECRET not in _texts(app.run())


def test_single_user_mode_shows_content_as_local_user(tmp_path):
    app = _session(_engine(tmp_path, auth=False))
    assert not app.exception
    assert SECRET in _texts(app)
    assert "user: local" in _texts(app)
    assert not app.text_input


def test_guessing_one_name_is_throttled_across_sessions(engine, monkeypatch):
    import docmind_ui.auth as gate
    from docmind_core.accounts.rate_limit import SlidingWindowLimiter

    monkeypatch.setattr(gate, "_attempts_by_name", SlidingWindowLimiter(window_s=300.0))
    monkeypatch.setattr(gate, "ATTEMPTS_PER_NAME", 2)
    monkeypatch.setattr(gate, "_SLOW_DOWN_AFTER", 100)
    for _ in range(2):  # each attempt from a fresh session
        app = _sign_in(_session(engine), "alice", "guess")
        assert any("Wrong user name" in e.value for e in app.error)
    app = _sign_in(_session(engine), "alice", "alice-password")  # even the right password waits
    assert any("Too many sign-in attempts" in e.value for e in app.error)
    assert SECRET not in _texts(app)
