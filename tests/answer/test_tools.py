"""Tools and the ToolContext boundary: session-scoped KBs, tool whitelist, dedupe, validation, call cap."""

from __future__ import annotations

import threading

import pytest

from docmind_core.backends.openai_parsing import parse_tool_call
from docmind_core.backends.protocols import ToolCallRequest
from docmind_core.answer.tools import ToolContext, Toolbox, loop_tool_specs
from tests.agentic_world import CORPUS, FixtureRetriever, settings


@pytest.fixture
def retriever():
    return FixtureRetriever(CORPUS)


@pytest.fixture
def toolbox(retriever):
    return Toolbox(retriever)


def call(name: str, **args) -> ToolCallRequest:
    return ToolCallRequest(id=f"id-{name}", name=name, arguments=args)


def test_a_call_naming_another_kb_searches_the_session_kbs_only(toolbox, retriever):
    ctx = ToolContext.for_run([1], user_id=7, settings=settings())
    obs = toolbox.dispatch(ctx, call("searchDocs", query="DM-5000 zephyr roadmap pump", kbIds=[2], kb_ids=[2]))
    assert retriever.seen_kb_ids == [[1]]
    assert obs.chunks and {c.kb_id for c in obs.chunks} == {1}
    assert "zephyr" not in obs.text.lower()
    record = ctx.records[0]
    assert "kbIds overridden by the session" in record.message and "kb_ids" not in record.args


def test_user_id_argument_is_overridden_too(toolbox):
    ctx = ToolContext.for_run([1], user_id=7, settings=settings())
    toolbox.dispatch(ctx, call("keywordSearch", query="warranty", userId=99))
    assert "userId overridden by the session" in ctx.records[0].message
    assert ctx.run.user_id == 7


def test_store_memory_and_kb_meta_are_never_offered_to_the_loop():
    for sandbox in (False, True):
        names = [s.name for s in loop_tool_specs(sandbox)]
        assert "store_memory" not in names and "kb_meta" not in names
        assert {"searchDocs", "keywordSearch", "webSearch", "recall_memory"} <= set(names)


def test_execute_code_only_with_the_sandbox_on():
    assert "executeCode" not in [s.name for s in loop_tool_specs(False)]
    assert "executeCode" in [s.name for s in loop_tool_specs(True)]
    schema = loop_tool_specs(True)[-1].openai_schema()
    assert schema["type"] == "function" and schema["function"]["name"] == "executeCode"


def test_store_memory_requested_by_the_model_is_refused(toolbox):
    ctx = ToolContext.for_run([1], 7, settings())
    obs = toolbox.dispatch(ctx, call("store_memory", text="the user likes pumps"))
    assert ctx.records[0].status == "error" and "Unknown tool" in obs.text


@pytest.mark.slow  # starts the sandbox subprocess
def test_execute_code_runs_only_when_enabled(toolbox):
    off = ToolContext.for_run([1], 7, settings())
    assert toolbox.dispatch(off, call("executeCode", code="print(6*7)")).text.startswith("Unknown tool")
    on = ToolContext.for_run([1], 7, settings(**{"sandbox.enabled": True, "sandbox.timeout_s": 5}))
    obs = toolbox.dispatch(on, call("executeCode", code="print(6*7)"))
    assert obs.text.strip() == "42" and on.records[0].status == "ok"
    slow = toolbox.dispatch(on, call("executeCode", code="import time; time.sleep(30)"))
    assert "stopped" in slow.text


def test_execute_code_is_stopped_after_its_timeout(toolbox):
    ctx = ToolContext.for_run([1], 7, settings(**{"sandbox.enabled": True, "sandbox.timeout_s": 0.5}))
    obs = toolbox.dispatch(ctx, call("executeCode", code="while True: pass"))
    assert ctx.records[0].status == "error" and "0.5" in obs.text


def test_a_repeated_query_is_answered_from_dedupe(toolbox, retriever):
    ctx = ToolContext.for_run([1], 7, settings())
    first = toolbox.dispatch(ctx, call("searchDocs", query="DM-3000 pump flow"))
    again = toolbox.dispatch(ctx, call("searchDocs", query="  pump   FLOW dm-3000 "))  # same after normalising
    assert first.chunks and not again.chunks
    assert again.text.startswith("Already searched; try another angle or stop")
    assert ctx.dedupe_hits == 1 and ctx.records[1].status == "deduplicated"
    assert len(retriever.queries) == 1  # the backend was not asked twice
    # the same words through another tool are a different search
    toolbox.dispatch(ctx, call("keywordSearch", query="DM-3000 pump flow"))
    assert ctx.dedupe_hits == 1


def test_unknown_tool_and_malformed_arguments_give_one_error_observation_each(toolbox):
    ctx = ToolContext.for_run([1], 7, settings())
    unknown = toolbox.dispatch(ctx, call("deleteEverything", query="x"))
    bad_json = toolbox.dispatch(ctx, parse_tool_call("x", "searchDocs", "{not json"))  # the model client's parser
    wrong_type = toolbox.dispatch(ctx, call("searchDocs", query=["a", "list"]))
    missing = toolbox.dispatch(ctx, call("searchDocs", top_k=3))
    extra = toolbox.dispatch(ctx, call("searchDocs", query="pump", colour="red"))
    assert "Unknown tool" in unknown.text
    assert "not valid JSON" in bad_json.text
    assert "must be a string" in wrong_type.text
    assert "missing query" in missing.text
    assert "unexpected argument" in extra.text
    assert [r.status for r in ctx.records] == ["error"] * 5
    assert ctx.call_count == 5  # they count against the budget


def test_the_call_cap_refuses_further_calls(toolbox, retriever):
    ctx = ToolContext.for_run([1], 7, settings(**{"agentic.max_tool_calls": 2}))
    toolbox.dispatch(ctx, call("searchDocs", query="pump"))
    toolbox.dispatch(ctx, call("searchDocs", query="warranty"))
    refused = toolbox.dispatch(ctx, call("searchDocs", query="filter"))
    assert "budget exhausted" in refused.text and ctx.records[-1].status == "rejected"
    assert len(retriever.queries) == 2


def test_top_k_is_taken_from_settings_and_clamped(toolbox):
    ctx = ToolContext.for_run([1], 7, settings(**{"agentic.search_top_k": 2}))
    assert len(toolbox.dispatch(ctx, call("searchDocs", query="pump DM-3000 DM-4000")).chunks) == 2
    assert len(toolbox.dispatch(ctx, call("keywordSearch", query="pump", topK=1)).chunks) == 3
    assert ctx.records[-1].adjusted == ["top_k 1 -> 3 (agentic.search_top_k_min)"]


def test_a_models_top_k_is_raised_to_the_floor_and_cut_at_the_ceiling_of_the_settings(toolbox, retriever):
    """A small model copies the schema's minimum (top_k 1); the settings, not the model, decide the range."""
    ctx = ToolContext.for_run([1], 7, settings(**{"agentic.search_top_k_min": 2, "agentic.search_top_k_max": 4}))
    low = toolbox.dispatch(ctx, call("keywordSearch", query="pump", top_k=1))
    high = toolbox.dispatch(ctx, call("keywordSearch", query="DM-3000", top_k=50))
    fine = toolbox.dispatch(ctx, call("keywordSearch", query="filter", top_k=3))
    assert [r.args["top_k"] for r in ctx.records] == [2, 4, 3]
    assert [r.adjusted for r in ctx.records] == [["top_k 1 -> 2 (agentic.search_top_k_min)"],
                                                 ["top_k 50 -> 4 (agentic.search_top_k_max)"], []]
    assert len(low.chunks) == 2 and len(high.chunks) <= 4 and len(fine.chunks) <= 3
    assert [q for m, q in retriever.queries if m == "keyword_candidates"] == ["pump", "DM-3000", "filter"]


def test_union_keeps_first_seen_order_and_counts_duplicates(toolbox):
    ctx = ToolContext.for_run([1], 7, settings())
    first = toolbox.dispatch(ctx, call("searchDocs", query="DM-3000"))
    second = toolbox.dispatch(ctx, call("keywordSearch", query="DM-3000 filter"))
    assert ctx.records[1].duplicate_chunks >= 1
    union = ctx.union()
    assert [c.chunk_id for c in union][: len(first.chunks)] == [c.chunk_id for c in first.chunks]
    assert len({c.chunk_id for c in union}) == len(union)
    both = [c for c in union if len(c.found_by) == 2]
    assert both and set(both[0].found_by) == {"searchDocs", "keywordSearch"}
    assert second.new_chunk_ids == [c for c in second.new_chunk_ids if c not in {x.chunk_id for x in first.chunks}]


def test_context_is_thread_safe_under_parallel_calls(toolbox):
    ctx = ToolContext.for_run([1], 7, settings(**{"agentic.max_tool_calls": 100}))
    queries = [f"pump {i}" for i in range(40)]
    threads = [threading.Thread(target=toolbox.dispatch, args=(ctx, call("searchDocs", query=q))) for q in queries]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert ctx.call_count == 40 and len(ctx.records) == 40
    assert len(ctx.union()) == len({c.chunk_id for c in ctx.union()})


def test_a_closed_context_refuses_calls(toolbox, retriever):
    ctx = ToolContext.for_run([1], 7, settings())
    ctx.close()
    obs = toolbox.dispatch(ctx, call("searchDocs", query="pump"))
    assert ctx.records[0].status == "rejected" and not obs.chunks and not retriever.queries


def test_web_search_without_a_backend_is_unavailable_not_an_error(toolbox):
    ctx = ToolContext.for_run([1], 7, settings())
    obs = toolbox.dispatch(ctx, call("webSearch", query="latest pump news"))
    assert ctx.records[0].status == "unavailable" and not ctx.used_web and "unavailable" in obs.text.lower()
