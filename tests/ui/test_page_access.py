"""The two leaks of issue 11 through the pages (AppTest on app.py, sign-in on), and the sign-in screen.

- a member unticking auth.enabled on the Config page switched sign-in off for everyone;
- a conversation id of someone else's was read into your prompt and appended to.
"""

from __future__ import annotations


import pytest
from streamlit.testing.v1 import AppTest

from docmind_core.errors import AccessDenied
from docmind_core.accounts.users import LOCAL_USER, UserStore
from docmind_core.workbench import Workbench
from docmind_ui.auth import TOKEN_KEY
from tests.access_world import FAST_HASHER, PASSWORD
from tests.paths import ROOT

pytestmark = pytest.mark.slow  # whole app runs (AppTest) or the demo KB ingested: not in make test-fast
APP = str(ROOT / "app.py")


@pytest.fixture(scope="module")
def world(app_engine):
    engine = app_engine
    users = UserStore(engine.db, hasher=FAST_HASHER)
    alice = users.add("alice", PASSWORD, department="research")
    users.add("bob", PASSWORD, department="sales")
    users.add("root", PASSWORD, role="admin")
    as_alice = Workbench(engine, alice)
    kb = as_alice.create_kb("alice-secret-kb", visibility="private")
    doc = engine.home.parent / "plan.txt"
    doc.write_text("The Orion launch budget is 4.2 million dollars.", encoding="utf-8")
    as_alice.ingest(kb.id, [doc])
    conversation = as_alice.start_conversation("alice's plans")
    list(as_alice.ask("What is the Orion launch budget?", [kb.id], conversation_id=conversation))
    Workbench(engine, LOCAL_USER).set_config({"auth.enabled": True})
    yield engine, alice, conversation


def _texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [t.value for t in at.title] + [c.value for c in at.caption]
    parts += [str(w.value) for w in at.warning] + [str(e.value) for e in at.error]
    parts += [str(option) for box in at.sidebar.multiselect for option in box.options]
    return "\n".join(parts)


def _signed_in(engine, username: str) -> AppTest:
    """A browser session holding the token a sign-in gives (the form itself: tests/test_auth_gate.py)."""
    _, token = engine.sign_in(username, PASSWORD)
    at = AppTest.from_file(APP, default_timeout=90)
    at.session_state[TOKEN_KEY] = token
    at.run()
    assert not at.exception, at.exception
    assert f"Signed in as **{username}**" in "\n".join(c.value for c in at.sidebar.caption)
    return at


def test_signed_out_screen_shows_only_the_form(world):
    at = AppTest.from_file(APP, default_timeout=90).run()
    assert not at.exception
    assert [t.label for t in at.text_input] == ["User name", "Password"]
    assert "alice-secret-kb" not in _texts(at)
    assert not at.sidebar.multiselect  # no KB picker, no backends, nothing before sign-in


def test_member_cannot_switch_sign_in_off_on_the_config_page(world):
    engine, _, _ = world
    at = _signed_in(engine, "bob")
    at.switch_page("pages/config.py").run()
    assert not at.exception, at.exception
    at.session_state["cfg-group-auth"] = True  # open the Sign-in group (its form is built when opened)
    at.run()
    assert at.checkbox(key="cfg::auth.enabled").disabled, "a member sees global keys read-only"
    assert next(b for b in at.button if b.label.startswith("Apply auth")).disabled
    # A forged form submission (a browser can send any widget value) reaches the same facade call:
    with pytest.raises(AccessDenied, match="only an admin"):
        Workbench(engine, engine.account("bob"), channel="web").set_config({"auth.enabled": False})
    assert engine.settings.auth.enabled is True  # nothing changed for anyone
    anonymous = AppTest.from_file(APP, default_timeout=90).run()
    assert [t.label for t in anonymous.text_input] == ["User name", "Password"]
    assert "alice-secret-kb" not in _texts(anonymous)


def test_member_tunes_grader_as_personal_values(world):
    engine, alice, _ = world
    at = _signed_in(engine, "bob")
    at.switch_page("pages/config.py").run()
    at.number_input(key="cfg::grader.high_threshold").set_value(0.71)
    next(b for b in at.button if b.label.startswith("Apply grader")).click()
    at.run()
    assert not at.exception, at.exception
    assert "your personal values" in "\n".join(s.value for s in at.success)
    bob = engine.account("bob")
    assert Workbench(engine, bob).settings().grader.high_threshold == 0.71
    assert engine.settings.grader.high_threshold == 0.9  # the global value, for everyone else
    assert Workbench(engine, alice).settings().grader.high_threshold == 0.9
    assert "yours · global 0.9" in "\n".join(c.value for c in at.caption)
    Workbench(engine, bob).reset_config()


def test_member_cannot_open_anothers_conversation_in_chat(world):
    engine, _, alice_conversation = world
    before = len(Workbench(engine, engine.account("alice")).conversation_messages(alice_conversation))
    at = _signed_in(engine, "bob")
    at.session_state["dm_conv"] = alice_conversation
    at.run()
    assert not at.exception, at.exception
    assert "4.2 million" not in _texts(at) and "Orion launch budget" not in _texts(at)
    assert any("not one of bob's conversations" in w.value for w in at.warning)
    at.chat_input[0].set_value("What did we say before?").run()
    after = Workbench(engine, engine.account("alice")).conversation_messages(alice_conversation)
    assert len(after) == before  # nothing appended to alice's conversation


def test_an_admin_promotes_a_members_values_on_the_config_page(world):
    engine, _, _ = world
    bob = engine.account("bob")
    Workbench(engine, bob).set_config({"grader.coverage_high": 0.85})
    at = _signed_in(engine, "root")
    at.switch_page("pages/config.py").run()
    assert not at.exception, at.exception
    assert "Members' personal values" in [h.value for h in at.subheader]
    at.button(key="dm_cfg_promote_bob").click()
    at.run()
    assert not at.exception, at.exception
    assert engine.settings.grader.coverage_high == 0.85  # global now
    assert Workbench(engine, bob).config_view().personal == {}
    history = Workbench(engine, engine.account("root")).config_history(5)
    assert any(h.key == "grader.coverage_high" and h.scope == "global" and h.changed_by == "root (web)"
               for h in history)
    Workbench(engine, LOCAL_USER).reset_config("grader.coverage_high")
