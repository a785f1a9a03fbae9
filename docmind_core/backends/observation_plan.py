"""The observation plan of one finished run: the tree of timed observations Langfuse shows (pure, no SDK).

``plan_observations(record)`` folds a stored run's events (``ObservationPlanner``, one of the event folds) into
``PlannedObservation``s: one per stage, with the start and end the run actually had (from the events' ``t_ms``
and durations), its model calls nested as generations, and the answer as the ``generation`` observation with
its model and token usage.  ``backends/tracing.py`` turns a plan into spans and exports them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from docmind_core import events as ev
from docmind_core.events import EventFold

ROOT_SPAN_NAME = "docmind_run"  # the run's root observation, which also names the trace


@dataclass
class PlannedObservation:
    name: str
    start_ms: float  # since the run started
    end_ms: float
    as_type: str = "span"  # "span" | "generation"
    input: Any = None
    output: Any = None
    metadata: dict[str, Any] | None = None
    level: str | None = None  # "WARNING" / "ERROR" for fallbacks and errors
    status_message: str | None = None
    model: str | None = None
    usage: dict[str, int] | None = None
    completion_start_ms: float | None = None
    children: list["PlannedObservation"] = field(default_factory=list)


def plan_observations(record: Any) -> PlannedObservation:
    """The observation tree of one stored run (a ``TraceRecord``)."""
    meta = record.meta
    events = list(record.events)
    done = next((e for e in reversed(events) if isinstance(e, ev.Done)), None)
    calls = {purpose: [c for c in (done.model_calls if done else []) if c.purpose == purpose]
             for purpose in {c.purpose for c in (done.model_calls if done else [])}}
    end_ms = max([meta.duration_ms or 0.0] + [e.t_ms for e in events])
    root = PlannedObservation(
        name=ROOT_SPAN_NAME, start_ms=0.0, end_ms=end_ms, input={"question": meta.question},
        output=done.answer if done else None,
        metadata={"run_id": meta.run_id, "requested_mode": meta.requested_mode, "kb_ids": meta.kb_ids,
                  "mode": meta.mode, "tier": meta.tier, "stop_reason": meta.stop_reason,
                  "route_reason": done.route_reason if done else "", "backend": done.backend if done else "",
                  "confidence": done.confidence.score if done and done.confidence else None,
                  "band": done.confidence.band if done and done.confidence else None})
    planner = ObservationPlanner(calls)
    for event in events:
        child = planner(event)
        if child is not None:
            root.children.append(child)
        planner.previous_ms = event.t_ms
    if planner.answer_start is not None or done is not None:
        root.children.append(_generation(planner.answer_start, done, calls.get("answer") or [],
                                         planner.first_token_ms, end_ms))
    for purpose, leftover in calls.items():  # calls no stage claimed (e.g. an understanding that failed early)
        for call in leftover:
            root.children.append(_call_obs(call, f"llm_{purpose}", end_ms))
    return root


class ObservationPlanner(EventFold[PlannedObservation | None]):
    """The observation of each stage event; model calls are claimed, in order, by the stage that made them.

    ``previous_ms`` is the time of the event before (stages without a duration of their own span from it).
    """

    def __init__(self, calls: dict[str, list]) -> None:
        self.calls = calls  # purpose -> the run's model calls not yet attached to a stage
        self.previous_ms = 0.0
        self.answer_start: ev.AnswerStarted | None = None
        self.first_token_ms: float | None = None

    def on_run(self, event: ev.RunStarted) -> None:
        return None  # the root observation is the run

    def on_scope(self, event: ev.ScopeDecided) -> PlannedObservation:
        return _obs("scope", self.previous_ms, event.t_ms, output={
            "scope": event.scope.value, "confidence": event.confidence, "via": event.via, "reason": event.reason})

    def on_understanding(self, event: ev.Understood) -> PlannedObservation:
        child = _obs("understanding", event.t_ms - event.duration_ms, event.t_ms,
                     output=event.understanding.model_dump(mode="json"), metadata={"via": event.via})
        _attach_call(child, self.calls.get("understanding"), "llm_understanding")
        return child

    def on_routing(self, event: ev.Routed) -> PlannedObservation:
        return _obs("routing", self.previous_ms, event.t_ms, output={
            "mode": event.decision.mode.value, "reason": event.decision.reason, "forced": event.decision.forced,
            "planned_tools": list(event.plan.tools) if event.plan else [], "note": event.note})

    def on_agentic_step(self, event: ev.AgenticStep) -> PlannedObservation:
        child = _obs(f"agentic_round_{event.iteration}", event.t_ms - event.duration_ms, event.t_ms,
                     output=[{"name": c.name, "args": c.args, "status": c.status, "results": c.result_count,
                              "new_chunks": c.new_chunks, "repaired_from": c.repaired_from}
                             for c in event.tool_calls],
                     metadata={"thought": event.thought, "new_chunks": event.new_chunks,
                               "duplicate_chunks": event.duplicate_chunks})
        _attach_call(child, self.calls.get("agent_round"), "llm_agent_round")
        return child

    def on_retrieval(self, event: ev.Retrieved) -> PlannedObservation:
        return _obs("retrieval", event.t_ms - event.duration_ms, event.t_ms, output={
            "candidates": event.candidate_count, "kb_chunks": event.kb_chunks, "web_chunks": event.web_chunks,
            "memory_items": event.memory_items},
            metadata={"mode": event.mode.value, "stop_reason": event.stop_reason, "rounds": event.rounds,
                      "workers": [w.model_dump(mode="json") for w in event.workers]})

    def on_rerank(self, event: ev.Reranked) -> PlannedObservation:
        return _obs("rerank", event.t_ms - event.duration_ms, event.t_ms, metadata={"reranker": event.reranker},
                    output=[{"chunk_id": c.chunk_id, "document": c.document, "origin": c.origin,
                             "rerank": c.scores.rerank, "kept": c.kept, "cut_by": c.cut_by}
                            for c in event.candidates[:30]])

    def on_grader(self, event: ev.Graded) -> PlannedObservation:
        name = "grader" if event.round == "initial" else "grader_after_web"
        return _obs(name, self.previous_ms, event.t_ms, output=event.grade.model_dump(mode="json"))

    def on_web_compensation(self, event: ev.WebCompensated) -> PlannedObservation:
        return _obs("web_compensation", event.t_ms - event.duration_ms, event.t_ms,
                    output={"ran": event.ran, "reason": event.reason, "added_chunks": event.added_chunks})

    def on_judge(self, event: ev.Judged) -> PlannedObservation:
        child = _obs(f"judge_{event.target}", event.t_ms - event.duration_ms, event.t_ms,
                     level="WARNING" if event.via == "offline" else None,
                     status_message=event.reason if event.via == "offline" else None,
                     output={"evidence": event.evidence.model_dump(mode="json") if event.evidence else None,
                             "claims": [c.model_dump(mode="json") for c in event.claims]},
                     metadata={"via": event.via, "tier_before": event.tier_before, "tier_after": event.tier_after})
        _attach_call(child, self.calls.get(f"judge_{event.target}"), f"llm_judge_{event.target}")
        return child

    def on_fallback(self, event: ev.Fallback) -> PlannedObservation:
        return _obs("fallback", event.t_ms, event.t_ms, level="WARNING",
                    status_message=f"{event.stage}: {event.reason}", metadata={"stage": event.stage, "to": event.to})

    def on_start(self, event: ev.AnswerStarted) -> None:
        self.answer_start = event  # the generation observation is built once the whole answer is known
        return None

    def on_token(self, event: ev.Token) -> None:
        if self.first_token_ms is None:
            self.first_token_ms = event.t_ms
        return None

    def on_error(self, event: ev.ErrorRaised) -> PlannedObservation:
        return _obs("error", event.t_ms, event.t_ms, level="ERROR", status_message=f"{event.stage}: {event.message}",
                    metadata={"stage": event.stage})

    def on_index_incomplete(self, event: ev.IndexIncomplete) -> PlannedObservation:
        return _obs("index_incomplete", event.t_ms, event.t_ms, level="WARNING",
                    status_message=f"knowledge base {event.kb_id}: {event.missing_vectors} of {event.total} "
                                   "chunks have no vector",
                    metadata={"kb_id": event.kb_id, "missing_vectors": event.missing_vectors, "total": event.total})

    def on_ingest_pending(self, event: ev.IngestPending) -> PlannedObservation:
        return _obs("ingest_pending", event.t_ms, event.t_ms, level="WARNING",
                    status_message=f"knowledge base {event.kb_name or event.kb_id}: {event.pending_documents} "
                                   f"document(s) still being ingested, not searched",
                    metadata={"kb_id": event.kb_id, "pending_documents": event.pending_documents,
                              "searched_documents": event.searched_documents})

    def on_notice(self, event: ev.Notice) -> PlannedObservation:
        return _obs("notice", event.t_ms, event.t_ms, level="WARNING", status_message=event.text,
                    metadata={"code": event.code})

    def on_done(self, event: ev.Done) -> None:
        return None  # the answer and its usage go on the generation observation


def _obs(name: str, start_ms: float, end_ms: float, **kwargs: Any) -> PlannedObservation:
    start = max(0.0, min(start_ms, end_ms))
    return PlannedObservation(name=name, start_ms=start, end_ms=max(end_ms, start), **kwargs)


def _attach_call(parent: PlannedObservation, pending: list | None, name: str) -> None:
    """Nest the next model call of this purpose under the stage it belongs to."""
    if pending:
        parent.children.append(_call_obs(pending.pop(0), name, parent.end_ms))


def _call_obs(call: Any, name: str, end_ms: float) -> PlannedObservation:
    return _obs(name, end_ms - call.latency_ms, end_ms, as_type="generation", model=call.model,
                usage=_usage([call]), level=None if call.ok else "ERROR",
                status_message=call.error or None, metadata={"purpose": call.purpose})


def _generation(start: Any, done: Any, answer_calls: list, first_token_ms: float | None,
                end_ms: float) -> PlannedObservation:
    begin = start.t_ms if start is not None else (done.t_ms if done is not None else end_ms)
    finish = done.t_ms if done is not None else end_ms
    sources = [f"[{i}] {c.document}" + (f" ({c.url})" if c.url else "") for i, c in
               enumerate(start.sources if start is not None else [], start=1)]
    model = answer_calls[0].model if answer_calls else (done.backend if done is not None else "")
    generation = _obs("generation", begin, finish, as_type="generation", model=model or None,
                      usage=_usage(answer_calls) if answer_calls else None, completion_start_ms=first_token_ms,
                      input={"template": start.prompt if start is not None else "", "sources": sources,
                             "memories": list(start.memories) if start is not None else []},
                      output=done.answer if done is not None else None,
                      metadata={"citations": done.citations.model_dump(mode="json") if done is not None else None})
    answer_calls.clear()
    return generation


def _usage(calls: list) -> dict[str, int]:
    prompt = sum(c.prompt_tokens for c in calls)
    completion = sum(c.completion_tokens for c in calls)
    return {"input": prompt, "output": completion, "total": prompt + completion}
