"""Fold a run's event stream into one summary (the CLI's ``--json``) and a text timeline."""

from __future__ import annotations

from typing import Any, Iterable

from pydantic import BaseModel, Field

from docmind_core.events import (
    AgenticStep, AnswerStarted, Done, ErrorRaised, Event, Fallback, Graded, Reranked, Retrieved, Routed, RunStarted,
    ScopeDecided, Token, Understood, WebCompensated,
)


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
            s.tool_calls = [{"name": c.name, "args": c.args, "status": c.status, "result_count": c.result_count}
                            for c in ev.tool_calls]
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
    """A compact, human-readable line per event (tokens folded into one line)."""
    lines: list[str] = []
    tokens = 0
    for ev in events:
        t = f"{ev.t_ms:8.1f} ms"
        if isinstance(ev, Token):
            tokens += 1
            continue
        if isinstance(ev, RunStarted):
            live = ", ".join(f"{b.role}={b.name}" for b in ev.backends)
            lines.append(f"{t}  run       {ev.run_id[:8]}  backends: {live}")
        elif isinstance(ev, ScopeDecided):
            lines.append(f"{t}  scope     {ev.scope.value} ({ev.via}, {ev.confidence:.2f}) {ev.reason}")
        elif isinstance(ev, Understood):
            u = ev.understanding
            lines.append(f"{t}  understand rewritten={u.rewritten_query!r} intent={u.intent.value} "
                         f"complexity={u.complexity.value} specificity={u.specificity.value} "
                         f"ambiguous={u.is_ambiguous} time={u.time_aware} memory={u.memory_aware} ({ev.via})")
        elif isinstance(ev, Routed):
            plan = f" plan={list(ev.plan.tools)}{' (conservative)' if ev.plan.conservative else ''}" if ev.plan else ""
            lines.append(f"{t}  routing   {ev.decision.mode.value} reason={ev.decision.reason}{plan} {ev.note}")
        elif isinstance(ev, AgenticStep):
            calls = "; ".join(f"{c.name}({_short_args(c.args)}) -> {c.result_count} [{c.status}]"
                              for c in ev.tool_calls)
            lines.append(f"{t}  agentic   round {ev.iteration}/{ev.max_iterations}: {calls} "
                         f"(new {ev.new_chunks}, dup {ev.duplicate_chunks})")
        elif isinstance(ev, Retrieved):
            extra = ""
            if ev.workers:
                extra = " workers: " + ", ".join(f"{w.name}={w.hits} ({w.status}, {w.latency_ms:.0f} ms)"
                                                 for w in ev.workers)
            if ev.stop_reason:
                extra += f" rounds={ev.rounds} stop={ev.stop_reason} dedupe={ev.dedupe_hits}"
            lines.append(f"{t}  retrieval {ev.mode}: {ev.candidate_count} candidates "
                         f"(kb {ev.kb_chunks}, web {ev.web_chunks}){extra}")
        elif isinstance(ev, Reranked):
            kept = sum(1 for c in ev.candidates if c.kept)
            top = max((c.scores.rerank or 0.0 for c in ev.candidates), default=0.0)
            lines.append(f"{t}  rerank    {len(ev.candidates)} scored by {ev.reranker}, kept {kept}, top {top:.3f}")
        elif isinstance(ev, Graded):
            g = ev.grade
            lines.append(f"{t}  grader    {g.tier.value} top={g.top_score:.3f} coverage={g.lex_coverage:.2f} "
                         f"({ev.round}) {g.reason}")
        elif isinstance(ev, WebCompensated):
            lines.append(f"{t}  web comp. {'ran' if ev.ran else 'skipped'}: {ev.reason} (+{ev.added_chunks})")
        elif isinstance(ev, Fallback):
            lines.append(f"{t}  FALLBACK  {ev.stage}: {ev.reason} -> {ev.to}")
        elif isinstance(ev, ErrorRaised):
            lines.append(f"{t}  ERROR     {ev.stage}: {ev.message}")
        elif isinstance(ev, AnswerStarted):
            lines.append(f"{t}  answer    prompt={ev.prompt} with {len(ev.sources)} sources")
        elif isinstance(ev, Done):
            conf = f"{ev.confidence.score:.2f} {ev.confidence.band}" if ev.confidence else "n/a"
            cov = "n/a" if ev.citations.coverage is None else f"{ev.citations.coverage:.2f}"
            lines.append(f"{t}  done      {tokens} tokens streamed; coverage={cov} invalid_refs="
                         f"{ev.citations.invalid_refs} confidence={conf}")
    return lines


def _short_args(args: dict[str, Any]) -> str:
    text = ", ".join(f"{k}={v!r}" for k, v in args.items())
    return text if len(text) <= 80 else text[:77] + "..."
