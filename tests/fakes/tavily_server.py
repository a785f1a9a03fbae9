"""A fake Tavily API on 127.0.0.1 speaking the HTTP protocol tavily-python uses.

The SDK POSTs JSON to ``{base_url}/search`` with ``Authorization: Bearer <key>``
and reads ``{"query", "results": [{"title", "url", "content", "score", ...}],
"response_time", ...}``; errors come back as ``{"detail": {"error": "..."}}``
with 400/401/403/429/5xx.  Tests script the replies and read back what was sent.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class ScriptedReply:
    status: int = 200
    results: list[dict] = field(default_factory=list)
    error: str = ""  # detail.error text for non-200 replies
    delay_s: float = 0.0


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict


class FakeTavilyServer:
    """Start with ``with FakeTavilyServer(api_key="tvly-test") as server: ...``; ``server.base_url``."""

    def __init__(self, api_key: str = "tvly-test"):
        self.api_key = api_key
        self.requests: list[RecordedRequest] = []
        self.default_results: list[dict] = []
        self._script: list[ScriptedReply] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)  # quick shutdown between tests

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def reply(self, *replies: ScriptedReply) -> None:
        """Queue replies for the next requests; afterwards ``default_results`` is served."""
        with self._lock:
            self._script.extend(replies)

    def __enter__(self) -> "FakeTavilyServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    # ------------------------------------------------------------------
    def _next(self) -> ScriptedReply:
        with self._lock:
            if self._script:
                return self._script.pop(0)
        return ScriptedReply(results=list(self.default_results))

    def _handler_class(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_unparsed": raw.decode("utf-8", "replace")}
                fake.requests.append(RecordedRequest(self.path, dict(self.headers.items()), body))
                if self.path != "/search":
                    return self._send(404, {"detail": {"error": f"no route {self.path}"}})
                if self.headers.get("Authorization") != f"Bearer {fake.api_key}":
                    return self._send(401, {"detail": {"error": "Unauthorized: missing or invalid API key."}})
                reply = fake._next()
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if reply.status != 200:
                    return self._send(reply.status, {"detail": {"error": reply.error or "scripted failure"}})
                limit = int(body.get("max_results") or 5)
                self._send(200, {
                    "query": body.get("query", ""),
                    "follow_up_questions": None,
                    "answer": None,
                    "images": [],
                    "results": reply.results[:limit],
                    "response_time": 0.01,
                    "request_id": f"req-{len(fake.requests)}",
                })

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode("utf-8")
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
                    pass

        return Handler


def result(title: str, url: str, content: str, score: float = 0.8) -> dict:
    """One Tavily search result in the API's shape."""
    return {"title": title, "url": url, "content": content, "score": score, "raw_content": None}
