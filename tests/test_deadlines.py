"""Deadlines and honesty: one run deadline shared by every stage, a per-run circuit breaker, and a run whose
retrieval was incomplete says so instead of answering "nothing relevant"."""

from __future__ import annotations

import json
import threading
import time

import pytest

from docmind_core.errors import ConfigError

from docmind_core.answer.agentic import AgenticPath
from docmind_core.backends.offline.chat import OfflineLanguageModel
from docmind_core.backends.factory import build_language_model
from docmind_core.events import Done, ErrorRaised, Fallback, Retrieved
from docmind_core.answer.grade import CragGrader
from docmind_core.values import RequestedMode, Tier
from docmind_core.answer.rule_planner import RulePlannerPath
from docmind_core.answer.pipeline import AnswerPipeline, AskRequest
from docmind_core.prompts import PromptLibrary
from docmind_core.settings import Settings
from docmind_core.answer.tools import Toolbox
from tests.agentic_world import CORPUS, FixtureRetriever, make_refiner, settings
from tests.fakes.openai_server import text

PROMPTS = PromptLibrary()
NOTHING_RELEVANT = "nothing relevant"
UNDERSTANDING = {
    "rewrittenQuery": "DM-3000 pump flow rate", "intent": "factoid", "complexity": "SIMPLE",
    "specificity": "PRECISE", "timeAware": False, "memoryAware": False, "isAmbiguous": False,
    "scope": "knowledge_query", "scopeConfidence": 0.95, "memoryWriteHints": [],
}
STALL_S = 8.0  # how long the stalled fake model takes to answer each call


def make_pipeline(llm, retriever) -> AnswerPipeline:
    toolbox = Toolbox(retriever)
    refiner = make_refiner()
    grader = CragGrader()
    rule_planner = RulePlannerPath(toolbox, refiner, grader)
    agentic = AgenticPath(llm, toolbox, refiner, grader, PROMPTS, rule_planner)
    return AnswerPipeline(llm=llm, fallback_llm=OfflineLanguageModel(PROMPTS), prompts=PROMPTS, store=None,
                          reranker=refiner.reranker, rule_planner=rule_planner, agentic=agentic, grader=grader, memory=None)


def ask(pipeline, question, cfg: Settings, mode=RequestedMode.RULE_PLANNER):
    request = AskRequest(question=question, kb_ids=[1], requested_mode=mode, user_id=7)
    events = list(pipeline.ask(request, cfg, [], threading.Event()))
    assert isinstance(events[-1], Done), [e.kind for e in events]
    return events, events[-1]


# --------------------------------------------------------------------------
# 5. a timed-out worker is an error, and incomplete retrieval is never "nothing relevant"
# --------------------------------------------------------------------------

def test_a_timed_out_doc_search_is_an_error_event_and_the_answer_says_retrieval_was_incomplete():
    retriever = FixtureRetriever(CORPUS)
    retriever.delay_s = {"candidates": 3.0, "keyword_candidates": 3.0}
    cfg = settings(**{"retrieval.worker_timeout_ms": 200})
    events, done = ask(make_pipeline(OfflineLanguageModel(PROMPTS), retriever), "What flow rate does the DM-3000 pump have?",
                       cfg)
    errors = [e for e in events if isinstance(e, ErrorRaised)]
    assert any("doc_search" in e.stage and "200 ms" in e.message for e in errors), errors
    assert done.grade is not None and "incomplete" in done.grade.reason
    assert NOTHING_RELEVANT not in done.answer.lower()
    assert "retrieval was incomplete" in done.answer.lower()
    assert "doc_search" in done.answer


def test_partial_evidence_is_used_and_still_flagged_incomplete():
    retriever = FixtureRetriever(CORPUS)
    retriever.delay_s = {"candidates": 3.0}  # doc_search stalls, keyword_search answers
    cfg = settings(**{"retrieval.worker_timeout_ms": 200})
    events, done = ask(make_pipeline(OfflineLanguageModel(PROMPTS), retriever), "What flow rate does the DM-3000 pump have?",
                       cfg)
    retrieved = next(e for e in events if isinstance(e, Retrieved))
    statuses = {w.name: w.status for w in retrieved.workers}
    assert statuses == {"doc_search": "timeout", "keyword_search": "ok"}
    assert any(isinstance(e, ErrorRaised) and "doc_search" in e.stage for e in events)
    assert done.sources and "40 litres" in done.answer
    # said in a notice beside the answer, not in it (DocMind's own words are never graded as a claim)
    assert "incomplete" in done.grade.reason and "retrieval was incomplete" not in done.answer.lower()
    assert [n.code for n in done.notices] == ["retrieval_incomplete"] and "doc_search" in done.notices[0].text
    if done.grade.tier is Tier.LOW:
        assert "no_evidence" not in done.grade.reason


@pytest.mark.slow  # waits out real deadlines of a second or more
def test_worker_timeouts_are_clipped_to_the_run_deadline():
    retriever = FixtureRetriever(CORPUS)
    retriever.delay_s = {"candidates": 6.0, "keyword_candidates": 6.0}
    cfg = settings(**{"retrieval.worker_timeout_ms": 60000, "run.deadline_ms": 2000, "run.answer_reserve_ms": 500})
    t0 = time.perf_counter()
    events, done = ask(make_pipeline(OfflineLanguageModel(PROMPTS), retriever), "What flow rate does the DM-3000 pump have?",
                       cfg)
    assert time.perf_counter() - t0 < 2.0 + 3.0
    assert any(isinstance(e, ErrorRaised) and "doc_search" in e.stage for e in events)
    assert NOTHING_RELEVANT not in done.answer.lower()


# --------------------------------------------------------------------------
# 6. a stalled LLM: the run ends by its deadline, the breaker stops further calls, the offline engine answers
# --------------------------------------------------------------------------

def stalled_model(server, cfg: Settings):
    env = {"OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": server.base_url}
    return build_language_model(cfg, env, PROMPTS)


@pytest.mark.slow  # waits out real deadlines of a second or more
def test_an_agentic_run_against_a_stalled_model_returns_by_its_deadline_and_stops_calling_it(server):
    def reply(request):
        if request.get("response_format"):
            return text(json.dumps(UNDERSTANDING))  # understanding is quick; every later call stalls
        return text("too late", delay=STALL_S)

    server.respond_with(reply)
    cfg = settings(**{"run.deadline_ms": 3000, "run.answer_reserve_ms": 1000, "llm.timeout_s": 30,
                      "llm.max_retries": 2, "agentic.total_timeout_ms": 45000,
                      "agentic.iteration_timeout_ms": 20000})
    pipeline = make_pipeline(stalled_model(server, cfg), FixtureRetriever(CORPUS))
    t0 = time.perf_counter()
    events, done = ask(pipeline, "What flow rate does the DM-3000 pump have?", cfg, RequestedMode.AGENTIC)
    elapsed = time.perf_counter() - t0
    assert elapsed < 3.0 + 5.0, f"the run took {elapsed:.1f}s"
    purposes = ["understanding" if r.get("response_format") else ("answer" if r.get("stream") else "agent_round")
                for r in server.requests]
    assert purposes == ["understanding", "agent_round"], purposes  # nothing after the first timeout
    assert any(isinstance(e, Fallback) and e.stage == "agentic" for e in events)
    assert any(isinstance(e, Fallback) and e.stage == "generation" and e.to == "offline" for e in events)
    assert any(isinstance(e, ErrorRaised) for e in events)
    assert done.answer and "40 litres" in done.answer


@pytest.mark.slow  # waits out a real deadline or runs the docmind command: make test only
def test_a_model_that_stalls_from_the_first_call_is_called_once(server):
    server.always(text("too late", delay=STALL_S))
    cfg = settings(**{"run.deadline_ms": 3000, "run.answer_reserve_ms": 1000, "llm.timeout_s": 30,
                      "llm.max_retries": 2})
    pipeline = make_pipeline(stalled_model(server, cfg), FixtureRetriever(CORPUS))
    t0 = time.perf_counter()
    events, done = ask(pipeline, "What flow rate does the DM-3000 pump have?", cfg, RequestedMode.AGENTIC)
    assert time.perf_counter() - t0 < 3.0 + 5.0
    assert len(server.requests) == 1
    assert done.answer and "40 litres" in done.answer


@pytest.mark.slow  # waits out real deadlines of a second or more
def test_a_stalled_answer_stream_falls_back_within_the_deadline(server):
    def reply(request):
        if request.get("stream"):
            return text("too late", delay=STALL_S)
        return text(json.dumps(UNDERSTANDING))

    server.respond_with(reply)
    cfg = settings(**{"run.deadline_ms": 3000, "run.answer_reserve_ms": 1000, "llm.timeout_s": 30,
                      "llm.max_retries": 2})
    pipeline = make_pipeline(stalled_model(server, cfg), FixtureRetriever(CORPUS))
    t0 = time.perf_counter()
    events, done = ask(pipeline, "What flow rate does the DM-3000 pump have?", cfg, RequestedMode.RULE_PLANNER)
    assert time.perf_counter() - t0 < 3.0 + 5.0
    assert sum(1 for r in server.requests if r.get("stream")) == 1
    assert any(isinstance(e, Fallback) and e.stage == "generation" for e in events)
    assert "40 litres" in done.answer


# --------------------------------------------------------------------------
# The local-model profile: bounded calls for a small model on a small machine
# --------------------------------------------------------------------------

def test_a_hand_set_deadline_under_the_profile_keeps_its_group_consistent():
    """local_small reserves 120 s for the answer; a hand-set 60 s deadline must not be refused for a key the
    user never set: the run group keeps its own values, the rest of the profile still applies."""
    mine = Settings().with_overrides({"llm.profile": "local_small", "run.deadline_ms": 60_000})
    assert mine.run.deadline_ms == 60_000 and mine.run.answer_reserve_ms < 60_000
    assert mine.llm.max_tokens == 384 and mine.agentic.max_iterations == 2  # other presets hold
    with pytest.raises(ConfigError, match="answer_reserve_ms"):  # a contradiction set by hand is still refused
        Settings().with_overrides({"llm.profile": "local_small", "run.deadline_ms": 60_000,
                                   "run.answer_reserve_ms": 70_000})


def test_local_small_profile_sets_limits_and_explicit_keys_win():
    local = Settings().with_overrides({"llm.profile": "local_small"})
    default = Settings()
    assert local.llm.max_tokens < default.llm.max_tokens
    assert local.llm.timeout_s > default.llm.timeout_s and local.llm.max_retries == 0
    assert local.run.deadline_ms > default.run.deadline_ms
    assert local.agentic.max_iterations <= 2
    mine = Settings().with_overrides({"llm.profile": "local_small", "llm.max_tokens": 200})
    assert mine.llm.max_tokens == 200 and mine.llm.timeout_s == local.llm.timeout_s


def test_every_chat_call_carries_max_tokens(server):
    def reply(request):
        if request.get("response_format"):
            return text(json.dumps(UNDERSTANDING))
        if request.get("stream"):
            return text("The DM-3000 pump runs at 40 litres per minute [1].")
        return text("")  # no tool call: the loop ends

    server.respond_with(reply)
    cfg = settings(**{"llm.profile": "local_small", "llm.understanding": "model"})  # every kind of call
    pipeline = make_pipeline(stalled_model(server, cfg), FixtureRetriever(CORPUS))
    events, done = ask(pipeline, "What flow rate does the DM-3000 pump have?", cfg, RequestedMode.AGENTIC)
    assert len(server.requests) == 3
    assert all(r.get("max_tokens") and r["max_tokens"] <= cfg.llm.max_tokens for r in server.requests)
    assert done.answer.startswith("The DM-3000 pump runs at 40 litres")


# --------------------------------------------------------------------------
# Ingestion does not starve questions on the shared encoder
# --------------------------------------------------------------------------

class SlowEncoder:
    """One call at a time (like the real encoders), 20 ms per text."""

    id, dim = "slow", 2

    def __init__(self):
        self.lock = threading.Lock()
        self.calls: list[int] = []

    def embed(self, texts):
        import numpy as np

        with self.lock:
            self.calls.append(len(texts))
            time.sleep(0.02 * len(texts))
            return np.ones((len(texts), 2), dtype=np.float32)


@pytest.mark.slow  # waits out real deadlines of a second or more
def test_a_question_is_encoded_between_the_slices_of_an_ingestion_batch():
    from docmind_core.backends.query_first import QueryFirstEmbedder

    inner = SlowEncoder()
    embedder = QueryFirstEmbedder(inner, bulk_min=32, slice_size=8)
    finished: dict[str, int] = {}

    def bulk():
        assert embedder.embed([f"chunk {i}" for i in range(64)]).shape == (64, 2)
        finished["bulk"] = len(inner.calls)

    worker = threading.Thread(target=bulk)
    worker.start()
    while not inner.calls:
        time.sleep(0.005)
    embedder.embed(["a question"])
    finished["question"] = len(inner.calls)
    worker.join(10)
    assert finished["question"] < finished["bulk"]  # it did not wait for the whole batch
    assert sorted(inner.calls) == [1] + [8] * 8 and embedder.id == "slow"


# --------------------------------------------------------------------------
# the clock bounds a call in progress, whatever its transport does
# --------------------------------------------------------------------------

def test_call_within_stops_waiting_at_its_time_and_cuts_the_call():
    from docmind_core.deadline import DeadlineCut, call_within

    release = threading.Event()
    cut: list[bool] = []

    def stalled():
        release.wait(10)  # a call that would go on long after its time
        return "late"

    def close():
        cut.append(True)
        release.set()  # as closing the connection ends the worker

    started = time.monotonic()
    with pytest.raises(DeadlineCut, match="cut after 0.3s"):
        call_within(0.3, stalled, close, "the stalled call")
    assert time.monotonic() - started < 2 and cut == [True]
    assert call_within(1.0, lambda: "in time") == "in time"
    with pytest.raises(ConfigError, match="raised in the worker"):
        call_within(1.0, lambda: (_ for _ in ()).throw(ConfigError("raised in the worker")))


def test_iterate_within_cuts_a_trickling_stream_and_honours_cancel():
    from docmind_core.deadline import DeadlineCut, iterate_within

    def trickling():
        for i in range(1000):
            time.sleep(0.05)  # each item arrives in time; the whole never does
            yield i

    closed: list[bool] = []
    received: list[int] = []
    started = time.monotonic()
    with pytest.raises(DeadlineCut):
        for item in iterate_within(0.5, trickling(), lambda: closed.append(True), "the stream"):
            received.append(item)
    assert time.monotonic() - started < 2.5 and 0 < len(received) < 50 and closed == [True]

    cancel = threading.Event()
    got = []
    for item in iterate_within(None, trickling(), None, "the stream", cancel):
        got.append(item)
        cancel.set()
    assert got == [0]
    assert list(iterate_within(1.0, iter([1, 2, 3]))) == [1, 2, 3]
