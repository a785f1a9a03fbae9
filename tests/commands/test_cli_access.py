"""The CLI applies a member's KB access when run with --as USERNAME."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from docmind_core.cli import cli
from docmind_core.engine import Engine
from docmind_core.errors import AccessDenied
from docmind_core.store.conversations import ConversationStore
from docmind_core.accounts.users import LOCAL_USER, UserStore
from docmind_core.workbench import Workbench

pytestmark = pytest.mark.slow  # the docmind CLI against a real engine per test: not in make test-fast


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    home = tmp_path_factory.mktemp("cli-access")
    engine = Engine.open(home, env={})
    users = UserStore(engine.db)
    bob = users.add("bob", "bob-password-1", department="sales")
    users.add("alice", "alice-password-1", department="research")
    doc = home / "plan.txt"
    doc.write_text("The Orion launch budget is 4.2 million dollars and ships in March.", encoding="utf-8")
    as_bob = Workbench(engine, bob, channel="cli")
    kb = as_bob.create_kb("bob-private", visibility="private")
    assert as_bob.ingest(kb.id, [doc])[0].status == "added"
    return home


def invoke(home, *args):
    return CliRunner().invoke(cli, ["--home", str(home), *args], catch_exceptions=False)


def test_owner_sees_and_searches_their_private_kb(world):
    listed = invoke(world, "kb", "list", "--json", "--as", "bob")
    assert [k["name"] for k in json.loads(listed.output)] == ["bob-private"]
    found = invoke(world, "search", "Orion launch budget", "--kb", "bob-private", "--json", "--as", "bob")
    assert found.exit_code == 0 and "4.2 million" in found.output


def test_member_cannot_list_show_search_ask_or_delete_anothers_private_kb(world):
    assert json.loads(invoke(world, "kb", "list", "--json", "--as", "alice").output) == []
    shown = invoke(world, "kb", "show", "bob-private", "--as", "alice")
    assert shown.exit_code == 2 and "may not read" in shown.output
    searched = invoke(world, "search", "Orion launch budget", "--kb", "bob-private", "--as", "alice")
    assert searched.exit_code == 2 and "4.2 million" not in searched.output
    deleted = invoke(world, "kb", "delete", "bob-private", "--yes", "--as", "alice")
    assert deleted.exit_code == 2
    asked = invoke(world, "ask", "What is the Orion launch budget?", "--kb", "bob-private", "--json", "--as", "alice")
    # a KB named on the command line that the user may not read is refused like an unknown name
    assert asked.exit_code == 2 and "may not read" in asked.output and "4.2" not in asked.output
    still_there = invoke(world, "kb", "list", "--json", "--as", "bob")
    assert [k["name"] for k in json.loads(still_there.output)] == ["bob-private"]


def test_ask_json_has_the_documented_fields(world):
    out = invoke(world, "ask", "What is the Orion launch budget?", "--kb", "bob-private", "--json", "--as", "bob")
    summary = json.loads(out.output)
    for key in ("answer", "mode", "route_reason", "scope", "understanding", "planned_tools", "tool_calls", "tier",
                "top_score", "lex_coverage", "web_compensated", "sources", "citations", "coverage", "invalid_refs",
                "confidence", "band", "stop_reason", "timings_ms", "backend"):
        assert key in summary, key
    assert summary["mode"] in {"RULE_PLANNER", "AGENTIC"}
    assert summary["sources"][0]["document"] == "plan.txt" and summary["sources"][0]["origin"] == "kb"
    assert "4.2 million" in summary["answer"]
    # the offline answer quotes its source: each claim is supported, and the summary says so
    assert summary["claims"] and all(c["status"] == "supported" and c["via"] == "offline" for c in summary["claims"])
    assert summary["claim_counts"] == {"supported": len(summary["claims"]), "unsupported": 0, "contradicted": 0}
    assert summary["confidence_reason"].startswith(f"{len(summary['claims'])} of {len(summary['claims'])} claims")
    plain = invoke(world, "ask", "What is the Orion launch budget?", "--kb", "bob-private", "--as", "bob")
    assert f"claims: {len(summary['claims'])} supported, 0 unsupported, 0 contradicted" in plain.output
    assert "confidence: " in plain.output


def test_config_set_refuses_low_above_high(world):
    refused = invoke(world, "config", "set", "grader.low_threshold", "0.9")
    assert refused.exit_code == 2 and "must be below" in refused.output
    assert invoke(world, "config", "get", "grader.low_threshold").output.strip() == "0.25"


def test_only_the_owner_changes_sharing_and_department_visibility_applies(world):
    users = UserStore(Engine.open(world, env={}).db)
    users.add("carol", "carol-password-1", department="sales")  # bob's department
    refused = invoke(world, "kb", "share", "bob-private", "--visibility", "public", "--as", "alice")
    assert refused.exit_code == 2
    assert json.loads(invoke(world, "kb", "list", "--json", "--as", "carol").output) == []
    shared = invoke(world, "kb", "share", "bob-private", "--visibility", "department", "--as", "bob")
    assert shared.exit_code == 0 and "department" in shared.output
    assert [k["name"] for k in json.loads(invoke(world, "kb", "list", "--json", "--as", "carol").output)] == \
        ["bob-private"]
    assert json.loads(invoke(world, "kb", "list", "--json", "--as", "alice").output) == []  # other department
    assert invoke(world, "kb", "share", "bob-private", "--visibility", "private", "--as", "bob").exit_code == 0
    assert json.loads(invoke(world, "kb", "list", "--json", "--as", "carol").output) == []


def test_traces_are_visible_to_their_owner_and_admins_only(world):
    engine = Engine.open(world, env={})
    users = UserStore(engine.db)
    bob, alice = users.find("bob"), users.find("alice")
    as_bob, as_alice, operator = Workbench(engine, bob), Workbench(engine, alice), Workbench(engine, LOCAL_USER)
    kb = as_bob.kb_by_name("bob-private")
    run_id = list(as_bob.ask("What is the Orion launch budget?", [kb.id]))[0].run_id
    assert run_id in {t.run_id for t in as_bob.list_traces()}
    assert run_id not in {t.run_id for t in as_alice.list_traces()}
    assert run_id in {t.run_id for t in operator.list_traces()}  # the local admin
    assert as_bob.get_trace(run_id).meta.user_id == bob.id
    with pytest.raises(AccessDenied):
        as_alice.get_trace(run_id)


# -- issue 11's two leaks, through the CLI ------------------------------------------------------


def test_a_member_cannot_switch_sign_in_off_or_change_global_config(world):
    invoke(world, "config", "set", "auth.enabled", "true")  # the operator turns sign-in on
    refused = invoke(world, "config", "set", "auth.enabled", "false", "--as", "bob")
    assert refused.exit_code == 2 and "only an admin" in refused.output
    refused = invoke(world, "config", "set", "vector_store.url", "http://127.0.0.1:9", "--as", "bob")
    assert refused.exit_code == 2 and "only an admin" in refused.output
    refused = invoke(world, "config", "reset", "auth.enabled", "--as", "bob")  # a reset is a change too
    assert refused.exit_code == 2 and "only an admin" in refused.output
    assert Engine.open(world, env={}).settings.auth.enabled is True
    assert "auth.enabled" in invoke(world, "config", "list", "--changed").output
    invoke(world, "config", "reset", "auth.enabled")
    assert Engine.open(world, env={}).settings.auth.enabled is False


def test_a_members_threshold_is_personal_and_an_admin_can_promote_it(world):
    changed = invoke(world, "config", "set", "grader.high_threshold", "0.7", "--as", "bob")
    assert changed.exit_code == 0 and "(yours)" in changed.output
    mine = invoke(world, "config", "list", "--changed", "--as", "bob").output
    assert "grader.high_threshold" in mine and "yours (global 0.9)" in mine
    assert "grader.high_threshold" not in invoke(world, "config", "list", "--changed", "--as", "alice").output
    assert invoke(world, "config", "get", "grader.high_threshold").output.strip() == "0.9"
    # bob's runs record his value in their config snapshot; alice's keep the global one
    engine = Engine.open(world, env={})
    bob, alice = engine.account("bob"), engine.account("alice")
    kb = Workbench(engine, bob).kb_by_name("bob-private")
    run = list(Workbench(engine, bob).ask("What is the Orion launch budget?", [kb.id]))[0].run_id
    assert Workbench(engine, bob).get_trace(run).config["grader.high_threshold"] == 0.7
    run = list(Workbench(engine, alice).ask("What is the Orion launch budget?", []))[0].run_id
    assert Workbench(engine, alice).get_trace(run).config["grader.high_threshold"] == 0.9
    history = invoke(world, "config", "history").output
    assert "personal grader.high_threshold" in history.replace("  ", " ") and "by bob (cli)" in history
    refused = invoke(world, "config", "promote", "bob", "--as", "alice")
    assert refused.exit_code == 2 and "only an admin" in refused.output
    assert invoke(world, "config", "promote", "bob").exit_code == 0  # the operator is an admin
    assert invoke(world, "config", "get", "grader.high_threshold").output.strip() == "0.7"
    assert "yours" not in invoke(world, "config", "list", "--changed", "--as", "bob").output
    assert "by local (cli)" in invoke(world, "config", "history").output
    invoke(world, "config", "reset", "grader.high_threshold")


def test_config_import_records_the_acting_user(world, tmp_path):
    path = tmp_path / "tuning.json"
    path.write_text(json.dumps({"agentic.max_iterations": 3, "grader.coverage_high": 0.75}), encoding="utf-8")
    assert invoke(world, "config", "import", str(path), "--as", "bob").exit_code == 0
    history = invoke(world, "config", "history", "--as", "bob").output
    assert history.count("by bob (import)") == 2
    path.write_text(json.dumps({"auth.enabled": False}), encoding="utf-8")
    refused = invoke(world, "config", "import", str(path), "--as", "bob")
    assert refused.exit_code == 2 and "only an admin" in refused.output
    invoke(world, "config", "reset", "--all", "--personal", "--as", "bob")


def test_a_member_cannot_read_or_extend_anothers_conversation(world):
    engine = Engine.open(world, env={})
    bob = UserStore(engine.db).find("bob")
    conversations = ConversationStore(engine.db)  # set-up straight in the store: bob's earlier exchange
    conversation = conversations.create(bob.id, title="bob's launch notes")
    conversations.add_message(conversation, "user", "What is the Orion launch budget?")
    conversations.add_message(conversation, "assistant", "The Orion launch budget is 4.2 million dollars [1].")
    before = conversations.messages(conversation)
    asked = invoke(world, "ask", "What did I ask before?", "--conversation", conversation, "--json", "--as", "alice")
    assert asked.exit_code == 2 and "not one of alice's conversations" in asked.output
    assert "Orion" not in asked.output and "4.2" not in asked.output
    assert conversations.messages(conversation) == before  # nothing appended
    # an id that does not exist gets the same answer: probing ids reveals nothing
    probe = invoke(world, "ask", "hello", "--conversation", "0" * 32, "--as", "alice")
    assert probe.exit_code == 2 and "not one of alice's conversations" in probe.output
