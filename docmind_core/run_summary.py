"""Fold a run's event stream into one summary (the CLI's ``--json``) and a text timeline."""

from __future__ import annotations

from typing import Any, Iterable

from pydantic import BaseModel, Field

from docmind_core.events import (
    AgenticStep, Done, ErrorRaised, Event, Fallback, Graded, IndexIncomplete, Retrieved, Routed, RunStarted,
    ScopeDecided, Understood, WebCompensated,
)
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
    s = RunSummary()
    for ev in events:
        if isinstance(ev, RunStarted):
            s.run_id, s.question = ev.run_id, ev.question
            s.backends = [b.model_dump() for b in ev.backends]
        elif isinstance(ev, ScopeDecided):
            s.scope = ev.scope.value
        elif isinstance(ev, Understood):
            s.understanding = ev.understanding.model_dump(mode="json")
        elif isinstance(ev, Routed):
            s.mode, s.route_reason = ev.decision.mode.value, ev.decision.reason
            s.planned_tools = list(ev.plan.tools) if ev.plan else []
        elif isinstance(ev, AgenticStep):
            s.rounds = max(s.rounds, ev.iteration)
        elif isinstance(ev, Retrieved):
            s.tool_calls = [{"name": c.name, "args": c.args, "status": c.status, "result_count": c.result_count,
                             "repaired_from": c.repaired_from} for c in ev.tool_calls]
            if not s.tool_calls and ev.workers:
                s.tool_calls = [{"name": w.name, "args": {}, "status": w.status, "result_count": w.hits}
                                for w in ev.workers]
            s.stop_reason = ev.stop_reason or s.stop_reason
        elif isinstance(ev, Graded):
            g = ev.grade
            s.tier, s.top_score, s.lex_coverage, s.grade_reason = g.tier.value, g.top_score, g.lex_coverage, g.reason
        elif isinstance(ev, WebCompensated):
            s.web_compensated = s.web_compensated or ev.ran
        elif isinstance(ev, ErrorRaised):
            s.errors.append({"stage": ev.stage, "message": ev.message})
        elif isinstance(ev, Fallback):
            s.fallbacks.append({"stage": ev.stage, "reason": ev.reason, "to": ev.to})
        elif isinstance(ev, IndexIncomplete):
            s.index_gaps.append({"kb_id": ev.kb_id, "missing_vectors": ev.missing_vectors, "total": ev.total})
        elif isinstance(ev, Done):
            s.answer, s.backend = ev.answer, ev.backend
            s.mode = ev.mode
            s.route_reason = ev.route_reason or s.route_reason
            s.scope = ev.scope.value
            s.sources = [SourceSummary(index=i, chunk_id=c.chunk_id, document=c.document, text=c.text,
                                       origin=c.origin, url=c.url, scores=c.scores.model_dump())
                         for i, c in enumerate(ev.sources, start=1)]
            s.citations = [u.model_dump() for u in ev.citations.used_sources]
            s.coverage, s.invalid_refs = ev.citations.coverage, ev.citations.invalid_refs
            if ev.confidence is not None:
                s.confidence, s.band, s.ungrounded = ev.confidence.score, ev.confidence.band, ev.confidence.ungrounded
            s.stop_reason = ev.stop_reason or s.stop_reason
            s.web_compensated = s.web_compensated or ev.web_compensated
            s.timings_ms = dict(ev.timings_ms)
            s.usage = {"prompt_tokens": sum(c.prompt_tokens for c in ev.model_calls),
                       "completion_tokens": sum(c.completion_tokens for c in ev.model_calls),
                       "model_calls": len(ev.model_calls)}
    return s


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
