"""A local OTLP/HTTP receiver standing in for Langfuse's ingestion endpoint.

The Langfuse SDK (v3+, OpenTelemetry based) POSTs protobuf-encoded
``ExportTraceServiceRequest`` bodies, usually gzip-compressed, with Basic auth
to ``{host}/api/public/otel/v1/traces``.  This server decodes them with
opentelemetry-proto and keeps every span (name, ids, parent, times, scope and
attributes as plain Python values) so tests can assert what was exported.
``hang_s`` makes it accept a request and not answer for that long.
"""

from __future__ import annotations

import base64
import gzip
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.fakes.loopback import FakeHandler, LoopbackServer

TRACES_PATH = "/api/public/otel/v1/traces"


@dataclass
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str  # "" for a root span
    start_ns: int
    end_ns: int
    scope: str
    attributes: dict[str, Any] = field(default_factory=dict)

    @property
    def duration_ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6


class _Handler(FakeHandler):
    fake: OtlpReceiver

    def do_POST(self) -> None:  # noqa: N802 (http.server naming)
        receiver = self.fake
        body = self.read_body()
        receiver.requests.append(dict(self.headers.items()))
        if receiver.hang_s:
            time.sleep(receiver.hang_s)
        if self.path != TRACES_PATH:
            return self.send_bytes(404, b"not found", "text/plain")
        encoding = (self.headers.get("Content-Encoding") or "").lower()
        if encoding == "gzip":
            body = gzip.decompress(body)
        elif encoding == "deflate":
            body = zlib.decompress(body)
        try:
            receiver._store(body)
        except Exception as exc:  # a malformed body is the client's bug: say so
            return self.send_bytes(400, str(exc).encode(), "text/plain")
        self.send_bytes(200, ExportTraceServiceResponse().SerializeToString(), "application/x-protobuf")


class OtlpReceiver(LoopbackServer):
    handler = _Handler

    def __init__(self, hang_s: float = 0.0):
        self.hang_s = hang_s
        self.spans: list[ReceivedSpan] = []
        self.requests: list[dict[str, str]] = []  # headers of each request
        self._lock = threading.Lock()

    @property
    def host(self) -> str:
        return self.url

    def wait_for(self, count: int, timeout_s: float = 10.0) -> list[ReceivedSpan]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.spans) >= count:
                    return list(self.spans)
            time.sleep(0.02)
        with self._lock:
            return list(self.spans)

    def basic_auth(self) -> tuple[str, str] | None:
        """(public key, secret key) from the last request's Basic auth header."""
        headers = {k.lower(): v for k, v in self.requests[-1].items()} if self.requests else {}
        header = headers.get("authorization", "")
        if not header.startswith("Basic "):
            return None
        user, _, password = base64.b64decode(header[6:]).decode("utf-8").partition(":")
        return user, password

    def _store(self, body: bytes) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        received = []
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append(ReceivedSpan(
                        name=span.name, trace_id=span.trace_id.hex(), span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(), start_ns=span.start_time_unix_nano,
                        end_ns=span.end_time_unix_nano, scope=scope_spans.scope.name,
                        attributes={kv.key: _any_value(kv.value) for kv in span.attributes}))
        with self._lock:
            self.spans.extend(received)


def _any_value(value) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _any_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None
