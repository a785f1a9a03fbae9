"""DocMind's tools over MCP (streamable HTTP), for other agents, behind API keys.

The server reuses the agentic loop's tool functions (``Toolbox``); what it
adds is the boundary an outside caller must not get around:

- every HTTP request carries an API key (``X-API-Key: dm_...`` or
  ``Authorization: Bearer dm_...``); without a valid, unrevoked key the
  request is answered 401 before the MCP SDK sees it, so not even the tool
  list leaks;
- the key acts as its user: every call goes through that user's access facade
  (:class:`~docmind_core.workbench.Workbench`), so ``kbIds`` are checked there.
  A call naming any KB the user may not read is *refused* as a whole (a tool
  error naming the ids) rather than silently narrowed, so a caller never
  mistakes "searched less than I asked" for "nothing there".  Omitting
  ``kbIds`` searches every KB the user can read;
- the memory tools take the user from the key; they have no user argument;
- ``webSearch`` is limited per key to ``web.mcp_rate_limit_per_minute`` calls
  in any 60 s (read at each call, so a config change applies at once);
- ``executeCode`` is not exposed: running code for outside callers is too
  large an attack surface.

Sessions are stateless (each POST stands alone) because each request is
authenticated on its own anyway.
"""

# No ``from __future__ import annotations`` here: the MCP SDK reads the tool
# functions' annotations at registration to build their JSON schemas.

import json
import logging
import sys
from dataclasses import dataclass
from typing import Any, Callable, Protocol

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings

from docmind_core.accounts.apikeys import ResolvedKey
from docmind_core.accounts.ids import RecordIdArgument, record_ids
from docmind_core.errors import DocMindError
from docmind_core.accounts.limits import check_kb_ids, require_text
from docmind_core.values import PendingIngest
from docmind_core.process import prepare_process
from docmind_core.accounts.rate_limit import SlidingWindowLimiter
from docmind_core.text.visible import visible_data
from docmind_core.settings import Settings
from docmind_core.answer.tools import ToolContext, ToolOutput
from docmind_core.workbench import Workbench

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"
MCP_TOOL_NAMES = ("searchDocs", "keywordSearch", "webSearch", "recall_memory", "store_memory", "kb_meta")
_CALLER_STATE = "docmind_caller"
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


class ToolEngine(Protocol):
    """What the server needs from the Engine (the composition root) itself: the key check.  Each call then
    runs through ``Workbench(engine, caller, "mcp")``, which reads the rest."""

    def resolve_api_key(self, key: str) -> ResolvedKey | None: ...


# --------------------------------------------------------------------------
# Authentication: an ASGI middleware in front of the SDK's app
# --------------------------------------------------------------------------


class ApiKeyGate:
    """Answers 401 to any HTTP request without a valid key; otherwise records the caller in the scope."""

    def __init__(self, app: Any, resolve_key: Callable[[str], ResolvedKey | None]):
        self.app = app
        self.resolve_key = resolve_key

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":  # start and stop of the SDK's session manager
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # MCP here is plain HTTP; refuse anything else (websockets) unread
            await send({"type": "websocket.close", "code": 1008})
            return
        key = api_key_from_headers(scope.get("headers", []))
        caller = await anyio.to_thread.run_sync(self.resolve_key, key) if key else None
        if caller is None:
            reason = "missing API key" if not key else "invalid or revoked API key"
            client = scope.get("client") or ("?", 0)
            log.info("refused MCP request from %s: %s", client[0], reason)  # never log the key itself
            await _send_401(send, f"{reason}: send X-API-Key or Authorization: Bearer with a key from "
                                  "'docmind apikey create'")
            return
        scope.setdefault("state", {})[_CALLER_STATE] = caller
        await self.app(scope, receive, send)


def api_key_from_headers(headers: list[tuple[bytes, bytes]]) -> str:
    """The key from X-API-Key, else from a Bearer Authorization header; "" when neither is there."""
    found = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in headers}
    if found.get("x-api-key", "").strip():
        return found["x-api-key"].strip()
    scheme, _, token = found.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


async def _send_401(send: Any, message: str) -> None:
    body = json.dumps({"error": "unauthorized", "message": message}).encode("utf-8")
    await send({"type": "http.response.start", "status": 401, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"www-authenticate", b'Bearer realm="docmind"')]})
    await send({"type": "http.response.body", "body": body})


def caller_of(ctx: Context) -> ResolvedKey:
    """The key and user the gate attached to this request."""
    request = ctx.request_context.request
    state = getattr(request, "scope", {}).get("state", {}) if request is not None else {}
    caller = state.get(_CALLER_STATE)
    if caller is None:  # only reachable if the app is mounted without the gate
        raise ToolError("this request was not authenticated")
    return caller


# --------------------------------------------------------------------------
# The tools, as plain synchronous functions of (caller, arguments)
# --------------------------------------------------------------------------


@dataclass
class McpToolService:
    """Runs one tool call for an authenticated caller; the SDK runs these in worker threads.

    Every call goes through the caller's :class:`Workbench`, which decides what the key's user may read.
    """

    engine: ToolEngine
    web_limiter: SlidingWindowLimiter

    def _bench(self, caller: ResolvedKey) -> Workbench:
        return Workbench(self.engine, caller.user, channel="mcp")

    def run(self, tool, *args):
        """Run one tool call; DocMind's own errors reach the caller as tool errors with their message.

        Other exceptions propagate: the SDK logs them and tells the caller only
        that the tool failed, so internals do not leak to outside agents.
        """
        try:
            return visible_data(tool(*args))  # names and excerpts reach the agent with hidden characters shown
        except ToolError:
            raise
        except DocMindError as exc:
            raise ToolError(str(exc)) from None

    def _kb_tool(self, caller: ResolvedKey, name: str, kb_ids: list[int] | None, **arguments) -> dict:
        bench = self._bench(caller)
        kb_ids = _parsed_kb_ids(bench.settings(), caller, kb_ids)
        scope = bench.tool_scope(kb_ids)
        if not scope.context.run.kb_ids:
            return _result(ToolOutput(text="No knowledge base is readable for this key's user."), scope.context)
        return _with_pending(_result(_checked(bench.run_tool(name, scope, **arguments)), scope.context), scope.pending)

    def search_docs(self, caller: ResolvedKey, query: str, kb_ids: list[int] | None, top_k: int) -> dict:
        require_text(query, "query")
        return self._kb_tool(caller, "searchDocs", kb_ids, query=query, top_k=top_k)

    def keyword_search(self, caller: ResolvedKey, query: str, kb_ids: list[int] | None, top_k: int) -> dict:
        require_text(query, "query")
        return self._kb_tool(caller, "keywordSearch", kb_ids, query=query, top_k=top_k)

    def web_search(self, caller: ResolvedKey, query: str, max_results: int | None) -> dict:
        require_text(query, "query")
        bench = self._bench(caller)
        scope = bench.tool_scope(None, searches_kbs=False)
        limit = scope.context.run.settings.web.mcp_rate_limit_per_minute
        decision = self.web_limiter.acquire(caller.key_id, limit)
        if not decision.allowed:
            raise ToolError(f"webSearch rate limit reached for this API key ({limit} calls per minute, "
                            f"web.mcp_rate_limit_per_minute); try again in {decision.retry_after_s:g} s")
        return _result(_checked(bench.run_tool("webSearch", scope, query=query, max_results=max_results)),
                       scope.context)

    def recall_memory(self, caller: ResolvedKey, query: str) -> dict:
        require_text(query, "query")
        bench = self._bench(caller)
        scope = bench.tool_scope(None, searches_kbs=False)
        output = _checked(bench.run_tool("recall_memory", scope, query=query))
        return {**_result(output, scope.context), "memories": list(output.memories)}

    def store_memory(self, caller: ResolvedKey, text: str) -> dict:
        require_text(text, "text")
        bench = self._bench(caller)
        scope = bench.tool_scope(None, searches_kbs=False)
        return _result(_checked(bench.run_tool("store_memory", scope, text=text.strip())), scope.context)

    def kb_meta(self, caller: ResolvedKey, kb_ids: list[int] | None) -> dict:
        bench = self._bench(caller)
        kb_ids = _parsed_kb_ids(bench.settings(), caller, kb_ids)
        scope = bench.tool_scope(kb_ids)
        pending = {p.kb_id: p.pending_documents for p in scope.pending}
        return {"status": "ok", "message": "", "text": _checked(bench.run_tool("kb_meta", scope)).text,
                "knowledge_bases": [{"id": kb.id, "name": kb.name, "description": kb.description,
                                     "visibility": kb.visibility, "documents": kb.document_count,
                                     "chunks": kb.chunk_count, "pending_documents": pending.get(kb.id, 0)}
                                    for kb in scope.knowledge_bases]}


def _parsed_kb_ids(settings: Settings, caller: ResolvedKey, kb_ids: list[int] | None) -> list[int] | None:
    """The kbIds as record ids, before any lookup: at most limits.max_kb_ids of them (100,000 ids cost one
    query each, and a refusal listing them all), each one an id a KB could have (a larger number crashed the
    lookup).  The SDK checks the schema first; this holds for a call that reaches the service another way."""
    try:
        check_kb_ids(kb_ids, settings)
        return record_ids(kb_ids, "kbIds")
    except DocMindError as exc:
        log.info("refused MCP call of API key %s: %s", caller.key_id, type(exc).__name__)  # never the ids
        raise


def _checked(output: ToolOutput) -> ToolOutput:
    """A tool that could not do its work becomes a tool error the caller sees as such."""
    if output.status in ("error", "unavailable", "rejected"):
        raise ToolError(output.message or output.text or f"tool {output.status}")
    return output


def _result(output: ToolOutput, ctx: ToolContext) -> dict:
    return {
        "status": output.status,
        "message": output.message,
        "kb_ids": list(ctx.run.kb_ids),
        "text": output.text,
        "chunks": [{"chunk_id": c.chunk_id, "kb_id": c.kb_id, "doc_id": c.doc_id, "document": c.document,
                    "location": c.location, "cited_as": c.cited_as, "text": c.text, "origin": c.origin, "url": c.url,
                    "score": c.scores.rerank if c.scores.rerank is not None else c.scores.fused}
                   for c in output.chunks],
    }


# --------------------------------------------------------------------------
# Building and serving the app
# --------------------------------------------------------------------------


def _with_pending(result: dict, pending: list[PendingIngest]) -> dict:
    """A search result over KBs still being ingested says so: how many documents were not searched, per KB,
    and in its message, so an agent never reads an empty result as "nothing relevant"."""
    count = sum(p.pending_documents for p in pending)
    result["pending_documents"] = count
    result["embedding_chunks"] = sum(p.embedding_chunks for p in pending)
    result["pending"] = [{"kb_id": p.kb_id, "kb_name": p.kb_name, "pending_documents": p.pending_documents,
                          "searched_documents": p.searched_documents, "embedding_chunks": p.embedding_chunks}
                         for p in pending]
    if count or result["embedding_chunks"]:
        note = "; ".join(p.message() for p in pending)
        result["message"] = f"{result['message']}; {note}" if result["message"] else note
    return result


def build_mcp_server(service: McpToolService) -> MCPServer:
    """The SDK server with DocMind's six tools registered."""
    server = MCPServer("docmind", instructions="Search DocMind knowledge bases, the web, and your memories.")

    async def call(fn, *args):
        return await anyio.to_thread.run_sync(lambda: service.run(fn, *args))

    @server.tool(name="searchDocs", description="Hybrid (semantic + keyword) search of knowledge bases you may "
                 "read. kbIds: which ones (default: all readable); asking for one you may not read is refused.")
    async def search_docs(query: str, ctx: Context, kbIds: list[RecordIdArgument] | None = None,
                          topK: int = 8) -> dict:
        return await call(service.search_docs, caller_of(ctx), query, kbIds, _clamp(topK, 1, 50))

    @server.tool(name="keywordSearch", description="Exact keyword (BM25) search of knowledge bases you may read, "
                 "for codes, versions and quoted names. kbIds as in searchDocs.")
    async def keyword_search(query: str, ctx: Context, kbIds: list[RecordIdArgument] | None = None,
                             topK: int = 8) -> dict:
        return await call(service.keyword_search, caller_of(ctx), query, kbIds, _clamp(topK, 1, 50))

    @server.tool(name="webSearch", description="Web search (rate-limited per API key).")
    async def web_search(query: str, ctx: Context, maxResults: int | None = None) -> dict:
        limited = None if maxResults is None else _clamp(maxResults, 1, 20)
        return await call(service.web_search, caller_of(ctx), query, limited)

    @server.tool(name="recall_memory", description="Recall what the key's user asked DocMind to remember.")
    async def recall_memory(query: str, ctx: Context) -> dict:
        return await call(service.recall_memory, caller_of(ctx), query)

    @server.tool(name="store_memory", description="Remember a fact for the key's user.")
    async def store_memory(text: str, ctx: Context) -> dict:
        return await call(service.store_memory, caller_of(ctx), text)

    @server.tool(name="kb_meta", description="Names, descriptions and sizes of the knowledge bases you may read "
                 "(or of kbIds).")
    async def kb_meta(ctx: Context, kbIds: list[RecordIdArgument] | None = None) -> dict:
        return await call(service.kb_meta, caller_of(ctx), kbIds)

    return server


def build_mcp_app(engine: ToolEngine, host: str = "127.0.0.1", allowed_hosts: list[str] | None = None) -> Any:
    """The ASGI app: the API-key gate in front of the SDK's streamable-HTTP app (endpoint ``/mcp``)."""
    service = McpToolService(engine, SlidingWindowLimiter(60.0))
    server = build_mcp_server(service)
    security = None
    if allowed_hosts:  # names this server is reached by, when it is not only on loopback
        security = TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=allowed_hosts,
                                             allowed_origins=[f"http://{h}" for h in allowed_hosts])
    inner = server.streamable_http_app(streamable_http_path=MCP_PATH, stateless_http=True, json_response=True,
                                       host=host, transport_security=security)
    return ApiKeyGate(inner, engine.resolve_api_key)


def serve(engine: ToolEngine, host: str = "127.0.0.1", port: int = 8765,
          allowed_hosts: list[str] | None = None) -> None:
    """Run the MCP server until interrupted."""
    import uvicorn

    prepare_process()  # the process-wide set-up (already made when the docmind command started this server)
    if host not in _LOOPBACK:
        print(f"warning: serving MCP on {host}: API keys travel in plain HTTP; put TLS in front of it",
              file=sys.stderr)
    uvicorn.run(build_mcp_app(engine, host=host, allowed_hosts=allowed_hosts), host=host, port=port,
                log_level="info")


def _clamp(value: int, low: int, high: int) -> int:
    return max(low, min(int(value), high))
