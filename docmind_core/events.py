"""The typed events one run of the pipeline yields.

Every consumer — the chat page, the CLI, the trace store, Langfuse export and
the tests — reads the same ``Iterator[Event]`` from ``Engine.ask()``.  Each
event is a frozen model with a ``kind`` discriminator; :data:`Event` is the
union and :func:`event_from_dict` rebuilds one from its stored form.

Whatever turns events into something else (the timeline, the digest, the run
summary, the Langfuse plan) is an :class:`EventFold`: one handler per kind,
dispatched by :func:`fold`, whose ``match`` ends in ``assert_never``.  A new
event class goes into the union, gets an abstract ``on_<kind>`` handler and a
``case`` in :func:`fold`; a type checker then flags the fold until the case is
there, and every fold class refuses to instantiate until it has the handler.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Annotated, Any, Generic, Literal, TypeVar, Union, assert_never, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from docmind_core.values import (
    BackendStatus,
    CitationResult,
    ClaimVerdict,
    Confidence,
    EvidenceVerdict,
    GradeResult,
    Mode,
    ModelCall,
    PathDecision,
    RetrievalPlan,
    RetrievedChunk,
    Scope,
    ToolCallRecord,
    Understanding,
    WorkerReport,
)


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    t_ms: float = 0.0  # milliseconds since the run started, stamped by the pipeline


class RunStarted(_Event):
    kind: Literal["run"] = "run"
    run_id: str
    question: str
    kb_ids: list[int]
    requested_mode: str
    backends: list[BackendStatus]
    conversation_id: str = ""
    selected_doc_ids: list[int] = Field(default_factory=list)


class ScopeDecided(_Event):
    kind: Literal["scope"] = "scope"
    scope: Scope
    confidence: float
    via: Literal["regex", "model", "offline", "fallback"]
    reason: str = ""


class Understood(_Event):
    kind: Literal["understanding"] = "understanding"
    understanding: Understanding
    via: Literal["model", "offline", "fallback"]
    duration_ms: float = 0.0
    note: str = ""  # why the rules answered instead of the model, or why the model's rewrite was discarded


class Routed(_Event):
    kind: Literal["routing"] = "routing"
    decision: PathDecision
    plan: RetrievalPlan | None = None  # RULE_PLANNER's planned tools
    note: str = ""  # e.g. why AGENTIC fell back to one-shot


class AgenticStep(_Event):
    kind: Literal["agentic_step"] = "agentic_step"
    iteration: int  # 1-based
    max_iterations: int
    tool_calls: list[ToolCallRecord]
    new_chunks: int
    duplicate_chunks: int
    duration_ms: float
    thought: str = ""  # the model's text beside its tool calls, if any
    offered_tools: list[str] = Field(default_factory=list)  # the tools this round's request offered
    withheld_tools: dict[str, str] = Field(default_factory=dict)  # loop tools not offered -> why (cannot work)
    requested_calls: int = 0  # calls the model asked for, before repeats and calls past the cap were dropped
    repeated_calls: int = 0  # dropped: same tool and normalised arguments as an earlier call of the round
    over_cap_calls: int = 0  # not run: past agentic.max_tool_calls


class Retrieved(_Event):
    kind: Literal["retrieval"] = "retrieval"
    mode: Mode  # the path that retrieved (stored traces may hold older names: see event_from_dict)
    workers: list[WorkerReport] = Field(default_factory=list)  # the rule planner's workers
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)  # agentic loop calls
    candidate_count: int = 0
    kb_chunks: int = 0
    web_chunks: int = 0
    memory_items: int = 0
    stop_reason: str = ""  # agentic: model_done / max_iterations / iteration_timeout / total_timeout / cancelled / error
    rounds: int = 0
    dedupe_hits: int = 0
    duration_ms: float = 0.0


class Reranked(_Event):
    kind: Literal["rerank"] = "rerank"
    candidates: list[RetrievedChunk]  # every candidate with its per-stage scores, kept or cut
    reranker: str
    duration_ms: float = 0.0


class Graded(_Event):
    kind: Literal["grader"] = "grader"
    grade: GradeResult
    round: Literal["initial", "after_web"] = "initial"


class WebCompensated(_Event):
    kind: Literal["web_compensation"] = "web_compensation"
    ran: bool
    reason: str
    added_chunks: int = 0
    duration_ms: float = 0.0


class Judged(_Event):
    """One call of the model judge (``grader.judge``): on the evidence before the answer, or on the answer's
    claims after it.  ``via`` "offline": the judge did not answer usably (timeout, malformed reply, no model),
    ``reason`` says why, and the offline checks stand.  ``via`` "skipped": the judge was not asked, because no
    verdict could change the evidence's tier (``reason`` says which)."""

    kind: Literal["judge"] = "judge"
    target: Literal["evidence", "claims"]
    via: Literal["llm", "offline", "skipped"]
    reason: str = ""  # the model's one-line reason, or why the judge fell back
    evidence: EvidenceVerdict | None = None
    tier_before: str = ""
    tier_after: str = ""
    claims: list[ClaimVerdict] = Field(default_factory=list)
    duration_ms: float = 0.0


class Fallback(_Event):
    kind: Literal["fallback"] = "fallback"
    stage: str
    reason: str
    to: str = ""  # what was used instead
    replaced: str = ""  # the text that was not shown (a model answer that failed the answer checks)


class AnswerStarted(_Event):
    kind: Literal["start"] = "start"
    prompt: str  # template name: knowledge_qa / low_confidence / fallback / meta_dialogue / chitchat / capability ...
    sources: list[RetrievedChunk]  # numbered [1..n] in this order
    memories: list[str] = Field(default_factory=list)


class Token(_Event):
    kind: Literal["token"] = "token"
    text: str


class ErrorRaised(_Event):
    kind: Literal["error"] = "error"
    stage: str
    message: str


class IndexIncomplete(_Event):
    """A KB of the run has fewer vectors than ready chunks: vector search misses the rest (keyword search
    still finds them), e.g. after an interrupted re-index.  ``docmind kb check NAME --repair`` fixes it."""

    kind: Literal["index_incomplete"] = "index_incomplete"
    kb_id: int
    missing_vectors: int
    total: int


class IngestPending(_Event):
    """A KB of the run is still being ingested: its pending documents (queued or running ingest jobs' files
    not yet landed, documents whose chunks are still being written) were not searched, so finding nothing
    in it is not "nothing relevant"."""

    kind: Literal["ingest_pending"] = "ingest_pending"
    kb_id: int
    kb_name: str = ""
    pending_documents: int
    searched_documents: int  # its complete and embedding documents, which the run searched
    embedding_chunks: int = 0  # chunks searched by keyword only: their vectors are still being written


# What DocMind itself says about a run, beside the answer: retrieval did not finish (a worker timed out, the vector
# server or the web search did not answer), KBs still being ingested or embedding, the model's answer replaced
# by the offline engine's, or set aside for an offline excerpt.
NoticeCode = Literal["retrieval_incomplete", "ingest_pending", "model_fallback", "stand_in"]


class AppNotice(BaseModel):
    """One of DocMind's own notes on a run: never part of the answer text, so never read as a claim."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    code: NoticeCode
    text: str


class Notice(_Event):
    """A note of DocMind's own, streamed where it arises and shown outside the answer (above it)."""

    kind: Literal["notice"] = "notice"
    code: NoticeCode
    text: str

    @property
    def notice(self) -> AppNotice:
        return AppNotice(code=self.code, text=self.text)


# supported / partly_supported / not_supported follow the confidence band (HIGH / MEDIUM / LOW); the other three
# carry no number: the answer states nothing to check, no source was searched, or the run was stopped
VerdictLevel = Literal["supported", "partly_supported", "not_supported", "no_answer", "not_checked", "stopped"]


class Verdict(BaseModel):
    """The one judgement a reader sees on an answer (docmind_core/answer/verdict.py derives it from the evidence
    grade, the claim checks and the confidence band)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    level: VerdictLevel
    label: str  # "Supported by the sources", "Partly supported", ...
    meaning: str  # what this label says about the answer, stated beside it
    score: float | None = None  # the support score (0..1), held inside the label's range; None: no number
    score_meaning: str = ""  # what the number is, with the thresholds that separate the labels
    reasons: list[str] = Field(default_factory=list)  # why this label (and why the evidence grade differs)
    evidence_grade: str = ""  # the retrieval's CRAG grade, HIGH / AMBIGUOUS / LOW; "" when nothing was graded
    supported_claims: int = 0
    checked_claims: int = 0  # claims that state something a source could back (not the "not checkable" ones)
    derived: bool = False  # computed when the run was read back (a trace stored before verdicts existed)


class Done(_Event):
    kind: Literal["done"] = "done"
    run_id: str
    answer: str
    mode: str  # SELECTED_DOC / RULE_PLANNER / AGENTIC, or NONE when no retrieval ran
    route_reason: str = ""
    scope: Scope = Scope.KNOWLEDGE_QUERY
    sources: list[RetrievedChunk] = Field(default_factory=list)
    citations: CitationResult = Field(default_factory=CitationResult)
    confidence: Confidence | None = None
    grade: GradeResult | None = None
    stop_reason: str = ""
    web_compensated: bool = False
    cancelled: bool = False
    timings_ms: dict[str, float] = Field(default_factory=dict)
    model_calls: list[ModelCall] = Field(default_factory=list)
    backend: str = ""  # the LLM backend's name
    pending_documents: int = 0  # documents of the searched KBs still being ingested (not searched)
    notices: list[AppNotice] = Field(default_factory=list)  # DocMind's own notes, shown outside the answer
    verdict: Verdict | None = None  # None only in traces stored before verdicts (derived when read back)


Event = Annotated[
    Union[
        RunStarted,
        ScopeDecided,
        Understood,
        Routed,
        AgenticStep,
        Retrieved,
        Reranked,
        Graded,
        WebCompensated,
        Judged,
        Fallback,
        AnswerStarted,
        Token,
        ErrorRaised,
        IndexIncomplete,
        IngestPending,
        Notice,
        Done,
    ],
    Field(discriminator="kind"),
]

_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)

EVENT_CLASSES: tuple[type[_Event], ...] = get_args(get_args(Event)[0])
EVENT_KINDS: tuple[str, ...] = tuple(cls.model_fields["kind"].default for cls in EVENT_CLASSES)


def event_to_dict(event: Event) -> dict[str, Any]:
    return event.model_dump(mode="json")


def event_from_dict(data: dict[str, Any]) -> Event:
    """An event from its stored form; the older names of an answer path a stored trace may hold are read as the
    path's name (here only: a new event takes the path's name alone)."""
    return _ADAPTER.validate_python(_current_path_names(data))


# How traces written before the answer paths had one name each spelt them (Retrieved.mode, Fallback.to)
_OLD_PATH_NAMES = {"one_shot": Mode.RULE_PLANNER.value, "agentic_loop": Mode.AGENTIC.value,
                   "selected_doc": Mode.SELECTED_DOC.value}


def _current_path_names(data: dict[str, Any]) -> dict[str, Any]:
    kind = data.get("kind")
    if kind == "retrieval" and data.get("mode") in _OLD_PATH_NAMES:
        return {**data, "mode": _OLD_PATH_NAMES[data["mode"]]}
    if kind == "fallback" and data.get("to") in _OLD_PATH_NAMES:
        return {**data, "to": _OLD_PATH_NAMES[data["to"]]}
    return data


# --------------------------------------------------------------------------
# The one fold over events
# --------------------------------------------------------------------------

R = TypeVar("R")


class EventFold(ABC, Generic[R]):
    """One handler per event kind, named ``on_<kind>``; :func:`fold` picks the handler.

    Abstract on purpose: a subclass that misses a kind cannot be instantiated, so no
    consumer silently drops an event kind added later.  Handlers that ignore their
    kind say so in one line (``return None``).
    """

    def __call__(self, event: Event) -> R:
        return fold(event, self)

    @abstractmethod
    def on_run(self, event: RunStarted) -> R: ...

    @abstractmethod
    def on_scope(self, event: ScopeDecided) -> R: ...

    @abstractmethod
    def on_understanding(self, event: Understood) -> R: ...

    @abstractmethod
    def on_routing(self, event: Routed) -> R: ...

    @abstractmethod
    def on_agentic_step(self, event: AgenticStep) -> R: ...

    @abstractmethod
    def on_retrieval(self, event: Retrieved) -> R: ...

    @abstractmethod
    def on_rerank(self, event: Reranked) -> R: ...

    @abstractmethod
    def on_grader(self, event: Graded) -> R: ...

    @abstractmethod
    def on_web_compensation(self, event: WebCompensated) -> R: ...

    @abstractmethod
    def on_judge(self, event: Judged) -> R: ...

    @abstractmethod
    def on_fallback(self, event: Fallback) -> R: ...

    @abstractmethod
    def on_start(self, event: AnswerStarted) -> R: ...

    @abstractmethod
    def on_token(self, event: Token) -> R: ...

    @abstractmethod
    def on_error(self, event: ErrorRaised) -> R: ...

    @abstractmethod
    def on_index_incomplete(self, event: IndexIncomplete) -> R: ...

    @abstractmethod
    def on_ingest_pending(self, event: IngestPending) -> R: ...

    @abstractmethod
    def on_notice(self, event: Notice) -> R: ...

    @abstractmethod
    def on_done(self, event: Done) -> R: ...


def fold(event: Event, handlers: EventFold[R]) -> R:
    """Hand ``event`` to its kind's handler; anything that is not an event of the union raises."""
    match event:
        case RunStarted():
            return handlers.on_run(event)
        case ScopeDecided():
            return handlers.on_scope(event)
        case Understood():
            return handlers.on_understanding(event)
        case Routed():
            return handlers.on_routing(event)
        case AgenticStep():
            return handlers.on_agentic_step(event)
        case Retrieved():
            return handlers.on_retrieval(event)
        case Reranked():
            return handlers.on_rerank(event)
        case Graded():
            return handlers.on_grader(event)
        case WebCompensated():
            return handlers.on_web_compensation(event)
        case Judged():
            return handlers.on_judge(event)
        case Fallback():
            return handlers.on_fallback(event)
        case AnswerStarted():
            return handlers.on_start(event)
        case Token():
            return handlers.on_token(event)
        case ErrorRaised():
            return handlers.on_error(event)
        case IndexIncomplete():
            return handlers.on_index_incomplete(event)
        case IngestPending():
            return handlers.on_ingest_pending(event)
        case Notice():
            return handlers.on_notice(event)
        case Done():
            return handlers.on_done(event)
        case _:
            assert_never(event)
