"""``docmind memory``, ``docmind conversation`` and ``docmind kb text``: a user sees (and deletes) what DocMind
keeps about them, and only that: another user's memory, conversation or document is refused."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from docmind_core.cli import cli
from docmind_core.engine import Engine
from docmind_core.workbench import Workbench

pytestmark = pytest.mark.slow  # the docmind CLI against a real engine: not in make test-fast


def invoke(home, *args, input=None):
    return CliRunner().invoke(cli, ["--home", str(home), *args], input=input)


@pytest.fixture
def home(tmp_path):
    home = tmp_path / "home"
    for name, extra in (("boss", ["--role", "admin"]), ("dave", []), ("erin", [])):
        out = invoke(home, "user", "add", name, "--password-stdin", *extra, input=f"{name}-password-1\n")
        assert out.exit_code == 0, out.output
    return home


def remember(home, username: str, text: str) -> tuple[int, str]:
    """A memory and a conversation of ``username``, made the way the app makes them."""
    engine = Engine.open(home, env={}, warm=False)
    bench = Workbench(engine, engine.account(username), channel="cli")
    conversation = bench.start_conversation(f"{username}'s notes")
    engine.refresh()
    engine.memory_store.add(bench.user.owner_key, text)
    return bench.list_memories()[0].id, conversation


def test_a_user_lists_and_forgets_their_own_memories_only(home):
    dave_memory, _ = remember(home, "dave", "dave prefers answers in German")
    erin_memory, _ = remember(home, "erin", "erin works on the Nimbus N2 launch")

    listed = invoke(home, "memory", "list", "--json", "--as", "dave")
    assert listed.exit_code == 0, listed.output
    assert [m["text"] for m in json.loads(listed.output)] == ["dave prefers answers in German"]

    refused = invoke(home, "memory", "forget", str(erin_memory), "--as", "dave")
    missing = invoke(home, "memory", "forget", "999999", "--as", "dave")
    assert refused.exit_code != 0 and missing.exit_code != 0
    assert "not one of dave's memories" in refused.output and "not one of dave's memories" in missing.output
    assert "erin works" in invoke(home, "memory", "list", "--as", "erin").output  # still there

    forgot = invoke(home, "memory", "forget", str(dave_memory), "--as", "dave")
    assert forgot.exit_code == 0 and f"forgot memory #{dave_memory}" in forgot.output
    assert "no memories" in invoke(home, "memory", "list", "--as", "dave").output


def test_clear_forgets_every_memory_of_the_user_and_no_one_else(home):
    remember(home, "dave", "dave's first fact")
    remember(home, "dave", "dave's second fact about the Aurora pump")
    remember(home, "erin", "erin's fact")
    cleared = invoke(home, "memory", "clear", "--yes", "--as", "dave")
    assert cleared.exit_code == 0 and "forgot 2 memories" in cleared.output
    assert json.loads(invoke(home, "memory", "list", "--json", "--as", "dave").output) == []
    assert len(json.loads(invoke(home, "memory", "list", "--json", "--as", "erin").output)) == 1


def test_a_user_deletes_their_own_conversation_and_not_someone_elses(home):
    _, dave_conversation = remember(home, "dave", "a fact")
    _, erin_conversation = remember(home, "erin", "another fact")
    refused = invoke(home, "conversation", "delete", erin_conversation, "--yes", "--as", "dave")
    assert refused.exit_code != 0 and "not one of dave's conversations" in refused.output
    assert erin_conversation in invoke(home, "conversation", "list", "--as", "erin").output

    deleted = invoke(home, "conversation", "delete", dave_conversation, "--yes", "--as", "dave")
    assert deleted.exit_code == 0, deleted.output
    assert "no conversations" in invoke(home, "conversation", "list", "--as", "dave").output


def test_kb_text_prints_what_was_extracted_and_only_for_readers(home, tmp_path):
    """``docmind kb text KB DOC``: the text the loader extracted, for checking an ingest; private to readers."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "plan.md").write_text("# Plan\n\nThe Nimbus N2 ships in May.\n", encoding="utf-8")
    ingested = invoke(home, "ingest", str(folder), "--kb", "dave_notes", "--as", "dave", "--no-progress")
    assert ingested.exit_code == 0, ingested.output
    shown = invoke(home, "kb", "text", "dave_notes", "plan.md", "--as", "dave")
    assert shown.exit_code == 0 and "The Nimbus N2 ships in May." in shown.output
    missing = invoke(home, "kb", "text", "dave_notes", "nope.md", "--as", "dave")
    assert missing.exit_code != 0 and "no document named 'nope.md'" in missing.output
    refused = invoke(home, "kb", "text", "dave_notes", "plan.md", "--as", "erin")
    assert refused.exit_code != 0 and "ships in May" not in refused.output
