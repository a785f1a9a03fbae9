"""Hostile questions, answers and names through the real entry points: pages, CLI, MCP, engine, tools."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from docmind_core.backends.protocols import ToolCallRequest
from docmind_core.events import Done, RunStarted, Token
from docmind_core.accounts.limits import InputTooLarge
from docmind_core.answer.tools import ToolContext, Toolbox
from docmind_core.workbench import Workbench
from tests.agentic_world import CORPUS, FixtureRetriever, settings
from tests.markdown_probe import render, text_of

ROOT = Path(__file__).resolve().parent.parent
HOSTILE_URL = "http://127.0.0.1:1/"
IMAGE = f"![x]({HOSTILE_URL}a.png)"
QUESTION = f"Why? {IMAGE} [click]({HOSTILE_URL}) <img src={HOSTILE_URL}b.png>"
TERMINAL_QUESTION = "hi \x1b]0;pwned\x07 \x1b[31mred\x1b[0m \x9b2J done"
ESCAPE_BYTES = ("\x1b", "\x07", "\x9b", "\x9d", "\x9c")


def _record_run(traces, question: str, answer: str, pair_id: str | None = None, mode: str = "NONE") -> str:
    run_id = uuid.uuid4().hex
    with traces.recorder(run_id=run_id, question=question, requested_mode="rule" if pair_id else "auto",
                         pair_id=pair_id) as recorder:
        recorder.record(RunStarted(run_id=run_id, question=question, kb_ids=[], requested_mode="auto", backends=[]))
        recorder.record(Token(text=answer))
        recorder.record(Done(run_id=run_id, answer=answer, mode=mode, stop_reason="model_done"))
    return run_id


# -- pages (AppTest) ------------------------------------------------------------------


@pytest.fixture(scope="module")
def hostile_home(app_engine):
    """An engine the app uses (same cache entry), with a hostile trace pair and a hostile KB description."""
    engine = app_engine
    engine.create_kb(f"kb {IMAGE}", f"Notes {IMAGE} [more]({HOSTILE_URL})\r\r{IMAGE}")
    pair = engine.traces.new_pair_id()
    _record_run(engine.traces, QUESTION, f"Answer.\r\r{IMAGE}", pair_id=pair, mode=f"RULE_PLANNER {IMAGE}")
    _record_run(engine.traces, QUESTION, f"Answer.\r\r{IMAGE}", pair_id=pair, mode="AGENTIC")
    yield engine


def _app_page(page: str):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    at.run()
    assert not at.exception, at.exception
    at.switch_page(page).run()
    assert not at.exception, at.exception
    return at


def _markdown_strings(at) -> list[str]:
    """Every string the page hands to Streamlit's Markdown renderer: bodies, labels, tooltips, progress texts."""
    found: list[str] = []

    def visit(node) -> None:
        proto = getattr(node, "proto", None)
        if proto is not None:
            for name in ("body", "label", "help", "text"):
                if name == "text" and getattr(node, "type", "") not in ("progress", "toast"):
                    continue
                value = getattr(proto, name, None) if name in {f.name for f in proto.DESCRIPTOR.fields} else None
                if isinstance(value, str) and value:
                    found.append(value)
        for child in getattr(node, "children", {}).values():
            visit(child)

    visit(at._tree)
    return found


def _assert_nothing_fetches_or_links_out(strings: list[str]) -> None:
    for s in strings:
        rendered = render(s, allow_html=True)
        bad = [u for u in rendered.urls() if "127.0.0.1:1" in u]
        assert not bad and not [u for u in rendered.images if not u.startswith("data:")], (s, rendered)


@pytest.mark.slow  # a whole-app run (AppTest)
def test_traces_page_shows_a_hostile_question_as_text_without_images_or_links(hostile_home):
    at = _app_page("pages/traces.py")
    at.session_state["dm_tr_table"] = {"selection": {"rows": [0], "columns": [], "cells": []}}
    at.run()
    assert not at.exception, at.exception
    strings = _markdown_strings(at)
    assert any("Replay" in s for s in strings), "one selected run is replayed"
    _assert_nothing_fetches_or_links_out(strings)
    assert any(IMAGE in text_of(s) for s in strings), "the question is still shown, as text"
    # a side-by-side pair opens as a comparison with both questions and modes in headings
    pair = hostile_home.traces.list()[0].pair_id
    at.session_state["dm_tr_table"] = {"selection": {"rows": [], "columns": [], "cells": []}}
    at.selectbox(key="dm_tr_pair").set_value(pair).run()
    assert not at.exception, at.exception
    strings = _markdown_strings(at)
    assert any("Comparison" in s for s in strings)
    _assert_nothing_fetches_or_links_out(strings)


@pytest.mark.slow  # a whole-app run (AppTest)
def test_kb_page_shows_a_hostile_description_and_name_as_text(hostile_home):
    at = _app_page("pages/knowledge_bases.py")
    strings = _markdown_strings(at)
    _assert_nothing_fetches_or_links_out(strings)
    assert any("Notes" in text_of(s) and IMAGE in text_of(s) for s in strings)


@pytest.mark.slow  # a whole-app run (AppTest)
def test_a_public_address_with_sign_in_off_shows_no_page_unless_allowed(hostile_home):
    from streamlit import config
    from streamlit.testing.v1 import AppTest

    from docmind_core.accounts.users import LOCAL_USER

    previous = config.get_option("server.address")
    config.set_option("server.address", "0.0.0.0")
    bench = Workbench(hostile_home, LOCAL_USER, "cli")
    try:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
        at.run()
        assert not at.exception, at.exception
        assert any("0.0.0.0" in text_of(e.value) and "sign-in off" in text_of(e.value) for e in at.error)
        assert not at.sidebar.multiselect and not at.title  # no sidebar, no page
        bench.set_config({"auth.allow_public_without_sign_in": True})
        at.run()
        assert not at.exception, at.exception
        assert any("without sign-in" in text_of(w.value) for w in at.warning)
        assert at.sidebar.multiselect and at.title  # the page renders, under the warning
    finally:
        config.set_option("server.address", previous)
        bench.reset_config("auth.allow_public_without_sign_in")


# -- CLI ----------------------------------------------------------------------------------


@pytest.mark.slow  # the docmind CLI on a real engine
def test_cli_prints_no_terminal_escape_from_questions_answers_or_names(tmp_path):
    from docmind_core.cli import cli
    from docmind_core.store.db import Database
    from docmind_core.store.kb_store import KnowledgeStore
    from docmind_core.store.traces import TraceStore

    home = tmp_path / "home"
    home.mkdir()
    db = Database(home / "docmind.db")
    run_id = _record_run(TraceStore(db), TERMINAL_QUESTION, "answer \x1b]8;;http://127.0.0.1:1/\x1b\\link\x1b[2J")
    KnowledgeStore(db).create_kb("kb\x1b[31mred", "usem3", 512, description="desc \x1b]0;pwned\x07")
    runner = CliRunner()
    outputs = []
    for args in (["traces", "list"], ["traces", "show", run_id], ["kb", "list"], ["kb", "show", "kb\x1b[31mred"]):
        result = runner.invoke(cli, ["--home", str(home), *args], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        outputs.append(result.output)
    printed = "".join(outputs)
    assert "hi" in outputs[0] and "red" in outputs[0] and "done" in outputs[0]
    assert "link" in outputs[1] and "desc" in outputs[2]
    assert not [b for b in ESCAPE_BYTES if b in printed], repr(printed)


# -- MCP ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mcp_service(tmp_path_factory):
    """The MCP tool service over a real engine, a member's API key, and a spy on KB lookups."""
    from docmind_core.engine import Engine
    from docmind_core.mcp_server import McpToolService
    from docmind_core.accounts.rate_limit import SlidingWindowLimiter

    engine = Engine.open(tmp_path_factory.mktemp("mcp-limits") / "home", env={})
    bob = engine.users.add("bob", "bob-password-1", department="sales")
    kb = engine.create_kb("bob-notes", owner_id=bob.id, department="sales")
    caller = engine.resolve_api_key(engine.api_keys.create(bob.id))
    lookups: list[int] = []
    get_kb = engine.store.get_kb

    def counted_get_kb(kb_id):
        lookups.append(kb_id)
        return get_kb(kb_id)

    engine.store.get_kb = counted_get_kb
    return engine, McpToolService(engine, SlidingWindowLimiter(60.0)), caller, kb, lookups


def test_mcp_refuses_100000_kb_ids_before_any_lookup_with_a_short_log(mcp_service, caplog):
    from mcp.server.mcpserver.exceptions import ToolError

    engine, service, caller, kb, lookups = mcp_service
    caplog.set_level(logging.DEBUG)
    lookups.clear()
    many = list(range(1, 100_001))
    for tool, args in ((service.search_docs, ("quarterly", many, 8)), (service.keyword_search, ("quarterly", many, 8)),
                       (service.kb_meta, (many,))):
        with pytest.raises(ToolError) as refused:
            service.run(tool, caller, *args)
        message = str(refused.value)
        assert "100,000" in message and "64" in message and "limits.max_kb_ids" in message
        assert len(message) < 300
    assert lookups == []
    assert len(caplog.text) < 3000, len(caplog.text)
    # within the cap the usual rules apply: bob searches his own KB
    assert service.run(service.search_docs, caller, "quarterly", [kb.id], 8)["kb_ids"] == [kb.id]


def test_mcp_refuses_an_oversize_query_or_memory(mcp_service):
    from mcp.server.mcpserver.exceptions import ToolError

    engine, service, caller, kb, lookups = mcp_service
    with pytest.raises(ToolError, match="limits.max_question_chars"):
        service.run(service.search_docs, caller, "quarterly " * 10_000, None, 8)
    with pytest.raises(ToolError, match="limits.max_tool_argument_bytes"):
        service.run(service.store_memory, caller, "remember " * 10_000)
    assert engine.memory_store.list(caller.user.id) == []


# -- engine ----------------------------------------------------------------------------------


@pytest.mark.slow  # a real engine
def test_a_100k_character_question_is_refused_before_any_run(tmp_path):
    from docmind_core.engine import Engine
    from docmind_core.accounts.users import LOCAL_USER

    engine = Engine.open(tmp_path / "home", env={})
    bench = Workbench(engine, LOCAL_USER, "cli")
    conversation = bench.start_conversation("t")
    with pytest.raises(InputTooLarge) as refused:
        list(bench.ask("why " * 25_000, [], conversation_id=conversation))
    message = str(refused.value)
    assert "100,000" in message and "4,000" in message and "limits.max_question_chars" in message
    assert engine.traces.list() == [] and bench.conversation_messages(conversation) == []
    with pytest.raises(InputTooLarge):
        bench.search("why " * 25_000, [])
    # the cap is a config key
    bench.set_config({"limits.max_question_chars": 100_000})
    assert bench.settings().limits.max_question_chars == 100_000


# -- tools (agentic loop) -------------------------------------------------------------------


def test_an_oversize_tool_argument_is_an_error_observation_not_a_crash():
    retriever = FixtureRetriever(CORPUS)
    toolbox = Toolbox(retriever)
    ctx = ToolContext.for_run([1], user_id=7, settings=settings())
    huge = "pump " * 5_000
    obs = toolbox.dispatch(ctx, ToolCallRequest(id="1", name="searchDocs", arguments={"query": huge}))
    assert obs.text.startswith("Invalid arguments for searchDocs") and "limits.max_tool_argument_bytes" in obs.text
    assert retriever.queries == [] and not obs.chunks
    record = ctx.records[0]
    assert record.status == "error" and len(str(record.args)) < 1000
    # a question-sized query that fits in bytes but not in characters is refused the same way
    ctx = ToolContext.for_run([1], 7, settings(**{"limits.max_tool_argument_bytes": 1_000_000}))
    obs = toolbox.dispatch(ctx, ToolCallRequest(id="2", name="keywordSearch", arguments={"query": "p" * 4_500}))
    assert obs.text.startswith("Invalid arguments") and "limits.max_question_chars" in obs.text
    assert retriever.queries == []
    # an ordinary call still runs
    ok = toolbox.dispatch(ctx, ToolCallRequest(id="3", name="searchDocs", arguments={"query": "pump flow"}))
    assert ok.chunks and retriever.queries
