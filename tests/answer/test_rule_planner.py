"""One-shot retrieval: parallel workers, worker timeouts, web compensation (fake Tavily server), web labels."""

from __future__ import annotations

import threading
import time

import pytest

from docmind_core.backends.web_search import TavilyWebSearch
from docmind_core.events import Graded, Reranked, Retrieved, WebCompensated
from docmind_core.answer.grade import CragGrader
from docmind_core.values import Mode, RetrievalPlan, Tier, Understanding
from docmind_core.answer.rule_planner import RulePlannerPath
from docmind_core.answer.tools import ToolContext, Toolbox
from tests.agentic_world import CORPUS, FixtureRetriever, drain, make_refiner, settings
from tests.fakes.tavily_server import result

WEB_RESULTS = [
    result("Pump market news", "https://news.example/pumps", "Zorblax pumps launched a quantum flux capacitor line."),
    result("Flux capacitors", "https://wiki.example/flux", "A quantum flux capacitor is a fictional zorblax device."),
]


@pytest.fixture
def tavily(tavily):
    tavily.default_results = WEB_RESULTS
    return tavily


def make(retriever=None, web=None):
    retriever = retriever or FixtureRetriever(CORPUS)
    toolbox = Toolbox(retriever, web=web)
    return RulePlannerPath(toolbox, make_refiner(), CragGrader()), retriever


def run(rule_planner, question, tools, cfg=None, kb_ids=(1,)):
    cfg = cfg or settings()
    ctx = ToolContext.for_run(list(kb_ids), 7, cfg)
    plan = RetrievalPlan(tools=list(tools))
    return drain(rule_planner.run(question, Understanding(rewritten_query=question), plan, ctx))


def test_planned_workers_run_in_parallel_and_union_is_refined():
    rule_planner, retriever = make()
    # the two workers' searches must be in progress together to get past this (one after the other, the first
    # waits out the barrier and fails), however slow the machine; the workers' own timeout is far above it
    retriever.meet = threading.Barrier(2, timeout=20)
    cfg = settings(**{"retrieval.worker_timeout_ms": 60_000})
    events, outcome = run(rule_planner, "DM-3000 pump litres per minute", ["doc_search", "keyword_search"], cfg)
    retrieved = events[0]
    assert isinstance(retrieved, Retrieved) and retrieved.mode is Mode.RULE_PLANNER
    assert [(w.name, w.status) for w in retrieved.workers] == [("doc_search", "ok"), ("keyword_search", "ok")]
    assert outcome.mode is Mode.RULE_PLANNER and outcome.result.chunks
    assert outcome.result.chunks[0].chunk_id == "a1"
    assert {c.kb_id for c in outcome.result.candidates} == {1}


def test_a_slow_worker_times_out_and_the_rest_continue():
    rule_planner, retriever = make()
    retriever.delay_s = {"keyword_candidates": 2.0}
    cfg = settings(**{"retrieval.worker_timeout_ms": 300})
    t0 = time.perf_counter()
    events, outcome = run(rule_planner, "DM-4000 pump", ["doc_search", "keyword_search"], cfg)
    assert time.perf_counter() - t0 < 1.5
    reports = {w.name: w for w in events[0].workers}
    assert reports["keyword_search"].status == "timeout" and "300 ms" in reports["keyword_search"].message
    assert reports["doc_search"].status == "ok" and reports["doc_search"].hits > 0
    assert outcome.result.chunks


def test_a_failing_worker_is_reported_and_dropped():
    rule_planner, retriever = make()
    retriever.fail = {"candidates"}
    events, outcome = run(rule_planner, "warranty claims pumps", ["doc_search", "keyword_search"])
    reports = {w.name: w for w in events[0].workers}
    assert reports["doc_search"].status == "error" and "down" in reports["doc_search"].message
    assert reports["keyword_search"].status == "ok"
    assert outcome.result.chunks[0].chunk_id == "a6"


def test_event_order_without_web_compensation():
    rule_planner, _ = make()
    events, outcome = run(rule_planner, "DM-3000 pump firmware", ["doc_search"])
    assert [e.kind for e in events] == ["retrieval", "rerank", "grader", "web_compensation"]
    rerank = events[1]
    assert isinstance(rerank, Reranked) and rerank.reranker == "overlap"
    assert all(c.scores.rerank is not None for c in rerank.candidates)
    assert outcome.grade.tier == Tier.HIGH
    comp = events[3]
    assert isinstance(comp, WebCompensated) and not comp.ran and "not needed" in comp.reason
    assert not outcome.web_compensated


def test_web_compensation_runs_on_low_and_web_evidence_is_labelled(tavily):
    web = TavilyWebSearch("tvly-test", base_url=tavily.base_url, timeout_s=5)
    rule_planner, _ = make(web=web)
    events, outcome = run(rule_planner, "quantum flux capacitor zorblax", ["doc_search"])
    kinds = [e.kind for e in events]
    assert kinds == ["retrieval", "rerank", "grader", "web_compensation", "grader"]
    assert events[2].grade.tier == Tier.LOW and events[2].grade.web_compensation_needed
    comp = events[3]
    assert comp.ran and comp.added_chunks >= 1
    assert isinstance(events[4], Graded) and events[4].round == "after_web"
    assert outcome.web_compensated
    web_chunks = [c for c in outcome.result.chunks if c.url]
    assert web_chunks and all(c.origin == "web" for c in web_chunks)
    assert len(tavily.requests) == 1


def test_web_compensation_does_not_repeat_when_the_plan_used_the_web(tavily):
    web = TavilyWebSearch("tvly-test", base_url=tavily.base_url, timeout_s=5)
    rule_planner, _ = make(web=web)
    tavily.default_results = []
    events, outcome = run(rule_planner, "quantum flux capacitor zorblax", ["doc_search", "web_search"])
    comp = [e for e in events if isinstance(e, WebCompensated)][0]
    assert not comp.ran and "already searched" in comp.reason
    assert len(tavily.requests) == 1 and not outcome.web_compensated


def test_web_compensation_off_on_low_is_respected(tavily):
    web = TavilyWebSearch("tvly-test", base_url=tavily.base_url, timeout_s=5)
    rule_planner, _ = make(web=web)
    cfg = settings(**{"retrieval.web_compensation_on_low": False})
    events, outcome = run(rule_planner, "quantum flux capacitor zorblax", ["doc_search"], cfg)
    comp = [e for e in events if isinstance(e, WebCompensated)][0]
    assert not comp.ran and not tavily.requests


def test_unavailable_web_is_reported_not_raised():
    rule_planner, _ = make()
    events, outcome = run(rule_planner, "quantum flux capacitor zorblax", ["doc_search"])
    comp = [e for e in events if isinstance(e, WebCompensated)][0]
    assert not comp.ran and "unavailable" in comp.reason
    assert outcome.grade.tier == Tier.LOW


def test_memory_worker_results_are_memories_not_sources():
    class Memory:
        def recall(self, user_id, query, top_k, min_similarity):
            return ["user 7 prefers the DM-4000"] if user_id == 7 else []

    toolbox = Toolbox(FixtureRetriever(CORPUS), memory=Memory())
    rule_planner = RulePlannerPath(toolbox, make_refiner(), CragGrader())
    events, outcome = run(rule_planner, "which pump do I prefer", ["doc_search", "recall_memory"])
    assert outcome.memories == ["user 7 prefers the DM-4000"]
    assert events[0].memory_items == 1
    assert all(c.origin != "memory" for c in outcome.result.chunks)


def test_keep_group_best_gives_every_search_its_best_chunk_within_the_budget():
    from docmind_core.values import SearchResult, StageScores
    from docmind_core.answer.finish import keep_group_best
    from docmind_core.text.tokens import count_tokens
    from tests.agentic_world import chunk

    def scored(cid, score, kept=True, cut=None):
        return chunk(cid, f"text of {cid} " * 5).model_copy(update={
            "scores": StageScores(rerank=score), "kept": kept, "cut_by": cut})

    strong = [scored(f"s{i}", 0.9 - i * 0.05) for i in range(4)]
    weak = scored("w0", 0.5, kept=False, cut="rerank")
    result = SearchResult(query="q", chunks=strong, candidates=strong + [weak])
    cfg = settings(**{"retrieval.final_top_k": 4, "rag.context_max_tokens": 200})
    out = keep_group_best(result, [["s0", "s1", "s2", "s3"], ["w0"]], cfg)
    ids = [c.chunk_id for c in out.chunks]
    assert len(ids) == 4 and "w0" in ids and "s3" not in ids and ids[0] == "s0"
    assert sum(count_tokens(c.text) for c in out.chunks) <= 200
    cut = {c.chunk_id: c.cut_by for c in out.candidates}
    assert cut["w0"] is None and cut["s3"] == "coverage"
    assert keep_group_best(result, [], cfg) is result


def test_a_hop_whose_best_chunk_is_the_first_hops_brings_its_own_first_find():
    """Issue 41: a hop on "Mikhail Gorbachev" ranks his own page first again, and the forum he initiated (what
    the hop was for) reranks low against the question; keeping only each search's best by the union rerank
    kept Gorbachev twice over and lost the forum."""
    from docmind_core.values import SearchResult, StageScores
    from docmind_core.answer.finish import keep_group_best
    from tests.agentic_world import chunk

    def scored(cid, score, kept=True, cut=None):
        return chunk(cid, f"text of {cid} " * 5).model_copy(update={
            "scores": StageScores(rerank=score), "kept": kept, "cut_by": cut})

    person, other, other2 = scored("gorbachev", 0.98), scored("suslov", 0.8), scored("podgorny", 0.5)
    forum = scored("forum", 0.04, kept=False, cut="rerank")
    result = SearchResult(query="q", chunks=[person, other, other2], candidates=[person, other, other2, forum])
    cfg = settings(**{"retrieval.final_top_k": 4, "rag.context_max_tokens": 400})
    hop = ["gorbachev", "forum", "suslov"]  # the hop search's own order
    out = keep_group_best(result, [["gorbachev", "suslov", "podgorny"], hop], cfg)
    assert {c.chunk_id for c in out.chunks} == {"gorbachev", "suslov", "forum"}


def test_a_chunk_shortened_to_fit_is_recorded_as_the_grader_saw_it():
    """keep_group_best may shorten a search's best chunk to the room left; the candidates (what the rerank event
    records, and what a what-if regrade or a threshold sweep grades again) must hold that same shortened text."""
    from docmind_core.values import SearchResult, StageScores
    from docmind_core.answer.finish import keep_group_best
    from tests.agentic_world import chunk

    def scored(cid, text, score, kept=True, cut=None):
        return chunk(cid, text).model_copy(update={"scores": StageScores(rerank=score), "kept": kept, "cut_by": cut})

    strong = [scored(f"s{i}", f"short text of s{i} " * 6, 0.9 - i * 0.05) for i in range(3)]
    long_weak = scored("w0", "a long bridge paragraph about the second entity " * 40, 0.5, kept=False, cut="rerank")
    result = SearchResult(query="q", chunks=strong, candidates=strong + [long_weak])
    cfg = settings(**{"retrieval.final_top_k": 4, "rag.context_max_tokens": 120})
    out = keep_group_best(result, [["s0", "s1", "s2"], ["w0"]], cfg)
    shown = {c.chunk_id: c.text for c in out.chunks}
    assert "w0" in shown and len(shown["w0"]) < len(long_weak.text)  # it was shortened to fit
    recorded = {c.chunk_id: c.text for c in out.candidates if c.kept}
    assert recorded == shown


def test_the_question_is_searched_beside_its_rewrite():
    """Issue 21: Rule and Auto modes searched only the rewrite, so a rewrite that lost the question's terms
    (or its language) lost the document; the rewrite only adds recall."""
    rule_planner, retriever = make()
    question = "DM-3000 的过滤器多久清洁一次？ filter"
    ctx = ToolContext.for_run([1], 7, settings())
    plan = RetrievalPlan(tools=["doc_search", "keyword_search"])
    events, outcome = drain(rule_planner.run(question, Understanding(rewritten_query="DM-4000 replaced"), plan, ctx))
    assert sorted(retriever.queries) == sorted([("candidates", "DM-4000 replaced"), ("candidates", question),
                                                ("keyword_candidates", "DM-4000 replaced"),
                                                ("keyword_candidates", question)])
    found = {c.chunk_id for c in outcome.result.candidates}
    assert {"a2", "a3"} <= found  # a2 from the rewrite, a3 (the filter) from the question only
    assert [r.args["query"] for r in ctx.records if r.name == "searchDocs"] == ["DM-4000 replaced", question]


def test_a_rewrite_equal_to_the_question_is_searched_once():
    rule_planner, retriever = make()
    run(rule_planner, "DM-3000 pump", ["doc_search"])
    assert retriever.queries == [("candidates", "DM-3000 pump")]
