"""The CLI applies a member's KB access when run with --as USERNAME."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from docmind_core.cli import cli
from docmind_core.engine import Engine
from docmind_core.errors import AccessDenied
from docmind_core.users import UserStore


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    home = tmp_path_factory.mktemp("cli-access")
    engine = Engine.open(home, env={})
    users = UserStore(engine.db)
    bob = users.add("bob", "bob-password-1", department="sales")
    users.add("alice", "alice-password-1", department="research")
    doc = home / "plan.txt"
    doc.write_text("The Orion launch budget is 4.2 million dollars and ships in March.", encoding="utf-8")
    kb = engine.create_kb("bob-private", user_id=bob.id, department="sales", visibility="private")
    assert engine.ingest(kb.id, [doc], user_id=bob.id)[0].status == "added"
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
    summary = json.loads(asked.output)
    assert not summary["sources"] and "4.2" not in summary["answer"]
    assert any(e["stage"] == "access" for e in summary["errors"])
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
    kb = engine.store.get_kb_by_name("bob-private")
    run_id = list(engine.ask("What is the Orion launch budget?", [kb.id], user_id=bob.id))[0].run_id
    assert run_id in {t.run_id for t in engine.list_traces(bob.id)}
    assert run_id not in {t.run_id for t in engine.list_traces(alice.id)}
    assert run_id in {t.run_id for t in engine.list_traces(None)}  # the local admin
    assert engine.get_trace(run_id, bob.id).meta.user_id == bob.id
    with pytest.raises(AccessDenied):
        engine.get_trace(run_id, alice.id)
