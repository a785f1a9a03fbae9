"""Reasoning in plain words on the pages (AppTest, demo KB, offline): the route sentence, each agentic round's
tool calls outside the collapsed timeline, the side-by-side answer and source diff, tables that fit."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from tests.ui.app_support import started_app
from tests.ui.test_pages import demo_home, has_demo_corpus  # noqa: F401 - demo_home is a fixture

pytestmark = pytest.mark.slow

COMPARISON = "Compare the maximum power draw of the Nimbus N1 and the Nimbus N2."



def _outside_expanders(at: AppTest) -> str:
    inside = {id(m) for e in at.expander for m in e.markdown}
    return "\n".join(m.value for m in at.markdown if id(m) not in inside)


def _column_config(frame) -> dict:
    return json.loads(frame.proto.columns) if frame.proto.columns else {}


@pytest.mark.skipif(not has_demo_corpus(), reason="needs the repository's demo corpus (data/demo)")
def test_chat_shows_the_route_sentence_and_each_rounds_calls_outside_the_timeline(demo_home):
    at = started_app()
    at.chat_input[0].set_value(COMPARISON).run()
    assert not at.exception, at.exception
    visible = _outside_expanders(at)
    assert 'class="dm-route"' in visible
    assert "comparison of 2 entities (Nimbus N1, Nimbus N2) -&gt; AGENTIC" in visible
    assert 'class="dm-rounds"' in visible and "<b>Round 1</b>" in visible
    assert "searchDocs “Nimbus N1 maximum power draw”" in visible  # the call and its query, not inside the timeline
    assert "hits (" in visible


@pytest.mark.skipif(not has_demo_corpus(), reason="needs the repository's demo corpus (data/demo)")
def test_side_by_side_shows_answer_and_source_diffs_and_one_tool_call_table(demo_home):
    at = started_app()
    at.segmented_control(key="dm_chat_mode").set_value("Side by side").run()
    at.chat_input[0].set_value(COMPARISON).run()
    assert not at.exception, at.exception
    labels = [t.label for t in at.tabs]
    assert labels[:4] == ["Answer diff", "Sources diff", "Timeline", "Tool calls"]
    html = "\n".join(m.value for m in at.markdown)
    assert 'class="dm-diff"' in html
    sources = next(f for f in at.dataframe if "side" in f.value.columns and "cited by A" in f.value.columns)
    assert set(sources.value["side"]) <= {"both", "only A", "only B"} and len(sources.value) >= 1
    tools = next(f for f in at.dataframe if "run" in f.value.columns and "tool" in f.value.columns)
    assert set(tools.value["run"]) == {"A", "B"}  # both runs' calls in one full-width table
    config = _column_config(tools)
    assert any("args" in k and v.get("width") == "large" for k, v in config.items()), config


def test_traces_table_keeps_the_label_column_in_view(demo_home):
    if not demo_home.traces.list():
        assert list(demo_home.ask("What uptime does Aurora Cloud guarantee?",
                                  [demo_home.store.list_kbs()[0].id]))[-1].kind == "done"
    at = started_app()
    at.switch_page("pages/traces.py").run()
    assert not at.exception, at.exception
    table = next(f for f in at.dataframe if "label" in f.value.columns and "run id" in f.value.columns)
    assert list(table.proto.column_order)[:2] == ["started", "label"]


def _chart_targets(chart) -> list[str]:
    """The card ids the bars of a plotly chart element carry (customdata), '' for a bar without a card."""
    spec = json.loads(chart.proto.spec)
    return [t for trace in spec["data"] if trace.get("type") == "bar" for t in trace.get("customdata") or []]


def test_chat_score_bars_carry_the_anchor_of_their_source_card(demo_home):
    """Every source card of an answer has a bar that jumps to it (the same helper as hit testing)."""
    import re

    at = started_app()
    at.chat_input[0].set_value("What is the maximum power draw of the Nimbus N2?").run()
    assert not at.exception, at.exception
    charts = [c for c in at.get("plotly_chart") if c.proto.id and "dm_chart_preload" not in c.proto.id]
    assert len(charts) == 1, [c.proto.id for c in at.get("plotly_chart")]
    chart = charts[0]
    assert list(chart.proto.selection_mode), "a click on a bar must reach the page (on_select)"
    targets = [t for t in _chart_targets(chart) if t]
    cards = re.findall(r'class="dm-source[^"]*" id="(src-[^"]+)"', "\n".join(m.value for m in at.markdown))
    assert cards and sorted(targets) == sorted(cards), (targets, cards)
