"""Export finished runs to Langfuse as one trace each, without ever slowing a run.

The Langfuse SDK (v3+) is OpenTelemetry based: it owns the OTLP/HTTP exporter,
the Basic-auth headers and the batch span processor.  We give it a
``TracerProvider`` of our own (so DocMind never changes the process-wide OTel
state) and create the spans from a *finished* trace record: each stage span
gets the start and end times the run actually had (from the events' ``t_ms``
and durations), and is wrapped in the SDK's ``LangfuseSpan`` /
``LangfuseGeneration`` so Langfuse sees observation types, input/output, model
and token usage exactly as its own decorators would write them.

Shape of one run:

    docmind_run                      root: question in, answer out, mode/tier/stop reason
      scope, understanding (+ llm generation), routing,
      agentic_round_N (+ llm generation), retrieval, rerank, grader,
      web_compensation, fallback / error (level WARNING / ERROR),
      generation                     a generation observation: model + token usage

:meth:`LangfuseExporter.export` only queues the record: spans are built and
flushed on one background thread, bounded by ``timeout_s``, and every failure
is logged, never raised.  A Langfuse that is down or hangs costs the run
nothing.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from docmind_core import events as ev
from docmind_core.events import EventFold
from docmind_core.backends.protocols import TraceExporter
from docmind_core.models import BackendStatus

log = logging.getLogger(__name__)

TRACER_NAME = "docmind"  # instrumentation scope of our spans; only these are exported
ROOT_SPAN_NAME = "docmind_run"
HOW_TO_ENABLE = "set LANGFUSE_PUBLIC_KEY, LANGFUSE_SECRET_KEY and LANGFUSE_HOST (or tracing.langfuse_host)"


# --------------------------------------------------------------------------
# Planning: a finished run -> a tree of timed observations (pure, no SDK)
# --------------------------------------------------------------------------


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
            metadata={"mode": event.mode, "stop_reason": event.stop_reason, "rounds": event.rounds,
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


# --------------------------------------------------------------------------
# Exporters
# --------------------------------------------------------------------------


class NullExporter:
    """Tracing off: exports nothing and says how to turn it on."""

    name = "none"

    def __init__(self, reason: str = "Langfuse keys not set"):
        self.reason = reason

    def export(self, run: Any) -> None:
        return None

    def flush(self, timeout_s: float | None = None) -> bool:
        return True

    def close(self) -> None:
        return None

    def status(self) -> BackendStatus:
        return BackendStatus(role="tracing", name="none", live=False, detail=self.reason, how_to_enable=HOW_TO_ENABLE)


class LangfuseExporter:
    """Langfuse over OTLP/HTTP; ``export`` returns at once and never raises.

    The SDK keeps one set of resources per public key per process: build exporters with
    :func:`shared_langfuse_exporter`, which hands out one per key.
    """

    name = "langfuse"

    def __init__(self, public_key: str, secret_key: str, host: str, timeout_s: float = 3.0):
        from langfuse import Langfuse
        from opentelemetry.sdk.trace import TracerProvider

        self.host = host.rstrip("/")
        self._public_key = public_key
        self._secret_key = secret_key
        self.timeout_s = float(timeout_s)
        self.last_error = ""
        self.exported_runs = 0
        self._provider = TracerProvider()  # ours alone: the process-wide OTel provider is left untouched
        # Our own OTLP exporter (a documented SDK option) so we learn whether Langfuse accepted a batch,
        # and so the timeout can be fractional; endpoint and headers are the ones the SDK would use.
        self._exporter = _OutcomeRecordingExporter(_otlp_exporter(self.host, public_key, secret_key, self.timeout_s))
        self._client = Langfuse(
            public_key=public_key, secret_key=secret_key, base_url=self.host,
            timeout=max(1, math.ceil(self.timeout_s)), tracer_provider=self._provider,
            should_export_span=_is_docmind_span, span_exporter=self._exporter,
            flush_interval=max(self.timeout_s, 1.0))
        self._tracer = self._provider.get_tracer(TRACER_NAME)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="langfuse-export")
        self._pending: set[Future] = set()
        self._lock = threading.Lock()

    def export(self, run: Any) -> None:
        try:
            future = self._executor.submit(self._export_now, run)
        except Exception as exc:  # closed executor, interpreter shutting down ...
            self.last_error = f"export not queued: {exc}"
            log.warning("Langfuse %s", self.last_error)
            return
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._forget)

    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait (bounded) for queued exports; True when all finished in time."""
        with self._lock:
            pending = list(self._pending)
        done, not_done = wait_futures(pending, timeout=self.timeout_s * 2 if timeout_s is None else timeout_s)
        return not not_done

    def close(self) -> None:
        with _EXPORTERS_LOCK:
            if _EXPORTERS.get(self._public_key) is self:
                del _EXPORTERS[self._public_key]
        self._executor.shutdown(wait=False, cancel_futures=True)
        threading.Thread(target=self._client.shutdown, name="langfuse-shutdown", daemon=True).start()

    def status(self) -> BackendStatus:
        detail = self.host + (f"; last export failed: {self.last_error}" if self.last_error else "")
        return BackendStatus(role="tracing", name="langfuse", live=True, detail=detail)

    # ------------------------------------------------------------------
    def _forget(self, future: Future) -> None:
        with self._lock:
            self._pending.discard(future)

    def _export_now(self, run: Any) -> None:
        try:
            from langfuse import LangfuseOtelSpanAttributes as Attr

            meta = run.meta
            trace_attributes = {Attr.TRACE_NAME: ROOT_SPAN_NAME}
            if meta.user_id is not None:
                trace_attributes[Attr.TRACE_USER_ID] = str(meta.user_id)
            if meta.conversation_id:
                trace_attributes[Attr.TRACE_SESSION_ID] = meta.conversation_id
            failures_before = self._exporter.failures
            self._emit(plan_observations(run), None, _epoch_ns(meta.started_at), trace_attributes)
            flushed = self._provider.force_flush(timeout_millis=int(self.timeout_s * 1000))
            if flushed and self._exporter.failures == failures_before:
                self.exported_runs += 1
                self.last_error = ""
            else:
                self.last_error = f"Langfuse at {self.host} did not accept the run within {self.timeout_s:g} s"
                log.warning(self.last_error)
        except Exception as exc:  # tracing must never break anything
            self.last_error = f"{type(exc).__name__}: {exc}"
            log.warning("Langfuse export of run %s failed: %s", getattr(run.meta, "run_id", "?"), self.last_error)

    def _emit(self, plan: PlannedObservation, parent_span: Any, base_ns: int,
              trace_attributes: dict[str, str] | None = None) -> None:
        """Create one observation (and its children) with the run's real timing."""
        from langfuse import LangfuseGeneration, LangfuseSpan
        from opentelemetry import context as otel_context
        from opentelemetry import trace as otel_trace

        parent_context = otel_trace.set_span_in_context(parent_span) if parent_span is not None \
            else otel_context.Context()  # a root: never adopt whatever span happens to be current
        otel_span = self._tracer.start_span(plan.name, context=parent_context,
                                            start_time=base_ns + _ns(plan.start_ms))
        for key, value in (trace_attributes or {}).items():
            otel_span.set_attribute(key, value)
        common = dict(otel_span=otel_span, langfuse_client=self._client, input=plan.input, output=plan.output,
                      metadata=plan.metadata, level=plan.level, status_message=plan.status_message)
        if plan.as_type == "generation":
            completion_start = None
            if plan.completion_start_ms is not None:
                completion_start = datetime.fromtimestamp((base_ns + _ns(plan.completion_start_ms)) / 1e9,
                                                          tz=timezone.utc)
            observation = LangfuseGeneration(**common, model=plan.model, usage_details=plan.usage,
                                             completion_start_time=completion_start)
        else:
            observation = LangfuseSpan(**common)
        for child in plan.children:
            self._emit(child, otel_span, base_ns)
        observation.end(end_time=base_ns + _ns(plan.end_ms))


class _OutcomeRecordingExporter:
    """Passes span batches to the OTLP exporter and counts the ones that failed."""

    def __init__(self, inner: Any):
        self._inner = inner
        self.failures = 0

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        try:
            result = self._inner.export(spans)
        except Exception:
            result = SpanExportResult.FAILURE
        if result != SpanExportResult.SUCCESS:
            self.failures += 1
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


def _otlp_exporter(host: str, public_key: str, secret_key: str, timeout_s: float) -> Any:
    import base64

    from langfuse import __version__ as langfuse_version
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    token = base64.b64encode(f"{public_key}:{secret_key}".encode("utf-8")).decode("ascii")
    headers = {"Authorization": f"Basic {token}", "x-langfuse-sdk-name": "python",
               "x-langfuse-sdk-version": langfuse_version, "x-langfuse-public-key": public_key,
               "x-langfuse-ingestion-version": "4"}
    return OTLPSpanExporter(endpoint=f"{host}/api/public/otel/v1/traces", headers=headers, timeout=timeout_s,
                            compression=Compression.Gzip)


# The SDK keeps one set of resources per public key per process, so a second exporter for the same
# key would silently lose its spans.  The engine rebuilds backends when settings change; it gets the
# exporter it already has for that key.
_EXPORTERS: dict[str, LangfuseExporter] = {}
_EXPORTERS_LOCK = threading.Lock()


def shared_langfuse_exporter(public_key: str, secret_key: str, host: str, timeout_s: float) -> TraceExporter:
    """The process's one Langfuse exporter for this key (built on first use); a null exporter that says why
    when the key is already connected to another host or with another secret."""
    with _EXPORTERS_LOCK:
        existing = _EXPORTERS.get(public_key)
        if existing is not None:
            if existing.host == host and existing._secret_key == secret_key:
                existing.timeout_s = float(timeout_s)
                return existing
            return NullExporter(f"Langfuse host or key changed to {host}; restart DocMind to apply it "
                                f"(still connected to {existing.host})")
        try:
            exporter = LangfuseExporter(public_key, secret_key, host, timeout_s)
        except Exception as exc:  # a broken SDK install must not stop the app
            log.warning("Langfuse exporter unavailable: %s", exc)
            return NullExporter(f"Langfuse could not start: {exc}")
        _EXPORTERS[public_key] = exporter
        return exporter


def _is_docmind_span(span: Any) -> bool:
    scope = getattr(span, "instrumentation_scope", None)
    return scope is not None and scope.name == TRACER_NAME


def _ns(ms: float) -> int:
    return int(round(ms * 1_000_000))


def _epoch_ns(started_at: str) -> int:
    """Wall-clock start of the run; imported runs without one start now."""
    try:
        return int(datetime.fromisoformat(started_at).timestamp() * 1e9)
    except (TypeError, ValueError):
        return time.time_ns()
