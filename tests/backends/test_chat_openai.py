"""OpenAIChatModel with the real openai SDK against the fake Chat Completions server."""

from __future__ import annotations

import json
import threading
import time

import pytest

from docmind_core.backends.chat_openai import OpenAIChatModel
from docmind_core.backends.openai_parsing import parse_tool_call
from docmind_core.backends.protocols import (
    AgentTranscript,
    AnswerPrompt,
    LanguageModel,
    ToolSpec,
    UnderstandingRequest,
    UsageMeter,
)
from docmind_core.deadline import RunGuard
from docmind_core.errors import BackendUnavailable, EmptyReply, IncompleteReply, ModelCallCut, ModelOutputError
from docmind_core.values import Complexity, Intent, Scope
from tests.fakes.openai_server import (
    call,
    cut_stream,
    empty_stream,
    printed,
    printed_calls,
    printed_content,
    status,
    text,
    tool_calls,
    trickle,
    truncated,
)

SEARCH = ToolSpec("searchDocs", "Semantic search over the selected knowledge bases",
                  {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]})


def model(server, **kw) -> OpenAIChatModel:
    options = dict(timeout_s=5, max_retries=2, temperature=0.2, retry_backoff_s=0.01)
    options.update(kw)
    return OpenAIChatModel(server.base_url, "test-key", "fake-model", **options)


def understanding_request(question="DM-3000 续航") -> UnderstandingRequest:
    return UnderstandingRequest(question=question, history=[], kb_brief="",
                                messages=[{"role": "system", "content": "json"}, {"role": "user", "content": question}])


def answer_prompt() -> AnswerPrompt:
    return AnswerPrompt(template="knowledge_qa", question="q", sources=[],
                        messages=[{"role": "system", "content": "s"}, {"role": "user", "content": "q"}])


def transcript() -> AgentTranscript:
    return AgentTranscript(question="q", rewritten_query="q", kb_brief="",
                           messages=[{"role": "system", "content": "s"}, {"role": "user", "content": "q"}])


def test_implements_the_protocol_and_reports_status(server):
    m = model(server)
    assert isinstance(m, LanguageModel)
    status_ = m.status()
    assert status_.live and status_.role == "llm"
    assert status_.name == m.name == f"openai:fake-model@127.0.0.1:{server.base_url.split(':')[2].split('/')[0]}"


def test_understand_non_streaming_json(server):
    server.script(text(json.dumps({"rewrittenQuery": "DM-3000 电池续航", "intent": "Comparison",
                                   "complexity": "medium", "scope": "knowledge_query", "scopeConfidence": 1.4,
                                   "timeAware": "true", "memoryWriteHints": "likes tea"}), usage=(40, 11)))
    meter = UsageMeter()
    u = model(server).understand(understanding_request(), meter)
    assert u.rewritten_query == "DM-3000 电池续航"
    assert (u.intent, u.complexity, u.scope) == (Intent.COMPARISON, Complexity.MEDIUM, Scope.KNOWLEDGE_QUERY)
    assert u.time_aware is True and u.scope_confidence == 1.0 and u.memory_write_hints == ["likes tea"]
    assert server.requests[0]["response_format"] == {"type": "json_object"}
    assert server.requests[0]["model"] == "fake-model"
    [call_] = meter.calls
    assert (call_.purpose, call_.prompt_tokens, call_.completion_tokens, call_.ok) == ("understanding", 40, 11, True)
    assert call_.latency_ms > 0


def test_understand_accepts_a_fenced_reply(server):
    server.script(text('```json\n{"rewrittenQuery": "x", "intent": "factoid", "complexity": "SIMPLE"}\n```'))
    assert model(server).understand(understanding_request(), UsageMeter()).rewritten_query == "x"


@pytest.mark.parametrize("content", [
    "Sure! The query is about batteries.",
    '{"rewrittenQuery": "x", "intent": "factoid"}',  # complexity missing
    '{"rewrittenQuery": "x", "intent": "factoid", "complexity": "HUGE"}',
    '{"rewrittenQuery": "x", "intent": ',
])
def test_invalid_json_raises_model_output_error(server, content):
    server.script(text(content))
    with pytest.raises(ModelOutputError):
        model(server).understand(understanding_request(), UsageMeter())


def test_500_then_success_is_retried(server):
    server.script(status(500, "overloaded"), status(503, "busy"), text("Answer text [1]."))
    meter = UsageMeter()
    pieces = list(model(server).stream_answer(answer_prompt(), meter))
    assert "".join(pieces) == "Answer text [1]."
    assert len(server.requests) == 3
    assert [c.ok for c in meter.calls] == [True]


def test_retries_are_bounded_and_reported(server):
    server.always(status(500, "down"))
    meter = UsageMeter()
    with pytest.raises(BackendUnavailable, match=r"HTTP 500.*down.*after 3 attempts"):
        model(server, max_retries=2).understand(understanding_request(), meter)
    assert len(server.requests) == 3
    assert meter.calls[-1].ok is False and "500" in meter.calls[-1].error


@pytest.mark.parametrize("code, message", [(401, "the endpoint refused the API key"), (400, "HTTP 400")])
def test_non_transient_errors_are_not_retried(server, code, message):
    server.always(status(code, "nope"))
    with pytest.raises(BackendUnavailable, match=message):
        model(server).understand(understanding_request(), UsageMeter())
    assert len(server.requests) == 1


@pytest.mark.slow  # waits out a real deadline or runs the docmind command: make test only
def test_timeout_raises_quickly_and_is_reported(server):
    server.always(text("too late", delay=3))
    meter = UsageMeter()
    started = time.perf_counter()
    with pytest.raises(BackendUnavailable, match="timeout"):
        model(server, timeout_s=1, max_retries=0).understand(understanding_request(), meter)
    assert time.perf_counter() - started < 2.5
    assert meter.calls[-1].ok is False and "timeout" in meter.calls[-1].error


def guard_for(seconds: float, retrieval_seconds: float | None = None) -> RunGuard:
    now = time.monotonic()
    return RunGuard(deadline_s=now + seconds, retrieval_deadline_s=now + (retrieval_seconds or seconds))


def wait_for_drop(server, within_s: float = 5.0) -> bool:
    """The fake server saw the client hang up (its next trickled byte failed to send)."""
    end = time.monotonic() + within_s
    while server.dropped == 0 and time.monotonic() < end:
        time.sleep(0.05)
    return server.dropped > 0


@pytest.mark.slow  # waits out a real deadline or runs the docmind command: make test only
def test_a_trickled_reply_is_cut_by_the_clock_and_its_connection_closed(server):
    server.always(trickle(text('{"rewrittenQuery": "x"}'), interval=0.2))  # every byte restarts a read timeout
    meter = UsageMeter()
    started = time.monotonic()
    with pytest.raises(ModelCallCut, match=r"cut after 1\.0s by llm.timeout_s"):
        model(server, timeout_s=1, max_retries=0).understand(understanding_request(), meter)
    assert time.monotonic() - started < 3
    assert [(c.ok, "cut after" in c.error) for c in meter.calls] == [(False, True)]
    assert wait_for_drop(server)


@pytest.mark.slow  # waits out a real deadline or runs the docmind command: make test only
def test_a_trickled_stream_is_cut_at_the_run_deadline_and_opens_the_breaker(server):
    # the first chunks arrive at once, then one byte every 0.1 s
    server.always(trickle(text("A long answer that arrives one byte at a time."), interval=0.1, head=600))
    guard = guard_for(1.5)
    meter = UsageMeter()
    received: list[str] = []
    started = time.monotonic()
    with pytest.raises(ModelCallCut, match=r"run\.deadline_ms\) while the answer was streaming"):
        for piece in model(server).for_run(guard).stream_answer(answer_prompt(), meter):
            received.append(piece)
    assert time.monotonic() - started < 4.5
    assert received  # some text streamed before the cut: the cut is in mid-stream, not at the start
    assert not guard.usable("llm") and "cut" in guard.breaker.reason("llm")
    assert meter.calls[-1].ok is False and "cut after" in meter.calls[-1].error
    assert wait_for_drop(server)


def test_an_empty_stream_is_an_empty_reply(server):
    server.script(empty_stream())
    meter = UsageMeter()
    with pytest.raises(EmptyReply, match="without any answer text"):
        list(model(server).stream_answer(answer_prompt(), meter))
    assert meter.calls[-1].ok is False


def test_a_stream_without_finish_reason_is_incomplete_after_its_text(server):
    server.script(cut_stream("The pump runs"))
    received: list[str] = []
    with pytest.raises(IncompleteReply, match="without a finish_reason after 13 characters"):
        for piece in model(server).stream_answer(answer_prompt(), UsageMeter()):
            received.append(piece)
    assert "".join(received) == "The pump runs"


@pytest.mark.parametrize("call_kind", ["stream", "understanding"])
def test_json_cut_mid_way_is_an_incomplete_reply(server, call_kind):
    server.script(truncated(text('{"rewrittenQuery": "x", "intent": "factoid"}')))
    meter = UsageMeter()
    with pytest.raises(IncompleteReply, match="not complete JSON"):
        if call_kind == "stream":
            list(model(server).stream_answer(answer_prompt(), meter))
        else:
            model(server).understand(understanding_request(), meter)
    assert [c.ok for c in meter.calls] == [False]


def test_bounded_chat_parses_records_once_and_honours_the_breaker(server):
    server.script(text('{"verdict": "answers"}', usage=(30, 5)), text("not json"))
    guard = guard_for(10)
    bound = model(server).for_run(guard)
    meter = UsageMeter()

    def verdict(response):
        try:
            return json.loads(response.choices[0].message.content)["verdict"]
        except ValueError:
            raise ModelOutputError("the judge's reply is not JSON") from None

    assert bound.bounded_chat("judge", meter, [{"role": "user", "content": "grade"}], parse=verdict,
                              response_format={"type": "json_object"}) == "answers"
    with pytest.raises(ModelOutputError):
        bound.bounded_chat("judge", meter, [{"role": "user", "content": "grade"}], parse=verdict)
    assert [(c.purpose, c.ok, c.prompt_tokens) for c in meter.calls] == [("judge", True, 30), ("judge", False, 0)]
    assert server.requests[0]["max_tokens"] == bound.max_tokens
    guard.trip("llm", "stalled earlier")
    with pytest.raises(BackendUnavailable, match="not called, stalled earlier"):
        bound.bounded_chat("judge", meter, [{"role": "user", "content": "grade"}])
    assert len(server.requests) == 2


def test_streaming_yields_deltas_and_records_usage(server):
    server.script(text("DM-3000 的续航为 12 小时[1]。", usage=(120, 18)))
    meter = UsageMeter()
    pieces = list(model(server).stream_answer(answer_prompt(), meter))
    assert len(pieces) > 1 and "".join(pieces) == "DM-3000 的续航为 12 小时[1]。"
    body = server.requests[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["temperature"] == 0.2
    [call_] = meter.calls
    assert (call_.purpose, call_.prompt_tokens, call_.completion_tokens) == ("answer", 120, 18)


def test_streaming_stops_on_cancel(server):
    server.script(text("one two three four five six seven eight nine ten"))
    cancel = threading.Event()
    meter = UsageMeter()
    received = []
    for piece in model(server).stream_answer(answer_prompt(), meter, cancel):
        received.append(piece)
        cancel.set()
    assert len(received) == 1
    assert meter.calls[0].error == "cancelled"


def test_agent_turn_parses_tool_calls_including_malformed_arguments(server):
    server.script(tool_calls(call("searchDocs", {"query": "DM-3000 续航"}, id="call_a"),
                             call("searchDocs", '{"query": "broken', id="call_b"),
                             call("keywordSearch", "[1, 2]", id="call_c"),
                             content="Searching both."))
    meter = UsageMeter()
    turn = model(server).agent_turn(transcript(), [SEARCH], meter, timeout_s=5)
    assert [c.id for c in turn.tool_calls] == ["call_a", "call_b", "call_c"]
    good, broken, not_object = turn.tool_calls
    assert good.arguments == {"query": "DM-3000 续航"} and not good.parse_error
    assert broken.arguments == {} and "not valid JSON" in broken.parse_error
    assert broken.raw_arguments == '{"query": "broken'
    assert "JSON object" in not_object.parse_error
    assert turn.text == "Searching both."
    assert turn.assistant_message["tool_calls"][1]["function"]["arguments"] == '{"query": "broken'
    body = server.requests[0]
    assert body["tools"] == [SEARCH.openai_schema()] and body["tool_choice"] == "auto"
    assert meter.calls[0].purpose == "agent_round"


def test_agent_turn_without_tool_calls_means_stop(server):
    server.script(text("I have enough evidence."))
    turn = model(server).agent_turn(transcript(), [SEARCH], UsageMeter(), timeout_s=5)
    assert turn.tool_calls == [] and turn.assistant_message == {"role": "assistant",
                                                               "content": "I have enough evidence."}


def test_agent_turn_honours_its_own_timeout(server):
    server.always(tool_calls(call("searchDocs", {"query": "x"}), delay=2))
    started = time.perf_counter()
    with pytest.raises(BackendUnavailable):
        model(server, max_retries=0).agent_turn(transcript(), [SEARCH], UsageMeter(), timeout_s=0.5)
    assert time.perf_counter() - started < 1.8


def test_empty_arguments_are_an_empty_object():
    assert parse_tool_call("x", "kb_meta", "").arguments == {}


# --------------------------------------------------------------------------
# Small local models print their tool calls as text (llama-server --jinja, Ollama)
# --------------------------------------------------------------------------

KEYWORD = ToolSpec("keywordSearch", "Exact keyword search",
                   {"type": "object", "properties": {"query": {"type": "string"}, "top_k": {"type": "integer"}},
                    "required": ["query"]})
TOOLS = [SEARCH, KEYWORD]


def small_model_turn(server, reply, tools=TOOLS):
    server.script(reply)
    return model(server).agent_turn(transcript(), tools, UsageMeter(), timeout_s=5)


@pytest.mark.parametrize("shape, repaired_from", [
    ("bare", "content_json"), ("fenced", "fenced_json"), ("tags", "tool_call_tags")])
def test_a_call_printed_as_content_is_recovered(server, shape, repaired_from):
    turn = small_model_turn(server, printed_calls(printed("searchDocs", {"query": "Nimbus N1 power draw"}),
                                                  shape=shape))
    [recovered] = turn.tool_calls
    assert (recovered.name, recovered.arguments, recovered.parse_error) == (
        "searchDocs", {"query": "Nimbus N1 power draw"}, "")
    assert recovered.repaired_from == repaired_from
    assert recovered.id  # the transcript's tool message must be able to answer it
    assert turn.text == ""  # the printed call is not a thought
    sent = turn.assistant_message["tool_calls"]
    assert [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in sent] == [
        (recovered.id, "searchDocs", {"query": "Nimbus N1 power draw"})]


@pytest.mark.parametrize("shape", ["bare", "fenced", "tags"])
def test_several_printed_calls_are_all_recovered(server, shape):
    turn = small_model_turn(server, printed_calls(printed("searchDocs", {"query": "Nimbus N1"}),
                                                  printed("keywordSearch", {"query": "N2 45 W"}), shape=shape))
    assert [(c.name, c.arguments["query"]) for c in turn.tool_calls] == [
        ("searchDocs", "Nimbus N1"), ("keywordSearch", "N2 45 W")]
    assert len({c.id for c in turn.tool_calls}) == 2


def test_arguments_as_a_json_string_and_parameters_as_an_alias(server):
    turn = small_model_turn(server, printed_calls(
        printed("searchDocs", json.dumps({"query": "warranty"})),
        printed("keywordSearch", {"query": "DM-3000", "top_k": 3}, key="parameters"), shape="tags"))
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [
        ("searchDocs", {"query": "warranty"}), ("keywordSearch", {"query": "DM-3000", "top_k": 3})]


def test_only_declared_arguments_are_kept(server):
    turn = small_model_turn(server, printed_calls(printed("keywordSearch", {
        "query": "HNSW", "top_k": 4, "kbIds": [9], "reason": "exact name"})))
    [recovered] = turn.tool_calls
    assert recovered.arguments == {"query": "HNSW", "top_k": 4}
    assert json.loads(recovered.raw_arguments) == {"query": "HNSW", "top_k": 4}


def test_text_around_a_printed_call_stays_the_thought(server):
    turn = small_model_turn(server, printed_calls(printed("searchDocs", {"query": "Nimbus N2"}), shape="fenced",
                                                  before="I will search for the N2 first.\n"))
    assert [c.name for c in turn.tool_calls] == ["searchDocs"]
    assert turn.text == "I will search for the N2 first."


def test_bare_json_after_a_sentence_is_recovered(server):
    turn = small_model_turn(server, printed_calls(printed("searchDocs", {"query": "Aurora uptime"}),
                                                  before="Searching now: "))
    assert [(c.name, c.repaired_from) for c in turn.tool_calls] == [("searchDocs", "content_json")]
    assert turn.text == "Searching now:"


@pytest.mark.parametrize("content", [
    json.dumps({"name": "deleteEverything", "arguments": {"query": "x"}}),  # a tool nobody declared
    '<tool_call>\n{"name": "store_memory", "arguments": {"text": "x"}}\n</tool_call>',
    json.dumps({"query": "no tool name"}),
    'The N1 draws 28 W and the N2 45 W: {"N1": "28 W", "N2": "45 W"}',
    "I have enough evidence.",
])
def test_content_that_is_not_a_declared_call_stays_plain_content(server, content):
    turn = small_model_turn(server, text(content))
    assert turn.tool_calls == []
    assert turn.text == content
    assert turn.assistant_message == {"role": "assistant", "content": content}


def test_an_undeclared_call_beside_a_declared_one_is_dropped(server):
    turn = small_model_turn(server, printed_calls(printed("searchDocs", {"query": "a"}),
                                                  printed("dropTables", {"query": "b"})))
    assert [c.name for c in turn.tool_calls] == ["searchDocs"]


def test_printed_arguments_that_are_not_an_object_are_a_parse_error(server):
    turn = small_model_turn(server, printed_calls(printed("searchDocs", "[1, 2]")))
    [recovered] = turn.tool_calls
    assert recovered.arguments == {} and "JSON object" in recovered.parse_error


def test_real_tool_calls_are_not_marked_repaired(server):
    turn = small_model_turn(server, tool_calls(call("searchDocs", {"query": "x"}, id="c1"),
                                               content='{"name": "keywordSearch", "arguments": {"query": "y"}}'))
    assert [(c.id, c.name, c.repaired_from) for c in turn.tool_calls] == [("c1", "searchDocs", "")]


def test_printed_calls_are_not_recovered_when_no_tools_were_offered(server):
    content = printed_content(printed("searchDocs", {"query": "x"}))
    turn = small_model_turn(server, text(content), tools=[])
    assert turn.tool_calls == [] and turn.text == content


def test_a_printed_call_in_the_openai_function_shape_is_recovered(server):
    content = json.dumps({"type": "function", "function": {"name": "searchDocs",
                                                          "arguments": json.dumps({"query": "SOC 2"})}})
    turn = small_model_turn(server, text(content))
    assert [(c.name, c.arguments, c.repaired_from) for c in turn.tool_calls] == [
        ("searchDocs", {"query": "SOC 2"}, "content_json")]
