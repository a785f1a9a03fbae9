"""Issue 19 item 4: a stored config value that is not JSON locked every command out, ``config reset --all``
included (a JSONDecodeError traceback).  Now such a value is skipped with a warning that names the key, the
default applies, and ``config reset KEY`` / ``config reset --all`` remove it (driven through the CLI; the bad
values are written into the database directly, as a hand edit or a broken tool would)."""

from __future__ import annotations

import sqlite3

import pytest
from click.testing import CliRunner

from docmind_core import cli as cli_module
from docmind_core.engine import Engine
from docmind_core.settings import Settings
from docmind_core.accounts.users import UserStore
from tests.access_world import FAST_HASHER

pytestmark = pytest.mark.slow  # the CLI on a real engine, several invocations


def invoke(home, *args):
    """One CLI invocation as a fresh process would run it (the CLI caches its engine per process)."""
    result = CliRunner().invoke(cli_module.cli, ["--home", str(home), *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        f"{args} crashed: {result.exception!r}\n{result.output}"
    return result


def store_raw(home, table: str, key: str, text: str, user_id: int | None = None) -> None:
    with sqlite3.connect(home / "docmind.db") as con:
        if table == "config":
            con.execute("INSERT OR REPLACE INTO config (key, value, updated_at) VALUES (?, ?, '2024-01-01')",
                        [key, text])
        else:
            con.execute("INSERT OR REPLACE INTO user_config (user_id, key, value, updated_at) "
                        "VALUES (?, ?, ?, '2024-01-01')", [user_id, key, text])


def stored_keys(home, table: str) -> list[str]:
    with sqlite3.connect(home / "docmind.db") as con:
        return [row[0] for row in con.execute(f"SELECT key FROM {table} ORDER BY key")]


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    home = tmp_path / "home"
    engine = Engine.open(home, env={}, warm=False)  # creates and migrates the database
    UserStore(engine.db, hasher=FAST_HASHER).add("alice", "alice-password", department="research")
    return home


def test_an_unreadable_global_value_is_skipped_named_and_reset(home):
    store_raw(home, "config", "grader.high_threshold", "{0.8")  # not JSON
    store_raw(home, "config", "agentic.max_iterations", "5")  # a good value beside it still applies

    listed = invoke(home, "config", "list")
    assert listed.exit_code == 0, listed.output
    assert "grader.high_threshold" in listed.stderr and "not readable" in listed.stderr
    assert "docmind config reset grader.high_threshold" in listed.output
    got = invoke(home, "config", "get", "grader.high_threshold")
    assert got.exit_code == 0 and got.stdout.strip() == repr(Settings().grader.high_threshold)
    assert invoke(home, "config", "get", "agentic.max_iterations").stdout.strip() == "5"
    assert invoke(home, "kb", "list").exit_code == 0

    reset = invoke(home, "config", "reset", "grader.high_threshold")
    assert reset.exit_code == 0, reset.output
    assert stored_keys(home, "config") == ["agentic.max_iterations"]
    clean = invoke(home, "config", "list")
    assert "grader.high_threshold" not in clean.stderr and "not readable" not in clean.output
    history = invoke(home, "config", "history")
    assert history.exit_code == 0 and "grader.high_threshold" in history.output


def test_reset_all_removes_an_unreadable_value(home):
    store_raw(home, "config", "llm.model", "not json at all")
    assert invoke(home, "config", "reset", "--all").exit_code == 0
    assert stored_keys(home, "config") == []
    assert invoke(home, "config", "list").stderr == ""


def test_an_unreadable_personal_value_is_skipped_named_and_reset(home):
    engine = Engine.open(home, env={}, warm=False)
    alice = engine.account("alice")
    del engine
    store_raw(home, "user_config", "grader.low_threshold", "[broken", user_id=alice.id)
    store_raw(home, "user_config", "retrieval.final_top_k", "7", user_id=alice.id)

    listed = invoke(home, "config", "list", "--as", "alice")
    assert listed.exit_code == 0, listed.output
    assert "grader.low_threshold" in listed.stderr and "not readable" in listed.stderr
    assert "docmind config reset grader.low_threshold --personal" in listed.output
    got = invoke(home, "config", "get", "grader.low_threshold", "--as", "alice")
    assert got.stdout.strip() == repr(Settings().grader.low_threshold)
    assert invoke(home, "config", "get", "retrieval.final_top_k", "--as", "alice").stdout.strip() == "7"
    assert invoke(home, "config", "list").exit_code == 0  # the operator's commands work too
    assert invoke(home, "config", "history", "--as", "alice").exit_code == 0

    reset = invoke(home, "config", "reset", "--all", "--personal", "--as", "alice")
    assert reset.exit_code == 0, reset.output
    assert stored_keys(home, "user_config") == []
    assert "not readable" not in invoke(home, "config", "list", "--as", "alice").stderr


def test_resetting_one_unreadable_personal_value(home):
    engine = Engine.open(home, env={}, warm=False)
    alice = engine.account("alice")
    del engine
    store_raw(home, "user_config", "grader.low_threshold", "nan-ish{", user_id=alice.id)
    reset = invoke(home, "config", "reset", "grader.low_threshold", "--personal", "--as", "alice")
    assert reset.exit_code == 0, reset.output
    assert stored_keys(home, "user_config") == []
