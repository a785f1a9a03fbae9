"""Knowledge-base access rules, through the guard and through the tools; personal-object predicates."""

from __future__ import annotations

import pytest

from docmind_core.accounts.access import (
    KbAccessGuard,
    can_read_conversation,
    can_read_trace,
)
from docmind_core.backends.protocols import ToolCallRequest
from docmind_core.errors import AccessDenied
from docmind_core.answer.tools import ToolContext
from docmind_core.accounts.users import LOCAL_USER
from docmind_core.workbench import Workbench
from tests.access_world import build_engine_world, build_world


@pytest.fixture
def world(tmp_path):
    return build_world(tmp_path)


@pytest.fixture
def guard(world):
    return KbAccessGuard(world.store, world.users)


def _readable_names(guard, user):
    return sorted(kb.name for kb in guard.readable_kbs(user))


def test_each_member_lists_only_what_they_may_read(world, guard):
    p = world.people
    assert _readable_names(guard, p["alice"]) == ["alice_private", "alice_team", "carol_public"]
    assert _readable_names(guard, p["bob"]) == ["alice_team", "carol_public"]  # same department as alice
    assert _readable_names(guard, p["carol"]) == ["carol_private", "carol_public"]  # other department


def test_admin_and_local_user_read_everything(world, guard):
    everything = sorted(world.kbs)
    assert _readable_names(guard, world.people["root"]) == everything
    assert _readable_names(guard, LOCAL_USER) == everything


def test_filter_readable_splits_and_refuses_unknown_ids(world, guard):
    k = world.kbs
    allowed, denied = guard.filter_readable(
        world.people["bob"], [k["alice_private"].id, k["alice_team"].id, 999, k["carol_public"].id, 999])
    assert allowed == [k["alice_team"].id, k["carol_public"].id]
    assert denied == [k["alice_private"].id, 999]


def test_an_id_no_kb_can_have_is_refused_like_an_unknown_one(world, guard):
    """Issue 40 item 3: an id beyond SQLite's integers reached the query and raised OverflowError."""
    team = world.kbs["alice_team"].id
    allowed, denied = guard.filter_readable(world.people["bob"], [team, 1180591620717411303424, 0, -2])
    assert allowed == [team] and denied == [1180591620717411303424, 0, -2]
    with pytest.raises(AccessDenied):
        guard.require_manage(world.people["root"], 2**63)


def test_require_readable_names_ids_but_not_secret_names(world, guard):
    secret = world.kbs["alice_private"]
    with pytest.raises(AccessDenied) as refused:
        guard.require_readable(world.people["bob"], [world.kbs["alice_team"].id, secret.id])
    message = str(refused.value)
    assert f"#{secret.id}" in message and "bob" in message
    assert secret.name not in message  # the name of an unreadable KB is itself not readable
    assert guard.require_readable(world.people["alice"], [secret.id]) == [secret.id]


def test_resolve_scope_defaults_to_every_readable_kb(world, guard):
    k = world.kbs
    assert sorted(guard.resolve_scope(world.people["bob"], None)) == sorted([k["alice_team"].id, k["carol_public"].id])
    with pytest.raises(AccessDenied):
        guard.resolve_scope(world.people["bob"], [k["carol_private"].id])


def test_only_owner_or_admin_manages(world, guard):
    team = world.kbs["alice_team"]
    assert guard.can_manage(world.people["alice"], team)
    assert guard.can_manage(world.people["root"], team)
    assert not guard.can_manage(world.people["bob"], team)  # may read, may not delete
    with pytest.raises(AccessDenied, match="only the owner"):
        guard.require_manage(world.people["bob"], team.id)
    with pytest.raises(AccessDenied, match="may not read"):  # cannot even see it: same words as unknown
        guard.require_manage(world.people["bob"], world.kbs["alice_private"].id)
    assert guard.require_manage(world.people["root"], world.kbs["alice_private"].id).name == "alice_private"


def test_visibility_changes_by_owner_only_and_take_effect(world, guard):
    private = world.kbs["alice_private"]
    bob = world.people["bob"]
    with pytest.raises(AccessDenied):
        guard.set_visibility(bob, private.id, "public")
    assert guard.set_visibility(world.people["alice"], private.id, "department").visibility == "department"
    assert private.id in guard.filter_readable(bob, [private.id])[0]
    assert private.id not in guard.filter_readable(world.people["carol"], [private.id])[0]
    guard.set_visibility(world.people["root"], private.id, "private")
    assert guard.filter_readable(bob, [private.id]) == ([], [private.id])


def test_department_falls_back_to_owner_and_unowned_kb_is_admin_only(world, guard):
    alice, bob, carol = world.people["alice"], world.people["bob"], world.people["carol"]
    no_dept = world.store.create_kb("no_dept", "test-embedder", 8, owner_id=alice.id, visibility="department")
    assert guard.filter_readable(bob, [no_dept.id])[0] == [no_dept.id]  # alice's department is research
    assert guard.filter_readable(carol, [no_dept.id])[1] == [no_dept.id]
    orphan = world.store.create_kb("orphan", "test-embedder", 8)  # made before sign-in existed
    assert guard.filter_readable(alice, [orphan.id])[1] == [orphan.id]
    assert guard.filter_readable(world.people["root"], [orphan.id])[0] == [orphan.id]


def test_agentic_tool_call_cannot_reach_another_members_private_kb(world, guard):
    """A model that names a private KB in its tool arguments still searches only the session's KBs."""
    bob = world.people["bob"]
    k = world.kbs
    asked = [k["alice_private"].id, k["alice_team"].id]
    allowed, denied = guard.filter_readable(bob, asked)
    assert denied == [k["alice_private"].id]
    ctx = ToolContext.for_run(allowed, bob.id, world.settings)
    request = ToolCallRequest(id="call-1", name="searchDocs",
                              arguments={"query": "quarterly zephyr", "kbIds": [k["alice_private"].id]})
    observation = world.toolbox.dispatch(ctx, request)
    assert observation.chunks, "the readable KB should still be searched"
    assert {c.kb_id for c in observation.chunks} == {k["alice_team"].id}
    assert "zephyr" not in observation.text
    assert world.retriever.seen_kb_ids == [[k["alice_team"].id]]
    assert "overridden by the session" in ctx.records[0].message


def test_keyword_tool_with_guarded_context_sees_only_readable_kbs(world, guard):
    carol = world.people["carol"]
    scope = guard.resolve_scope(carol, None)
    ctx = ToolContext.for_run(scope, carol.id, world.settings)
    output = world.toolbox.keyword_search(ctx, "quarterly", top_k=10)
    assert {c.kb_id for c in output.chunks} == {world.kbs["carol_private"].id, world.kbs["carol_public"].id}


def test_memory_tools_are_per_user(world):
    alice, bob = world.people["alice"], world.people["bob"]
    alice_ctx = ToolContext.for_run([], alice.id, world.settings)
    bob_ctx = ToolContext.for_run([], bob.id, world.settings)
    world.toolbox.store_memory(alice_ctx, "my cat is called Miso")
    assert world.toolbox.recall_memory(alice_ctx, "cat name").memories == ["my cat is called Miso"]
    assert world.toolbox.recall_memory(bob_ctx, "cat name").memories == []
    # a model passing userId is overridden by the session, like kbIds
    request = ToolCallRequest(id="c", name="recall_memory", arguments={"query": "cat", "userId": alice.id})
    observation = world.toolbox.dispatch(bob_ctx, request)
    assert "Miso" not in observation.text


def test_conversation_and_trace_predicates(world):
    alice, bob, root = world.people["alice"], world.people["bob"], world.people["root"]
    assert can_read_conversation(alice, alice.id) and not can_read_conversation(bob, alice.id)
    assert not can_read_conversation(root, alice.id)  # admins do not read others' conversations
    assert can_read_trace(alice, alice.id) and can_read_trace(root, alice.id) and not can_read_trace(bob, alice.id)
    # rows written in single-user mode (user id NULL or 0) belong to the local user only
    assert can_read_conversation(LOCAL_USER, None) and not can_read_conversation(alice, None)


# -- the same rules through the real Engine (UI, CLI and pipeline entry points) -----------------


@pytest.fixture
def engine_world(home, tmp_path):
    return build_engine_world(home, tmp_path)


def test_the_facade_applies_the_guard_to_list_search_ask_and_delete(engine_world):
    engine, alice, bob, private, public = engine_world
    as_alice, as_bob = Workbench(engine, alice), Workbench(engine, bob)
    assert [kb.name for kb in as_bob.list_kbs()] == ["handbook"]
    assert {kb.name for kb in as_alice.list_kbs()} == {"alice-notes", "handbook"}
    with pytest.raises(AccessDenied):
        as_bob.search("zephyr budget", [private.id])
    assert as_alice.search("zephyr budget", [private.id]).chunks
    events = list(as_bob.ask("When does the zephyr project launch?", [private.id, public.id]))
    assert any(e.kind == "error" and e.stage == "access" for e in events)
    done = events[-1]
    assert done.kind == "done"
    assert all(s.kb_id != private.id for s in done.sources)
    assert "March" not in done.answer
    with pytest.raises(AccessDenied):
        as_bob.delete_kb(private.id)
    with pytest.raises(AccessDenied):
        as_alice.ingest(public.id, [])  # may read bob's public KB, may not change it
    as_alice.delete_kb(private.id)
    assert [kb.name for kb in as_alice.list_kbs()] == ["handbook"]
