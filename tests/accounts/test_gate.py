"""The sign-in gate (docmind_core/accounts/gate.py): what the web app's sign-in form runs on before the engine.

It must sign people in exactly as the engine does, over the same tables: a token from one resolves in the
other, signing out through one ends the sessions the other made, and the settings it reads are the stored ones.
"""

from __future__ import annotations

import sys

from docmind_core.accounts.gate import SignInGate
from docmind_core.accounts.users import UserStore
from tests.access_world import FAST_HASHER, PASSWORD


def _gate(tmp_path) -> SignInGate:
    gate = SignInGate.open(tmp_path / "home")
    UserStore(gate.db, hasher=FAST_HASHER).add("alice", PASSWORD, department="research")
    return gate


def test_the_gate_signs_in_resolves_and_signs_out(tmp_path):
    gate = _gate(tmp_path)
    assert gate.has_accounts()
    assert gate.sign_in("alice", "not her password") is None
    user, token = gate.sign_in("alice", PASSWORD)
    assert user.username == "alice" and gate.user_for_session(token) == user
    assert gate.end_sessions(user) == 1
    assert gate.user_for_session(token) is None


def test_the_gate_and_the_engine_share_sessions_and_settings(tmp_path):
    from docmind_core.engine import Engine

    gate = _gate(tmp_path)
    gate.config.set("auth.session_hours", 3, by="test")
    engine = Engine(tmp_path / "home", gate.db, gate.config, env={}, warm=False, background=True)
    try:
        _, from_engine = engine.sign_in("alice", PASSWORD)
        _, from_gate = gate.sign_in("alice", PASSWORD)
        assert gate.user_for_session(from_engine) == engine.user_for_session(from_gate) == engine.account("alice")
        assert gate.settings.auth.session_hours == engine.settings.auth.session_hours == 3
        assert gate.end_sessions(engine.account("alice")) == 2
        assert engine.user_for_session(from_engine) is None
    finally:
        engine.wait_ready(90)


def test_the_gate_imports_no_engine():
    import os
    import subprocess

    from tests.paths import ROOT

    probe = ("import sys, docmind_core.accounts.gate; "
             "print(sorted(m for m in ('docmind_core.engine', 'docmind_core.workbench', 'docmind_core.answer.pipeline',"
             " 'docmind_core.backends.factory') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "[]"
