"""Issue 19's account items found on the pages (AppTest on app.py, sign-in on):

- an admin's Chat selected every KB by default, members' private ones included;
- conversations made in single-user mode were visible to nobody once sign-in was switched on;
- a session token with a non-ASCII character raised UnicodeEncodeError instead of being refused.
"""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from docmind_core.accounts.users import LOCAL_USER, UserStore
from docmind_core.workbench import Workbench
from docmind_ui.auth import TOKEN_KEY
from docmind_ui.session import KB_KEY
from tests.access_world import FAST_HASHER, PASSWORD
from tests.paths import ROOT

pytestmark = pytest.mark.slow  # whole app runs (AppTest): not in make test-fast
APP = str(ROOT / "app.py")


@pytest.fixture(scope="module")
def world(app_engine):
    engine = app_engine
    operator = Workbench(engine, LOCAL_USER)
    operator_kb = operator.create_kb("operator-kb")  # single-user mode: owned by nobody
    notes = operator.start_conversation("single-user notes")
    users = UserStore(engine.db, hasher=FAST_HASHER)
    alice = users.add("alice", PASSWORD, department="research")
    bob = users.add("bob", PASSWORD, department="sales")
    root = users.add("root", PASSWORD, role="admin")
    kbs = {
        "alice-private": Workbench(engine, alice).create_kb("alice-private-kb", visibility="private"),
        "bob-public": Workbench(engine, bob).create_kb("bob-public-kb", visibility="public"),
        "root-own": Workbench(engine, root).create_kb("root-own-kb", visibility="private"),
        "operator": operator_kb,
    }
    alice_conversation = Workbench(engine, alice).start_conversation("alice's own")
    operator.set_config({"auth.enabled": True})
    yield engine, kbs, notes, alice_conversation


def _signed_in(engine, username: str) -> AppTest:
    _, token = engine.sign_in(username, PASSWORD)
    at = AppTest.from_file(APP, default_timeout=90)
    at.session_state[TOKEN_KEY] = token
    at.run()
    assert not at.exception, at.exception
    return at


def test_an_admins_chat_leaves_members_private_kbs_unselected(world):
    engine, kbs, _, _ = world
    at = _signed_in(engine, "root")
    picker = at.sidebar.multiselect(key=KB_KEY)
    assert "alice-private-kb (0 docs)" in picker.options  # an admin may still pick it
    assert set(picker.value) == {kbs["root-own"].id, kbs["bob-public"].id, kbs["operator"].id}


def test_a_members_chat_selects_what_they_may_read(world):
    engine, kbs, _, _ = world
    at = _signed_in(engine, "alice")
    assert set(at.sidebar.multiselect(key=KB_KEY).value) == {kbs["alice-private"].id, kbs["bob-public"].id}


def test_single_user_conversations_belong_to_the_first_admin_after_sign_in(world):
    engine, _, notes, alice_conversation = world
    at = _signed_in(engine, "root")
    titles = " | ".join(at.sidebar.selectbox(key="dm_conv_pick").options)  # "title · time" labels
    assert "single-user notes" in titles and "alice's own" not in titles
    assert [c.id for c in Workbench(engine, engine.account("root")).list_conversations()] == [notes]
    alices = " | ".join(_signed_in(engine, "alice").sidebar.selectbox(key="dm_conv_pick").options)
    assert "single-user notes" not in alices and "alice's own" in alices
    assert [c.id for c in Workbench(engine, engine.account("alice")).list_conversations()] == [alice_conversation]


@pytest.mark.parametrize("token", ["caf\u00e9.signature", "abc.sign\u2603ture", "\u00e9"])
def test_a_token_with_a_non_ascii_character_is_refused(world, token):
    at = AppTest.from_file(APP, default_timeout=90)
    at.session_state[TOKEN_KEY] = token
    at.run()
    assert not at.exception, at.exception
    assert [t.label for t in at.text_input] == ["User name", "Password"]
    assert TOKEN_KEY not in at.session_state


def test_a_valid_token_with_a_non_ascii_character_added_is_refused(world):
    engine, _, _, _ = world
    _, token = engine.sign_in("alice", PASSWORD)
    at = AppTest.from_file(APP, default_timeout=90)
    at.session_state[TOKEN_KEY] = token + "\u00e9"
    at.run()
    assert not at.exception, at.exception
    assert [t.label for t in at.text_input] == ["User name", "Password"]
