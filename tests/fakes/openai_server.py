"""A scripted fake of the OpenAI Chat Completions API on 127.0.0.1, for tests.

It speaks the real wire protocol, so tests drive it with the real ``openai``
SDK: ``POST /v1/chat/completions`` returns a JSON ``chat.completion``, or with
``"stream": true`` server-sent events (``data: {chunk}`` lines, ``choices[0].delta``,
a final ``data: [DONE]``, and a usage chunk when
``stream_options.include_usage`` is set).  Tool calls are returned in the
message (or streamed as ``delta.tool_calls`` pieces keyed by ``index``).

Usage::

    from tests.fakes.openai_server import FakeOpenAIServer, text, tool_calls, status, call

    with FakeOpenAIServer() as server:
        server.script(status(500), text("hello"))            # replies in order, one per request
        server.script(tool_calls(call("searchDocs", {"query": "x"})))
        server.script(text("slow", delay=2.0))               # sleeps before answering (timeouts)
        server.always(text("done"))                          # reply once the queue is empty
        server.respond_with(lambda request: text("echo"))    # or decide from the request body
        client = OpenAI(base_url=server.base_url, api_key="test")
        ...
        server.requests        # list of the JSON bodies received, in order
        server.requests[-1]["tools"]

Small local models (Qwen2.5-Coder 0.5B/1.5B under ``llama-server --jinja``, Ollama) often print a
tool call as text instead of sending ``tool_calls``.  ``printed_calls`` answers with exactly that
content::

    server.script(printed_calls(printed("searchDocs", {"query": "x"})))                  # bare JSON
    server.script(printed_calls(printed("searchDocs", {"query": "x"}), shape="fenced"))  # ```json block
    server.script(printed_calls(printed("searchDocs", {"query": "x"}), printed("keywordSearch", {...}),
                                shape="tags"))                                          # <tool_call> tags
    printed("searchDocs", '{"query": "x"}')            # "arguments" as a JSON string
    printed("searchDocs", {"query": "x"}, key="parameters")

A reply may carry log-probabilities, returned when the request asks for ``logprobs``::

    server.script(scored('{"verdict": "yes"}', [('{"', {'{"': 1.0}), ("verdict", {"verdict": 1.0}),
                                                ('":"', {'":"': 1.0}), ("yes", {"yes": 0.8, "no": 0.2})]))

Misbehaving servers, for deadline and honesty tests::

    server.script(trickle(text("...")))           # headers, then one byte every 0.5 s (JSON body or stream)
    server.script(empty_stream())                 # a well-formed reply with no content at all
    server.script(cut_stream("The answer is"))    # streams some content, then closes: no finish_reason, no [DONE]
    server.script(truncated(text("...")))         # a JSON body cut mid-way (Content-Length matches the cut);
                                                  # on a stream, a last chunk cut mid-JSON and no [DONE]

Reply builders: ``text(content, usage=(prompt, completion), delay=0)``,
``tool_calls(*calls, content="", usage=..., delay=0)`` with
``call(name, arguments_dict_or_raw_string, id=None)``, and
``status(code, message="...", delay=0)`` for an HTTP error.  A reply's ``finish_reason`` can be set
("length": a generation cut by ``max_tokens``); a request's ``stop`` sequences cut the content before the
first of them, as a real server does.  With an empty
queue and no default the server answers 500 "no scripted reply", which makes
a missing script obvious in a test.
"""

from __future__ import annotations

import json
import math
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Literal

from tests.fakes.loopback import FakeHandler, LoopbackServer


@dataclass
class ScriptedCall:
    name: str
    arguments: str  # raw JSON text as the model would send it (may be malformed on purpose)
    id: str = ""


@dataclass
class Reply:
    content: str = ""
    calls: list[ScriptedCall] = field(default_factory=list)
    status: int = 200
    message: str = ""
    usage: tuple[int, int] = (12, 7)
    delay: float = 0.0
    # (token, {alternative: probability}) per generated token, sent as ``logprobs.content`` when the request asks
    # for logprobs (what llama-server and OpenAI return); None: the server sends none
    logprobs: list[tuple[str, dict[str, float]]] | None = None
    # how the reply goes over the wire: "whole" (well-formed), "trickle" (one byte per ``interval``),
    # "cut" (a stream that stops mid-way), "truncated" (JSON cut mid-way)
    wire: Literal["whole", "trickle", "cut", "truncated"] = "whole"
    interval: float = 0.5
    head: int = 0  # bytes a trickle sends at once before it slows down
    finish_reason: str = ""  # "" = what a real server says for this reply ("stop" / "tool_calls"); "length"


def scored(content: str, tokens: list[tuple[str, dict[str, float]]], delay: float = 0.0) -> Reply:
    """A reply whose tokens carry log-probabilities: ``tokens`` lists each generated token with the
    probabilities of the likeliest tokens at its place (the generated one included)."""
    return Reply(content=content, logprobs=tokens, delay=delay)


def call(name: str, arguments: dict | str, id: str | None = None) -> ScriptedCall:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return ScriptedCall(name=name, arguments=raw, id=id or f"call_{uuid.uuid4().hex[:10]}")


def text(content: str, usage: tuple[int, int] = (12, 7), delay: float = 0.0) -> Reply:
    return Reply(content=content, usage=usage, delay=delay)


def tool_calls(*calls: ScriptedCall, content: str = "", usage: tuple[int, int] = (20, 9),
               delay: float = 0.0) -> Reply:
    return Reply(content=content, calls=list(calls), usage=usage, delay=delay)


def status(code: int, message: str = "scripted failure", delay: float = 0.0) -> Reply:
    return Reply(status=code, message=message, delay=delay)


def trickle(reply: Reply, interval: float = 0.5, head: int = 0) -> Reply:
    """``reply`` sent as headers and then one byte every ``interval`` seconds: a read timeout never fires.
    The first ``head`` bytes of the body go at once (a stream that starts well, then slows to a trickle)."""
    return replace(reply, wire="trickle", interval=interval, head=head)


def empty_stream(usage: tuple[int, int] = (12, 0)) -> Reply:
    """A well-formed reply with no content: a stream of only the role delta, ``stop`` and [DONE]."""
    return Reply(content="", usage=usage)


def cut_stream(content: str) -> Reply:
    """A stream that sends ``content`` and then closes the connection, without finish_reason or [DONE]."""
    return Reply(content=content, wire="cut")


def truncated(reply: Reply) -> Reply:
    """``reply``'s JSON cut in the middle (the declared length matches the cut body, so HTTP is clean)."""
    return replace(reply, wire="truncated")


def printed(name: str, arguments: dict | str, key: str = "arguments") -> dict[str, Any]:
    """One tool call the way a small model prints it: ``{"name": ..., "arguments": {...}}``."""
    return {"name": name, key: arguments}


PrintedShape = Literal["bare", "fenced", "tags"]


def printed_content(*calls: dict[str, Any], shape: PrintedShape = "bare", before: str = "",
                    after: str = "") -> str:
    """The content of a reply that prints ``calls`` as text.

    ``bare``: the JSON object (several calls: a JSON list); ``fenced``: the same inside a
    ```json code block; ``tags``: one ``<tool_call>...</tool_call>`` block per call (Qwen's template).
    """
    if shape == "tags":
        body = "\n".join(f"<tool_call>\n{json.dumps(c, ensure_ascii=False)}\n</tool_call>" for c in calls)
    else:
        body = json.dumps(calls[0] if len(calls) == 1 else list(calls), ensure_ascii=False)
        if shape == "fenced":
            body = f"```json\n{body}\n```"
    return before + body + after


def printed_calls(*calls: dict[str, Any], shape: PrintedShape = "bare", before: str = "", after: str = "",
                  usage: tuple[int, int] = (20, 9), delay: float = 0.0) -> Reply:
    """A reply with no ``tool_calls``: the calls are printed in ``content`` (see :func:`printed_content`)."""
    return Reply(content=printed_content(*calls, shape=shape, before=before, after=after), usage=usage,
                 delay=delay)


class FakeOpenAIServer(LoopbackServer):
    """A Chat Completions endpoint in a background thread; use as a context manager."""

    def __init__(self, model: str = "fake-model"):
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.dropped = 0  # replies the client hung up on before they were fully sent
        self._queue: deque[Reply] = deque()
        self._default: Reply | None = None
        self._responder: Callable[[dict[str, Any]], Reply] | None = None
        self._lock = threading.Lock()

    # -- scripting -----------------------------------------------------------
    def script(self, *replies: Reply) -> "FakeOpenAIServer":
        with self._lock:
            self._queue.extend(replies)
        return self

    def always(self, reply: Reply) -> "FakeOpenAIServer":
        self._default = reply
        return self

    def respond_with(self, responder: Callable[[dict[str, Any]], Reply]) -> "FakeOpenAIServer":
        """Decide each reply from the request body (used when the queue is empty)."""
        self._responder = responder
        return self

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self._responder is not None:
            return self._responder(body)
        if self._default is not None:
            return self._default
        return status(500, "no scripted reply")

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"


class _Handler(FakeHandler):
    fake: FakeOpenAIServer
    protocol_version = "HTTP/1.1"
    _sent = 0  # body bytes of the current reply written so far (a trickle's head goes at once)

    def do_POST(self) -> None:  # noqa: N802 (http.server naming)
        raw = self.read_body() or b"{}"
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._json(404, {"error": {"message": f"unknown path {self.path}", "type": "invalid_request_error"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._json(400, {"error": {"message": "request body is not JSON", "type": "invalid_request_error"}})
            return
        self.fake.requests.append(body)
        reply = _stopped(self.fake._next_reply(body), body.get("stop"))
        self._sent = 0
        if reply.delay:
            time.sleep(reply.delay)
        try:
            if reply.status != 200:
                self._json(reply.status, {"error": {"message": reply.message, "type": "server_error",
                                                    "code": str(reply.status)}})
            elif body.get("stream"):
                self._stream(body, reply)
            else:
                self._json(200, _completion(self.fake.model, reply, bool(body.get("logprobs"))), reply)
        except OSError:  # BrokenPipe, ConnectionReset: the client gave up (timeout and deadline tests)
            with self.fake._lock:
                self.fake.dropped += 1

    def _json(self, code: int, payload: dict[str, Any], reply: Reply | None = None) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode()
        if reply is not None and reply.wire == "truncated":
            data = data[:len(data) * 3 // 5]
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if code >= 400:
            self.send_header("retry-after-ms", "10")  # the SDK honours it; keeps retry tests fast
        self.end_headers()
        self._write(data, reply)

    def _write(self, data: bytes, reply: Reply | None) -> None:
        if reply is None or reply.wire != "trickle":
            self.wfile.write(data)
            self.wfile.flush()
            return
        for i in range(len(data)):  # each byte restarts the client's read timeout
            self.wfile.write(data[i:i + 1])
            self.wfile.flush()
            if self._sent >= reply.head:
                time.sleep(reply.interval)
            self._sent += 1

    def _stream(self, body: dict[str, Any], reply: Reply) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        base = {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": self.fake.model}

        def send(choices: list[dict[str, Any]], usage: dict[str, int] | None = None) -> None:
            chunk = dict(base, choices=choices)
            if usage is not None:
                chunk["usage"] = usage
            self._write(f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode(), reply)

        send([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
        for piece in _pieces(reply.content):
            send([{"index": 0, "delta": {"content": piece}, "finish_reason": None}])
        if reply.wire == "cut":
            return  # the connection closes here: no finish_reason, no usage, no [DONE]
        if reply.wire == "truncated":
            last = json.dumps(dict(base, choices=[{"index": 0, "delta": {"content": " more"}, "finish_reason": None}]))
            self.wfile.write(f"data: {last[:len(last) // 2]}\n\n".encode())
            self.wfile.flush()
            return
        for i, c in enumerate(reply.calls):
            half = len(c.arguments) // 2
            send([{"index": 0, "delta": {"tool_calls": [{"index": i, "id": c.id, "type": "function",
                                                          "function": {"name": c.name, "arguments": ""}}]},
                   "finish_reason": None}])
            for part in (c.arguments[:half], c.arguments[half:]):
                send([{"index": 0, "delta": {"tool_calls": [{"index": i, "function": {"arguments": part}}]},
                       "finish_reason": None}])
        send([{"index": 0, "delta": {}, "finish_reason": _finish(reply)}])
        if (body.get("stream_options") or {}).get("include_usage"):
            send([], usage=_usage(reply))
        self._write(b"data: [DONE]\n\n", reply)


FakeOpenAIServer.handler = _Handler  # the handler reads the server's script, so it comes after the server


def _stopped(reply: Reply, stop: Any) -> Reply:
    """The reply as a real server sends it under the request's ``stop``: cut before the first stop sequence
    (which is not sent), finish reason "stop"."""
    sequences = [stop] if isinstance(stop, str) else [s for s in (stop or []) if s]
    cuts = [reply.content.find(s) for s in sequences if s in reply.content]
    if not cuts or reply.calls:
        return reply
    return replace(reply, content=reply.content[:min(cuts)], finish_reason="stop")


def _pieces(content: str, size: int = 4) -> list[str]:
    return [content[i:i + size] for i in range(0, len(content), size)]


def _finish(reply: Reply) -> str:
    return reply.finish_reason or ("tool_calls" if reply.calls else "stop")


def _usage(reply: Reply) -> dict[str, int]:
    prompt, completion = reply.usage
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _logprobs(reply: Reply) -> dict[str, Any] | None:
    if reply.logprobs is None:
        return None
    content = []
    for token, alternatives in reply.logprobs:
        top = [{"token": alt, "logprob": math.log(max(p, 1e-12)), "bytes": None}
               for alt, p in sorted(alternatives.items(), key=lambda item: -item[1])]
        own = alternatives.get(token, max(alternatives.values(), default=1.0))
        content.append({"token": token, "logprob": math.log(max(own, 1e-12)), "bytes": None, "top_logprobs": top})
    return {"content": content}


def _completion(model: str, reply: Reply, logprobs: bool = False) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content or None}
    if reply.calls:
        message["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.name, "arguments": c.arguments}} for c in reply.calls]
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": _logprobs(reply) if logprobs else None,
                     "finish_reason": _finish(reply)}],
        "usage": _usage(reply),
    }
