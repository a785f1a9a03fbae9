"""Fold a run's event stream into one summary (the CLI's ``--json``) and a text timeline."""

from __future__ import annotations

from typing import Any, Iterable

from pydantic import BaseModel, Field

from docmind_core import events as ev
from docmind_core.events import Event, EventFold
from docmind_core.safe_text import strip_control
from docmind_core.timeline import timeline


class SourceSummary(BaseModel):
    index: int
    chunk_id: str
    document: str
    text: str
    origin: str
    url: str = ""
    scores: dict[str, Any]


class RunSummary(BaseModel):
    run_id: str = ""
    question: str = ""
    answer: str = ""
    mode: str = ""
    route_reason: str = ""
    route_explanation: str = ""  # the route in plain words: the signals that decided it
    scope: str = ""
    understanding: dict[str, Any] = Field(default_factory=dict)
    planned_tools: list[str] = Field(default_factory=list)
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    rounds: int = 0
    tier: str = ""
    top_score: float | None = None
    lex_coverage: float | None = None
    grade_reason: str = ""
    web_compensated: bool = False
    sources: list[SourceSummary] = Field(default_factory=list)
    citations: list[dict[str, Any]] = Field(default_factory=list)
    coverage: float | None = None
    invalid_refs: int = 0
    confidence: float | None = None
    band: str = ""
    ungrounded: bool = False
    stop_reason: str = ""
    timings_ms: dict[str, float] = Field(default_factory=dict)
    backend: str = ""
    backends: list[dict[str, Any]] = Field(default_factory=list)
    errors: list[dict[str, str]] = Field(default_factory=list)
    fallbacks: list[dict[str, str]] = Field(default_factory=list)
    index_gaps: list[dict[str, int]] = Field(default_factory=list)  # KBs searched with missing vectors
    usage: dict[str, int] = Field(default_factory=dict)


def summarise(events: Iterable[Event]) -> RunSummary:
    summary_fold = RunSummaryFold()
    for event in events:
        summary_fold(event)
    return summary_fold.summary


class RunSummaryFold(EventFold[None]):
    """Fills one :class:`RunSummary` from a run's events; later events refine earlier ones."""

    def __init__(self) -> None:
        self.summary = RunSummary()

    def on_run(self, event: ev.RunStarted) -> None:
        s = self.summary
        s.run_id, s.question = event.run_id, event.question
        s.backends = [b.model_dump() for b in event.backends]

    def on_scope(self, event: ev.ScopeDecided) -> None:
        self.summary.scope = event.scope.value

    def on_understanding(self, event: ev.Understood) -> None:
        self.summary.understanding = event.understanding.model_dump(mode="json")

    def on_routing(self, event: ev.Routed) -> None:
        s = self.summary
        s.mode, s.route_reason = event.decision.mode.value, event.decision.reason
        s.route_explanation = event.decision.explanation
        s.planned_tools = list(event.plan.tools) if event.plan else []

    def on_agentic_step(self, event: ev.AgenticStep) -> None:
        self.summary.rounds = max(self.summary.rounds, event.iteration)

    def on_retrieval(self, event: ev.Retrieved) -> None:
        s = self.summary
        s.tool_calls = [{"name": c.name, "args": c.args, "status": c.status, "result_count": c.result_count,
                         "repaired_from": c.repaired_from} for c in event.tool_calls]
        if not s.tool_calls and event.workers:
            s.tool_calls = [{"name": w.name, "args": {}, "status": w.status, "result_count": w.hits}
                            for w in event.workers]
        s.stop_reason = event.stop_reason or s.stop_reason

    def on_rerank(self, event: ev.Reranked) -> None:
        return None  # the candidates reach the summary as the Done event's sources

    def on_grader(self, event: ev.Graded) -> None:
        s, g = self.summary, event.grade
        s.tier, s.top_score, s.lex_coverage, s.grade_reason = g.tier.value, g.top_score, g.lex_coverage, g.reason

    def on_web_compensation(self, event: ev.WebCompensated) -> None:
        self.summary.web_compensated = self.summary.web_compensated or event.ran

    def on_fallback(self, event: ev.Fallback) -> None:
        self.summary.fallbacks.append({"stage": event.stage, "reason": event.reason, "to": event.to})

    def on_start(self, event: ev.AnswerStarted) -> None:
        return None  # the sources are the Done event's

    def on_token(self, event: ev.Token) -> None:
        return None  # the answer is the Done event's

    def on_error(self, event: ev.ErrorRaised) -> None:
        self.summary.errors.append({"stage": event.stage, "message": event.message})

    def on_index_incomplete(self, event: ev.IndexIncomplete) -> None:
        self.summary.index_gaps.append({"kb_id": event.kb_id, "missing_vectors": event.missing_vectors,
                                        "total": event.total})

    def on_done(self, event: ev.Done) -> None:
        s = self.summary
        s.answer, s.backend = event.answer, event.backend
        s.mode = event.mode
        s.route_reason = event.route_reason or s.route_reason
        s.scope = event.scope.value
        s.sources = [SourceSummary(index=i, chunk_id=c.chunk_id, document=c.document, text=c.text,
                                   origin=c.origin, url=c.url, scores=c.scores.model_dump())
                     for i, c in enumerate(event.sources, start=1)]
        s.citations = [u.model_dump() for u in event.citations.used_sources]
        s.coverage, s.invalid_refs = event.citations.coverage, event.citations.invalid_refs
        if event.confidence is not None:
            s.confidence, s.band, s.ungrounded = (event.confidence.score, event.confidence.band,
                                                  event.confidence.ungrounded)
        s.stop_reason = event.stop_reason or s.stop_reason
        s.web_compensated = s.web_compensated or event.web_compensated
        s.timings_ms = dict(event.timings_ms)
        s.usage = {"prompt_tokens": sum(c.prompt_tokens for c in event.model_calls),
                   "completion_tokens": sum(c.completion_tokens for c in event.model_calls),
                   "model_calls": len(event.model_calls)}


def timeline_lines(events: Iterable[Event]) -> list[str]:
    """The shared timeline (the same rows the chat and Traces pages show) as plain text lines."""
    lines: list[str] = []
    for row in timeline(list(events)):
        fields = "; ".join(f"{k}={v}" for k, v in row.fields.items() if v not in ("", "—"))
        lines.append(f"{row.t_ms:9.1f} ms  {row.title}" + (f"  ({fields})" if fields else ""))
        for item in row.items:
            lines.append(" " * 14 + "- " + ", ".join(f"{k}={v}" for k, v in item.items() if v not in ("", None)))
    # questions, tool arguments and messages come from users and models: one terminal-safe line each
    return [strip_control(line, single_line=True) for line in lines]
