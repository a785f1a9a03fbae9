"""Issue 19, item 1 and the account items of item 8, through the ``docmind`` CLI (and the facade where the issue
used it): a new account never inherits a removed one's data, removal says what it deleted or transferred,
and every user and API-key command acts as ``--as`` / ``DOCMIND_USER``."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from docmind_core.cli import cli
from docmind_core.engine import Engine
from docmind_core.errors import AccessDenied
from docmind_core.accounts.users import LOCAL_USER
from docmind_core.workbench import Workbench

pytestmark = pytest.mark.slow  # the docmind CLI against a real engine: not in make test-fast

SALARY = "Dave salary list: CEO 900k, CTO 700k. Codename REDFOX."


def invoke(home, *args, input=None, env=None):
    return CliRunner().invoke(cli, ["--home", str(home), *args], input=input, env=env, catch_exceptions=False)


def add_user(home, name, *extra):
    out = invoke(home, "user", "add", name, "--password-stdin", *extra, input=f"{name}-password-1\n")
    assert out.exit_code == 0, out.output
    return out


@pytest.fixture
def home(tmp_path):
    home = tmp_path / "home"
    add_user(home, "boss", "--role", "admin")
    return home


def dave_with_everything(home, tmp_path) -> dict:
    """dave's KB (through the CLI, as the issue did), a conversation with a run, a memory, a personal value."""
    add_user(home, "dave")
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "salaries.md").write_text(SALARY, encoding="utf-8")
    ingested = invoke(home, "ingest", str(folder), "--kb", "dave_private", "--as", "dave", "--no-progress")
    assert ingested.exit_code == 0, ingested.output
    engine = Engine.open(home, env={}, warm=False)
    dave = Workbench(engine, engine.account("dave"), channel="cli")
    kb = dave.kb_by_name("dave_private")
    conversation = dave.start_conversation("dave's pay review")
    run_id = list(dave.ask("What does the CEO earn per REDFOX salary list?", [kb.id],
                           conversation_id=conversation))[0].run_id
    dave.set_config({"grader.high_threshold": 0.55})
    engine.refresh()
    engine.memory_store.add(dave.user.id, "dave's bonus is paid in March")
    return {"conversation": conversation, "run_id": run_id, "kb_id": kb.id}


def test_a_new_account_inherits_nothing_of_a_removed_one(home, tmp_path):
    dave = dave_with_everything(home, tmp_path)
    removed = invoke(home, "user", "remove", "dave", "--yes")
    assert removed.exit_code == 0, removed.output
    # the command says what it deleted, with counts
    assert "deleted: 1 knowledge base, 1 document" in removed.output
    for said in ("1 conversation", "1 trace", "1 memory", "1 personal config value"):
        assert said in removed.output, removed.output
    add_user(home, "mallory")

    listed = invoke(home, "kb", "list", "--json", "--as", "mallory")
    assert json.loads(listed.output) == []
    found = invoke(home, "search", "REDFOX salary", "--kb", "dave_private", "--as", "mallory")
    assert found.exit_code == 2 and "900k" not in found.output

    engine = Engine.open(home, env={}, warm=False)
    mallory = Workbench(engine, engine.account("mallory"), channel="cli")
    assert mallory.list_conversations() == []
    with pytest.raises(AccessDenied):
        mallory.conversation_messages(dave["conversation"])
    assert mallory.list_traces() == []
    with pytest.raises(AccessDenied):
        mallory.get_trace(dave["run_id"])
    assert mallory.settings().grader.high_threshold == engine.settings.grader.high_threshold != 0.55
    nothing = mallory.tool_scope(None, searches_kbs=False)
    assert mallory.run_tool("recall_memory", nothing, query="when is dave's bonus paid").memories == []
    assert mallory.user.id > engine.retired_user_ids()[0].id  # a fresh id, above dave's
    # deleted through the ingestor: no document row, no vectors of the KB left
    assert engine.db.db.execute("SELECT COUNT(*) FROM documents WHERE kb_id = ?", [dave["kb_id"]]).fetchone()[0] == 0
    engine.refresh()
    assert engine.ingestor.vector_store.count(dave["kb_id"]) == 0


def test_remove_with_transfer_hands_everything_over_and_says_so(home, tmp_path):
    dave = dave_with_everything(home, tmp_path)
    add_user(home, "carol")
    removed = invoke(home, "user", "remove", "dave", "--transfer-to", "carol", "--yes")
    assert removed.exit_code == 0, removed.output
    assert "transferred to 'carol': 1 knowledge base, 1 document" in removed.output
    assert "1 conversation, 1 trace" in removed.output
    assert "deleted:" in removed.output and "1 memory, 1 personal config value" in removed.output
    found = invoke(home, "search", "REDFOX salary", "--kb", "dave_private", "--as", "carol")
    assert found.exit_code == 0 and "900k" in found.output
    engine = Engine.open(home, env={}, warm=False)
    carol = Workbench(engine, engine.account("carol"), channel="cli")
    assert [c.id for c in carol.list_conversations()] == [dave["conversation"]]
    assert carol.get_trace(dave["run_id"]) is not None
    assert carol.settings().grader.high_threshold != 0.55  # dave's tuning is not carol's
    add_user(home, "mallory")
    assert json.loads(invoke(home, "kb", "list", "--json", "--as", "mallory").output) == []


def test_remove_refuses_an_unknown_transfer_target_and_changes_nothing(home, tmp_path):
    add_user(home, "dave")
    refused = CliRunner().invoke(cli, ["--home", str(home), "user", "remove", "dave", "--transfer-to", "nobody",
                                       "--yes"])
    assert refused.exit_code == 2 and "no user named 'nobody'" in refused.output
    assert "dave" in invoke(home, "user", "list").output


def test_retired_ids_are_listed(home, tmp_path):
    add_user(home, "dave")
    invoke(home, "user", "remove", "dave", "--yes")
    listed = invoke(home, "user", "retired")
    assert "dave" in listed.output and "removed by local (cli)" in listed.output


# -- item 8: the user and API-key commands read the acting user like every other command -----------


@pytest.mark.parametrize("how", ["env", "option"])
def test_user_and_key_commands_act_as_the_named_user(home, how):
    add_user(home, "alice")
    add_user(home, "bob")

    def as_bob(*args, input=None):
        if how == "env":
            return CliRunner().invoke(cli, ["--home", str(home), *args], input=input, env={"DOCMIND_USER": "bob"})
        return CliRunner().invoke(cli, ["--home", str(home), *args, "--as", "bob"], input=input)

    added = as_bob("user", "add", "eve", "--role", "admin", "--password-stdin", input="eve-password-1\n")
    assert added.exit_code == 2 and "only an admin" in added.output, added.output
    changed = as_bob("user", "passwd", "alice", "--password-stdin", input="stolen-password\n")
    assert changed.exit_code == 2 and "only an admin" in changed.output
    assert as_bob("user", "remove", "alice", "--yes").exit_code == 2
    assert as_bob("user", "list").exit_code == 2
    assert as_bob("apikey", "create", "alice").exit_code == 2
    own_key = as_bob("apikey", "create", "bob")
    assert own_key.exit_code == 0 and own_key.output.startswith("dm_")
    listed = as_bob("apikey", "list", "--json")
    assert {k["username"] for k in json.loads(listed.output)} == {"bob"}
    engine = Engine.open(home, env={}, warm=False)
    assert engine.account("eve") is None
    assert engine.users.authenticate("alice", "stolen-password") is None
    assert engine.users.authenticate("alice", "alice-password-1") is not None
    # bob changes his own password
    assert as_bob("user", "passwd", "bob", "--password-stdin", input="bob-password-2\n").exit_code == 0


# -- item 8: a private KB's name is refused like any other name the user may not use ---------------


def test_ingest_into_a_private_name_reveals_nothing(home, tmp_path):
    add_user(home, "alice")
    add_user(home, "bob")
    note = tmp_path / "f.md"
    note.write_text("alice's notes", encoding="utf-8")
    for name, visibility in (("alice_private", "private"), ("alice_public", "public")):
        assert invoke(home, "ingest", str(note), "--kb", name, "--as", "alice", "--no-progress").exit_code == 0
        invoke(home, "kb", "share", name, "--visibility", visibility, "--as", "alice")
    mine = tmp_path / "mine.md"
    mine.write_text("bob's notes", encoding="utf-8")
    private = invoke(home, "ingest", str(mine), "--kb", "alice_private", "--as", "bob", "--no-progress")
    public = invoke(home, "ingest", str(mine), "--kb", "alice_public", "--as", "bob", "--no-progress")
    assert private.exit_code == public.exit_code == 2
    assert "already exists" not in private.output
    # bob can see alice_public exists; the answer for the private name is the same, name aside
    assert private.output.replace("alice_private", "NAME") == public.output.replace("alice_public", "NAME")
    assert "may not use the knowledge base name" in private.output
    engine = Engine.open(home, env={}, warm=False)
    operator = Workbench(engine, LOCAL_USER)
    for name in ("alice_private", "alice_public"):
        assert [d.name for d in operator.list_documents(operator.kb_by_name(name).id)] == ["f.md"]


# -- item 8: single-user conversations once sign-in is on -----------------------------------------


def test_single_user_conversations_go_to_the_admin_created_after_the_switch(tmp_path):
    home = tmp_path / "home"
    engine = Engine.open(home, env={}, warm=False)
    notes = Workbench(engine, LOCAL_USER, channel="cli").start_conversation("before sign-in")
    assert invoke(home, "config", "set", "auth.enabled", "true").exit_code == 0
    add_user(home, "alice")
    add_user(home, "boss", "--role", "admin")  # the first admin, created after the switch
    add_user(home, "second", "--role", "admin")
    engine = Engine.open(home, env={}, warm=False)
    assert [c.id for c in Workbench(engine, engine.account("boss")).list_conversations()] == [notes]
    assert Workbench(engine, engine.account("alice")).list_conversations() == []
    assert Workbench(engine, engine.account("second")).list_conversations() == []
