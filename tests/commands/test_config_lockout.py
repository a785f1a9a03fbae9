"""No config value can lock the CLI out: bad values are refused when set, and a stored value that makes a
backend unusable (set by an older version, or a server that went away) still lets every command start."""

from __future__ import annotations

import json
import sqlite3

import pytest
from click.testing import CliRunner

from docmind_core import cli as cli_module
from docmind_core.engine import Engine
from docmind_core.settings import Settings

pytestmark = pytest.mark.slow  # real engines and the CLI against unreachable servers: not in make test-fast

UNREACHABLE_CHROMA = "http://127.0.0.1:1"


def invoke(home, *args):
    """One CLI invocation: each opens its own engine, as a fresh process does."""
    result = CliRunner().invoke(cli_module.cli, ["--home", str(home), *args])
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), \
        f"{args} crashed: {result.exception!r}\n{result.output}"
    return result


def store_raw(home, key, value):
    """Write an override straight into SQLite, as an older version (with laxer validation) could have."""
    Engine.open(home, env={})  # creates and migrates the database
    with sqlite3.connect(home / "docmind.db") as con:
        con.execute("INSERT OR REPLACE INTO config (key, value, updated_at) VALUES (?, ?, '2024-01-01T00:00:00')",
                    [key, json.dumps(value)])


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    return tmp_path / "home"


def test_an_unreachable_chroma_server_names_itself_and_config_reset_still_works(home, tmp_path):
    doc = tmp_path / "note.txt"
    doc.write_text("The Vega relay runs at 48 volts.", encoding="utf-8")
    engine = Engine.open(home, env={})
    assert engine.ingest(engine.create_kb("notes").id, [doc])[0].status == "added"
    del engine

    accepted = invoke(home, "config", "set", "vector_store.url", UNREACHABLE_CHROMA)
    assert accepted.exit_code == 0  # a well-formed URL: whether a server answers there is not known yet

    listed = invoke(home, "kb", "list")
    assert listed.exit_code == 0 and "notes" in listed.output
    shown = invoke(home, "backends")
    assert shown.exit_code == 0
    line = next(ln for ln in shown.output.splitlines() if ln.startswith("vector_store"))
    assert "unreachable" in line and UNREACHABLE_CHROMA in line
    searched = invoke(home, "search", "Vega relay voltage", "--kb", "notes")  # refused, never "no hits"
    assert searched.exit_code == 2 and "Chroma server" in searched.output and UNREACHABLE_CHROMA in searched.output

    reset = invoke(home, "config", "reset", "vector_store.url")
    assert reset.exit_code == 0
    found = invoke(home, "search", "Vega relay voltage", "--kb", "notes")
    assert found.exit_code == 0 and "48 volts" in found.output


def test_an_empty_model_name_is_refused_with_an_endpoint_and_without(home):
    assert invoke(home, "config", "set", "llm.base_url", "http://127.0.0.1:9/v1").exit_code == 0
    refused = invoke(home, "config", "set", "llm.model", "")
    assert refused.exit_code == 2 and "llm.model" in refused.output
    assert invoke(home, "config", "get", "llm.model").output.strip() == repr(Settings().llm.model)
    assert invoke(home, "kb", "list").exit_code == 0
    assert invoke(home, "config", "reset", "llm.base_url").exit_code == 0
    assert invoke(home, "config", "set", "llm.model", "  ").exit_code == 2


@pytest.mark.parametrize("key, value", [
    ("vector_store.url", "not a url"),
    ("vector_store.url", "ftp://127.0.0.1:8000"),
    ("vector_store.url", "http://127.0.0.1:99999"),
    ("llm.base_url", "localhost:11434/v1 extra"),
    ("llm.base_url", "http//127.0.0.1:11434/v1"),
    ("web.tavily_base_url", "tavily"),
    ("tracing.langfuse_host", "://nohost"),
])
def test_malformed_urls_are_refused_and_nothing_is_stored(home, key, value):
    refused = invoke(home, "config", "set", key, value)
    assert refused.exit_code == 2 and key in refused.output
    assert invoke(home, "config", "list", "--changed").output.strip() == ""


def test_values_stored_by_an_older_version_never_prevent_start_or_reset(home):
    store_raw(home, "llm.base_url", "http://127.0.0.1:9/v1")
    store_raw(home, "llm.model", "")
    store_raw(home, "vector_store.url", UNREACHABLE_CHROMA)
    store_raw(home, "web.tavily_base_url", "not a url")

    listed = invoke(home, "kb", "list")
    assert listed.exit_code == 0
    assert invoke(home, "backends").exit_code == 0
    assert invoke(home, "config", "list").exit_code == 0
    for key in ("llm.model", "vector_store.url", "web.tavily_base_url", "llm.base_url"):
        assert invoke(home, "config", "reset", key).exit_code == 0, key
    assert invoke(home, "config", "list", "--changed").output.strip() == ""
    assert invoke(home, "kb", "list").exit_code == 0


def test_engine_open_with_an_unreachable_chroma_server_still_serves_other_work(home):
    store_raw(home, "vector_store.url", UNREACHABLE_CHROMA)
    engine = Engine.open(home, env={})
    status = {s.role: s for s in engine.backends()}["vector_store"]
    assert status.live is False and "unreachable" in status.detail
    assert engine.store.list_kbs() == []
