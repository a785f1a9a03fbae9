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

from tests.fakes.loopback import FakeHandler, LoopbackServer


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


class _Handler(FakeHandler):
    fake: FakeTavilyServer

    def do_POST(self) -> None:  # noqa: N802 (http.server naming)
        fake = self.fake
        raw = self.read_body()
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
        self.send_bytes(status, json.dumps(payload).encode("utf-8"), "application/json")


class FakeTavilyServer(LoopbackServer):
    """Start with ``with FakeTavilyServer(api_key="tvly-test") as server: ...``; ``server.base_url``."""

    handler = _Handler

    def __init__(self, api_key: str = "tvly-test"):
        self.api_key = api_key
        self.requests: list[RecordedRequest] = []
        self.default_results: list[dict] = []
        self._script: list[ScriptedReply] = []
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return self.url

    def reply(self, *replies: ScriptedReply) -> None:
        """Queue replies for the next requests; afterwards ``default_results`` is served."""
        with self._lock:
            self._script.extend(replies)

    def _next(self) -> ScriptedReply:
        with self._lock:
            if self._script:
                return self._script.pop(0)
        return ScriptedReply(results=list(self.default_results))


def result(title: str, url: str, content: str, score: float = 0.8) -> dict:
    """One Tavily search result in the API's shape."""
    return {"title": title, "url": url, "content": content, "score": score, "raw_content": None}
