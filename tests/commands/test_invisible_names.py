"""Issue 19 item 8 through the CLI: bidi overrides and zero-width characters in a document name, a KB name,
a chunk and the answer built from it are shown as visible ``<U+XXXX>`` markers on the terminal, and as
``\\uXXXX`` escapes in JSON (which still parses to the stored text)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from docmind_core import cli as cli_module

pytestmark = pytest.mark.slow  # the CLI on a real engine with ingestion and a run

DOC = "invoice\u202etxt.md"  # shown as "invoicedm.txt" where the override acts
KB = "fin\u200bance"
HIDDEN = ("\u202e", "\u200b", "\u2060")


def invoke(home, *args):
    result = CliRunner().invoke(cli_module.cli, ["--home", str(home), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    root = tmp_path_factory.mktemp("invisible")
    doc = root / DOC
    doc.write_text("# REDFOX\n\nThe RED\u2060FOX budget is 42 units, approved by the board in March.\n",
                   encoding="utf-8")
    invoke(root / "home", "ingest", str(doc), "--kb", KB)
    return root / "home"


def assert_shown(text: str) -> None:
    assert not [c for c in HIDDEN if c in text], repr(text)


def test_kb_and_document_names_show_markers(home):
    listed = invoke(home, "kb", "list").output
    assert_shown(listed)
    assert "fin<U+200B>ance" in listed
    shown = invoke(home, "kb", "show", KB).output
    assert_shown(shown)
    assert "invoice<U+202E>txt.md" in shown


def test_json_escapes_them_and_parses_to_the_stored_names(home):
    out = invoke(home, "kb", "show", KB, "--json").output
    assert_shown(out)
    assert "\\u202e" in out and "\\u200b" in out
    data = json.loads(out)
    assert data["kb"]["name"] == KB and data["documents"][0]["name"] == DOC


def test_search_and_ask_show_markers_in_excerpts_sources_and_answers(home):
    searched = invoke(home, "search", "REDFOX budget", "--kb", KB).output
    assert_shown(searched)
    assert "RED<U+2060>FOX" in searched
    searched_json = invoke(home, "search", "REDFOX budget", "--kb", KB, "--json").output
    assert_shown(searched_json)
    assert "RED\u2060FOX" in json.dumps(json.loads(searched_json), ensure_ascii=False)

    asked = invoke(home, "ask", "What is the REDFOX budget?", "--kb", KB).output
    assert_shown(asked)
    assert "invoice<U+202E>txt.md" in asked  # the source line
    asked_json = invoke(home, "ask", "What is the REDFOX budget?", "--kb", KB, "--json").output
    assert_shown(asked_json)
    data = json.loads(asked_json)
    assert any(s["document"] == DOC for s in data["sources"]), data["sources"]
