"""The AGENTIC path: our own bounded tool-calling loop, then the shared finalize step.

Each round sends the conversation and the tool schemas to the model
(``LanguageModel.agent_turn``); no tool call means the model is done.  The
calls of one round run in parallel under the run's :class:`ToolContext`, and
their results go back into the conversation as OpenAI ``tool`` messages (plus
structured observations for the offline policy).

The loop is bounded four ways (rounds, per-round time, total time, tool-call
cap) and checks the cancel flag while it waits.  A round runs in a worker
thread so a slow model cannot hold the loop past its deadline; on timeout the
context's stop flag halts pending tools, and the worker is joined before
``run`` returns (the model call itself was given the same deadline).

Finalize reranks the union of everything found on one scale, then grades and
compensates with the web exactly as one-shot does.  Any exception or an empty
union falls back to one-shot retrieval with the conservative plan.

Under a run's :class:`~docmind_core.deadline.RunGuard` the loop also ends in
time for that fallback to run before the retrieval budget is spent; a round
that timed out in the model opens the run's breaker for the model, and a loop
started with the breaker already open goes straight to one-shot.  A loop cut
by a timeout marks the retrieval incomplete.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from docmind_core.backends.protocols import (
    AgentTranscript, AgentTurn, LanguageModel, Observation, ToolSpec,
)
from docmind_core.answer.grade import CragGrader
from docmind_core.prompts import PromptLibrary
from docmind_core.retrieval.refine import EvidenceRefiner
from docmind_core.deadline import LLM, bind_model, elapsed_ms, looks_like_timeout
from docmind_core.events import AgenticStep, ErrorRaised, Fallback, Retrieved
from docmind_core.values import (Mode, RetrievalPlan, RetrievedChunk, SearchResult, StageScores, StopReason,
                              ToolCallRecord, Understanding)
from docmind_core.answer.finish import EventStream, EvidenceFinisher, RetrievalOutcome
from docmind_core.answer.rule_planner import RulePlannerPath
from docmind_core.settings import Settings
from docmind_core.text.tokens import keyword_tokens, normalise_query
from docmind_core.backends.openai_parsing import CALL_STOP_SEQUENCES
from docmind_core.answer.tools import LOOP_TOOLS, ToolContext, Toolbox

_JOIN_GRACE_S = 3.0  # after a timeout, how long to wait for the round's worker to notice and finish
_POLL_S = 0.05  # how often the waiting loop looks at the cancel flag
_FALLBACK_SHARE = 0.25  # of the retrieval time left when the loop starts, kept for the one-shot fallback
_SANDBOX_SECTION = ("- executeCode: run a short Python program for exact arithmetic, counting or date maths over "
                    "numbers you found; print the result. It cannot read the knowledge bases.\n")
CONSERVATIVE_PLAN = RetrievalPlan(tools=["doc_search", "keyword_search"], conservative=True,
                                  reasons={"doc_search": "agentic fallback", "keyword_search": "agentic fallback"})


@dataclass
class _Round:
    turn: AgentTurn
    observations: list[Observation] = field(default_factory=list)
    requested: int = 0  # calls the model asked for
    repeated: int = 0  # of those, dropped as repeats within the round
    over_cap: int = 0  # of those, not run: past the tool-call cap


@dataclass
class _LoopEnd:
    """Why the loop ended early, when a backend (not the model's own choice) ended it."""

    error: str = ""  # for an ErrorRaised event
    in_model: bool = False  # the round was still waiting for the model when its time ran out


class _RoundWorker(threading.Thread):
    """One round (model call + its tools) in its own thread, so the loop can stop waiting at the deadline."""

    def __init__(self, work, name: str):
        super().__init__(name=name, daemon=True)
        self._work = work
        self.result: Any = None
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self.result = self._work()
        except BaseException as exc:  # noqa: BLE001 - handed to the loop, which decides
            self.error = exc

    def wait(self, timeout_s: float, cancel: threading.Event) -> bool:
        """True when the round finished in time; False on deadline or cancel (checked every few ms)."""
        deadline = time.perf_counter() + timeout_s
        while self.is_alive():
            left = deadline - time.perf_counter()
            if left <= 0 or cancel.is_set():
                return False
            self.join(min(left, _POLL_S))
        return not cancel.is_set()


class AgenticPath:
    """The bounded tool-calling loop with its finalize step; falls back to one-shot on failure."""

    def __init__(self, llm: LanguageModel, toolbox: Toolbox, refiner: EvidenceRefiner, grader: CragGrader,
                 prompts: PromptLibrary, rule_planner: RulePlannerPath):
        self.llm = llm
        self.toolbox = toolbox
        self.prompts = prompts
        self.finisher = EvidenceFinisher(toolbox, refiner, grader)
        self.rule_planner = rule_planner  # the fallback path when the loop cannot go on

    # ------------------------------------------------------------------
    def run(self, question: str, understanding: Understanding, kb_brief: str, ctx: ToolContext) -> EventStream:
        """Settings, cancel flag, deadline and meter are the run's (``ctx.run``)."""
        settings, guard = ctx.run.settings, ctx.run.guard
        started = time.perf_counter()
        llm = bind_model(self.llm, guard)
        if guard is not None and not guard.usable(LLM):
            ctx.close()
            return (yield from self._fall_back(question, understanding, ctx,
                                               f"the language model is not called again in this run: "
                                               f"{guard.breaker.reason(LLM)}", StopReason.ERROR, 0, 0.0))
        query = understanding.rewritten_query or question
        tools, withheld = self.toolbox.offered_specs(ctx)
        transcript = AgentTranscript(question=question, rewritten_query=query, kb_brief=kb_brief,
                                     messages=self._seed_messages(question, query, kb_brief, settings, tools),
                                     max_tokens=settings.agentic.round_max_tokens,
                                     stop=CALL_STOP_SEQUENCES if settings.agentic.stop_after_printed_call else ())
        rounds = 0
        stop_reason: str = StopReason.MAX_ITERATIONS
        failure = ""
        end = _LoopEnd()
        try:
            loop = self._loop(llm, transcript, tools, withheld, ctx, started, end)
            try:
                while True:
                    step = next(loop)
                    rounds += 1
                    yield step
            except StopIteration as done:
                stop_reason = done.value
        except Exception as exc:  # noqa: BLE001 - any loop failure degrades to one-shot, the answer still comes
            stop_reason, failure = StopReason.ERROR, f"{type(exc).__name__}: {exc}"
        finally:
            ctx.close()  # the loop is over: nothing may run under this context any more

        if stop_reason != StopReason.CANCELLED and not failure and settings.agentic.search_question:
            self._search_question(question, ctx)
        loop_ms = elapsed_ms(started)
        if stop_reason == StopReason.CANCELLED:
            return (yield from self._cancelled_outcome(query, ctx, rounds, loop_ms))
        timed_out = stop_reason in (StopReason.ITERATION_TIMEOUT, StopReason.TOTAL_TIMEOUT)
        if guard is not None and end.in_model:  # the model did not answer in time: not called again this run
            guard.trip(LLM, f"it timed out earlier in this run ({failure or stop_reason} in the agentic loop)")
        if end.in_model:  # a stalled model is an error of the run (the Fallback event below says what replaced it)
            yield ErrorRaised(stage="agentic", message=f"the language model timed out: {failure or end.error}")
        union = ctx.union()
        if failure or not union:
            reason = failure or ("the loop found no evidence" if not timed_out else
                                 f"the loop stopped ({stop_reason}) before it found evidence")
            return (yield from self._fall_back(question, understanding, ctx, reason, stop_reason, rounds, loop_ms))
        incomplete = [f"the agentic loop was cut short ({stop_reason})"] if timed_out else []
        try:
            yield Retrieved(mode=Mode.AGENTIC, tool_calls=list(ctx.records), candidate_count=len(union),
                            kb_chunks=sum(1 for c in union if c.origin == "kb"),
                            web_chunks=sum(1 for c in union if c.origin == "web"),
                            memory_items=len(ctx.memories), stop_reason=stop_reason, rounds=rounds,
                            dedupe_hits=ctx.dedupe_hits, duration_ms=loop_ms)
            rerank_query = expanded_rerank_query(query, ctx)
            union = self._on_one_scale(rerank_query, union, ctx)
            done = yield from self.finisher.finish(query, union, ctx, ctx.used_web,
                                                   rerank_query=rerank_query, groups=list(ctx.search_groups),
                                                   incomplete=incomplete)
        except Exception as exc:  # noqa: BLE001
            return (yield from self._fall_back(question, understanding, ctx,
                                               f"finalize failed: {type(exc).__name__}: {exc}", StopReason.ERROR,
                                               rounds, loop_ms))
        if not done.result.chunks:
            return (yield from self._fall_back(question, understanding, ctx,
                                               "finalize kept no evidence", stop_reason, rounds, loop_ms))
        return RetrievalOutcome(
            result=done.result, grade=done.grade, mode=Mode.AGENTIC, stop_reason=stop_reason,
            web_compensated=done.web_compensated, memories=list(ctx.memories), tool_calls=list(ctx.records),
            rounds=rounds, dedupe_hits=ctx.dedupe_hits, timings_ms={"agentic_loop": loop_ms, **done.timings_ms},
            incomplete=incomplete)

    # ------------------------------------------------------------------
    def _loop(self, llm: Any, transcript: AgentTranscript, tools: Sequence[ToolSpec], withheld: dict[str, str],
              ctx: ToolContext, started: float, end: _LoopEnd):
        """Yields one AgenticStep per round and returns the stop reason."""
        settings, cancel, guard = ctx.run.settings, ctx.run.cancel, ctx.run.guard
        cfg = settings.agentic
        allowed = [t.name for t in tools]
        total_deadline = started + cfg.total_timeout_ms / 1000
        if guard is not None:  # end early enough for the one-shot fallback to run inside the retrieval budget
            left = guard.retrieval_remaining()
            room = min(settings.retrieval.worker_timeout_ms / 1000, _FALLBACK_SHARE * left)
            total_deadline = min(total_deadline, time.perf_counter() + left - room)
        worker: _RoundWorker | None = None
        try:
            for iteration in range(1, cfg.max_iterations + 1):
                if cancel.is_set():
                    return StopReason.CANCELLED
                now = time.perf_counter()
                if now >= total_deadline:
                    return StopReason.TOTAL_TIMEOUT
                round_s = cfg.iteration_timeout_ms / 1000
                bound = StopReason.ITERATION_TIMEOUT
                if total_deadline - now < round_s:
                    round_s, bound = total_deadline - now, StopReason.TOTAL_TIMEOUT
                before = len(ctx.records)
                round_started = time.perf_counter()
                phase = {"in_model": True}
                worker = _RoundWorker(lambda: self._round(llm, transcript, tools, ctx, round_s, allowed, phase),
                                      name=f"docmind-agent-round-{iteration}")
                if not worker.wait(round_s, cancel):  # deadline or cancel while the round was running
                    ctx.stop.set()
                    if not cancel.is_set():
                        end.in_model = phase["in_model"]
                        end.error = f"round {iteration} got no answer within {round_s:.1f} s ({bound})"
                    return StopReason.CANCELLED if cancel.is_set() else bound
                if worker.error is not None:
                    if looks_like_timeout(worker.error) and phase["in_model"]:
                        end.in_model = True
                        end.error = f"{type(worker.error).__name__}: {worker.error}"
                        if time.perf_counter() - round_started >= round_s * 0.9:
                            return bound
                    raise worker.error
                rnd: _Round = worker.result
                if not rnd.turn.tool_calls:
                    return StopReason.MODEL_DONE
                self._append(transcript, rnd, iteration)
                records = ctx.records[before:]
                yield AgenticStep(iteration=iteration, max_iterations=cfg.max_iterations, tool_calls=records,
                                  new_chunks=sum(r.new_chunks for r in records),
                                  duplicate_chunks=sum(r.duplicate_chunks for r in records),
                                  duration_ms=elapsed_ms(round_started), thought=rnd.turn.text or "",
                                  offered_tools=list(allowed), withheld_tools=dict(withheld),
                                  requested_calls=rnd.requested, repeated_calls=rnd.repeated,
                                  over_cap_calls=rnd.over_cap)
                if ctx.call_count >= cfg.max_tool_calls:
                    return StopReason.MAX_TOOL_CALLS
            return StopReason.MAX_ITERATIONS
        finally:
            if worker is not None and worker.is_alive():
                ctx.stop.set()  # pending tools of the abandoned round see this and return at once
                worker.join(_JOIN_GRACE_S)  # the model call had the same deadline; let it end

    def _round(self, llm: Any, transcript: AgentTranscript, tools: Sequence[ToolSpec], ctx: ToolContext,
               timeout_s: float, allowed: list[str], phase: dict[str, bool]) -> _Round:
        # agent_turn's timeout is the whole call's budget, retries included (OpenAIChatModel fits every attempt
        # inside it), so the call has ended by the round's deadline and no thread survives run().
        turn = llm.agent_turn(transcript, tools, ctx.run.meter, max(0.1, timeout_s))
        phase["in_model"] = False
        calls = list(turn.tool_calls or [])
        for i, call in enumerate(calls):
            if not call.id:
                call.id = f"call_{len(transcript.rounds) + 1}_{i + 1}"
        if not calls or ctx.stop.is_set():
            return _Round(turn=turn)
        # in the model's order: repeats dropped, the cap applied in that order, the rest side by side
        done = self.toolbox.dispatch_round(ctx, calls, allowed)
        return _Round(turn=turn, observations=done.observations, requested=done.printed, repeated=done.repeated,
                      over_cap=done.over_cap)

    @staticmethod
    def _append(transcript: AgentTranscript, rnd: _Round, iteration: int) -> None:
        """The assistant turn and one tool message per call, in OpenAI format, plus the structured round."""
        # the transcript carries the calls that ran (each answered by its tool message), not the dropped repeats
        ran = [obs.call for obs in rnd.observations]
        message = dict(rnd.turn.assistant_message or {})
        if not message or len(ran) != len(rnd.turn.tool_calls):
            message = {"role": "assistant", "content": rnd.turn.text or None, "tool_calls": [
                {"id": c.id, "type": "function",
                 "function": {"name": c.name, "arguments": c.raw_arguments or json.dumps(c.arguments,
                                                                                         ensure_ascii=False)}}
                for c in ran]}
        transcript.messages.append(message)
        for obs in rnd.observations:
            transcript.messages.append({"role": "tool", "tool_call_id": obs.call.id, "content": obs.text})
        transcript.rounds.append(list(rnd.observations))

    def _seed_messages(self, question: str, query: str, kb_brief: str, settings: Settings,
                       tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
        offered = {t.name for t in tools}
        sandbox = _SANDBOX_SECTION if "executeCode" in offered else ""
        template = "agentic_system_compact" if settings.agentic.compact_tools else "agentic_system"
        system = self.prompts.render(template, sandbox_section=sandbox)
        system = _without_unoffered_lines(system, offered)
        lines = [f"Question: {question}"]
        if query.strip() != question.strip():
            lines.append(f"Rewritten search query: {query}")
        lines.append(f"Knowledge bases: {kb_brief or '(none described)'}")
        lines.append("Gather the evidence with the tools, then stop.")
        return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]

    def _search_question(self, question: str, ctx: ToolContext) -> None:
        """searchDocs on the question as asked, when no search of the loop ran it (``agentic.search_question``):
        the model's queries only add to it.  Recorded as a call after the loop; a failure leaves the union as
        the loop made it."""
        asked = normalise_query(question)
        if any(r.name == "searchDocs" and r.status == "ok" and normalise_query(str(r.args.get("query", ""))) == asked
               for r in ctx.records):
            return
        started = time.perf_counter()
        top_k = ctx.run.settings.agentic.search_top_k
        try:
            output = self.toolbox.call(ctx, "searchDocs", {"query": question, "top_k": top_k})
        except Exception:  # noqa: BLE001 - an addition to the loop's evidence, never a reason to fail it
            return
        new, dup = ctx.absorb(output.chunks, "searchDocs")
        if output.chunks:
            ctx.add_search_group([c.chunk_id for c in output.chunks])
        ctx.record(ToolCallRecord(name="searchDocs", args={"query": question, "top_k": top_k},
                                  result_count=len(output.chunks), new_chunks=len(new), duplicate_chunks=dup,
                                  status=output.status, latency_ms=elapsed_ms(started),
                                  message="the question as asked, searched after the loop (agentic.search_question)"))

    def _on_one_scale(self, query: str, union: list[RetrievedChunk], ctx: ToolContext) -> list[RetrievedChunk]:
        """Re-derive every chunk's retriever scores against the one finalize query.

        Each tool call scored its chunks against *its own* query (cosine to that
        query, bm25 of that query), so those numbers are not comparable across
        calls, nor with web results.  The reranker reads them as features, so
        they are replaced by the cosine to the finalize query (from the stored
        vectors, no re-encoding) and that query's bm25 where the chunk ranks.
        Without a hybrid retriever the scores are simply cleared.
        """
        fresh = [c.model_copy(update={"scores": StageScores(), "kept": True, "cut_by": None}) for c in union]
        retriever = self.toolbox.retriever
        vector_store = getattr(retriever, "vector_store", None)
        embedder = getattr(retriever, "embedder", None)
        kb_chunks = [c for c in fresh if c.origin == "kb"]
        if not kb_chunks or vector_store is None or embedder is None:
            return fresh
        try:
            from docmind_core.backends.embedders import query_vectors
            from docmind_core.retrieval.hybrid import stored_embeddings

            # another encoder's stored vectors are in another space: those chunks get no cosine
            same = set(retriever.vector_kbs({c.kb_id for c in kb_chunks if c.kb_id is not None}))
            in_space = [c for c in kb_chunks if c.kb_id is None or c.kb_id in same]
            stored = stored_embeddings(vector_store, in_space, getattr(retriever, "store", None)) if in_space else {}
            qvec = np.asarray(query_vectors(embedder, [query])[0], dtype=np.float32) if stored else None
            depth = max(ctx.run.settings.retrieval.keyword_top_k, 2 * len(kb_chunks))
            bm25 = {c.chunk_id: (c.scores.keyword, rank) for rank, c in enumerate(
                retriever.keyword_candidates(query, list(ctx.run.kb_ids), depth), start=1)}
        except Exception:  # noqa: BLE001 - an optional refinement; the reranker can work from text alone
            return fresh
        for chunk in kb_chunks:
            vec = stored.get(chunk.chunk_id)
            if vec is not None and qvec is not None and vec.shape == qvec.shape:
                chunk.scores.vector = round(float(np.dot(vec, qvec)), 6)
            if chunk.chunk_id in bm25:
                chunk.scores.keyword, chunk.scores.keyword_rank = bm25[chunk.chunk_id]
        return fresh

    # ------------------------------------------------------------------
    def _fall_back(self, question: str, understanding: Understanding, ctx: ToolContext, reason: str,
                   stop_reason: str, rounds: int, loop_ms: float) -> EventStream:
        yield Fallback(stage="agentic", reason=reason, to=Mode.RULE_PLANNER.value)
        fresh = ctx.fresh()  # the loop's dedupe memory must not block the fallback's searches
        outcome = yield from self.rule_planner.run(question, understanding, CONSERVATIVE_PLAN, fresh)
        outcome.fell_back = True
        outcome.stop_reason = stop_reason
        outcome.rounds = rounds
        outcome.dedupe_hits = ctx.dedupe_hits
        outcome.tool_calls = [*ctx.records, *outcome.tool_calls]
        outcome.memories = list(dict.fromkeys([*ctx.memories, *outcome.memories]))
        outcome.timings_ms = {"agentic_loop": loop_ms, **outcome.timings_ms}
        return outcome

    def _cancelled_outcome(self, query: str, ctx: ToolContext, rounds: int, loop_ms: float) -> EventStream:
        yield Retrieved(mode=Mode.AGENTIC, tool_calls=list(ctx.records), stop_reason=StopReason.CANCELLED,
                        rounds=rounds, dedupe_hits=ctx.dedupe_hits, duration_ms=loop_ms)
        # nothing was graded: a cancelled run has no tier (a LOW here read as "the evidence was weak")
        return RetrievalOutcome(result=SearchResult(query=query, chunks=[], candidates=[]), grade=None,
                                mode=Mode.AGENTIC, stop_reason=StopReason.CANCELLED, tool_calls=list(ctx.records),
                                rounds=rounds, dedupe_hits=ctx.dedupe_hits, memories=list(ctx.memories),
                                timings_ms={"agentic_loop": loop_ms})


def expanded_rerank_query(query: str, ctx: ToolContext) -> str:
    """The question plus the loop's search queries that reached beyond its own words.

    A bridge paragraph found by a second-hop search ("Shirley Temple") shares
    few words with the question, so reranking the union against the question
    alone would throw away exactly what the hop found.  Queries whose terms the
    question already contains (per-focus searches of a comparison) add nothing.
    """
    own = set(keyword_tokens(query))
    extra: list[str] = []
    for record in ctx.records:
        if record.name not in ("searchDocs", "keywordSearch") or record.status != "ok" or not record.new_chunks:
            continue
        text = str(record.args.get("query", ""))
        if set(keyword_tokens(text)) - own and text not in extra:
            extra.append(text)
    # sorted: calls of one round finish in any order, and the encoder reads word order
    return " ".join([query, *sorted(extra)]) if extra else query


def _without_unoffered_lines(system: str, offered: set[str]) -> str:
    """The system prompt without the lines that describe a loop tool this round does not offer."""
    unoffered = [name for name in LOOP_TOOLS if name not in offered]
    if not unoffered:
        return system
    return "\n".join(line for line in system.split("\n")
                     if not any(line.lstrip("- ").startswith(f"{name}") for name in unoffered))
