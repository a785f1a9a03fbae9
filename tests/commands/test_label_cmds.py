"""Labels on the command line: `ask --json` carries the KB's badge figure, `dataset label` stores (and
corrects) a label that the next answer's figure counts, `dataset labels` reviews and exports them."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from docmind_core import cli as cli_module
from tests.commands.test_ask_words import QUESTION, home  # noqa: F401 - the fixture: a KB "relays", one document

pytestmark = pytest.mark.slow  # a real engine (embedder, Chroma) behind the CLI


def _run(home, *args) -> str:
    result = CliRunner().invoke(cli_module.cli, ["--home", str(home), *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_ask_json_carries_the_badge_and_a_label_changes_it(home, tmp_path):
    first = json.loads(_run(home, "ask", QUESTION, "--kb", "relays", "--mode", "rule", "--json"))
    badge = first["kb_badge"]
    assert badge["kb_names"] == ["relays"] and badge["labelled_runs"] == 0 and badge["needed"] == 20
    assert badge["method"].startswith("Wilson score") and "no such answer labelled yet" in badge["statement"]
    _run(home, "dataset", "label", first["run_id"], "--verdict", "right")
    _run(home, "dataset", "label", first["run_id"], "--verdict", "wrong", "--source-doc", "relay.md")  # corrected
    second = json.loads(_run(home, "ask", QUESTION, "--kb", "relays", "--mode", "rule", "--json"))
    after = second["kb_badge"]
    assert after["labelled_runs"] == 1 and after["statement"] != badge["statement"]
    supported = first["verdict"]["level"] == "supported"
    assert (after["labelled"], after["right"]) == ((1, 0) if supported else (0, 0))
    listed = _run(home, "dataset", "labels", "--kb", "relays")
    assert first["run_id"][:12] in listed and "wrong" in listed and "[source: relay.md]" in listed
    assert after["statement"] in listed
    out = tmp_path / "labels.jsonl"
    _run(home, "dataset", "labels", "--kb", "relays", "--jsonl", str(out))
    [line] = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert line["run_id"] == first["run_id"] and line["label"] == "wrong"
    assert line["right_source"]["documents"] == ["relay.md"]
    text = _run(home, "ask", QUESTION, "--kb", "relays", "--mode", "rule", "--no-timeline")
    assert after["statement"] in text
