"""The closing stage of both retrieval paths: refine -> grade -> at most one web compensation round.

RULE_PLANNER (one-shot) and AGENTIC (the loop's finalize step) both end here, so they rerank, grade and
compensate in exactly the same way and hand generation the same :class:`RetrievalOutcome`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Generator, Sequence

from docmind_core.answer.grade import CragGrader
from docmind_core.retrieval.refine import EvidenceRefiner
from docmind_core.deadline import elapsed_ms
from docmind_core.events import Event, Graded, Reranked, WebCompensated
from docmind_core.values import CutBy, GradeResult, Mode, RetrievedChunk, SearchResult, ToolCallRecord, WorkerReport
from docmind_core.settings import Settings
from docmind_core.text.tokens import count_tokens, truncate_to_tokens
from docmind_core.answer.tools import ToolContext, Toolbox, ToolOutput

EventStream = Generator[Event, None, "RetrievalOutcome"]


@dataclass
class RetrievalOutcome:
    """What retrieval hands to generation, whichever path produced it."""

    result: SearchResult  # chunks = the sources, in order; candidates = every candidate with its scores
    grade: GradeResult | None  # None: stopped before the evidence was graded
    mode: Mode  # RULE_PLANNER or AGENTIC: the path that retrieved
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


def _reranker_name(refiner: Any) -> str:
    reranker = getattr(refiner, "reranker", None)
    return str(getattr(reranker, "name", "") or type(refiner).__name__)


class EvidenceFinisher:
    """union → refine (rerank, MMR, parent expansion, compression) → grade → at most one web round."""

    def __init__(self, toolbox: Toolbox, refiner: EvidenceRefiner, grader: CragGrader):
        self.toolbox = toolbox
        self.refiner = refiner
        self.grader = grader

    def finish(self, query: str, union: Sequence[RetrievedChunk], ctx: ToolContext,
               web_already_used: bool, rerank_query: str | None = None,
               groups: Sequence[Sequence[str]] = (), incomplete: Sequence[str] = ()
               ) -> Generator[Event, None, FinishedEvidence]:
        """``groups``: chunk ids per search; each search's best-reranked chunk is kept (see keep_group_best).
        ``incomplete``: what did not answer during retrieval; the grade's reason says so.  Settings and
        deadline are the run's (``ctx.run``)."""
        settings, guard = ctx.run.settings, ctx.run.guard
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        result = keep_group_best(self.refiner.refine(rerank_query or query, list(union), settings), groups, settings)
        timings["refine"] = elapsed_ms(t0)
        yield Reranked(candidates=result.candidates, reranker=_reranker_name(self.refiner),
                       duration_ms=timings["refine"])
        t0 = time.perf_counter()
        grade = self.grader.grade(query, result.chunks, settings.grader,
                                  settings.retrieval.web_compensation_on_low, incomplete=incomplete)
        timings["grade"] = elapsed_ms(t0)
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
                                  status=web.status, latency_ms=elapsed_ms(t0), message=web.message or "web compensation"))
        if web.status != "ok" or not web.chunks:
            timings["web_compensation"] = elapsed_ms(t0)
            why = web.message or "web search returned nothing"
            yield WebCompensated(ran=False, reason=f"{reason}; {why}", duration_ms=timings["web_compensation"])
            return FinishedEvidence(result, grade, False, timings)

        merged = merge_unique(union, web.chunks)
        result = keep_group_best(self.refiner.refine(rerank_query or query, merged, settings), groups, settings)
        timings["web_compensation"] = elapsed_ms(t0)
        added = sum(1 for c in result.chunks if c.origin == "web")
        yield WebCompensated(ran=True, reason=reason, added_chunks=added, duration_ms=timings["web_compensation"])
        grade = self.grader.grade(query, result.chunks, settings.grader,
                                  settings.retrieval.web_compensation_on_low, incomplete=incomplete)
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
    search's best.  A search whose best is already another search's (a hop on
    "Mikhail Gorbachev" finds his page first again) brings its own first find
    not yet kept instead (the forum he initiated, which the question's rerank
    scores low).  Same number of chunks, same token budget.
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
        elif ranked:  # its best is another search's: the search's own first find not yet wanted
            own = next((cid for cid in group if cid in score and score[cid] >= 0 and cid not in wanted), None)
            if own is not None:
                wanted.append(own)
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
    # a kept chunk is recorded as the grader and the answer see it (shortened to fit, if it was)
    kept_by_id = {c.chunk_id: c for c in kept}
    candidates = [kept_by_id[c.chunk_id] if c.chunk_id in kept_by_id
                  else c.model_copy(update={"kept": False, "cut_by": c.cut_by or CutBy.COVERAGE})
                  for c in result.candidates]
    return result.model_copy(update={"chunks": kept, "candidates": candidates,
                                     "used_tokens": sum(count_tokens(c.text) for c in kept)})


def merge_unique(first: Sequence[RetrievedChunk], second: Sequence[RetrievedChunk]) -> list[RetrievedChunk]:
    """Both lists in order, each chunk id once (its first occurrence)."""
    seen: dict[str, RetrievedChunk] = {}
    for chunk in [*first, *second]:
        seen.setdefault(chunk.chunk_id, chunk)
    return list(seen.values())
