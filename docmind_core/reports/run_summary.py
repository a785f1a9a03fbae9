"""A run's summary (the CLI's ``--json``) and its text timeline, both read from what the pages read.

The summary is built from :class:`RunDigest`, the pages' one fold of the events, so the CLI and the
chat and Traces pages cannot report a run differently.
"""

from __future__ import annotations

from typing import Any, Iterable

from pydantic import BaseModel, Field

from docmind_core.answer.verdict import verdict_of
from docmind_core.events import Done, Event
from docmind_core.text.reasons import describe_reason
from docmind_core.text.visible import escape_markdown, strip_control
from docmind_core.reports.timeline import RunDigest, timeline


class SourceSummary(BaseModel):
    index: int
    chunk_id: str
    document: str
    location: str = ""  # "p. 2", "rows 2–14", a heading path (RetrievedChunk.location)
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
    route_reason_words: str = ""  # the machine reasons in words (reasons.describe_reason), beside each code
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
    grade_reason_words: str = ""
    web_compensated: bool = False
    sources: list[SourceSummary] = Field(default_factory=list)
    citations: list[dict[str, Any]] = Field(default_factory=list)
    coverage: float | None = None
    invalid_refs: int = 0
    confidence: float | None = None
    band: str = ""
    ungrounded: bool = False
    confidence_reason: str = ""
    asks_for: list[str] = Field(default_factory=list)  # kinds of value the question asks for (version, date, ...)
    answers_question: bool | None = None  # False: no supported claim states an asked value; None: none asked
    # each claim of the answer read against its source: supported / unsupported / contradicted / not_checkable
    claims: list[dict[str, Any]] = Field(default_factory=list)
    claim_counts: dict[str, int] = Field(default_factory=dict)
    # the one verdict a reader sees (label, meaning, support score and its meaning, reasons, evidence grade);
    # tier, confidence and band above stay for scripts and stored summaries
    verdict: dict[str, Any] | None = None
    notices: list[dict[str, str]] = Field(default_factory=list)  # DocMind's own notes, outside the answer
    stop_reason: str = ""
    stop_reason_words: str = ""
    timings_ms: dict[str, float] = Field(default_factory=dict)
    backend: str = ""
    backends: list[dict[str, Any]] = Field(default_factory=list)
    errors: list[dict[str, str]] = Field(default_factory=list)
    fallbacks: list[dict[str, str]] = Field(default_factory=list)
    judge: list[dict[str, Any]] = Field(default_factory=list)  # the model judge's verdicts (grader.judge)
    index_gaps: list[dict[str, int]] = Field(default_factory=list)  # KBs searched with missing vectors
    pending_documents: int = 0  # documents of the searched KBs still being ingested (not searched)
    pending: list[dict[str, Any]] = Field(default_factory=list)  # per KB: kb_id, kb_name, pending, searched
    usage: dict[str, int] = Field(default_factory=dict)
    # what "Supported by the sources" has earned in the KBs this run asked, from their labelled runs
    # (experiments/badge.py: counts, rate, Wilson interval, statement); None when no KB was asked
    kb_badge: dict[str, Any] | None = None


def summarise(events: Iterable[Event]) -> RunSummary:
    return summary_of(RunDigest.from_events(list(events)))


def summary_of(digest: RunDigest) -> RunSummary:
    """The digest the pages render, as the CLI's summary: one fold of the events serves both."""
    done, routed, grade = digest.done, digest.routed, digest.grade
    summary = RunSummary(
        run_id=digest.run_id, question=digest.question, answer=digest.answer, mode=digest.mode,
        route_reason=digest.route_reason, route_explanation=routed.decision.explanation if routed else (digest.scope.reason if digest.scope else ""),
        scope=digest.scope_name,
        understanding=digest.understood.understanding.model_dump(mode="json") if digest.understood else {},
        planned_tools=list(routed.plan.tools) if routed and routed.plan else [],
        tool_calls=[{"name": c.name, "args": c.args, "status": c.status, "result_count": c.result_count,
                     "repaired_from": c.repaired_from} for c in digest.tool_calls],
        rounds=digest.rounds, tier=digest.tier, web_compensated=digest.web_compensated,
        sources=[SourceSummary(index=i, chunk_id=c.chunk_id, document=c.document, location=c.location,
                               text=c.text, origin=c.origin,
                               url=c.url, scores=c.scores.model_dump())
                 for i, c in enumerate(digest.sources, start=1)],
        stop_reason=digest.stop_reason, stop_reason_words=describe_reason(digest.stop_reason),
        route_reason_words=describe_reason(digest.route_reason), timings_ms=digest.timings_ms,
        backends=[b.model_dump() for b in digest.started.backends] if digest.started else [],
        errors=[{"stage": e.stage, "message": e.message} for e in digest.errors],
        fallbacks=[{"stage": f.stage, "reason": f.reason, "to": f.to} for f in digest.fallbacks],
        judge=[j.model_dump(mode="json", exclude={"kind", "t_ms"}) for j in digest.judgements],
        index_gaps=[{"kb_id": g.kb_id, "missing_vectors": g.missing_vectors, "total": g.total}
                    for g in digest.index_gaps],
        pending_documents=digest.pending_documents,
        pending=[{"kb_id": p.kb_id, "kb_name": p.kb_name, "pending_documents": p.pending_documents,
                  "searched_documents": p.searched_documents, "embedding_chunks": p.embedding_chunks}
                 for p in digest.pending],
        notices=[n.model_dump(mode="json") for n in digest.notices])
    if grade is not None:
        summary.top_score, summary.lex_coverage = grade.top_score, grade.lex_coverage
        summary.grade_reason = grade.reason
        summary.grade_reason_words = describe_reason(grade.reason)
    if done is not None:
        summary.backend = done.backend
        summary.citations = [u.model_dump() for u in done.citations.used_sources]
        summary.coverage, summary.invalid_refs = done.citations.coverage, done.citations.invalid_refs
        summary.claims = [c.model_dump(mode="json") for c in done.citations.claims]
        summary.claim_counts = {"supported": done.citations.supported_claims,
                                "unsupported": done.citations.unsupported_claims,
                                "contradicted": done.citations.contradicted_claims}
        if done.confidence is not None:
            summary.confidence, summary.band = done.confidence.score, done.confidence.band
            summary.ungrounded = done.confidence.ungrounded
            summary.confidence_reason = done.confidence.reason
            summary.asks_for = list(done.confidence.asks_for)
            summary.answers_question = done.confidence.answers_question
        verdict = digest.verdict
        summary.verdict = verdict.model_dump(mode="json") if verdict is not None else None
        tokens = digest.tokens
        summary.usage = {"prompt_tokens": tokens["prompt"], "completion_tokens": tokens["completion"],
                         "model_calls": tokens["calls"]}
    return summary


def answer_lead_markdown(done: Done) -> list[str]:
    """The Markdown an exported answer opens with: its verdict (label, number and what both mean, why) and
    DocMind's notices on it, each a quoted line.  Text from models and documents is escaped."""
    verdict = verdict_of(done)
    head = f"> **Verdict: {escape_markdown(verdict.label)}**"
    if verdict.score is not None:
        head += f" · {verdict.score:.2f} ({escape_markdown(verdict.score_meaning)})"
    lines = [head, f"> {escape_markdown(verdict.meaning)}"]
    if verdict.reasons:
        lines.append("> Why: " + escape_markdown("; ".join(verdict.reasons)))
    if verdict.evidence_grade:
        lines.append(f"> Evidence grade (how well what retrieval found matches the question): "
                     f"{verdict.evidence_grade}")
    lines += [f"> Note from DocMind: {escape_markdown(n.text)}" for n in done.notices]
    return [line + "  " if i < len(lines) - 1 else line for i, line in enumerate(lines)]  # hard line breaks


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
