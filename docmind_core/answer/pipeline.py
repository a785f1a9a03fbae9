"""One run of the answer pipeline, as a stream of typed events.

scope (answer.scope) → understanding (answer.understand) → routing (answer.route, answer.plan) →
retrieval: SELECTED_DOC (answer.selected_doc) / RULE_PLANNER (answer.rule_planner) / AGENTIC (answer.agentic),
each ending in refine → grade → web compensation (retrieval.refine, answer.grade, answer.finish) →
streamed answer (answer.generate) → citations and claim checks (answer.citations, answer.claims,
answer.answer_type).

A failure anywhere yields an ``ErrorRaised`` or ``Fallback`` event and the
run still ends with ``Done``.  The pipeline holds no per-run state between
calls; persistence (conversation, trace, Langfuse) is the engine's job.

Each run has one :class:`~docmind_core.answer.run_context.RunContext`, built
at its start from the request's session scope and the settings: every stage
reads the settings, the cancel flag, the deadline and the usage meter from it.
The deadline (``run.deadline_ms``, a :class:`RunGuard`) reaches understanding
(through the bound model), the agentic loop, the one-shot workers, the judge
and generation.  Once the model timed out in a run
it is not called again: the offline engine writes the answer from the same
evidence.  When retrieval was incomplete a notice says so first; with no
evidence at all the reply says only that, and never "nothing relevant".

DocMind's own notes (retrieval incomplete, still ingesting or embedding, the model replaced, an offline
excerpt standing in) are ``Notice`` events and ``Done.notices``, never answer text: the claim checks and the
confidence read only what answers.  A reply that retrieved nothing (a greeting) or is only DocMind's note has
no claims.  ``Done.verdict`` (answer/verdict.py) is the one judgement the reader sees.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator, Sequence

from docmind_core.answer.answer_check import rescue_notice, second_opinion
from docmind_core.answer.selected_doc import SelectedDocPath
from docmind_core.answer.generate import AnswerWriter, choose_template
from docmind_core.answer.grade import CragGrader
from docmind_core.answer.judge import (
    ModelJudge, claims_step, claims_to_check, evidence_step, judged_citations, resolve_judge,
)
from docmind_core.answer.plan import time_keyword
from docmind_core.answer.route import route_with_plan
from docmind_core.answer.run_context import RunContext
from docmind_core.answer.scope import trusted_scope
from docmind_core.answer.understand import QueryUnderstanding
from docmind_core.answer.verdict import verdict_for
from docmind_core.backends.protocols import LanguageModel, Reranker, UsageMeter
from docmind_core.answer.citations import confidence_from, parse_citations
from docmind_core.deadline import LLM, RunGuard, elapsed_ms
from docmind_core.events import (
    AppNotice, Done, ErrorRaised, Event, Fallback, IngestPending, Notice, Routed, RunStarted, ScopeDecided, Token,
    Understood,
)
from docmind_core.values import (
    NO_RETRIEVAL_MODE, BackendStatus, CitationResult, GradeResult, Mode, PathDecision, PendingIngest, RequestedMode,
    RetrievalPlan, RetrievedChunk,
    Scope, StopReason, Turn, Understanding,
)
from docmind_core.text.query_signals import fast_scope, memory_text
from docmind_core.settings import Settings
from docmind_core.answer.tools import ToolContext

if TYPE_CHECKING:
    from docmind_core.answer.agentic import AgenticPath
    from docmind_core.answer.rule_planner import RulePlannerPath
    from docmind_core.answer.memory import MemoryStore
    from docmind_core.prompts import PromptLibrary
    from docmind_core.store.kb_store import KnowledgeStore

# Scopes that never retrieve: each maps to the answer template that handles it.
_DIRECT_TEMPLATES = {
    Scope.META_DIALOGUE: "meta_dialogue",
    Scope.CHITCHAT: "chitchat",
    Scope.CAPABILITY: "capability",
    Scope.OUT_OF_SCOPE: "out_of_scope",
    Scope.MEMORY_COMMAND: "memory_ack",
}



@dataclass
class AskRequest:
    question: str
    kb_ids: list[int]
    requested_mode: RequestedMode = RequestedMode.AUTO
    selected_doc_ids: list[int] = field(default_factory=list)
    user_id: int | None = None
    conversation_id: str = ""
    history: list[Turn] = field(default_factory=list)
    exclude_doc_ids: list[int] = field(default_factory=list)  # never retrieved nor read (leave-gold-out runs)
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    pending: list[PendingIngest] = field(default_factory=list)  # selected KBs still being ingested


def _failed_call(meter: UsageMeter, purpose: str) -> str:
    """The error of the last failed model call for ``purpose`` in this run ("" when none failed)."""
    return next((c.error for c in reversed(meter.calls) if c.purpose == purpose and not c.ok), "")


@dataclass
class _RunState:
    """What one run has learnt so far; read by the final Done event even after a failure."""

    started: float
    stage: str = "start"
    scope: Scope = Scope.KNOWLEDGE_QUERY
    decision: PathDecision | None = None
    sources: list[RetrievedChunk] = field(default_factory=list)
    grade: GradeResult | None = None
    stop_reason: str = ""
    web_compensated: bool = False
    memories: list[str] = field(default_factory=list)
    memory_text: str = ""  # what a memory command asked to store
    answer: str = ""
    template: str = ""  # the answer prompt the answer was written with
    answer_offline: bool = False  # the offline engine wrote the answer (the model failed, or is the offline engine)
    stand_in: bool = False  # the offline reading replaced a model answer that failed its checks (answer_check.py)
    timings: dict[str, float] = field(default_factory=dict)
    incomplete: list[str] = field(default_factory=list)  # what did not answer during retrieval
    judge: ModelJudge | None = None  # the model judge of this run (grader.judge), None: offline checks only
    citations: CitationResult | None = None  # once the answer is written and its claims checked (offline/judge)
    pending: list[PendingIngest] = field(default_factory=list)  # selected KBs still being ingested
    notices: list[AppNotice] = field(default_factory=list)  # DocMind's own notes, outside the answer text
    app_written: bool = False  # the reply is only DocMind's own note (nothing found to answer from)

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000


class AnswerPipeline:
    """Turns a question into a graded, cited, streamed answer."""

    def __init__(self, *, llm: LanguageModel, fallback_llm: LanguageModel, prompts: PromptLibrary,
                 store: KnowledgeStore | None, reranker: Reranker, rule_planner: RulePlannerPath,
                 agentic: AgenticPath, grader: CragGrader, memory: MemoryStore | None,
                 judge: ModelJudge | None = None):
        # store None: no SELECTED_DOC reading; memory None: no "remember ..." (evaluation and unit tests)
        self.llm = llm
        self.prompts = prompts
        self.store = store
        self.selected_doc = SelectedDocPath(store, reranker, grader)
        self.understanding = QueryUnderstanding(llm, prompts)
        self.writer = AnswerWriter(llm, fallback_llm, prompts)
        self.rule_planner = rule_planner
        self.agentic = agentic
        self.memory = memory
        self.judge = judge  # over the configured model; None when it is the offline engine

    # ------------------------------------------------------------------
    def ask(self, request: AskRequest, settings: Settings, backends: Sequence[BackendStatus],
            cancel: threading.Event | None = None) -> Iterator[Event]:
        run = RunContext.start(settings, request.kb_ids, request.user_id, request.exclude_doc_ids, cancel,
                               guard=RunGuard.start(settings))
        state = _RunState(started=time.perf_counter(), pending=list(request.pending))

        def stamp(event: Event) -> Event:
            return event.model_copy(update={"t_ms": round(state.elapsed_ms(), 2)})

        yield stamp(RunStarted(
            run_id=request.run_id, question=request.question, kb_ids=list(request.kb_ids),
            requested_mode=request.requested_mode.value, backends=list(backends),
            conversation_id=request.conversation_id, selected_doc_ids=list(request.selected_doc_ids)))
        for pending in request.pending:  # said up front: what this run cannot search yet
            yield stamp(IngestPending(kb_id=pending.kb_id, kb_name=pending.kb_name,
                                      pending_documents=pending.pending_documents,
                                      searched_documents=pending.searched_documents,
                                      embedding_chunks=pending.embedding_chunks))
        try:
            if not request.question.strip():
                raise ValueError("the question is empty")
            for event in self._run(request, run, state):
                yield stamp(event)
        except GeneratorExit:  # the consumer went away: stop tools and the model, end quietly
            run.cancel.set()
            raise
        except Exception as exc:  # any stage: report it where it happened, then still finish the run
            yield stamp(ErrorRaised(stage=state.stage, message=f"{type(exc).__name__}: {exc}"))
            if state.stage in ("understanding", "routing", "retrieval"):
                state.incomplete.append(f"{state.stage} failed ({type(exc).__name__}: {exc})")
            if not state.answer:
                for event in self._fallback_answer(request, state, run):
                    yield stamp(event)
        state.timings["total"] = round(state.elapsed_ms(), 2)
        yield stamp(self._done(request, state, run))

    # ------------------------------------------------------------------
    def _run(self, request: AskRequest, run: RunContext, state: _RunState) -> Iterator[Event]:
        settings, guard = run.settings, run.guard
        question = request.question.strip()
        history = request.history[-2 * settings.rag.history_turns:] if settings.rag.history_turns else []
        state.judge, unavailable = resolve_judge(settings.grader.judge, self.judge)
        if unavailable:
            yield Fallback(stage="judge", reason=unavailable, to="offline checks")

        # 1. scope: the regex fast path answers with zero model calls when it is sure
        state.stage = "scope"
        t = time.perf_counter()
        fast = fast_scope(question, history)
        kb_brief = ""  # the KBs' names and descriptions: read once, for understanding and the agentic seed
        state.timings["scope"] = elapsed_ms(t)
        understanding: Understanding | None = None
        if fast is not None:
            state.scope, state.memory_text = fast.scope, fast.memory_text
            yield ScopeDecided(scope=fast.scope, confidence=fast.confidence, via="regex", reason=fast.reason)
        else:
            # 2. understanding: one model call that also decides the scope
            state.stage = "understanding"
            t = time.perf_counter()
            kb_brief = self._kb_brief(run.kb_ids)
            understood = self.understanding.understand(question, history, kb_brief, run)
            understanding, via = understood.understanding, understood.via
            state.timings["understanding"] = elapsed_ms(t)
            if via == "fallback":  # the model's reply was not used: say why, and what classified instead
                failed = _failed_call(run.meter, "understanding")
                why = failed or (f"the language model is not called again in this run: "
                                 f"{guard.breaker.reason(LLM)}" if not guard.usable(LLM) else
                                 "the understanding step failed")
                yield ErrorRaised(stage="understanding", message=why)
                yield Fallback(stage="understanding", reason=f"the model's understanding was not used: {why}",
                               to="conservative classification (offline rules: the question searched as asked)")
            state.scope, why = trusted_scope(understanding, settings)
            yield ScopeDecided(scope=state.scope, confidence=understanding.scope_confidence, via=via, reason=why)
            yield Understood(understanding=understanding, via=via, duration_ms=state.timings["understanding"],
                             note=understood.note)
            self._store_memory_hints(run, understanding)

        if state.scope != Scope.KNOWLEDGE_QUERY:
            yield from self._answer_without_retrieval(run, question, history, state)
            return

        if understanding is None:  # fast path said "knowledge" (it never does today, but stay total)
            understanding = Understanding(rewritten_query=question)

        # 3. routing
        state.stage = "routing"
        decision, plan = route_with_plan(question, understanding, request.selected_doc_ids, request.requested_mode,
                                         settings)
        state.decision = decision
        yield Routed(decision=decision, plan=plan)
        unsearched_web = self._web_not_searched(question, understanding, decision, plan)
        if unsearched_web:
            yield Fallback(stage="web", reason=unsearched_web, to="the knowledge bases only")

        # 4. retrieval and grading
        state.stage = "retrieval"
        t = time.perf_counter()
        if decision.mode == Mode.SELECTED_DOC:
            reading = yield from self.selected_doc.read(understanding.rewritten_query or request.question,
                                                         request.selected_doc_ids, run,
                                                         question=decision.reason == "selected_doc_question")
            state.sources, state.grade = reading.sources, reading.grade
        else:
            ctx = ToolContext(run)
            if decision.mode == Mode.AGENTIC:
                outcome = yield from self.agentic.run(question, understanding, kb_brief or self._kb_brief(run.kb_ids),
                                                      ctx)
            else:
                outcome = yield from self.rule_planner.run(question, understanding, plan, ctx)
            state.sources = [c for c in outcome.result.chunks]
            state.incomplete = list(outcome.incomplete)
            state.grade = outcome.grade
            state.stop_reason = outcome.stop_reason
            state.web_compensated = outcome.web_compensated
            state.memories = list(outcome.memories)
            for name, value in outcome.timings_ms.items():
                state.timings[f"retrieval.{name}"] = round(value, 2)
        state.timings["retrieval"] = elapsed_ms(t)

        if run.cancel.is_set():
            state.stop_reason = state.stop_reason or StopReason.CANCELLED
            return

        # 4b. the model judge reads the evidence; a summary of the user's own selection is not second-guessed,
        # a question asked of it is graded, so judged, like retrieved evidence
        judged = decision.mode != Mode.SELECTED_DOC or decision.reason == "selected_doc_question"
        if state.judge is not None and judged and state.sources and state.grade:
            state.stage = "judge"
            t = time.perf_counter()
            state.grade = yield from evidence_step(state.judge, question, state.grade, state.sources, run)
            state.timings["judge.evidence"] = elapsed_ms(t)

        # 5. generation
        state.stage = "generation"
        template = choose_template(state.grade, state.sources)
        yield from self._generate(template, question, history, state, run)

        # 6. the model judge reads each claim against its source, over the offline checks' statuses
        if state.judge is not None and settings.grader.judge_claims and state.answer and not run.cancel.is_set():
            citations = parse_citations(state.answer, state.sources, settings.citation.coverage_min_sentence_len)
            state.citations = citations  # read once: the done event uses these unless the judge re-rates them
            claims = claims_to_check(citations, state.sources)
            if claims:
                state.stage = "judge"
                t = time.perf_counter()
                verdicts = yield from claims_step(state.judge, claims, run)
                state.citations = judged_citations(citations, claims, verdicts, state.answer, state.sources)
                state.timings["judge.claims"] = elapsed_ms(t)

        # 7. a model answer that fails the claim or answer-type checks gives way to the offline reading of the
        # same evidence when that reading passes them (citation.rescue_failed_answer; answer_check.py)
        if settings.citation.rescue_failed_answer and not state.answer_offline and state.answer \
                and template in ("knowledge_qa", "low_confidence") and not state.incomplete \
                and not state.pending and not run.cancel.is_set():
            state.stage = "answer check"
            yield from self._second_opinion(question, history, state, run)

    # ------------------------------------------------------------------
    def _answer_without_retrieval(self, run: RunContext, question: str, history: list[Turn],
                                  state: _RunState) -> Iterator[Event]:
        template = _DIRECT_TEMPLATES[state.scope]
        if state.scope == Scope.MEMORY_COMMAND:
            text = state.memory_text or memory_text(question) or question
            if run.user_id is not None and self.memory is not None:
                self.memory.add(run.user_id, text, source="memory_command")
                state.memories = [text]
            else:
                yield Fallback(stage="memory", reason="no signed-in user to store a memory for", to="reply only")
        state.stage = "generation"
        yield from self._generate(template, question, history, state, run)

    def _generate(self, template: str, question: str, history: list[Turn], state: _RunState,
                  run: RunContext) -> Iterator[Event]:
        written = yield from self.writer.write(template, question, state.sources, history, state.memories,
                                               state.incomplete, run, pending=state.pending)
        state.answer = written.text
        state.template, state.answer_offline = template, written.offline
        state.notices.extend(written.notices)
        state.app_written = written.app_written
        if written.cancelled:
            state.stop_reason = state.stop_reason or StopReason.CANCELLED
        if written.duration_ms:
            state.timings["generation"] = written.duration_ms

    def _second_opinion(self, question: str, history: list[Turn], state: _RunState,
                        run: RunContext) -> Iterator[Event]:
        t = time.perf_counter()
        opinion = second_opinion(
            question, state.answer, state.sources, run.settings.citation.coverage_min_sentence_len,
            state.grade.tier if state.grade is not None else None,
            lambda: self.writer.offline_reading(state.template, question, state.sources, history, state.memories,
                                                run),
            state.citations)
        state.citations = opinion.model.citations  # the done event reads these unless the answer is replaced
        if opinion.model.fails:
            state.timings["answer_check"] = elapsed_ms(t)
        if not opinion.replacement:
            return
        yield Fallback(stage="answer check", reason=opinion.reason, replaced=state.answer,
                       to=f"{self.writer.fallback_llm.name} (offline reading of the same evidence)")
        # the replacement is the rescue notice + the offline reading (answer_check.second_opinion): the notice
        # is DocMind's word, shown beside the answer, and only the reading is the answer
        notice = rescue_notice(question, opinion.model)
        reading = opinion.replacement.removeprefix(notice)
        event = Notice(code="stand_in", text=notice.strip())
        state.notices.append(event.notice)
        yield event
        yield Token(text="\n\n" + reading)
        state.answer = reading
        state.stand_in = True
        state.citations = None  # read again over the answer that is shown

    def _fallback_answer(self, request: AskRequest, state: _RunState, run: RunContext) -> Iterator[Event]:
        """After a failure before the answer: answer with the fallback template and whatever evidence we have."""
        yield Fallback(stage=state.stage, reason="the pipeline failed before answering", to="fallback prompt")
        state.answer = yield from self.writer.write_after_failure(
            request.question, state.sources, state.memories, state.incomplete or [f"{state.stage} failed"], run)
        state.app_written = not state.sources  # with no evidence the reply is DocMind's note that it has none

    # ------------------------------------------------------------------
    def _done(self, request: AskRequest, state: _RunState, run: RunContext) -> Done:
        settings, cancel = run.settings, run.cancel
        if state.app_written or state.scope != Scope.KNOWLEDGE_QUERY:
            citations = CitationResult()  # DocMind's own words, or a reply that searched nothing: no claims
        else:
            citations = state.citations or parse_citations(state.answer, state.sources,
                                                           settings.citation.coverage_min_sentence_len)
        confidence = None
        if state.grade is not None and not cancel.is_set():  # a stopped answer is partial: no confidence
            confidence = confidence_from(citations, state.grade.top_score, state.grade.tier, settings.citation,
                                         question=request.question, stand_in=state.stand_in,
                                         sources=state.sources if settings.grader.require_asked_target else ())
        decision = state.decision
        done = Done(
            run_id=request.run_id, answer=state.answer,
            mode=decision.mode.value if decision else NO_RETRIEVAL_MODE,
            route_reason=decision.reason if decision else f"scope:{state.scope.value}",
            scope=state.scope, sources=state.sources, citations=citations, confidence=confidence,
            grade=state.grade, stop_reason=state.stop_reason or (StopReason.CANCELLED if cancel.is_set() else ""),
            web_compensated=state.web_compensated, cancelled=cancel.is_set(), timings_ms=state.timings,
            model_calls=list(run.meter.calls), backend=self.llm.name,
            pending_documents=sum(p.pending_documents for p in state.pending),
            notices=list(state.notices),
        )
        return done.model_copy(update={"verdict": verdict_for(done, settings.citation)})

    def _web_not_searched(self, question: str, understanding: Understanding, decision: PathDecision,
                          plan: RetrievalPlan | None) -> str:
        """For a time-aware question the web cannot answer (no live backend), why, in words; else ""."""
        if decision.mode is Mode.SELECTED_DOC:
            return ""
        word = time_keyword(question) or time_keyword(understanding.rewritten_query)
        wanted = "web_search" in plan.tools if plan is not None else bool(word or understanding.time_aware)
        missing = self.rule_planner.toolbox.web_unavailable() if wanted else ""
        if not missing:
            return ""
        what = f"the question is time-aware (\"{word}\")" if word else "the question is time-aware"
        return f"{what}, but the web is not searched: {missing}; the answer may be out of date"

    # ------------------------------------------------------------------
    def _kb_brief(self, kb_ids: Sequence[int]) -> str:
        """Names and descriptions of the selected KBs (never their ids) for rewriting and the agentic seed."""
        lines = []
        for kb_id in kb_ids:
            try:
                kb = self.store.get_kb(kb_id)
            except Exception:
                continue
            lines.append(f"- {kb.name}: {kb.description}" if kb.description else f"- {kb.name}")
        return "\n".join(lines) if lines else "(no knowledge base selected)"

    def _store_memory_hints(self, run: RunContext, understanding: Understanding) -> None:
        if run.user_id is None or self.memory is None:
            return
        for hint in understanding.memory_write_hints[:3]:
            if hint.strip():
                self.memory.add(run.user_id, hint.strip(), source="hint")
