"""Export finished runs to Langfuse as one trace each, without ever slowing a run.

The Langfuse SDK (v3+) is OpenTelemetry based: it owns the OTLP/HTTP exporter,
the Basic-auth headers and the batch span processor.  We give it a
``TracerProvider`` of our own (so DocMind never changes the process-wide OTel
state) and create the spans from a *finished* trace record's observation plan
(``backends/observation_plan.py``): each stage span gets the start and end
times the run actually had, and is wrapped in the SDK's ``LangfuseSpan`` /
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
from datetime import datetime, timezone
from typing import Any

from docmind_core.backends.observation_plan import ROOT_SPAN_NAME, PlannedObservation, plan_observations
from docmind_core.backends.protocols import TraceExporter
from docmind_core.values import BackendStatus

log = logging.getLogger(__name__)

TRACER_NAME = "docmind"  # instrumentation scope of our spans; only these are exported
HOW_TO_ENABLE = "set LANGFUSE_PUBLIC_KEY, LANGFUSE_SECRET_KEY and LANGFUSE_HOST (or tracing.langfuse_host)"


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
