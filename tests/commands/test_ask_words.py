"""`docmind ask` prints reasons in words; `--json` keeps each machine code and adds its words beside it
(issue 23 item 6)."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from docmind_core import cli as cli_module
from docmind_core.engine import Engine
from docmind_core.text.reasons import describe_reason

pytestmark = pytest.mark.slow  # a real engine (embedder, Chroma) behind the CLI

QUESTION = "What voltage does the Vega relay run at?"
_CODE = re.compile(r"(?<![\w.])[a-z]+(?:_[a-z]+)+(?::[\d.]+)?(?![\w.])")


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("ask_words") / "home"
    docs = home.parent / "docs"
    docs.mkdir()
    (docs / "relay.md").write_text("# Vega relay\n\nThe Vega relay runs at 48 volts. It switches in 3 ms.\n",
                                   encoding="utf-8")
    engine = Engine.open(home, env={})
    assert engine.ingest(engine.create_kb("relays").id, [docs / "relay.md"])[0].status == "added"
    return home


def _ask(home, *extra):
    result = CliRunner().invoke(cli_module.cli, ["--home", str(home), "ask", QUESTION, "--kb", "relays",
                                                 "--mode", "rule", *extra])
    assert result.exit_code == 0, result.output
    return result.output


def test_json_keeps_each_code_and_adds_its_words(home):
    summary = json.loads(_ask(home, "--json"))
    assert summary["route_reason"] == "forced_rule"
    assert summary["route_reason_words"] == describe_reason("forced_rule")
    assert summary["grade_reason"] and summary["grade_reason_words"] == describe_reason(summary["grade_reason"])
    assert summary["grade_reason_words"] != summary["grade_reason"]


def test_text_output_shows_words_not_codes(home):
    out = _ask(home)
    head = out.split("\nTimeline:")[0]
    assert "reason=" not in head
    assert re.search(r"^evidence grade (HIGH|AMBIGUOUS|LOW): \w", head, re.MULTILINE), head
    assert re.search(r"verdict: (Supported by the sources|Partly supported|Not supported by the sources|No answer in "
                     r"the sources)", head), head
    codes = {c for c in _CODE.findall(out) if not c.startswith(("gray_zone_mode", "coverage_first"))}
    assert not codes & {"forced_rule", "rerank_high", "rerank_low", "high_rerank_but_low_coverage",
                        "gray_zone_coverage_mid", "gray_zone_coverage_high", "gray_zone_coverage_low",
                        "high_rerank_but_no_coverage", "low_rerank_but_rare_entity_hit"}, codes
