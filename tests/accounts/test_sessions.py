"""Sign-in sessions last ``auth.session_hours`` on the server, not only in the browser's cookie.

The cookie's Max-Age is checked in tests/ui/test_auth_gate.py; here the server's own expiry: a token
resolves to its user until the configured lifetime has passed, and to nobody after it.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

import docmind_core.accounts.sessions as auth_sessions
from docmind_core.engine import Engine
from docmind_core.accounts.users import LOCAL_USER, UserStore
from docmind_core.workbench import Workbench
from tests.access_world import FAST_HASHER, PASSWORD


class _Clock:
    """Stands in for ``datetime`` in auth_sessions: now() is the real time plus ``ahead``."""

    ahead = timedelta(0)

    @classmethod
    def now(cls, tz=None):
        return datetime.now(tz) + cls.ahead


@pytest.mark.parametrize("hours", [2.0, 30.0])  # under and over the 12-hour default
def test_a_session_ends_when_the_configured_lifetime_has_passed(tmp_path, monkeypatch, hours):
    engine = Engine.open(tmp_path / "home", env={}, warm=False)
    UserStore(engine.db, hasher=FAST_HASHER).add("alice", PASSWORD, department="research")
    Workbench(engine, LOCAL_USER).set_config({"auth.enabled": True, "auth.session_hours": hours})
    alice, token = engine.sign_in("alice", PASSWORD)
    monkeypatch.setattr(auth_sessions, "datetime", _Clock)
    _Clock.ahead = timedelta(hours=hours) - timedelta(minutes=1)
    assert engine.user_for_session(token) == alice  # a refresh just before the end is still signed in
    _Clock.ahead = timedelta(hours=hours) + timedelta(minutes=1)
    assert engine.user_for_session(token) is None
    expires = engine.db.db.execute("SELECT expires_at FROM auth_sessions").fetchone()[0]
    lifetime = datetime.fromisoformat(expires) - datetime.now(timezone.utc)
    assert abs(lifetime - timedelta(hours=hours)) < timedelta(minutes=1)


def test_an_engine_start_reads_the_signing_key_without_a_write(tmp_path, sql_writes):
    """Every engine start needs the session-signing key; once it exists, reading it takes no write lock (a CLI
    command started during another process's long write waited for it, or failed with "locked")."""
    from docmind_core.accounts.sessions import SessionStore
    from docmind_core.store.db import Database

    home = tmp_path / "home"
    engine = Engine.open(home, env={}, warm=False)
    alice = UserStore(engine.db, hasher=FAST_HASHER).add("alice", PASSWORD)
    token = engine.sessions.create(alice, lifetime_hours=1)
    sql_writes.clear()
    db = Database(home / "docmind.db")
    sessions = SessionStore(db, UserStore(db))
    assert sql_writes == []
    assert sessions.resolve(token).id == alice.id  # signed with the first start's key: the key was read, not made


@pytest.mark.parametrize("token", ["caf\u00e9.x", "abc.\u2603", "\u00e9", "a.b\udcff"])
def test_a_token_with_a_non_ascii_character_is_refused(tmp_path, token):
    engine = Engine.open(tmp_path / "home", env={}, warm=False)
    UserStore(engine.db, hasher=FAST_HASHER).add("alice", PASSWORD)
    _, valid = engine.sign_in("alice", PASSWORD)
    assert engine.user_for_session(token) is None
    assert engine.user_for_session(valid + token) is None
    assert engine.user_for_session(valid).username == "alice"
