"""One-shot retrieval: the planned tools in parallel, then one refine → grade → web-compensation pass.

This is the RULE_PLANNER path and the agentic loop's fallback.  The closing
stage (:class:`EvidenceFinisher`) is shared with the loop's finalize step so
both paths rerank, grade and compensate in exactly the same way.

Both ``run`` methods are generators: they yield events and *return* a
:class:`RetrievalOutcome` (read it with ``outcome = yield from ...``).

Workers run under the run's :class:`~docmind_core.deadline.RunGuard`: each
one's timeout is clipped to the retrieval budget, a worker that times out opens
the breaker for its tool (the run does not call it again), and a worker that
timed out or failed is an ``ErrorRaised`` event and makes the retrieval
*incomplete*: the grade and the answer then say so, and an empty result is
never presented as "nothing relevant".
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Generator, Literal, Sequence

from docmind_core.deadline import RunGuard
from docmind_core.events import ErrorRaised, Event, Graded, Reranked, Retrieved, WebCompensated
from docmind_core.grade import CragGrader
from docmind_core.retrieval.hybrid import EvidenceRefiner
from docmind_core.models import (
    GradeResult, RetrievalPlan, RetrievedChunk, SearchResult, ToolCallRecord, ToolName, Understanding,
    WorkerReport,
)
from docmind_core.settings import Settings
from docmind_core.text import count_tokens, truncate_to_tokens
from docmind_core.tools import ToolContext, Toolbox, ToolOutput

EventStream = Generator[Event, None, "RetrievalOutcome"]

# Plan tool name -> (toolbox tool, its arguments besides the query)
_WORKER_TOOLS: dict[str, str] = {
    "doc_search": "searchDocs", "keyword_search": "keywordSearch", "web_search": "webSearch",
    "recall_memory": "recall_memory",
}


@dataclass
class RetrievalOutcome:
    """What retrieval hands to generation, whichever path produced it."""

    result: SearchResult  # chunks = the sources, in order; candidates = every candidate with its scores
    grade: GradeResult
    mode: Literal["one_shot", "agentic_loop"]
    stop_reason: str = ""
    web_compensated: bool = False
    memories: list[str] = field(default_factory=list)
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    workers: list[WorkerReport] = field(default_factory=list)
    rounds: int = 0
    dedupe_hits: int = 0
    fell_back: bool = False
    timings_ms: dict[str, float] = field(default_factory=dict)
    incomplete: list[str] = field(default_factory=list)  # what did not answer ("doc_search timed out ...")

    @property
    def sources(self) -> list[RetrievedChunk]:
        return self.result.chunks


@dataclass
class FinishedEvidence:
    result: SearchResult
    grade: GradeResult
    web_compensated: bool
    timings_ms: dict[str, float]


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 2)


def _reranker_name(refiner: Any) -> str:
    reranker = getattr(refiner, "reranker", None)
    return str(getattr(reranker, "name", "") or type(refiner).__name__)


class EvidenceFinisher:
    """union → refine (rerank, MMR, parent expansion, compression) → grade → at most one web round."""

    def __init__(self, toolbox: Toolbox, refiner: EvidenceRefiner, grader: CragGrader):
        self.toolbox = toolbox
        self.refiner = refiner
        self.grader = grader

    def finish(self, query: str, union: Sequence[RetrievedChunk], ctx: ToolContext, settings: Settings,
               web_already_used: bool, rerank_query: str | None = None,
               groups: Sequence[Sequence[str]] = (), incomplete: Sequence[str] = (),
               guard: RunGuard | None = None) -> Generator[Event, None, FinishedEvidence]:
        """``groups``: chunk ids per search; each search's best-reranked chunk is kept (see keep_group_best).
        ``incomplete``: what did not answer during retrieval; the grade's reason says so."""
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        result = keep_group_best(self.refiner.refine(rerank_query or query, list(union), settings), groups, settings)
        timings["refine"] = _ms(t0)
        yield Reranked(candidates=result.candidates, reranker=_reranker_name(self.refiner),
                       duration_ms=timings["refine"])
        t0 = time.perf_counter()
        grade = self.grader.grade(query, result.chunks, settings, incomplete=incomplete)
        timings["grade"] = _ms(t0)
        yield Graded(grade=grade, round="initial")

        wanted, reason = self._compensation_wanted(grade, web_already_used)
        if wanted and guard is not None and (guard.retrieval_expired() or not guard.usable("webSearch")):
            wanted, reason = False, "not run: no time left for retrieval (run.deadline_ms)" \
                if guard.retrieval_expired() else f"not run: {guard.breaker.reason('webSearch')}"
        if not wanted:
            yield WebCompensated(ran=False, reason=reason)
            return FinishedEvidence(result, grade, False, timings)

        t0 = time.perf_counter()
        try:
            web = self.toolbox.call(ctx, "webSearch", {"query": query, "max_results": settings.web.max_results})
        except Exception as exc:  # noqa: BLE001 - compensation is best effort; keep the KB evidence
            web = ToolOutput(status="error", message=str(exc))
        ctx.record(ToolCallRecord(name="webSearch", args={"query": query}, result_count=len(web.chunks),
                                  status=web.status, latency_ms=_ms(t0), message=web.message or "web compensation"))
        if web.status != "ok" or not web.chunks:
            timings["web_compensation"] = _ms(t0)
            why = web.message or "web search returned nothing"
            yield WebCompensated(ran=False, reason=f"{reason}; {why}", duration_ms=timings["web_compensation"])
            return FinishedEvidence(result, grade, False, timings)

        merged = _merge(union, web.chunks)
        result = keep_group_best(self.refiner.refine(rerank_query or query, merged, settings), groups, settings)
        timings["web_compensation"] = _ms(t0)
        added = sum(1 for c in result.chunks if c.origin == "web")
        yield WebCompensated(ran=True, reason=reason, added_chunks=added, duration_ms=timings["web_compensation"])
        grade = self.grader.grade(query, result.chunks, settings, incomplete=incomplete)
        yield Graded(grade=grade, round="after_web")
        return FinishedEvidence(result, grade, True, timings)

    @staticmethod
    def _compensation_wanted(grade: GradeResult, web_already_used: bool) -> tuple[bool, str]:
        # The grader already decided from retrieval.web_compensation_on_low / grader.web_fallback_on_ambiguous.
        if not grade.web_compensation_needed:
            return False, f"not needed: tier {grade.tier.value}"
        if web_already_used:
            return False, "not run: the web was already searched in this run"
        return True, f"tier {grade.tier.value}: {grade.reason}" if grade.reason else f"tier {grade.tier.value}"


def keep_group_best(result: SearchResult, groups: Sequence[Sequence[str]], settings: Settings) -> SearchResult:
    """Make sure every search's best chunk (by the union rerank) is in the context.

    One rerank against the whole question lets a strong focus crowd out a weak
    one ("Arthur Conan Doyle" outscores "Penelope Lively" eight times over),
    and a bridge paragraph found by a second hop shares few words with the
    question.  Each search the loop ran asked for something the answer needs,
    so its best chunk displaces the weakest kept chunk that is not itself some
    search's best.  Same number of chunks, same token budget.
    """
    if not groups or not result.chunks:
        return result
    score = {c.chunk_id: (c.scores.rerank if c.scores.rerank is not None else -1.0) for c in result.candidates}
    by_id = {c.chunk_id: c for c in result.candidates}
    wanted: list[str] = []
    for group in groups:
        ranked = sorted((cid for cid in group if cid in score and score[cid] >= 0), key=lambda cid: -score[cid])
        if ranked and ranked[0] not in wanted:
            wanted.append(ranked[0])
    # best first, so the cap keeps the strongest (and the result does not depend on which call finished first)
    wanted = sorted(wanted, key=lambda cid: (-score[cid], cid))[: max(1, settings.retrieval.final_top_k // 2)]
    kept = list(result.chunks)
    kept_ids = {c.chunk_id for c in kept}
    budget = settings.rag.context_max_tokens
    for cid in wanted:
        if cid in kept_ids:
            continue
        victims = [c for c in kept if c.chunk_id not in wanted]
        if not victims:
            break
        victim = min(victims, key=lambda c: score.get(c.chunk_id, -1.0))
        incoming = by_id[cid].model_copy(update={"kept": True, "cut_by": None})
        room = budget - (sum(count_tokens(c.text) for c in kept) - count_tokens(victim.text))
        if room < 20:
            continue
        if count_tokens(incoming.text) > room:
            incoming = incoming.model_copy(update={"text": truncate_to_tokens(incoming.text, room), "terms": None})
        kept[kept.index(victim)] = incoming
        kept_ids.discard(victim.chunk_id)
        kept_ids.add(cid)
    if kept_ids == {c.chunk_id for c in result.chunks}:
        return result
    kept.sort(key=lambda c: -score.get(c.chunk_id, -1.0))
    candidates = [c.model_copy(update={"kept": c.chunk_id in kept_ids,
                                       "cut_by": None if c.chunk_id in kept_ids else (c.cut_by or "coverage")})
                  for c in result.candidates]
    return result.model_copy(update={"chunks": kept, "candidates": candidates,
                                     "used_tokens": sum(count_tokens(c.text) for c in kept)})


def _merge(first: Sequence[RetrievedChunk], second: Sequence[RetrievedChunk]) -> list[RetrievedChunk]:
    seen: dict[str, RetrievedChunk] = {}
    for chunk in [*first, *second]:
        seen.setdefault(chunk.chunk_id, chunk)
    return list(seen.values())


class OneShotRetrieval:
    """Planned tools in parallel threads, each under retrieval.worker_timeout_ms; failures drop out."""

    def __init__(self, toolbox: Toolbox, refiner: EvidenceRefiner, grader: CragGrader):
        self.toolbox = toolbox
        self.finisher = EvidenceFinisher(toolbox, refiner, grader)

    def run(self, question: str, understanding: Understanding, plan: RetrievalPlan, ctx: ToolContext,
            settings: Settings, cancel: threading.Event | None = None,
            guard: RunGuard | None = None) -> EventStream:
        started = time.perf_counter()
        query = understanding.rewritten_query or question
        reports, outputs = self._run_workers(query, plan.tools, ctx, settings, cancel, guard)
        incomplete = [f"{r.name} {'timed out' if r.status == 'timeout' else 'failed'} ({r.message})"
                      for r in reports if r.status in ("timeout", "error")]
        union: list[RetrievedChunk] = []
        for output in outputs:
            union = _merge(union, output.chunks)
        memories = [m for o in outputs for m in o.memories]
        memories = list(dict.fromkeys(memories))
        retrieval_ms = _ms(started)
        yield Retrieved(mode="one_shot", workers=reports, candidate_count=len(union),
                        kb_chunks=sum(1 for c in union if c.origin == "kb"),
                        web_chunks=sum(1 for c in union if c.origin == "web"),
                        memory_items=len(memories), duration_ms=retrieval_ms)
        for report in reports:  # right after the worker list: each worker that did not answer is an error
            if report.status in ("timeout", "error"):
                yield ErrorRaised(stage=f"retrieval.{report.name}", message=f"{report.status}: {report.message}")
        web_used = any(r.name == "web_search" and r.status == "ok" for r in reports)
        done = yield from self.finisher.finish(query, union, ctx, settings, web_used, incomplete=incomplete,
                                               guard=guard)
        timings = {"retrieval": retrieval_ms, **done.timings_ms}
        return RetrievalOutcome(result=done.result, grade=done.grade, mode="one_shot", stop_reason="",
                                web_compensated=done.web_compensated, memories=memories,
                                tool_calls=list(ctx.records), workers=reports, timings_ms=timings,
                                incomplete=incomplete)

    def _run_workers(self, query: str, tools: Sequence[ToolName], ctx: ToolContext, settings: Settings,
                     cancel: threading.Event | None,
                     guard: RunGuard | None = None) -> tuple[list[WorkerReport], list[ToolOutput]]:
        """Each planned tool in its own thread; a slow or failing worker is reported and left out."""
        configured_ms = settings.retrieval.worker_timeout_ms
        timeout_s = configured_ms / 1000
        names = list(dict.fromkeys(tools))
        if not names or (cancel is not None and cancel.is_set()):
            return [], []
        reports: list[WorkerReport] = []
        if guard is not None:
            timeout_s = guard.clip(timeout_s, retrieval=True)
            for name in [n for n in names if not guard.usable(_WORKER_TOOLS[n])]:
                names.remove(name)  # timed out earlier in this run: not called again
                reports.append(WorkerReport(name=name, status="error",
                                            message=f"not called: {guard.breaker.reason(_WORKER_TOOLS[name])}"))
        clipped = timeout_s * 1000 < configured_ms
        budget_note = f"no answer within {round(timeout_s * 1000)} ms" + \
            (" (what was left of run.deadline_ms)" if clipped else "")
        if not names:
            return reports, []
        if timeout_s < 0.05:  # the run's retrieval budget is spent: do not start work that cannot finish
            return reports + [WorkerReport(name=n, status="timeout", message=budget_note) for n in names], []
        pool = ThreadPoolExecutor(max_workers=len(names), thread_name_prefix="docmind-worker")
        starts = {name: time.perf_counter() for name in names}
        futures = {name: pool.submit(self._work, name, query, ctx) for name in names}
        deadline = time.perf_counter() + timeout_s
        pending = set(futures.values())
        while pending:  # wake up early on cancel; otherwise until all finish or the deadline passes
            left = deadline - time.perf_counter()
            if left <= 0 or (cancel is not None and cancel.is_set()):
                break
            _, pending = wait(pending, timeout=min(left, 0.1), return_when=FIRST_EXCEPTION)
        pool.shutdown(wait=False, cancel_futures=True)  # stragglers finish in the background, unused

        outputs: list[ToolOutput] = []
        for name, fut in futures.items():
            if not fut.done():
                reports.append(WorkerReport(name=name, status="timeout", latency_ms=round(timeout_s * 1000, 2),
                                            message=budget_note))
                if guard is not None:
                    guard.trip(_WORKER_TOOLS[name], f"{_WORKER_TOOLS[name]} timed out earlier in this run "
                                                    f"({budget_note})")
                continue
            exc = fut.exception()
            if exc is not None:
                reports.append(WorkerReport(name=name, status="error", latency_ms=_ms(starts[name]),
                                            message=str(exc)))
                continue
            output, latency = fut.result()
            status = "ok" if output.status == "ok" else ("unavailable" if output.status == "unavailable" else "error")
            reports.append(WorkerReport(name=name, status=status, hits=len(output.chunks) + len(output.memories),
                                        latency_ms=latency, message=output.message))
            if status == "ok":
                outputs.append(output)
        return reports, outputs

    def _work(self, name: str, query: str, ctx: ToolContext) -> tuple[ToolOutput, float]:
        t0 = time.perf_counter()
        tool = _WORKER_TOOLS[name]
        args: dict[str, Any] = {"query": query}
        if tool in ("searchDocs",):
            args["top_k"] = None  # the whole fused candidate list; the refiner cuts it
        output = self.toolbox.call(ctx, tool, args)
        latency = _ms(t0)
        ctx.record(ToolCallRecord(name=tool, args={"query": query}, result_count=len(output.chunks),
                                  status=output.status, latency_ms=latency, message=output.message))
        return output, latency
