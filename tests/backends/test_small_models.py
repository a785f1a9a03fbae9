"""Small local models through the agentic loop: printed tool calls are run, and the repair is in the events.

The model is the real ``OpenAIChatModel`` (real openai SDK) against the fake
Chat Completions server, which answers the way Qwen2.5-Coder 0.5B / 1.5B do
under ``llama-server --jinja``: the call printed in ``content``.
"""

from __future__ import annotations

import json

import pytest

from docmind_core.answer.agentic import AgenticPath
from docmind_core.backends.chat_openai import OpenAIChatModel
from docmind_core.engine import Engine
from docmind_core.events import AgenticStep, AnswerStarted, Done, Retrieved, event_from_dict, event_to_dict
from docmind_core.answer.grade import CragGrader
from docmind_core.values import Understanding
from docmind_core.answer.rule_planner import RulePlannerPath
from docmind_core.prompts import PromptLibrary
from docmind_core.reports.timeline import timeline
from docmind_core.answer.tools import ToolContext, Toolbox
from tests.agentic_world import CORPUS, FixtureRetriever, drain, make_refiner, settings
from tests.fakes.openai_server import call, printed, printed_calls, text, tool_calls
from tests.paths import ROOT

PROMPTS = PromptLibrary()


def run_loop(server, question: str):
    model = OpenAIChatModel(server.base_url, "", "qwen2.5-coder-1.5b", timeout_s=10, max_retries=0, prompts=PROMPTS)
    retriever = FixtureRetriever(CORPUS)
    toolbox, refiner, grader = Toolbox(retriever), make_refiner(), CragGrader()
    agent = AgenticPath(model, toolbox, refiner, grader, PROMPTS, RulePlannerPath(toolbox, refiner, grader))
    cfg = settings()
    ctx = ToolContext.for_run([1], 7, cfg)
    gen = agent.run(question, Understanding(rewritten_query=question), "pumps: product manuals", ctx)
    events, outcome = drain(gen)
    return events, outcome, ctx


@pytest.mark.parametrize("shape, repaired_from", [
    ("bare", "content_json"), ("fenced", "fenced_json"), ("tags", "tool_call_tags")])
def test_a_printed_call_runs_as_a_tool_call_and_the_repair_is_in_the_events(server, shape, repaired_from):
    server.script(printed_calls(printed("searchDocs", {"query": "DM-3000 flow rate", "kbIds": [2]}), shape=shape),
                  text("I have enough evidence."))
    events, outcome, ctx = run_loop(server, "What flow rate does the DM-3000 pump have?")

    assert outcome.stop_reason == "model_done" and outcome.rounds == 1 and not outcome.fell_back
    assert outcome.result.chunks[0].chunk_id == "a1"  # the printed search really ran
    [step] = [e for e in events if isinstance(e, AgenticStep)]
    [record] = step.tool_calls
    assert (record.name, record.args["query"], record.status, record.repaired_from) == (
        "searchDocs", "DM-3000 flow rate", "ok", repaired_from)
    assert "kbIds" not in record.args and not record.message  # dropped as undeclared, not scrubbed by the session
    assert step.thought == ""  # the printed JSON is not shown as the model's thought
    retrieved = next(e for e in events if isinstance(e, Retrieved))
    assert retrieved.tool_calls[0].repaired_from == repaired_from

    # The second request carries the call back as a real tool call, answered by its tool message.
    messages = server.requests[1]["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]
    sent = messages[2]["tool_calls"][0]
    assert sent["function"]["name"] == "searchDocs" and json.loads(sent["function"]["arguments"]) == {
        "query": "DM-3000 flow rate"}
    assert messages[3]["tool_call_id"] == sent["id"] and "40 litres" in messages[3]["content"]

    # The trace keeps it, and the timeline shows it.
    assert event_from_dict(json.loads(json.dumps(event_to_dict(step)))) == step
    rows = [r for r in timeline(events) if r.kind == "agentic_step"]
    assert rows[0].items[0]["repaired from"] == repaired_from


def test_a_real_tool_call_shows_no_repair_in_the_timeline(server):
    server.script(tool_calls(call("searchDocs", {"query": "DM-3000 flow rate"}, id="c1")), text("done"))
    events, outcome, _ = run_loop(server, "What flow rate does the DM-3000 pump have?")
    [step] = [e for e in events if isinstance(e, AgenticStep)]
    assert step.tool_calls[0].repaired_from == ""
    items = [item for row in timeline(events) if row.kind == "agentic_step" for item in row.items]
    assert items and all("repaired from" not in item for item in items)


def test_a_printed_call_to_an_undeclared_tool_is_not_run(server):
    server.script(printed_calls(printed("store_memory", {"text": "remember me"})))
    events, outcome, ctx = run_loop(server, "DM-3000 filter maintenance")
    assert not [e for e in events if isinstance(e, AgenticStep)]
    assert outcome.stop_reason == "model_done" and outcome.rounds == 0
    assert "store_memory" not in {r.name for r in outcome.tool_calls}


# --------------------------------------------------------------------------
# End to end: issue 12's run with Qwen2.5-Coder-1.5B, replayed through the fake server
# --------------------------------------------------------------------------

DEMO = ROOT / "data" / "demo"
COMPARISON = "Compare the maximum power draw of the Nimbus N1 and the Nimbus N2"
UNDERSTANDING = {"rewrittenQuery": "Nimbus N1 Nimbus N2 maximum power draw", "intent": "comparison",
                 "complexity": "MEDIUM", "specificity": "PRECISE", "scope": "knowledge_query",
                 "scopeConfidence": 0.9}
UNCITED_ANSWER = ("The Nimbus N1 has a maximum power draw of 28 W. "
                  "The Nimbus N2 has a maximum power draw of 45 W at full load.")


@pytest.fixture(scope="module")
def nimbus_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("small-model-home")
    engine = Engine.open(home, env={})
    kb = engine.create_kb("nimbus", description="Halcyon Data product documents")
    files = [DEMO / "pricing_comparison.html", DEMO / "nimbus_n2_datasheet.pdf", DEMO / "faq.md"]
    assert all(o.status == "added" for o in engine.ingest(kb.id, files))
    return home


def small_model_replies(request):
    """What Qwen2.5-Coder-1.5B under llama-server --jinja sent: calls printed as JSON, an answer without [n]."""
    if request.get("response_format"):
        return text(json.dumps(UNDERSTANDING))
    if request.get("tools"):
        rounds_so_far = sum(1 for m in request["messages"] if m["role"] == "assistant")
        if rounds_so_far == 0:
            return printed_calls(printed("searchDocs", {"query": "Nimbus N1 maximum power draw"}),
                                 printed("searchDocs", {"query": "Nimbus N2 maximum power draw"}))
        return text("I have enough evidence.")
    return text(UNCITED_ANSWER)


@pytest.mark.slow  # ingests a KB and runs a whole local-small-model answer
def test_a_local_small_model_run_uses_its_printed_calls_and_its_unmarked_answer_is_grounded(nimbus_home, server):
    server.respond_with(small_model_replies)
    engine = Engine.open(nimbus_home, env={})  # no API key: a local server needs none
    engine.config.set("llm.base_url", server.base_url)
    engine.config.set("llm.model", "qwen2.5-coder:1.5b")
    try:
        kb_id = engine.store.find_kb("nimbus").id
        events = list(engine.ask(COMPARISON, [kb_id], mode="agentic"))
    finally:
        engine.config.reset("llm.base_url")
        engine.config.reset("llm.model")
    done = events[-1]
    assert isinstance(done, Done) and done.backend.startswith("openai:qwen2.5-coder:1.5b")
    calls = [c for e in events if isinstance(e, AgenticStep) for c in e.tool_calls]
    assert [(c.name, c.repaired_from, c.status) for c in calls] == [("searchDocs", "content_json", "ok")] * 2
    assert done.answer == UNCITED_ANSWER and done.grade is not None and done.grade.tier.value == "HIGH"
    citations = done.citations
    assert citations.inferred_sentences == 2 and citations.coverage == 1.0
    assert all(u.inferred for u in citations.used_sources)
    assert {done.sources[u.index - 1].document for u in citations.used_sources} == {
        "pricing_comparison.html", "nimbus_n2_datasheet.pdf"}
    assert done.confidence is not None and done.confidence.band != "LOW" and done.confidence.score > 0.3


# --------------------------------------------------------------------------
# Issue 21: what the 1.5B printed, replayed through the fake server
# --------------------------------------------------------------------------

def _flood(*calls: tuple[str, dict], cut: str = '{"name": "keywordSearch", "arguments": {"query": "DM-30') -> str:
    """``<tools>`` blocks one after the other, ending in a call cut off by max_tokens (finish "length")."""
    blocks = "".join(f"<tools>\n{json.dumps(printed(name, args))}\n</tools>\n<tools></tools>\n"
                     for name, args in calls)
    return blocks + "<tools>\n" + cut


FLOOD_CALLS = [
    ("searchDocs", {"query": "DM-3000 flow rate", "top_k": 1}),
    ("keywordSearch", {"query": "DM-3000", "top_k": 1}),
    ("webSearch", {"query": "DM-3000 flow rate"}),
    ("recall_memory", {"query": "DM-3000"}),
    ("searchDocs", {"query": "dm-3000   FLOW rate", "top_k": 1}),  # the same search, written again
    ("searchDocs", {"query": "DM-3000 litres per minute", "top_k": 1}),
    ("keywordSearch", {"query": "DM-3000 pump"}),
]


class _NoMemories:
    """A memory store for a user who has stored nothing."""

    def list(self, user_id):
        return []

    def recall(self, user_id, query, top_k=5, min_similarity=0.3):
        return []

    def add(self, user_id, text, source=""):
        raise AssertionError("nothing is stored here")


def run_small(server, question: str = "What flow rate does the DM-3000 pump have?", **overrides):
    from docmind_core.backends.web_search import UnavailableWebSearch

    model = OpenAIChatModel(server.base_url, "", "qwen2.5-coder-1.5b", timeout_s=10, max_retries=0, prompts=PROMPTS)
    retriever = FixtureRetriever(CORPUS)
    toolbox = Toolbox(retriever, web=UnavailableWebSearch("set TAVILY_API_KEY"), memory=_NoMemories())
    refiner, grader = make_refiner(), CragGrader()
    agent = AgenticPath(model, toolbox, refiner, grader, PROMPTS, RulePlannerPath(toolbox, refiner, grader))
    ctx = ToolContext.for_run([1], 7, settings(**overrides))
    events, outcome = drain(agent.run(question, Understanding(rewritten_query=question), "pumps: product manuals",
                                      ctx))
    return events, outcome, ctx, retriever


def test_a_flood_runs_in_the_models_order_without_repeats_under_the_cap_and_only_offered_tools(server):
    """Issue 21: blocks for every tool until finish 'length'; the cap was applied in thread order."""
    from tests.fakes.openai_server import Reply

    server.script(Reply(content=_flood(*FLOOD_CALLS), finish_reason="length", usage=(600, 384)),
                  text("I have enough evidence."))
    events, outcome, ctx, retriever = run_small(server, **{"agentic.max_tool_calls": 3,
                                                           "agentic.stop_after_printed_call": False})
    [step] = [e for e in events if isinstance(e, AgenticStep)]
    # webSearch and recall_memory were not offered, so their blocks are not calls; the repeat is dropped;
    # the first three distinct calls run, in the printed order, and the fourth is past the cap
    assert [(r.name, r.args["query"], r.status) for r in step.tool_calls] == [
        ("searchDocs", "DM-3000 flow rate", "ok"), ("keywordSearch", "DM-3000", "ok"),
        ("searchDocs", "DM-3000 litres per minute", "ok")]
    assert (step.requested_calls, step.repeated_calls, step.over_cap_calls) == (5, 1, 1)
    assert sorted(q for _, q in retriever.queries) == ["DM-3000", "DM-3000 flow rate", "DM-3000 litres per minute"]
    assert step.thought == ""  # no leftover <tools></tools> pairs or cut-off JSON
    assert outcome.stop_reason == "max_tool_calls"
    assert all(r.repaired_from == "tools_tags" for r in step.tool_calls)

    assert step.offered_tools == ["searchDocs", "keywordSearch"]
    assert set(step.withheld_tools) == {"webSearch", "recall_memory"}
    request = server.requests[0]
    assert [t["function"]["name"] for t in request["tools"]] == ["searchDocs", "keywordSearch"]
    system = request["messages"][0]["content"]
    assert "searchDocs:" in system and "webSearch:" not in system and "recall_memory:" not in system

    [row] = [r for r in timeline(events) if r.kind == "agentic_step"]
    assert row.fields["offered tools"] == "searchDocs, keywordSearch"
    assert "webSearch (web search unavailable" in row.fields["not offered"]
    assert "recall_memory (the user has no memories)" in row.fields["not offered"]
    assert row.fields["calls asked"] == "5 (1 repeated, 1 past the cap: not run)"
    assert [item["repaired from"] for item in row.items] == ["tools_tags"] * 3


def test_a_tool_round_stops_after_the_first_printed_call(server):
    """The request carries stop sequences and the round's own max_tokens; the server cuts the flood there."""
    from tests.fakes.openai_server import Reply

    server.script(Reply(content=_flood(*FLOOD_CALLS), finish_reason="length"), text("I have enough evidence."))
    events, outcome, ctx, _ = run_small(server, **{"agentic.round_max_tokens": 96})
    first = server.requests[0]
    assert first["stop"] == ["</tools>", "</tool_call>", "</function>"] and first["max_tokens"] == 96
    [step] = [e for e in events if isinstance(e, AgenticStep)]
    assert [(r.name, r.args["query"]) for r in step.tool_calls] == [("searchDocs", "DM-3000 flow rate")]
    assert step.requested_calls == 1 and outcome.stop_reason == "model_done"
    assert server.requests[1]["stop"] == first["stop"]  # every tool round


def test_a_models_top_k_of_1_is_raised_to_the_floor_and_the_timeline_says_so(server):
    """Issue 21: the model copies the schema's minimum of 1 and retrieval returned one passage."""
    server.script(printed_calls(printed("searchDocs", {"query": "DM-3000 pump", "top_k": 1}), shape="tags"),
                  text("I have enough evidence."))
    events, outcome, ctx, _ = run_small(server, **{"agentic.search_top_k_min": 3})
    [step] = [e for e in events if isinstance(e, AgenticStep)]
    [record] = step.tool_calls
    assert record.args["top_k"] == 3 and record.result_count == 3
    assert record.adjusted == ["top_k 1 -> 3 (agentic.search_top_k_min)"]
    [row] = [r for r in timeline(events) if r.kind == "agentic_step"]
    assert row.items[0]["adjusted"] == "top_k 1 -> 3 (agentic.search_top_k_min)"


def test_the_compact_schema_offers_only_the_query(server):
    server.script(text("I have enough evidence."))
    run_small(server, **{"agentic.compact_tools": True})
    tools = {t["function"]["name"]: t["function"] for t in server.requests[0]["tools"]}
    assert set(tools) == {"searchDocs", "keywordSearch"}
    assert tools["searchDocs"]["parameters"] == {"type": "object", "properties": {"query": {"type": "string"}},
                                                 "required": ["query"]}
    assert len(tools["searchDocs"]["description"]) < 40
    system = server.requests[0]["messages"][0]["content"]
    full = PROMPTS.render("agentic_system", sandbox_section="")
    assert "searchDocs:" in system and "webSearch" not in system and len(system) < len(full) / 2


Q07 = "Nimbus 的默认管理地址是什么？"


def _english_rewrite(request):
    """The 1.5B's q07 run: the understanding rewrote the Chinese question into English; answers quote sources."""
    if request.get("response_format"):
        return text(json.dumps({"rewrittenQuery": "What is the default management address of Nimbus?",
                                "intent": "factoid", "complexity": "SIMPLE", "specificity": "BROAD",
                                "scope": "knowledge_query", "scopeConfidence": 0.9}))
    sources = request["messages"][-1]["content"]
    return text("默认管理地址是 192.168.50.1 [1]。" if "192.168.50.1" in sources else "资料中没有提到。")


@pytest.fixture(scope="module")
def manual_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("small-model-zh")
    engine = Engine.open(home, env={})
    kb = engine.create_kb("nimbus", description="Halcyon Data product documents")
    files = [DEMO / "nimbus_manual_zh.docx", DEMO / "pricing_comparison.html", DEMO / "nimbus_n2_datasheet.pdf",
             DEMO / "faq.md", DEMO / "release_notes.md"]
    assert all(o.status == "added" for o in engine.ingest(kb.id, files))
    return home


@pytest.mark.slow  # ingests a KB and runs a whole answer
def test_a_rewrite_into_english_is_discarded_and_rule_mode_finds_the_chinese_manual(manual_home, server):
    server.respond_with(_english_rewrite)
    engine = Engine.open(manual_home, env={})
    engine.config.set("llm.base_url", server.base_url)
    engine.config.set("llm.model", "qwen2.5-coder-1.5b-instruct")
    try:
        kb_id = engine.store.find_kb("nimbus").id
        events = list(engine.ask(Q07, [kb_id], mode="rule"))
    finally:
        engine.config.reset("llm.base_url")
        engine.config.reset("llm.model")
    from docmind_core.events import Understood

    [understood] = [e for e in events if isinstance(e, Understood)]
    assert understood.via == "model" and understood.understanding.rewritten_query == Q07
    assert "switched from Chinese to English" in understood.note
    done = events[-1]
    assert isinstance(done, Done) and "192.168.50.1" in done.answer
    assert done.sources[0].document == "nimbus_manual_zh.docx"
    assert "time per stage" in [r for r in timeline(events) if r.kind == "done"][0].fields


@pytest.mark.slow  # runs a whole answer over an ingested KB
@pytest.mark.parametrize("profile, compact", [("local_small", True), ("default", False)])
def test_local_small_sends_the_short_answer_instructions_with_the_same_evidence(manual_home, server, profile,
                                                                                compact):
    server.respond_with(_english_rewrite)
    engine = Engine.open(manual_home, env={})
    engine.config.set_many({"llm.base_url": server.base_url, "llm.model": "qwen2.5-coder-1.5b-instruct",
                            "llm.profile": profile, "grader.judge": "off"}, by="test")
    try:
        events = list(engine.ask(Q07, [engine.store.find_kb("nimbus").id], mode="rule"))
    finally:
        for key in ("llm.base_url", "llm.model", "llm.profile", "grader.judge"):
            engine.config.reset(key)
    [template] = [e.prompt for e in events if isinstance(e, AnswerStarted)]  # the logical name either way
    assert template in ("knowledge_qa", "low_confidence")
    [answer] = [r for r in server.requests if not r.get("response_format")]
    system, user = answer["messages"][0]["content"], answer["messages"][-1]["content"]
    short, full = (PROMPTS.render_messages(name, sources="", question="", memories="",
                                           language="Chinese (简体中文)")[0]["content"]
                   for name in (f"{template}_compact", template))
    assert system == (short if compact else full) and len(short) < len(full) / 2
    assert ("Remembered about the user" in user) is compact
    assert "192.168.50.1" in user and user.rstrip().endswith(Q07)  # the evidence and question are the same
    done = events[-1]
    assert isinstance(done, Done) and "192.168.50.1" in done.answer


def test_a_server_that_refuses_stop_sequences_is_asked_again_without_them(server):
    from tests.fakes.openai_server import status

    def refuses_stop(request):
        if "stop" in request:
            return status(400, "Unsupported parameter: 'stop' is not supported with this model.")
        if any(m["role"] == "assistant" for m in request["messages"]):
            return text("I have enough evidence.")
        return printed_calls(printed("searchDocs", {"query": "DM-3000 flow rate"}), shape="tags")

    server.respond_with(refuses_stop)
    events, outcome, _, _ = run_small(server)
    assert [("stop" in r) for r in server.requests[:2]] == [True, False]
    assert outcome.stop_reason == "model_done" and [c.name for c in outcome.tool_calls] == ["searchDocs"]


def test_the_question_is_searched_after_the_loop_when_the_model_never_did(server):
    """Under local_small the model's queries only add to a search of the question as asked."""
    question = "How often is the DM-3000 filter cleaned?"
    server.script(printed_calls(printed("searchDocs", {"query": "DM-4000 litres"}), shape="tags"),
                  text("I have enough evidence."))
    events, outcome, ctx, retriever = run_small(server, question, **{"agentic.search_question": True})
    assert [(r.name, r.args["query"]) for r in outcome.tool_calls] == [("searchDocs", "DM-4000 litres"),
                                                                       ("searchDocs", question)]
    assert "agentic.search_question" in outcome.tool_calls[-1].message
    assert "a3" in {c.chunk_id for c in outcome.result.candidates}  # the filter passage: only the question finds it
    retrieval = [r for r in timeline(events) if r.kind == "retrieval"][0]
    assert [item["args"] for item in retrieval.items] == [json.dumps({"query": question, "top_k": 8})]


def test_a_question_the_model_searched_itself_is_not_searched_again(server):
    question = "DM-3000 flow rate"
    server.script(printed_calls(printed("searchDocs", {"query": "dm-3000  flow rate"}), shape="tags"),
                  text("I have enough evidence."))
    _, outcome, _, _ = run_small(server, question, **{"agentic.search_question": True})
    assert [r.args["query"] for r in outcome.tool_calls] == ["dm-3000  flow rate"]
