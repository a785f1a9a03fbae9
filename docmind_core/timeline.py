"""One run's events turned into what a person reads: a digest and a timeline.

The chat page renders a live run and the Traces page replays a stored one; both
call :func:`timeline` and :meth:`RunDigest.from_events` on the same event list,
so a replay shows exactly what the chat showed.  Nothing here knows about
Streamlit or HTML.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterable, Literal, Sequence

from docmind_core.events import (
    AgenticStep,
    AnswerStarted,
    Done,
    ErrorRaised,
    Event,
    Fallback,
    Graded,
    IndexIncomplete,
    Reranked,
    Retrieved,
    Routed,
    RunStarted,
    ScopeDecided,
    Token,
    Understood,
    WebCompensated,
    event_from_dict,
)
from docmind_core.models import GradeResult, RetrievedChunk, ToolCallRecord

RowStatus = Literal["ok", "info", "warn", "error"]


def as_events(items: Iterable[Any]) -> list[Event]:
    """Events from live objects or their stored dict form (a trace read back from JSON)."""
    return [event_from_dict(item) if isinstance(item, dict) else item for item in items]


# --------------------------------------------------------------------------
# Timeline
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class TimelineRow:
    """One step of a run as the UI lists it."""

    seq: int
    kind: str  # the event kind; "token" rows stand for a whole streamed answer
    t_ms: float
    title: str
    status: RowStatus = "ok"
    duration_ms: float | None = None
    fields: dict[str, str] = field(default_factory=dict)  # label -> value, in display order
    items: list[dict[str, Any]] = field(default_factory=list)  # tool calls / workers, one dict per table row

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _fmt(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _args(args: dict) -> str:
    return json.dumps(args, ensure_ascii=False, sort_keys=True)


def tool_call_item(call: ToolCallRecord) -> dict[str, Any]:
    item = {"tool": call.name, "args": _args(call.args), "results": call.result_count,
            "new": call.new_chunks, "duplicates": call.duplicate_chunks,
            "latency_ms": round(call.latency_ms, 1), "status": call.status, "message": call.message}
    if call.repaired_from:  # the model printed this call as text; DocMind recovered it
        item["repaired from"] = call.repaired_from
    return item


def _row_for(seq: int, ev: Event) -> TimelineRow:  # noqa: C901 - one branch per event kind, flat on purpose
    t = ev.t_ms
    if isinstance(ev, RunStarted):
        return TimelineRow(seq, ev.kind, t, "Run started", "info", fields={
            "question": ev.question, "requested mode": ev.requested_mode,
            "knowledge bases": ", ".join(str(k) for k in ev.kb_ids) or "—",
            "selected documents": ", ".join(str(d) for d in ev.selected_doc_ids) or "—",
            "backends": "; ".join(f"{b.role}: {b.name}{'' if b.live else ' (fallback)'}" for b in ev.backends)})
    if isinstance(ev, ScopeDecided):
        return TimelineRow(seq, ev.kind, t, f"Scope: {ev.scope.value} (via {ev.via})",
                           "warn" if ev.via == "fallback" else "ok",
                           fields={"confidence": _fmt(ev.confidence, 2), "reason": ev.reason or "—"})
    if isinstance(ev, Understood):
        u = ev.understanding
        return TimelineRow(seq, ev.kind, t, f"Understanding (via {ev.via})",
                           "warn" if ev.via == "fallback" or u.is_fallback else "ok", ev.duration_ms, fields={
                               "rewritten query": u.rewritten_query, "intent": u.intent.value,
                               "complexity": u.complexity.value + (" (upgraded)" if u.upgraded_complexity else ""),
                               "specificity": u.specificity.value, "ambiguous": str(u.is_ambiguous),
                               "time aware": str(u.time_aware), "memory aware": str(u.memory_aware),
                               "scope": f"{u.scope.value} ({u.scope_confidence:.2f})",
                               "memory hints": "; ".join(u.memory_write_hints) or "—"})
    if isinstance(ev, Routed):
        fields = {"reason": ev.decision.reason, "forced": str(ev.decision.forced)}
        items: list[dict[str, Any]] = []
        if ev.plan is not None:
            fields["planned tools"] = ", ".join(ev.plan.tools) + (" (conservative)" if ev.plan.conservative else "")
            items = [{"tool": tool, "why": ev.plan.reasons.get(tool, "")} for tool in ev.plan.tools]
        if ev.note:
            fields["note"] = ev.note
        return TimelineRow(seq, ev.kind, t, f"Route → {ev.decision.mode.value}", "warn" if ev.note else "ok",
                           fields=fields, items=items)
    if isinstance(ev, AgenticStep):
        fields = {"tool calls": str(len(ev.tool_calls)), "new chunks": str(ev.new_chunks),
                  "duplicates": str(ev.duplicate_chunks)}
        if ev.thought:
            fields["thought"] = ev.thought
        bad = any(c.status in ("error", "rejected") for c in ev.tool_calls)
        return TimelineRow(seq, ev.kind, t, f"Agentic round {ev.iteration}/{ev.max_iterations}",
                           "warn" if bad else "ok", ev.duration_ms, fields,
                           [tool_call_item(c) for c in ev.tool_calls])
    if isinstance(ev, Retrieved):
        fields = {"candidates": str(ev.candidate_count), "kb chunks": str(ev.kb_chunks),
                  "web chunks": str(ev.web_chunks), "memories": str(ev.memory_items)}
        if ev.mode == "agentic_loop":
            fields.update({"rounds": str(ev.rounds), "stop reason": ev.stop_reason or "—",
                           "deduplicated": str(ev.dedupe_hits)})
        items = [{"worker": w.name, "status": w.status, "hits": w.hits, "latency_ms": round(w.latency_ms, 1),
                  "message": w.message} for w in ev.workers]
        items += [tool_call_item(c) for c in ev.tool_calls]
        degraded = any(w.status != "ok" for w in ev.workers) or ev.stop_reason in ("error", "total_timeout",
                                                                                    "iteration_timeout")
        return TimelineRow(seq, ev.kind, t, f"Retrieval ({ev.mode.replace('_', ' ')})",
                           "warn" if degraded else "ok", ev.duration_ms, fields, items)
    if isinstance(ev, Reranked):
        kept = [c for c in ev.candidates if c.kept]
        top = max((c.scores.rerank for c in ev.candidates if c.scores.rerank is not None), default=None)
        return TimelineRow(seq, ev.kind, t, f"Rerank ({ev.reranker})", "ok", ev.duration_ms, fields={
            "candidates": str(len(ev.candidates)), "kept": str(len(kept)), "top score": _fmt(top),
            "web candidates": str(sum(1 for c in ev.candidates if c.origin == "web"))})
    if isinstance(ev, Graded):
        g = ev.grade
        return TimelineRow(seq, ev.kind, t, f"CRAG tier {g.tier.value}" + (" (after web)" if ev.round == "after_web"
                                                                         else ""),
                           {"HIGH": "ok", "AMBIGUOUS": "warn", "LOW": "error"}[g.tier.value], fields={
                               "top score": _fmt(g.top_score), "lexical coverage": _fmt(g.lex_coverage),
                               "kb entity weak": str(g.kb_entity_weak),
                               "web compensation needed": str(g.web_compensation_needed),
                               "gray-zone mode": g.gray_zone_mode or "—", "reason": g.reason})
    if isinstance(ev, WebCompensated):
        return TimelineRow(seq, ev.kind, t, "Web compensation " + ("ran" if ev.ran else "skipped"),
                           "info", ev.duration_ms, {"reason": ev.reason, "added chunks": str(ev.added_chunks)})
    if isinstance(ev, Fallback):
        return TimelineRow(seq, ev.kind, t, f"Fallback in {ev.stage}", "warn",
                           fields={"reason": ev.reason, "used instead": ev.to or "—"})
    if isinstance(ev, AnswerStarted):
        return TimelineRow(seq, ev.kind, t, f"Answer prompt: {ev.prompt}", "info", fields={
            "sources": str(len(ev.sources)), "web sources": str(sum(1 for s in ev.sources if s.origin == "web")),
            "memories": str(len(ev.memories))})
    if isinstance(ev, ErrorRaised):
        return TimelineRow(seq, ev.kind, t, f"Error in {ev.stage}", "error", fields={"message": ev.message})
    if isinstance(ev, IndexIncomplete):
        return TimelineRow(seq, ev.kind, t, f"Index incomplete: knowledge base {ev.kb_id}", "warn", fields={
            "chunks without a vector": f"{ev.missing_vectors} of {ev.total}",
            "effect": "vector search misses them; keyword search still finds them",
            "repair": "docmind kb check NAME --repair"})
    if isinstance(ev, Done):
        c = ev.citations
        tokens_in = sum(m.prompt_tokens for m in ev.model_calls)
        tokens_out = sum(m.completion_tokens for m in ev.model_calls)
        fields = {"mode": ev.mode, "route reason": ev.route_reason or "—", "backend": ev.backend or "—",
                  "confidence": (f"{ev.confidence.score:.3f} ({ev.confidence.band})" if ev.confidence else "—"),
                  "citation coverage": _fmt(c.coverage, 2), "invalid refs": str(c.invalid_refs),
                  "web compensated": str(ev.web_compensated), "stop reason": ev.stop_reason or "—",
                  "model calls": f"{len(ev.model_calls)} ({tokens_in} in / {tokens_out} out tokens)"}
        if c.inferred_sentences:  # the model wrote no marker there; the parser found the supporting source
            fields["citation coverage"] += f" ({c.inferred_sentences} sentences inferred)"
        if ev.cancelled:
            fields["cancelled"] = "True"
        return TimelineRow(seq, ev.kind, t, "Done" + (" (cancelled)" if ev.cancelled else ""),
                           "warn" if ev.cancelled else "ok", ev.timings_ms.get("total"), fields)
    raise TypeError(f"no timeline row for event kind {getattr(ev, 'kind', type(ev).__name__)!r}")


def timeline(events: Sequence[Event | dict]) -> list[TimelineRow]:
    """The rows the chat and Traces pages list, one per event; a streamed answer collapses into one row."""
    rows: list[TimelineRow] = []
    streamed: list[Token] = []

    def flush() -> None:
        if streamed:
            text = "".join(tok.text for tok in streamed)
            first, last = streamed[0].t_ms, streamed[-1].t_ms
            rows.append(TimelineRow(len(rows), "token", first, "Answer streamed", "ok", last - first,
                                    {"pieces": str(len(streamed)), "characters": str(len(text))}))
            streamed.clear()

    saw_rounds = False
    for ev in as_events(events):
        if isinstance(ev, Token):
            streamed.append(ev)
            continue
        flush()
        row = _row_for(len(rows), ev)
        if isinstance(ev, AgenticStep):
            saw_rounds = True
        elif isinstance(ev, Retrieved) and saw_rounds and ev.tool_calls:
            # the loop's calls were already listed round by round; keep only the calls made after the loop
            listed = sum(1 for r in rows if r.kind == "agentic_step" for _ in r.items)
            extra = [tool_call_item(c) for c in ev.tool_calls[listed:]]
            row = replace(row, items=extra, fields={**row.fields, "tool calls": f"{len(ev.tool_calls)} (see rounds)"})
        rows.append(row)
    flush()
    return rows


# --------------------------------------------------------------------------
# Digest: the facts of one run, pulled out of its events once
# --------------------------------------------------------------------------


@dataclass
class RunDigest:
    events: list[Event]
    started: RunStarted | None = None
    scope: ScopeDecided | None = None
    understood: Understood | None = None
    routed: Routed | None = None
    agentic_steps: list[AgenticStep] = field(default_factory=list)
    retrieved: Retrieved | None = None
    reranks: list[Reranked] = field(default_factory=list)
    grades: list[Graded] = field(default_factory=list)
    web: WebCompensated | None = None
    fallbacks: list[Fallback] = field(default_factory=list)
    errors: list[ErrorRaised] = field(default_factory=list)
    index_gaps: list[IndexIncomplete] = field(default_factory=list)
    answer_started: AnswerStarted | None = None
    streamed_text: str = ""
    done: Done | None = None

    @classmethod
    def from_events(cls, events: Sequence[Event | dict]) -> "RunDigest":
        evs = as_events(events)
        digest = cls(events=evs)
        pieces: list[str] = []
        for ev in evs:
            match ev:
                case RunStarted():
                    digest.started = ev
                case ScopeDecided():
                    digest.scope = ev
                case Understood():
                    digest.understood = ev
                case Routed():
                    digest.routed = ev
                case AgenticStep():
                    digest.agentic_steps.append(ev)
                case Retrieved():
                    digest.retrieved = ev
                case Reranked():
                    digest.reranks.append(ev)
                case Graded():
                    digest.grades.append(ev)
                case WebCompensated():
                    digest.web = ev
                case Fallback():
                    digest.fallbacks.append(ev)
                case ErrorRaised():
                    digest.errors.append(ev)
                case IndexIncomplete():
                    digest.index_gaps.append(ev)
                case AnswerStarted():
                    digest.answer_started = ev
                case Token():
                    pieces.append(ev.text)
                case Done():
                    digest.done = ev
        digest.streamed_text = "".join(pieces)
        return digest

    # -- what the pages and the comparison read ------------------------------
    @property
    def run_id(self) -> str:
        if self.done is not None:
            return self.done.run_id
        return self.started.run_id if self.started is not None else ""

    @property
    def question(self) -> str:
        return self.started.question if self.started is not None else ""

    @property
    def query(self) -> str:
        """The query retrieval and grading used: the rewritten one when understanding ran."""
        if self.understood is not None and self.understood.understanding.rewritten_query:
            return self.understood.understanding.rewritten_query
        return self.question

    @property
    def answer(self) -> str:
        return self.done.answer if self.done is not None and self.done.answer else self.streamed_text

    @property
    def mode(self) -> str:
        if self.done is not None:
            return self.done.mode
        return self.routed.decision.mode.value if self.routed is not None else ""

    @property
    def sources(self) -> list[RetrievedChunk]:
        if self.done is not None and self.done.sources:
            return list(self.done.sources)
        return list(self.answer_started.sources) if self.answer_started is not None else []

    @property
    def candidates(self) -> list[RetrievedChunk]:
        """Every candidate of the last rerank (after web compensation when it ran)."""
        return list(self.reranks[-1].candidates) if self.reranks else []

    @property
    def grade(self) -> GradeResult | None:
        if self.done is not None and self.done.grade is not None:
            return self.done.grade
        return self.grades[-1].grade if self.grades else None

    @property
    def tier(self) -> str:
        return self.grade.tier.value if self.grade is not None else ""

    @property
    def stop_reason(self) -> str:
        if self.done is not None and self.done.stop_reason:
            return self.done.stop_reason
        return self.retrieved.stop_reason if self.retrieved is not None else ""

    @property
    def tool_calls(self) -> list[ToolCallRecord]:
        """Tool calls of the agentic loop, or the one-shot workers seen as calls of their tool."""
        calls = [c for step in self.agentic_steps for c in step.tool_calls]
        if not calls and self.retrieved is not None:
            calls = list(self.retrieved.tool_calls)
            if not calls:
                calls = [ToolCallRecord(name=w.name, args={"query": self.query}, result_count=w.hits,
                                        latency_ms=w.latency_ms,
                                        status="ok" if w.status == "ok" else ("unavailable" if w.status ==
                                                                              "unavailable" else "error"),
                                        message=w.message)
                         for w in self.retrieved.workers]
        return calls

    @property
    def timings_ms(self) -> dict[str, float]:
        return dict(self.done.timings_ms) if self.done is not None else {}

    @property
    def tokens(self) -> dict[str, int]:
        calls = self.done.model_calls if self.done is not None else []
        return {"prompt": sum(c.prompt_tokens for c in calls), "completion": sum(c.completion_tokens for c in calls),
                "calls": len(calls)}

    @property
    def first_event_ms(self) -> float:
        return self.events[0].t_ms if self.events else 0.0
