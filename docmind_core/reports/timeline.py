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

from docmind_core import events as ev
from docmind_core.answer.answer_type import KIND_WORDS
from docmind_core.answer.verdict import verdict_of
from docmind_core.events import Event, EventFold, event_from_dict
from docmind_core.values import GradeResult, Mode, RetrievedChunk, ToolCallRecord
from docmind_core.text.reasons import describe_reason
from docmind_core.text.tokens import detect_language

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
    if call.adjusted:  # the settings, not the model, decided these arguments
        item["adjusted"] = "; ".join(call.adjusted)
    return item


def across_languages(candidates: Sequence[RetrievedChunk]) -> str:
    """Why some candidates were scored as they were: the question crossed languages (most of its nearest chunks
    are in the other language), so the reranker scored those chunks by meaning and names, not shared words.
    '' when none was."""
    across = [c for c in candidates if c.scores.rerank_across]
    if not across:
        return ""
    names = {"zh": "Chinese", "en": "English"}
    language = " and ".join(sorted({names.get(detect_language(c.text), "other-language") for c in across}))
    kept = sum(1 for c in across if c.kept)
    return (f"the question crosses into {language}: most of its nearest chunks are {language}, so "
            f"{len(across)} {language} chunk{'s' if len(across) != 1 else ''} ({kept} kept) were scored by meaning "
            "and names, not shared words")


def judge_row(event: ev.Judged) -> TimelineRow:
    """The model judge's verdict on the evidence (and what it did to the tier) or on each claim."""
    if event.via == "offline":
        return _row(event, f"Judge ({event.target}): offline checks kept", "warn", event.duration_ms,
                    {"reason": event.reason})
    if event.via == "skipped":
        return _row(event, f"Judge ({event.target}): not asked", "ok", event.duration_ms,
                    {"reason": event.reason, "tier": event.tier_after or "—"})
    if event.target == "evidence" and event.evidence is not None:
        verdict = event.evidence
        moved = event.tier_before != event.tier_after
        return _row(event, f"Judge (evidence): {verdict.verdict}", "warn" if verdict.verdict == "no" else "ok",
                    event.duration_ms, {
                        "P(yes)": _fmt(verdict.p_yes), "scored by": verdict.scored_by, "reason": verdict.reason,
                        "quote": quote_line(verdict),
                        "tier": f"{event.tier_before} -> {event.tier_after}" if moved else event.tier_after or "—"})
    counts = {status: sum(1 for c in event.claims if c.status == status)
              for status in ("supported", "contradicted", "not_found")}
    status: RowStatus = "error" if counts["contradicted"] else "warn" if counts["not_found"] else "ok"
    return _row(event, "Judge (claims): " + ", ".join(f"{n} {s.replace('_', ' ')}" for s, n in counts.items()),
                status, event.duration_ms, {"reason": event.reason},
                [{"source": f"[{c.source}]", "status": c.status.replace("_", " "), "claim": c.claim,
                  "reason": c.reason} for c in event.claims])


def quote_line(verdict) -> str:
    """What the check of the judge's quote found, in words ("—" when the reply quoted nothing to check)."""
    if not verdict.quote_note:
        return "—"
    return ("found: " if verdict.quote_verified else "not found: ") + verdict.quote_note


class TimelineBuilder(EventFold[TimelineRow | None]):
    """Folds events into rows, one per event; a streamed answer collapses into one row."""

    def __init__(self) -> None:
        self.rows: list[TimelineRow] = []
        self._streamed: list[ev.Token] = []
        self._saw_rounds = False

    def add(self, event: Event) -> None:
        row = self(event)
        if row is None:
            return
        self._flush_tokens()
        self.rows.append(replace(row, seq=len(self.rows)))

    def finish(self) -> list[TimelineRow]:
        self._flush_tokens()
        return self.rows

    def _flush_tokens(self) -> None:
        if self._streamed:
            text = "".join(tok.text for tok in self._streamed)
            first, last = self._streamed[0].t_ms, self._streamed[-1].t_ms
            self.rows.append(TimelineRow(len(self.rows), "token", first, "Answer streamed", "ok", last - first,
                                         {"pieces": str(len(self._streamed)), "characters": str(len(text))}))
            self._streamed.clear()

    # -- one handler per kind; ``add`` numbers the rows --------------------------
    def on_token(self, event: ev.Token) -> None:
        self._streamed.append(event)
        return None

    def on_run(self, event: ev.RunStarted) -> TimelineRow:
        return _row(event, "Run started", "info", fields={
            "question": event.question, "requested mode": event.requested_mode,
            "knowledge bases": ", ".join(str(k) for k in event.kb_ids) or "—",
            "selected documents": ", ".join(str(d) for d in event.selected_doc_ids) or "—",
            "backends": "; ".join(f"{b.role}: {b.name}{'' if b.live else ' (fallback)'}" for b in event.backends)})

    def on_scope(self, event: ev.ScopeDecided) -> TimelineRow:
        return _row(event, f"Scope: {event.scope.value} (via {event.via})",
                    "warn" if event.via == "fallback" else "ok",
                    fields={"confidence": _fmt(event.confidence, 2), "reason": describe_reason(event.reason) or "—"})

    def on_understanding(self, event: ev.Understood) -> TimelineRow:
        u = event.understanding
        fields = {"note": event.note} if event.note else {}
        return _row(event, f"Understanding (via {event.via})",
                    "warn" if event.via == "fallback" or u.is_fallback else "ok", event.duration_ms, fields={
                        **fields,
                        "rewritten query": u.rewritten_query, "intent": u.intent.value,
                        "complexity": u.complexity.value + (" (upgraded)" if u.upgraded_complexity else ""),
                        "specificity": u.specificity.value, "ambiguous": str(u.is_ambiguous),
                        "time aware": str(u.time_aware), "memory aware": str(u.memory_aware),
                        "scope": f"{u.scope.value} ({u.scope_confidence:.2f})",
                        "memory hints": "; ".join(u.memory_write_hints) or "—"})

    def on_routing(self, event: ev.Routed) -> TimelineRow:
        # the explanation names the signals; older traces have only the code, put in words
        fields = {"why": event.decision.explanation or describe_reason(event.decision.reason),
                  "forced": str(event.decision.forced)}
        items: list[dict[str, Any]] = []
        if event.plan is not None:
            fields["planned tools"] = ", ".join(event.plan.tools) + (" (conservative)" if event.plan.conservative
                                                                     else "")
            items = [{"tool": tool, "why": event.plan.reasons.get(tool, "")} for tool in event.plan.tools]
        if event.note:
            fields["note"] = event.note
        return _row(event, f"Route → {event.decision.mode.value}", "warn" if event.note else "ok",
                    fields=fields, items=items)

    def on_agentic_step(self, event: ev.AgenticStep) -> TimelineRow:
        self._saw_rounds = True
        fields = {"tool calls": str(len(event.tool_calls)), "new chunks": str(event.new_chunks),
                  "duplicates": str(event.duplicate_chunks)}
        if event.offered_tools:
            fields["offered tools"] = ", ".join(event.offered_tools)
        if event.withheld_tools:
            fields["not offered"] = "; ".join(f"{name} ({why})" for name, why in event.withheld_tools.items())
        dropped = [f"{n} {what}" for n, what in ((event.repeated_calls, "repeated"),
                                                 (event.over_cap_calls, "past the cap")) if n]
        if dropped:
            fields["calls asked"] = f"{event.requested_calls} ({', '.join(dropped)}: not run)"
        if event.thought:
            fields["thought"] = event.thought
        bad = any(c.status in ("error", "rejected") for c in event.tool_calls)
        return _row(event, f"Agentic round {event.iteration}/{event.max_iterations}", "warn" if bad else "ok",
                    event.duration_ms, fields, [tool_call_item(c) for c in event.tool_calls])

    def on_retrieval(self, event: ev.Retrieved) -> TimelineRow:
        fields = {"candidates": str(event.candidate_count), "kb chunks": str(event.kb_chunks),
                  "web chunks": str(event.web_chunks), "memories": str(event.memory_items)}
        if event.mode is Mode.AGENTIC:
            fields.update({"rounds": str(event.rounds), "stop reason": describe_reason(event.stop_reason) or "—",
                           "deduplicated": str(event.dedupe_hits)})
        items = [{"worker": w.name, "status": w.status, "hits": w.hits, "latency_ms": round(w.latency_ms, 1),
                  "message": w.message} for w in event.workers]
        calls = [tool_call_item(c) for c in event.tool_calls]
        if self._saw_rounds and event.tool_calls:
            # the loop's calls were already listed round by round; keep only the calls made after the loop
            listed = sum(len(r.items) for r in self.rows if r.kind == "agentic_step")
            items, calls = [], calls[listed:]
            fields["tool calls"] = f"{len(event.tool_calls)} (see rounds)"
        degraded = any(w.status != "ok" for w in event.workers) or event.stop_reason in (
            "error", "total_timeout", "iteration_timeout")
        return _row(event, f"Retrieval ({event.mode.value})", "warn" if degraded else "ok",
                    event.duration_ms, fields, items + calls)

    def on_rerank(self, event: ev.Reranked) -> TimelineRow:
        kept = [c for c in event.candidates if c.kept]
        top = max((c.scores.rerank for c in event.candidates if c.scores.rerank is not None), default=None)
        fields = {"candidates": str(len(event.candidates)), "kept": str(len(kept)), "top score": _fmt(top),
                  "web candidates": str(sum(1 for c in event.candidates if c.origin == "web"))}
        across = across_languages(event.candidates)
        if across:
            fields["across languages"] = across
        return _row(event, f"Rerank ({event.reranker})", "ok", event.duration_ms, fields=fields)

    def on_grader(self, event: ev.Graded) -> TimelineRow:
        g = event.grade
        # the CRAG tier of the evidence, named for what it grades: the answer's verdict is on the done row
        return _row(event, f"Evidence grade {g.tier.value}" + (" (after web)" if event.round == "after_web" else ""),
                    {"HIGH": "ok", "AMBIGUOUS": "warn", "LOW": "error"}[g.tier.value], fields={
                        "top score": _fmt(g.top_score), "lexical coverage": _fmt(g.lex_coverage),
                        "kb entity weak": str(g.kb_entity_weak),
                        "web compensation needed": str(g.web_compensation_needed),
                        "gray-zone mode": g.gray_zone_mode or "—", "reason": describe_reason(g.reason)})

    def on_web_compensation(self, event: ev.WebCompensated) -> TimelineRow:
        return _row(event, "Web compensation " + ("ran" if event.ran else "skipped"), "info", event.duration_ms,
                    {"reason": describe_reason(event.reason), "added chunks": str(event.added_chunks)})

    def on_judge(self, event: ev.Judged) -> TimelineRow:
        return judge_row(event)

    def on_fallback(self, event: ev.Fallback) -> TimelineRow:
        fields = {"reason": describe_reason(event.reason), "used instead": event.to or "—"}
        if event.replaced:
            fields["not shown"] = event.replaced
        return _row(event, f"Fallback in {event.stage}", "warn", fields=fields)

    def on_start(self, event: ev.AnswerStarted) -> TimelineRow:
        return _row(event, "Writing the answer", "info", fields={
            "prompt": event.prompt, "sources": str(len(event.sources)),
            "web sources": str(sum(1 for s in event.sources if s.origin == "web")),
            "memories": str(len(event.memories))})

    def on_error(self, event: ev.ErrorRaised) -> TimelineRow:
        return _row(event, f"Error in {event.stage}", "error", fields={"message": event.message})

    def on_index_incomplete(self, event: ev.IndexIncomplete) -> TimelineRow:
        return _row(event, f"Index incomplete: knowledge base {event.kb_id}", "warn", fields={
            "chunks without a vector": f"{event.missing_vectors} of {event.total}",
            "effect": "vector search misses them; keyword search still finds them",
            "repair": "docmind kb check NAME --repair"})

    def on_ingest_pending(self, event: ev.IngestPending) -> TimelineRow:
        return _row(event, f"Still being ingested: knowledge base {event.kb_name or event.kb_id}", "warn", fields={
            "pending documents": str(event.pending_documents),
            "searched documents": str(event.searched_documents),
            "chunks still embedding": str(event.embedding_chunks),
            "effect": "pending documents were not searched: what they hold is not known yet; chunks still "
                      "embedding were searched by keyword only"})

    def on_notice(self, event: ev.Notice) -> TimelineRow:
        return _row(event, f"Notice: {event.code.replace('_', ' ')}", "warn", fields={"text": event.text})

    def on_done(self, event: ev.Done) -> TimelineRow:
        c = event.citations
        verdict = verdict_of(event)
        tokens_in = sum(m.prompt_tokens for m in event.model_calls)
        tokens_out = sum(m.completion_tokens for m in event.model_calls)
        fields = {"verdict": verdict_line(verdict), "mode": event.mode,
                  "route reason": describe_reason(event.route_reason) or "—",
                  "backend": event.backend or "—",
                  # the score the verdict starts from (it may hold it lower), with the band it fell in
                  "coverage x top score": (f"{event.confidence.score:.3f} (band {event.confidence.band})"
                                           if event.confidence else "—"),
                  "citation coverage": _fmt(c.coverage, 2), "invalid refs": str(c.invalid_refs),
                  "web compensated": str(event.web_compensated),
                  "stop reason": describe_reason(event.stop_reason) or "—",
                  "model calls": f"{len(event.model_calls)} ({tokens_in} in / {tokens_out} out tokens)"}
        if c.inferred_sentences:  # the model wrote no marker there; the parser found the supporting source
            fields["citation coverage"] += f" ({c.inferred_sentences} sentences inferred)"
        stages = stage_times(event.timings_ms)
        if stages:
            fields["time per stage"] = stages
        if c.claims:
            fields["claims"] = (f"{c.supported_claims} supported, {c.unsupported_claims} unsupported, "
                                f"{c.contradicted_claims} contradicted")
        if event.confidence is not None and event.confidence.reason:
            fields["confidence reason"] = event.confidence.reason
        unanswered = event.confidence is not None and event.confidence.answers_question is False
        if unanswered:
            fields["answers the question"] = "no: no supported claim states " + " or ".join(
                KIND_WORDS.get(k, k) for k in event.confidence.unanswered)
        if event.cancelled:
            fields["cancelled"] = "True"
        items = [{"claim": _short(k.text), "status": k.status, "source": f"[{k.source_index}]" if k.source_index
                  else "", "why": k.reason, "by": k.via} for k in c.claims if k.status != "supported"]
        flagged = c.contradicted_claims or c.unsupported_claims or unanswered
        return _row(event, f"Done: {verdict.label}" + (" (cancelled)" if event.cancelled else ""),
                    "warn" if event.cancelled or flagged else "ok", event.timings_ms.get("total"), fields, items)


_PROGRESS_WORDS = {
    "run": "Starting", "scope": "Reading the question", "understanding": "Understanding the question",
    "routing": "Choosing how to search", "retrieval": "Ranking what the search found",
    "rerank": "Grading the evidence", "grader": "Grading the evidence", "web_compensation": "Searching the web",
    "judge": "Checking the evidence", "start": "Writing the answer", "token": "Writing the answer",
    "index_incomplete": "Searching (part of a knowledge base has no vectors yet)",
    "ingest_pending": "Searching (a knowledge base is still being ingested)", "done": "Checking the answer",
}


def progress_words(event: Event) -> str:
    """What the run is doing once ``event`` has come, in words, for the status line while an answer streams
    ("Writing the answer", never the prompt's name)."""
    if event.kind == "agentic_step":
        return f"Searching, round {event.iteration}"
    if event.kind == "fallback":
        return f"Working around a problem in {_stage_words(event.stage)}"
    if event.kind == "error":
        return f"A step failed ({_stage_words(event.stage)}); going on without it"
    if event.kind == "notice":
        return "Writing the answer"
    return _PROGRESS_WORDS.get(event.kind, event.kind.replace("_", " ").capitalize())


def _stage_words(stage: str) -> str:
    """"retrieval.doc_search" -> "retrieval, doc search"."""
    return stage.replace(".", ", ").replace("_", " ")


STOPPED_BY_YOU = "Stopped by you: what was written so far is kept, and the steps still running were ended."


def problem_lines(digest: "RunDigest") -> list[str]:
    """The run's errors as the page states them beside the answer.  A run the user stopped says so once: the
    steps it cut short end in errors (a search's deadline, a worker's timeout) that are the stop, not a failure;
    they stay in the timeline."""
    if digest.cancelled:
        return [STOPPED_BY_YOU]
    return [f"{error.stage}: {error.message}" for error in digest.errors]


def verdict_line(verdict: ev.Verdict) -> str:
    """The verdict on one line: label, number, and the reasons ("Partly supported, 0.59: ...")."""
    head = verdict.label + (f", support {verdict.score:.2f}" if verdict.score is not None else "")
    return head + (": " + "; ".join(verdict.reasons) if verdict.reasons else "")


def _short(text: str, limit: int = 120) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[:limit - 1] + "…"


# The stages of a run in run order, as Done.timings_ms names them; retrieval's own parts are shown beside it.
_STAGES = ("scope", "understanding", "retrieval", "generation")


def stage_times(timings_ms: dict[str, float]) -> str:
    """``scope 1 ms · understanding 12.3 s · retrieval 4.1 s (agentic_loop 3.2 s, ...) · generation 9.8 s``."""
    parts = []
    for stage in _STAGES:
        if stage not in timings_ms:
            continue
        inner = [f"{k.split('.', 1)[1]} {_duration(v)}" for k, v in timings_ms.items()
                 if k.startswith(f"{stage}.")]
        parts.append(f"{stage} {_duration(timings_ms[stage])}" + (f" ({', '.join(inner)})" if inner else ""))
    return " · ".join(parts)


def _duration(ms: float) -> str:
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def _row(event: Event, title: str, status: RowStatus = "ok", duration_ms: float | None = None,
         fields: dict[str, str] | None = None, items: list[dict[str, Any]] | None = None) -> TimelineRow:
    """A row for ``event``; :meth:`TimelineBuilder.add` gives it its number."""
    return TimelineRow(0, event.kind, event.t_ms, title, status, duration_ms, fields or {}, items or [])


def timeline(events: Sequence[Event | dict]) -> list[TimelineRow]:
    """The rows the chat and Traces pages list, one per event; a streamed answer collapses into one row."""
    builder = TimelineBuilder()
    for event in as_events(events):
        builder.add(event)
    return builder.finish()


# --------------------------------------------------------------------------
# Digest: the facts of one run, pulled out of its events once
# --------------------------------------------------------------------------


@dataclass
class RunDigest:
    events: list[Event]
    started: ev.RunStarted | None = None
    scope: ev.ScopeDecided | None = None
    understood: ev.Understood | None = None
    routed: ev.Routed | None = None
    agentic_steps: list[ev.AgenticStep] = field(default_factory=list)
    retrieved: ev.Retrieved | None = None  # the last retrieval
    retrievals: list[ev.Retrieved] = field(default_factory=list)  # an agentic loop and its one-shot fallback
    reranks: list[ev.Reranked] = field(default_factory=list)
    grades: list[ev.Graded] = field(default_factory=list)
    web: ev.WebCompensated | None = None
    judgements: list[ev.Judged] = field(default_factory=list)  # the model judge's calls (grader.judge)
    fallbacks: list[ev.Fallback] = field(default_factory=list)
    errors: list[ev.ErrorRaised] = field(default_factory=list)
    index_gaps: list[ev.IndexIncomplete] = field(default_factory=list)
    pending: list[ev.IngestPending] = field(default_factory=list)  # searched KBs still being ingested
    notice_events: list[ev.Notice] = field(default_factory=list)  # DocMind's own notes, as they were streamed
    answer_started: ev.AnswerStarted | None = None
    streamed_text: str = ""
    done: ev.Done | None = None

    @classmethod
    def from_events(cls, events: Sequence[Event | dict]) -> "RunDigest":
        digester = _Digester(cls(events=as_events(events)))
        for event in digester.digest.events:
            digester(event)
        digester.digest.streamed_text = "".join(digester.pieces)
        return digester.digest

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
    def route_reason(self) -> str:
        if self.done is not None and self.done.route_reason:
            return self.done.route_reason
        return self.routed.decision.reason if self.routed is not None else ""

    @property
    def scope_name(self) -> str:
        """The run's scope as the Done event settled it (a failed run keeps what the scope step decided)."""
        if self.done is not None:
            return self.done.scope.value
        return self.scope.scope.value if self.scope is not None else ""

    @property
    def rounds(self) -> int:
        return max((step.iteration for step in self.agentic_steps), default=0)

    @property
    def web_compensated(self) -> bool:
        if self.done is not None:
            return self.done.web_compensated
        return self.web is not None and self.web.ran

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
    def cancelled(self) -> bool:
        return self.done is not None and self.done.cancelled

    @property
    def tier(self) -> str:
        """The CRAG tier, or "" when nothing was graded or the run was stopped (a stopped run has no tier)."""
        return self.grade.tier.value if self.grade is not None and not self.cancelled else ""

    @property
    def verdict(self) -> ev.Verdict | None:
        """The answer's one verdict: recorded by the run, or derived from an older trace's done event; None
        until the run is done."""
        return verdict_of(self.done) if self.done is not None else None

    @property
    def notices(self) -> list[ev.AppNotice]:
        """DocMind's own notes on the run, shown beside the answer (the done event's, else those streamed)."""
        if self.done is not None and self.done.notices:
            return list(self.done.notices)
        return [n.notice for n in self.notice_events]

    @property
    def stop_reason(self) -> str:
        if self.done is not None and self.done.stop_reason:
            return self.done.stop_reason
        return self.retrieved.stop_reason if self.retrieved is not None else ""

    @property
    def tool_calls(self) -> list[ToolCallRecord]:
        """Every tool call of the run, in order: the agentic loop's, then one-shot workers seen as calls of
        their tool (a plain one-shot run's, or the fallback's after the loop)."""
        loop = [r for r in self.retrievals if r.mode is Mode.AGENTIC]
        # the loop's Retrieved lists every call it made, a round cut short included; without it (the loop
        # failed and fell back) its rounds hold what is known
        calls = list(loop[-1].tool_calls) if loop else [c for step in self.agentic_steps for c in step.tool_calls]
        for retrieval in self.retrievals:
            if retrieval.mode is Mode.RULE_PLANNER:  # every worker ran its tool on the run's query
                calls += [ToolCallRecord(name=w.name, args={"query": self.query}, result_count=w.hits,
                                         latency_ms=w.latency_ms, status=w.status, message=w.message)
                          for w in retrieval.workers]
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
    def pending_documents(self) -> int:
        if self.done is not None:
            return self.done.pending_documents
        return sum(p.pending_documents for p in self.pending)

    @property
    def first_event_ms(self) -> float:
        return self.events[0].t_ms if self.events else 0.0


class _Digester(EventFold[None]):
    """Files each event of a run under its place in a :class:`RunDigest`."""

    def __init__(self, digest: RunDigest) -> None:
        self.digest = digest
        self.pieces: list[str] = []

    def on_run(self, event: ev.RunStarted) -> None:
        self.digest.started = event

    def on_scope(self, event: ev.ScopeDecided) -> None:
        self.digest.scope = event

    def on_understanding(self, event: ev.Understood) -> None:
        self.digest.understood = event

    def on_routing(self, event: ev.Routed) -> None:
        self.digest.routed = event

    def on_agentic_step(self, event: ev.AgenticStep) -> None:
        self.digest.agentic_steps.append(event)

    def on_retrieval(self, event: ev.Retrieved) -> None:
        self.digest.retrieved = event
        self.digest.retrievals.append(event)

    def on_rerank(self, event: ev.Reranked) -> None:
        self.digest.reranks.append(event)

    def on_grader(self, event: ev.Graded) -> None:
        self.digest.grades.append(event)

    def on_web_compensation(self, event: ev.WebCompensated) -> None:
        self.digest.web = event

    def on_judge(self, event: ev.Judged) -> None:
        self.digest.judgements.append(event)

    def on_fallback(self, event: ev.Fallback) -> None:
        self.digest.fallbacks.append(event)

    def on_start(self, event: ev.AnswerStarted) -> None:
        self.digest.answer_started = event

    def on_token(self, event: ev.Token) -> None:
        self.pieces.append(event.text)

    def on_error(self, event: ev.ErrorRaised) -> None:
        self.digest.errors.append(event)

    def on_index_incomplete(self, event: ev.IndexIncomplete) -> None:
        self.digest.index_gaps.append(event)

    def on_ingest_pending(self, event: ev.IngestPending) -> None:
        self.digest.pending.append(event)

    def on_notice(self, event: ev.Notice) -> None:
        self.digest.notice_events.append(event)

    def on_done(self, event: ev.Done) -> None:
        self.digest.done = event
