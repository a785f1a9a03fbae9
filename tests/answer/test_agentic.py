"""The agentic loop in-process (scripted model) and through the real openai SDK against a fake server."""

from __future__ import annotations

import threading
import time

import pytest

from docmind_core.answer.agentic import AgenticPath, expanded_rerank_query
from docmind_core.answer.rule_planner import RulePlannerPath
from docmind_core.backends.web_search import TavilyWebSearch
from docmind_core.events import AgenticStep, ErrorRaised, Fallback, Retrieved
from docmind_core.answer.grade import CragGrader
from docmind_core.values import Mode, StageScores, Understanding
from docmind_core.prompts import PromptLibrary
from docmind_core.text.tokens import count_tokens
from docmind_core.answer.tools import ToolContext, Toolbox
from tests.agentic_world import CORPUS, FixtureRetriever, ScriptedModel, chunk, drain, make_refiner, settings
from tests.fakes.tavily_server import FakeTavilyServer, result

PROMPTS = PromptLibrary()


class RecordingMemory:
    def __init__(self):
        self.added: list[tuple] = []

    def add(self, user_id, text, source):
        self.added.append((user_id, text, source))

    def recall(self, user_id, query, top_k, min_similarity):
        return []


def build(model, retriever=None, web=None, memory=None):
    retriever = retriever or FixtureRetriever(CORPUS)
    toolbox = Toolbox(retriever, web=web, memory=memory)
    refiner, grader = make_refiner(), CragGrader()
    rule_planner = RulePlannerPath(toolbox, refiner, grader)
    return AgenticPath(model, toolbox, refiner, grader, PROMPTS, rule_planner), retriever


def run(agent, question, cfg=None, cancel=None, kb_ids=(1,)):
    cfg = cfg or settings()
    ctx = ToolContext.for_run(list(kb_ids), 7, cfg, cancel=cancel)
    events, outcome = drain(agent.run(question, Understanding(rewritten_query=question), "pumps: product manuals",
                                        ctx))
    return events, outcome, ctx


_PREEXISTING: set[threading.Thread] = set()


@pytest.fixture(autouse=True)
def _threads_before_the_test():
    """Threads alive when a test starts are not its own: an earlier test's stand-in tool may still be sleeping."""
    _PREEXISTING.clear()
    _PREEXISTING.update(threading.enumerate())
    yield


def round_threads() -> list[threading.Thread]:
    """Round and tool threads this test started that are still alive."""
    return [t for t in threading.enumerate()
            if t not in _PREEXISTING and t.name.startswith(("docmind-agent-round", "docmind-tool"))]


def test_one_tool_round_then_no_tool_call_runs_exactly_one_round_and_clears_the_context():
    model = ScriptedModel(rounds=[[("searchDocs", {"query": "DM-3000 flow rate"})]])
    agent, _ = build(model)
    events, outcome, ctx = run(agent, "What flow rate does the DM-3000 pump have?")
    steps = [e for e in events if isinstance(e, AgenticStep)]
    assert len(steps) == 1 and steps[0].iteration == 1 and steps[0].max_iterations == 4
    assert steps[0].tool_calls[0].name == "searchDocs" and steps[0].tool_calls[0].result_count > 0
    assert steps[0].new_chunks > 0
    assert outcome.stop_reason == "model_done" and outcome.rounds == 1 and outcome.mode is Mode.AGENTIC
    assert len(model.transcripts) == 2  # asked twice: one tool round, then "done"
    assert outcome.result.chunks[0].chunk_id == "a1"
    assert ctx.closed and ctx.stop.is_set()  # the run's tool context is cleared
    assert not round_threads()


def test_transcript_carries_openai_tool_messages():
    seen = {}

    class Peek(ScriptedModel):
        def agent_turn(self, transcript, tools, meter, timeout_s):
            seen["messages"] = [dict(m) for m in transcript.messages]
            seen["rounds"] = len(transcript.rounds)
            return super().agent_turn(transcript, tools, meter, timeout_s)

    agent, _ = build(Peek(rounds=[[("searchDocs", {"query": "DM-3000"}), ("keywordSearch", {"query": "v2.4.1"})]]))
    run(agent, "Which firmware does the DM-3000 need?")
    roles = [m["role"] for m in seen["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "tool"] and seen["rounds"] == 1
    assert "executeCode" not in seen["messages"][0]["content"]
    assert "Question: Which firmware" in seen["messages"][1]["content"] and "pumps" in seen["messages"][1]["content"]
    ids = [c["id"] for c in seen["messages"][2]["tool_calls"]]
    assert [m["tool_call_id"] for m in seen["messages"][3:]] == ids


def test_a_model_that_always_calls_tools_stops_at_max_iterations():
    model = ScriptedModel(rounds=[[("searchDocs", {"query": "pump"})]], repeat_last=True)
    agent, _ = build(model)
    events, outcome, _ = run(agent, "Tell me about pumps", settings(**{"agentic.max_iterations": 3}))
    assert [e.iteration for e in events if isinstance(e, AgenticStep)] == [1, 2, 3]
    assert outcome.stop_reason == "max_iterations" and outcome.rounds == 3
    retrieved = [e for e in events if isinstance(e, Retrieved)][0]
    assert retrieved.stop_reason == "max_iterations" and retrieved.rounds == 3 and retrieved.mode is Mode.AGENTIC


def test_the_tool_call_cap_ends_the_loop():
    model = ScriptedModel(rounds=[[("searchDocs", {"query": "pump a"}), ("searchDocs", {"query": "pump b"})]],
                          repeat_last=True)
    agent, _ = build(model)
    _, outcome, ctx = run(agent, "pumps", settings(**{"agentic.max_tool_calls": 3}))
    assert outcome.stop_reason == "max_tool_calls" and ctx.call_count == 3


def test_a_slow_model_hits_the_round_timeout_and_still_gets_an_answer():
    model = ScriptedModel(rounds=[[("searchDocs", {"query": "pump"})]], delay_s=6.0)
    agent, _ = build(model)
    t0 = time.perf_counter()
    events, outcome, _ = run(agent, "DM-4000 pump flow",
                             settings(**{"agentic.iteration_timeout_ms": 300, "agentic.total_timeout_ms": 5000}))
    assert time.perf_counter() - t0 < 4.0
    assert outcome.stop_reason == "iteration_timeout"
    assert outcome.fell_back and outcome.result.chunks  # nothing gathered → one-shot fallback
    assert any(isinstance(e, Fallback) for e in events)
    assert not round_threads(), "a round thread outlived run()"


def test_a_slow_model_hits_the_total_timeout():
    model = ScriptedModel(rounds=[[("searchDocs", {"query": "pump"})]], repeat_last=True, delay_s=0.25)
    agent, _ = build(model)
    t0 = time.perf_counter()
    _, outcome, _ = run(agent, "DM-4000 pump flow", settings(**{
        "agentic.iteration_timeout_ms": 2000, "agentic.total_timeout_ms": 650, "agentic.max_iterations": 10}))
    assert time.perf_counter() - t0 < 2.0
    assert outcome.stop_reason == "total_timeout"
    assert 1 <= outcome.rounds <= 3 and not outcome.fell_back and outcome.result.chunks
    assert not round_threads()


def test_an_exception_in_a_tool_falls_back_to_one_shot():
    retriever = FixtureRetriever(CORPUS)
    retriever.fail = {"candidates"}  # searchDocs breaks; keyword search still works
    agent, _ = build(ScriptedModel(rounds=[[("searchDocs", {"query": "warranty claims"})]]), retriever)
    events, outcome, _ = run(agent, "How long do I have for warranty claims?")
    fallback = [e for e in events if isinstance(e, Fallback)]
    assert fallback and fallback[0].to == "RULE_PLANNER" and "searchDocs failed" in fallback[0].reason
    assert outcome.fell_back and outcome.stop_reason == "error" and outcome.mode is Mode.RULE_PLANNER
    assert outcome.result.chunks and outcome.result.chunks[0].chunk_id == "a6"
    kinds = [e.kind for e in events]
    assert kinds.index("fallback") < kinds.index("retrieval")


class TimingOutRetriever(FixtureRetriever):
    def _search(self, method, query, kb_ids, top_k):
        if method == "candidates" and not getattr(self, "timed_out", False):
            self.timed_out = True
            raise TimeoutError("vector search timed out")
        return super()._search(method, query, kb_ids, top_k)


def test_a_tool_that_times_out_is_not_blamed_on_the_language_model():
    """Only a model that stalled is shut off for the run; a search backend's timeout is the tool's failure."""
    agent, _ = build(ScriptedModel(rounds=[[("searchDocs", {"query": "warranty claims"})]]),
                     TimingOutRetriever(CORPUS))
    events, outcome, _ = run(agent, "How long do I have for warranty claims?")
    assert outcome.fell_back and outcome.mode is Mode.RULE_PLANNER
    errors = [e.message for e in events if isinstance(e, ErrorRaised)]
    assert not any("language model timed out" in m for m in errors), errors


def test_an_exception_in_the_model_falls_back_to_one_shot():
    agent, _ = build(ScriptedModel(raise_on_round=1))
    events, outcome, _ = run(agent, "DM-3000 filter maintenance")
    assert outcome.fell_back and outcome.result.chunks
    assert "model endpoint exploded" in [e for e in events if isinstance(e, Fallback)][0].reason


def test_a_model_asking_for_another_kb_gets_the_session_kbs_only():
    model = ScriptedModel(rounds=[[("searchDocs", {"query": "zephyr roadmap DM-5000", "kbIds": [2]})]])
    agent, retriever = build(model)
    _, outcome, ctx = run(agent, "What is on the zephyr roadmap?")
    assert retriever.seen_kb_ids and all(ids == [1] for ids in retriever.seen_kb_ids)
    assert all(c.kb_id == 1 for c in outcome.result.candidates if c.origin == "kb")
    assert "overridden" in ctx.records[0].message


def test_store_memory_is_never_offered_nor_called():
    memory = RecordingMemory()
    model = ScriptedModel(rounds=[[("store_memory", {"text": "remember this"}), ("searchDocs", {"query": "pump"})]])
    agent, _ = build(model, memory=memory)
    _, outcome, ctx = run(agent, "pumps")
    assert all("store_memory" not in names and "kb_meta" not in names for names in model.seen_tools)
    assert all("executeCode" not in names for names in model.seen_tools)
    assert memory.added == []
    assert ctx.records[0].status == "error" and "unknown tool" in ctx.records[0].message


def test_execute_code_is_offered_when_the_sandbox_is_on():
    model = ScriptedModel(rounds=[[("executeCode", {"code": "print(40 * 60)"})]])
    agent, _ = build(model)
    _, outcome, ctx = run(agent, "DM-3000 litres per hour", settings(**{"sandbox.enabled": True}))
    assert "executeCode" in model.seen_tools[0]
    assert ctx.records[0].status == "ok"


def test_a_repeated_query_is_answered_from_dedupe():
    model = ScriptedModel(rounds=[[("searchDocs", {"query": "DM-3000 filter"})],
                                  [("searchDocs", {"query": "filter DM-3000"})]])
    agent, retriever = build(model)
    events, outcome, _ = run(agent, "How often is the DM-3000 filter cleaned?")
    steps = [e for e in events if isinstance(e, AgenticStep)]
    assert steps[1].tool_calls[0].status == "deduplicated"
    assert outcome.dedupe_hits == 1 and len([q for q in retriever.queries if q[0] == "candidates"]) == 1


def test_union_rerank_orders_by_the_reranker_not_raw_scores():
    """A KB hit with raw score 0.4 beats a web hit with raw score 1.0 when the reranker says so."""
    kb_hit = chunk("k1", "DM-3000 pump flow rate is 40 litres per minute.", 1, "pumps.md")

    class RawScoreRetriever(FixtureRetriever):
        def candidates(self, query, kb_ids, settings, doc_ids=None):
            return [kb_hit.model_copy(update={"scores": StageScores(vector=0.4, fused=0.4)})]

    with FakeTavilyServer(api_key="tvly-test") as tavily:
        tavily.default_results = [result("Gardening", "https://garden.example/roses",
                                         "Roses need six hours of sun.", score=1.0)]
        web = TavilyWebSearch("tvly-test", base_url=tavily.base_url, timeout_s=5)
        model = ScriptedModel(rounds=[[("searchDocs", {"query": "DM-3000 flow rate"}),
                                       ("webSearch", {"query": "DM-3000 flow rate"})]])
        agent, _ = build(model, RawScoreRetriever(CORPUS), web=web)
        events, outcome, _ = run(agent, "DM-3000 pump flow rate litres per minute")
    union = [c for c in outcome.result.candidates]
    assert {c.origin for c in union} == {"kb", "web"}
    ranked = sorted(union, key=lambda c: -(c.scores.rerank or 0))
    assert ranked[0].chunk_id == "k1" and outcome.result.chunks[0].chunk_id == "k1"
    web_chunk = [c for c in union if c.origin == "web"][0]
    assert web_chunk.scores.rerank < ranked[0].scores.rerank  # Tavily's own 1.0 counted for nothing
    # the loop already used the web, so no second web round
    assert not outcome.web_compensated and len(tavily.requests) == 1


def test_the_context_never_exceeds_the_token_budget():
    long_corpus = [chunk(f"p{i}", ("pump maintenance schedule DM-3000 " * 40) + str(i), 1, f"doc{i}.md")
                   for i in range(12)]
    model = ScriptedModel(rounds=[[("searchDocs", {"query": "pump maintenance"}),
                                   ("keywordSearch", {"query": "DM-3000 schedule"})]])
    agent, _ = build(model, FixtureRetriever(long_corpus))
    cfg = settings(**{"rag.context_max_tokens": 150})
    _, outcome, _ = run(agent, "DM-3000 pump maintenance schedule", cfg)
    assert outcome.result.chunks
    assert sum(count_tokens(c.text) for c in outcome.result.chunks) <= 150


def test_event_order_is_agentic_steps_then_retrieval_rerank_grader():
    model = ScriptedModel(rounds=[[("searchDocs", {"query": "Kiss and Tell Corliss Archer"})],
                                  [("searchDocs", {"query": "Shirley Temple government position"})]])
    agent, _ = build(model)
    events, outcome, _ = run(agent, "What government position was held by the actress who played Corliss Archer?")
    kinds = [e.kind for e in events]
    assert kinds[:6] == ["agentic_step", "agentic_step", "retrieval", "rerank", "grader", "web_compensation"]
    assert {c.chunk_id for c in outcome.result.chunks} >= {"a4", "a5"}


@pytest.mark.slow  # a cancelled run waits out the round worker's 3 s join grace (agentic._JOIN_GRACE_S)
def test_cancel_stops_the_loop_without_leaving_threads():
    cancel = threading.Event()
    model = ScriptedModel(rounds=[[("searchDocs", {"query": "pump"})]], delay_s=5.0)
    agent, _ = build(model)
    threading.Timer(0.2, cancel.set).start()
    t0 = time.perf_counter()
    events, outcome, _ = run(agent, "pump", cancel=cancel)
    assert time.perf_counter() - t0 < 4.0
    assert outcome.stop_reason == "cancelled" and not outcome.result.chunks
    assert [e.kind for e in events] == ["retrieval"]


def test_expanded_rerank_query_adds_only_hop_queries():
    ctx = ToolContext.for_run([1], 7, settings())
    agent, _ = build(ScriptedModel())
    agent.toolbox.dispatch(ctx, _req("searchDocs", "Corliss Archer Kiss and Tell"))
    agent.toolbox.dispatch(ctx, _req("searchDocs", "Shirley Temple government"))
    q = "Which government position did the actress playing Corliss Archer in Kiss and Tell hold?"
    assert expanded_rerank_query(q, ctx) == q + " Shirley Temple government"


def _req(name, query):
    from docmind_core.backends.protocols import ToolCallRequest

    return ToolCallRequest(id=query, name=name, arguments={"query": query})


# --------------------------------------------------------------------------
# The same loop through the real openai SDK against a local fake server
# --------------------------------------------------------------------------

from tests.fakes.openai_server import FakeOpenAIServer, call, status, text, tool_calls  # noqa: E402


@pytest.fixture
def fake_openai():
    with FakeOpenAIServer() as server:
        yield server


def openai_model(server, timeout_s=10.0):
    from docmind_core.backends.chat_openai import OpenAIChatModel

    return OpenAIChatModel(server.base_url, "test-key", "fake-model", timeout_s=timeout_s, max_retries=0,
                           prompts=PROMPTS)


def test_sdk_tool_call_then_answer_runs_one_round_with_session_kbs(fake_openai):
    fake_openai.script(tool_calls(call("searchDocs", {"query": "DM-3000 flow rate", "kbIds": [2]}, id="call_1")),
                       text("I have enough evidence."))
    agent, retriever = build(openai_model(fake_openai))
    events, outcome, ctx = run(agent, "What flow rate does the DM-3000 pump have?")
    assert outcome.stop_reason == "model_done" and outcome.rounds == 1 and not outcome.fell_back
    assert all(ids == [1] for ids in retriever.seen_kb_ids)
    first, second = fake_openai.requests
    offered = [t["function"]["name"] for t in first["tools"]]
    assert offered == ["searchDocs", "keywordSearch"]  # this world has no web backend and no memory
    roles = [m["role"] for m in second["messages"]]
    assert roles == ["system", "user", "assistant", "tool"]
    assert second["messages"][2]["tool_calls"][0]["id"] == "call_1"
    assert second["messages"][3]["tool_call_id"] == "call_1" and "40 litres" in second["messages"][3]["content"]
    assert ctx.closed and outcome.result.chunks[0].chunk_id == "a1"


def test_sdk_malformed_arguments_become_an_error_observation(fake_openai):
    fake_openai.script(tool_calls(call("searchDocs", "{not json", id="bad")),
                       tool_calls(call("keywordSearch", {"query": "warranty"}, id="good")),
                       text("done"))
    agent, _ = build(openai_model(fake_openai))
    events, outcome, ctx = run(agent, "warranty period")
    assert outcome.stop_reason == "model_done" and outcome.rounds == 2
    assert ctx.records[0].status == "error"
    tool_msg = fake_openai.requests[1]["messages"][-1]
    assert tool_msg["tool_call_id"] == "bad" and "Invalid arguments" in tool_msg["content"]
    assert outcome.result.chunks[0].chunk_id == "a6"


def test_sdk_slow_model_hits_the_round_timeout_and_falls_back(fake_openai):
    fake_openai.always(text("too late", delay=6.0))
    agent, _ = build(openai_model(fake_openai))
    t0 = time.perf_counter()
    events, outcome, _ = run(agent, "DM-4000 pump", settings(**{"agentic.iteration_timeout_ms": 400}))
    assert time.perf_counter() - t0 < 4.0  # well before the model's reply: the loop stopped waiting
    assert outcome.stop_reason == "iteration_timeout" and outcome.fell_back and outcome.result.chunks
    assert not round_threads()


def test_sdk_server_error_falls_back_to_one_shot(fake_openai):
    fake_openai.always(status(500, "boom"))
    agent, _ = build(openai_model(fake_openai))
    events, outcome, _ = run(agent, "DM-3000 filter maintenance")
    assert outcome.fell_back and outcome.stop_reason == "error" and outcome.result.chunks
    assert [e.kind for e in events][:2] == ["fallback", "retrieval"]


@pytest.mark.slow  # waits out a real deadline or runs the docmind command: make test only
def test_sdk_retries_fit_inside_the_round(fake_openai):
    """With retries on, every attempt ends by the round deadline, so no thread outlives run()."""
    from docmind_core.backends.chat_openai import OpenAIChatModel

    fake_openai.always(text("too late", delay=3.0))
    model = OpenAIChatModel(fake_openai.base_url, "test-key", "fake-model", timeout_s=10, max_retries=2,
                            prompts=PROMPTS, retry_backoff_s=0.01)
    agent, _ = build(model)
    _, outcome, _ = run(agent, "DM-4000 pump", settings(**{"agentic.iteration_timeout_ms": 900}))
    assert outcome.stop_reason == "iteration_timeout" and outcome.result.chunks
    assert not round_threads()
