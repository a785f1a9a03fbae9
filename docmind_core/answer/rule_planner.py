"""One-shot retrieval: the planned tools in parallel, then one refine → grade → web-compensation pass.

This is the RULE_PLANNER path and the agentic loop's fallback.  The KB
searches run the rewritten query and, when it differs, the question as it
was asked: the rewrite only adds recall, it never replaces the question.  The closing
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

import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any, Sequence

from docmind_core.answer.finish import EventStream, EvidenceFinisher, RetrievalOutcome, merge_unique
from docmind_core.answer.grade import CragGrader
from docmind_core.deadline import elapsed_ms
from docmind_core.events import ErrorRaised, Retrieved
from docmind_core.values import Mode, RetrievalPlan, RetrievedChunk, ToolCallRecord, ToolName, Understanding, WorkerReport
from docmind_core.retrieval.refine import EvidenceRefiner
from docmind_core.text.tokens import normalise_query
from docmind_core.answer.tools import ToolContext, Toolbox, ToolOutput

_KB_TOOLS = ("searchDocs", "keywordSearch")  # the searches that also run the question beside its rewrite
# Plan tool name -> (toolbox tool, its arguments besides the query)
_WORKER_TOOLS: dict[str, str] = {
    "doc_search": "searchDocs", "keyword_search": "keywordSearch", "web_search": "webSearch",
    "recall_memory": "recall_memory",
}


class RulePlannerPath:
    """Planned tools in parallel threads, each under retrieval.worker_timeout_ms; failures drop out."""

    def __init__(self, toolbox: Toolbox, refiner: EvidenceRefiner, grader: CragGrader):
        self.toolbox = toolbox
        self.finisher = EvidenceFinisher(toolbox, refiner, grader)

    def run(self, question: str, understanding: Understanding, plan: RetrievalPlan, ctx: ToolContext) -> EventStream:
        """Settings, cancel flag and deadline are the run's (``ctx.run``)."""
        started = time.perf_counter()
        query = understanding.rewritten_query or question
        # the rewrite only adds recall: the KB searches also run the question as it was asked
        extra = [question] if question.strip() and normalise_query(question) != normalise_query(query) else []
        reports, outputs = self._run_workers(query, plan.tools, ctx, extra_queries=extra)
        incomplete = [f"{r.name} {'timed out' if r.status == 'timeout' else 'failed'} ({r.message})"
                      for r in reports if r.status in ("timeout", "error")]
        union: list[RetrievedChunk] = []
        for output in outputs:
            union = merge_unique(union, output.chunks)
        memories = [m for o in outputs for m in o.memories]
        memories = list(dict.fromkeys(memories))
        retrieval_ms = elapsed_ms(started)
        yield Retrieved(mode=Mode.RULE_PLANNER, workers=reports, candidate_count=len(union),
                        kb_chunks=sum(1 for c in union if c.origin == "kb"),
                        web_chunks=sum(1 for c in union if c.origin == "web"),
                        memory_items=len(memories), duration_ms=retrieval_ms)
        for report in reports:  # right after the worker list: each worker that did not answer is an error
            if report.status in ("timeout", "error"):
                yield ErrorRaised(stage=f"retrieval.{report.name}", message=f"{report.status}: {report.message}")
        web_used = any(r.name == "web_search" and r.status == "ok" for r in reports)
        done = yield from self.finisher.finish(query, union, ctx, web_used, incomplete=incomplete)
        timings = {"retrieval": retrieval_ms, **done.timings_ms}
        return RetrievalOutcome(result=done.result, grade=done.grade, mode=Mode.RULE_PLANNER, stop_reason="",
                                web_compensated=done.web_compensated, memories=memories,
                                tool_calls=list(ctx.records), workers=reports, timings_ms=timings,
                                incomplete=incomplete)

    def _run_workers(self, query: str, tools: Sequence[ToolName], ctx: ToolContext,
                     extra_queries: Sequence[str] = ()) -> tuple[list[WorkerReport], list[ToolOutput]]:
        """Each planned tool in its own thread; a slow or failing worker is reported and left out."""
        settings, cancel, guard = ctx.run.settings, ctx.run.cancel, ctx.run.guard
        configured_ms = settings.retrieval.worker_timeout_ms
        timeout_s = configured_ms / 1000
        names = list(dict.fromkeys(tools))
        if not names or cancel.is_set():
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
        futures = {name: pool.submit(self._work, name, query, ctx, extra_queries) for name in names}
        deadline = time.perf_counter() + timeout_s
        pending = set(futures.values())
        while pending:  # wake up early on cancel; otherwise until all finish or the deadline passes
            left = deadline - time.perf_counter()
            if left <= 0 or cancel.is_set():
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
                reports.append(WorkerReport(name=name, status="error", latency_ms=elapsed_ms(starts[name]),
                                            message=str(exc)))
                continue
            output, latency = fut.result()
            status = "ok" if output.status == "ok" else ("unavailable" if output.status == "unavailable" else "error")
            reports.append(WorkerReport(name=name, status=status, hits=len(output.chunks) + len(output.memories),
                                        latency_ms=latency, message=output.message))
            if status == "ok":
                outputs.append(output)
        return reports, outputs

    def _work(self, name: str, query: str, ctx: ToolContext,
              extra_queries: Sequence[str] = ()) -> tuple[ToolOutput, float]:
        """One worker's tool on the query; a KB search also on each extra query (the question as asked), its
        hits merged after the query's own."""
        t0 = time.perf_counter()
        tool = _WORKER_TOOLS[name]
        queries = [query, *extra_queries] if tool in _KB_TOOLS else [query]
        merged: ToolOutput | None = None
        for text in queries:
            started = time.perf_counter()
            args: dict[str, Any] = {"query": text}
            if tool in ("searchDocs",):
                args["top_k"] = None  # the whole fused candidate list; the refiner cuts it
            output = self.toolbox.call(ctx, tool, args)
            ctx.record(ToolCallRecord(name=tool, args={"query": text}, result_count=len(output.chunks),
                                      status=output.status, latency_ms=elapsed_ms(started), message=output.message))
            if merged is None:
                merged = output
            elif output.status == "ok":
                merged.chunks = merge_unique(merged.chunks, output.chunks)
        assert merged is not None
        return merged, elapsed_ms(t0)
