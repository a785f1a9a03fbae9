"""The MCP server on 127.0.0.1, driven by the official ``mcp`` client SDK over streamable HTTP."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

import httpx2
import pytest
import uvicorn
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from docmind_core.accounts.apikeys import ApiKeyStore
from docmind_core.mcp_server import MCP_TOOL_NAMES, api_key_from_headers, build_mcp_app
from tests.access_world import build_engine_world, build_world

_INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _RunningServer:
    """uvicorn serving the MCP app in a daemon thread on a free loopback port."""

    def __init__(self, engine):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.server = uvicorn.Server(uvicorn.Config(build_mcp_app(engine), host="127.0.0.1", port=self.port,
                                                    log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "MCP server did not start"
            time.sleep(0.05)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def served(tmp_path_factory, embedder):
    """One world (real MemoryStore over the bundled encoder) and one server; tests talk to it over HTTP."""
    world = build_world(tmp_path_factory.mktemp("mcp"), embedder=embedder)
    world.overrides = {"web.mcp_rate_limit_per_minute": 2}
    keys = ApiKeyStore(world.db)
    issued = {name: keys.create(user.id, label=f"{name} agent") for name, user in world.people.items()}
    running = _RunningServer(world)
    yield world, running.url, issued, keys
    running.stop()


async def _session_run(url: str, key: str | None, work, bearer: bool = False):
    headers = {}
    if key is not None:
        headers = {"Authorization": f"Bearer {key}"} if bearer else {"X-API-Key": key}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await work(session)


def run(url, key, work, bearer=False):
    return asyncio.run(_session_run(url, key, work, bearer))


def _payload(result) -> dict:
    assert not result.is_error, result.content[0].text
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


# -- authentication ------------------------------------------------------------


def test_no_key_gets_401_and_no_tool_listing(served):
    _, url, _, _ = served
    for headers in ({}, {"X-API-Key": "dm_not-a-real-key"}, {"Authorization": "Basic dXNlcjpwYXNz"}):
        for body in (_INIT, _LIST):
            response = httpx2.post(url, json=body, headers={**_HEADERS, **headers})
            assert response.status_code == 401
            assert "searchDocs" not in response.text and "API key" in response.json()["message"]


def test_sdk_client_without_key_is_refused(served):
    _, url, _, _ = served
    with pytest.raises(BaseException) as refused:
        run(url, None, lambda s: s.list_tools())
    assert _contains(refused.value, MCPError)


def test_revoked_key_gets_401(served):
    world, url, _, keys = served
    key = keys.create(world.people["bob"].id, label="to revoke")
    assert httpx2.post(url, json=_INIT, headers={**_HEADERS, "X-API-Key": key}).status_code == 200
    keys.revoke(keys.list(world.people["bob"].id)[-1].id)
    assert httpx2.post(url, json=_INIT, headers={**_HEADERS, "X-API-Key": key}).status_code == 401
    with pytest.raises(BaseException):
        run(url, key, lambda s: s.list_tools())


def test_valid_key_lists_the_six_tools(served):
    _, url, issued, _ = served

    async def work(session):
        return await session.list_tools()

    listed = run(url, issued["bob"], work, bearer=True)
    names = {t.name for t in listed.tools}
    assert names == set(MCP_TOOL_NAMES)
    assert "executeCode" not in names
    for tool in listed.tools:  # no tool lets a caller say who it is
        assert not {"userId", "user_id"} & set(tool.input_schema.get("properties", {}))


# -- knowledge-base access -------------------------------------------------------


def test_search_docs_returns_only_readable_kbs(served):
    world, url, issued, _ = served
    k = world.kbs

    async def work(session):
        return await session.call_tool("searchDocs", {"query": "quarterly", "topK": 20})

    found = _payload(run(url, issued["bob"], work))
    assert {c["kb_id"] for c in found["chunks"]} == {k["alice_team"].id, k["carol_public"].id}
    admin_found = _payload(run(url, issued["root"], work))
    assert {c["kb_id"] for c in admin_found["chunks"]} == {kb.id for kb in k.values()}


def test_search_naming_an_unreadable_kb_is_refused(served):
    world, url, issued, _ = served
    k = world.kbs

    async def work(session):
        refused = await session.call_tool("searchDocs", {"query": "zephyr", "kbIds": [k["alice_private"].id,
                                                                                     k["alice_team"].id]})
        keyword = await session.call_tool("keywordSearch", {"query": "zephyr", "kbIds": [k["alice_private"].id]})
        own = await session.call_tool("keywordSearch", {"query": "quarterly", "kbIds": [k["alice_team"].id]})
        return refused, keyword, own

    refused, keyword, own = run(url, issued["bob"], work)
    for result in (refused, keyword):
        assert result.is_error
        text = result.content[0].text
        assert f"#{k['alice_private'].id}" in text and "may not read" in text
        assert "zephyr" not in text
    assert {c["kb_id"] for c in _payload(own)["chunks"]} == {k["alice_team"].id}


def test_kb_meta_lists_readable_kbs_only(served):
    world, url, issued, _ = served

    async def work(session):
        return await session.call_tool("kb_meta", {})

    meta = _payload(run(url, issued["carol"], work))
    assert sorted(kb["name"] for kb in meta["knowledge_bases"]) == ["carol_private", "carol_public"]


# -- memories and web ------------------------------------------------------------


def test_memory_tools_stay_within_the_keys_user(served):
    _, url, issued, _ = served

    async def alice_work(session):
        stored = await session.call_tool("store_memory", {"text": "alice prefers tea over coffee"})
        recalled = await session.call_tool("recall_memory", {"query": "does alice prefer tea or coffee"})
        return stored, recalled

    stored, recalled = run(url, issued["alice"], alice_work)
    assert _payload(stored)["status"] == "ok"
    assert _payload(recalled)["memories"] == ["alice prefers tea over coffee"]

    async def carol_work(session):
        # userId is not a parameter of the tool: an extra one is dropped, never obeyed
        sneaky = await session.call_tool("recall_memory", {"query": "does alice prefer tea or coffee", "userId": 1})
        plain = await session.call_tool("recall_memory", {"query": "does alice prefer tea or coffee"})
        return sneaky, plain

    sneaky, plain = run(url, issued["carol"], carol_work)
    assert _payload(sneaky)["memories"] == []
    assert _payload(plain)["memories"] == []


def test_web_search_is_rate_limited_per_key(served):
    world, url, issued, keys = served
    other_key = keys.create(world.people["carol"].id, label="second key")

    async def three_calls(session):
        return [await session.call_tool("webSearch", {"query": f"news {i}"}) for i in range(3)]

    first, second, third = run(url, issued["carol"], three_calls)
    assert _payload(first)["chunks"][0]["origin"] == "web" and not second.is_error
    assert third.is_error
    assert "rate limit" in third.content[0].text and "per minute" in third.content[0].text
    # the limit is per key: the same user's other key still has its own allowance
    assert not run(url, other_key, lambda s: s.call_tool("webSearch", {"query": "news"})).is_error


@pytest.mark.slow  # a real engine behind a real MCP server
def test_real_engine_behind_mcp_keeps_private_kbs_private(home, tmp_path):
    """The server over the composition root: hybrid search, real memory store, same boundary."""
    engine, alice, bob, private, public = build_engine_world(home, tmp_path)
    keys = ApiKeyStore(engine.db)
    bob_key, alice_key = keys.create(bob.id), keys.create(alice.id)
    running = _RunningServer(engine)
    try:
        async def search_all(session):
            return await session.call_tool("searchDocs", {"query": "zephyr"})

        bob_found = _payload(run(running.url, bob_key, search_all))
        assert bob_found["kb_ids"] == [public.id]
        assert bob_found["chunks"] and {c["kb_id"] for c in bob_found["chunks"]} == {public.id}
        alice_found = _payload(run(running.url, alice_key, search_all))
        assert {c["kb_id"] for c in alice_found["chunks"]} == {private.id, public.id}

        async def ask_private(session):
            return await session.call_tool("searchDocs", {"query": "budget", "kbIds": [private.id]})

        refused = run(running.url, bob_key, ask_private)
        assert refused.is_error and "40k" not in refused.content[0].text

        async def remember(session):
            await session.call_tool("store_memory", {"text": "Bob's standup is at 9:30 every weekday"})
            return await session.call_tool("recall_memory", {"query": "when is bob's standup"})

        assert "9:30" in " ".join(_payload(run(running.url, bob_key, remember))["memories"])
        assert [m.text for m in engine.memory_store.list(bob.id)] == ["Bob's standup is at 9:30 every weekday"]
        assert engine.memory_store.list(alice.id) == []
    finally:
        running.stop()


@pytest.mark.slow  # a real engine behind a real MCP server
def test_a_new_accounts_key_reaches_nothing_of_a_removed_account(home, tmp_path):
    """Issue 19: user ids were handed out again, so the next account's key read a removed one's KB and memories."""
    from docmind_core.accounts.users import LOCAL_USER, UserStore
    from docmind_core.workbench import Workbench
    from tests.access_world import FAST_HASHER, PASSWORD

    engine, *_ = build_engine_world(home, tmp_path)
    users = UserStore(engine.db, hasher=FAST_HASHER)
    dave = users.add("dave", PASSWORD)  # the newest account: its id was the one handed out again
    salaries = tmp_path / "salaries.txt"
    salaries.write_text("Dave salary list: CEO 900k. Codename REDFOX.", encoding="utf-8")
    dave_kb = Workbench(engine, dave).create_kb("dave_private")
    engine.ingest(dave_kb.id, [salaries])
    keys = ApiKeyStore(engine.db)
    dave_key = keys.create(dave.id)
    running = _RunningServer(engine)
    try:
        async def remember(session):
            return await session.call_tool("store_memory", {"text": "dave's bonus of 50k is paid in March"})

        assert _payload(run(running.url, dave_key, remember))["status"] == "ok"
        Workbench(engine, LOCAL_USER).remove_user("dave")
        mallory = users.add("mallory", PASSWORD)
        mallory_key = keys.create(mallory.id)

        async def look(session):
            meta = await session.call_tool("kb_meta", {})
            recalled = await session.call_tool("recall_memory", {"query": "when is dave's bonus paid"})
            found = await session.call_tool("searchDocs", {"query": "REDFOX salary"})
            return meta, recalled, found

        meta, recalled, found = run(running.url, mallory_key, look)
        assert "dave_private" not in {kb["name"] for kb in _payload(meta)["knowledge_bases"]}
        assert _payload(recalled)["memories"] == []
        assert "900k" not in json.dumps(_payload(found))
        # the removed account's own key is refused
        assert httpx2.post(running.url, json=_INIT, headers={**_HEADERS, "X-API-Key": dave_key}).status_code == 401
    finally:
        running.stop()


def test_api_key_header_parsing():
    assert api_key_from_headers([(b"x-api-key", b" dm_a ")]) == "dm_a"
    assert api_key_from_headers([(b"authorization", b"Bearer dm_b")]) == "dm_b"
    assert api_key_from_headers([(b"authorization", b"Basic abc")]) == ""
    assert api_key_from_headers([]) == ""


def _contains(exc: BaseException, kind: type) -> bool:
    if isinstance(exc, kind):
        return True
    return any(_contains(e, kind) for e in getattr(exc, "exceptions", ()))


def test_websocket_scope_is_refused_without_reaching_the_sdk():
    from docmind_core.mcp_server import ApiKeyGate

    reached, sent = [], []

    async def inner(scope, receive, send):
        reached.append(scope)

    async def send(message):
        sent.append(message)

    gate = ApiKeyGate(inner, resolve_key=None)
    asyncio.run(gate({"type": "websocket", "headers": []}, None, send))
    assert not reached and sent == [{"type": "websocket.close", "code": 1008}]


# -- a KB still being ingested ---------------------------------------------------------


def test_search_over_a_kb_being_ingested_says_how_many_documents_are_pending(served):
    """Issue 19 item 7 over MCP: an empty search of a KB with 40 files not yet landed is not "nothing there"."""
    from tests.pending_jobs import pending_job

    world, url, issued, _ = served
    team = world.kbs["alice_team"].id

    async def work(session):
        search = await session.call_tool("searchDocs", {"query": "nebula", "kbIds": [team]})
        keyword = await session.call_tool("keywordSearch", {"query": "nebula", "kbIds": [team]})
        meta = await session.call_tool("kb_meta", {"kbIds": [team]})
        return search, keyword, meta

    with pending_job(world.db, team, 40):
        search, keyword, meta = (_payload(r) for r in run(url, issued["alice"], work))
    for found in (search, keyword):
        assert found["chunks"] == [] and found["pending_documents"] == 40
        assert found["pending"] == [{"kb_id": team, "kb_name": "alice_team", "pending_documents": 40,
                                     "searched_documents": 1, "embedding_chunks": 0}]
        assert "still being ingested: 40 document(s) pending" in found["message"]
    assert meta["knowledge_bases"][0]["pending_documents"] == 40
    after = _payload(run(url, issued["alice"], lambda s: s.call_tool("searchDocs", {"query": "nebula",
                                                                                    "kbIds": [team]})))
    assert after["pending_documents"] == 0 and after["pending"] == []


@pytest.mark.slow  # a real engine behind a real MCP server
def test_mcp_results_show_bidi_and_invisible_characters_as_markers(home, tmp_path):
    """Issue 19 item 8 over MCP: a document named with a right-to-left override, holding a zero-width space,
    reaches the agent with both shown as markers, never as characters that reorder or hide text."""
    engine, alice, _bob, private, _public = build_engine_world(home, tmp_path)
    tricky = tmp_path / "invoice\u202etxt.md"
    tricky.write_text("The zephyr invoice total is 12\u200b000 dollars.", encoding="utf-8")
    assert [o.status for o in engine.ingest(private.id, [tricky])] == ["added"]
    key = ApiKeyStore(engine.db).create(alice.id)
    running = _RunningServer(engine)
    try:
        found = _payload(run(running.url, key, lambda s: s.call_tool(
            "keywordSearch", {"query": "invoice total dollars", "kbIds": [private.id]})))
    finally:
        running.stop()
    text = json.dumps(found, ensure_ascii=False)
    assert "\u202e" not in text and "\u200b" not in text
    assert "invoice<U+202E>txt.md" in text and "12<U+200B>000" in text


# -- issue 40 item 3: an id no record can have is refused at the edge ---------------------------------


def test_a_huge_or_invalid_kb_id_is_refused_at_once_without_a_traceback(served, caplog):
    """A kbId beyond SQLite's integers raised OverflowError inside the lookup: ~300 log lines per request."""
    world, url, issued, _ = served
    readable = world.kbs["alice_team"].id
    huge = 1180591620717411303424

    async def work(session):
        calls = [("searchDocs", {"query": "x", "kbIds": [huge]}), ("keywordSearch", {"query": "x", "kbIds": [huge]}),
                 ("kb_meta", {"kbIds": [readable, -3]}), ("searchDocs", {"query": "x", "kbIds": [0]}),
                 ("kb_meta", {"kbIds": [2**64]})]
        return [await session.call_tool(name, arguments) for name, arguments in calls]

    with caplog.at_level("DEBUG"):
        results = run(url, issued["alice"], work)
    for result in results:
        assert result.is_error
        text = result.content[0].text
        assert "kbIds" in text and "1 to 9223372036854775807" in text, text
    assert "1180591620717411303424" in results[0].content[0].text
    assert not [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]
    assert not [r for r in caplog.records if "OverflowError" in r.getMessage()]
    # a valid id still works, as a string too
    assert _payload(run(url, issued["alice"], lambda s: s.call_tool("kb_meta", {"kbIds": [readable]})))


def test_the_tool_schema_states_the_id_range(served):
    _, url, issued, _ = served
    listed = run(url, issued["bob"], lambda s: s.list_tools())
    search = next(t for t in listed.tools if t.name == "searchDocs")
    items = search.input_schema["properties"]["kbIds"]["anyOf"][0]["items"]
    assert items["minimum"] == 1 and items["maximum"] == 2**63 - 1


def test_an_empty_query_is_refused_with_a_clear_message(served):
    """Issue 40 item 9: a question or query of nothing but spaces is refused, not run."""
    _, url, issued, _ = served

    async def work(session):
        return [await session.call_tool(name, {key: "  \n"}) for name, key in
                (("searchDocs", "query"), ("keywordSearch", "query"), ("webSearch", "query"),
                 ("recall_memory", "query"), ("store_memory", "text"))]

    for result in run(url, issued["carol"], work):
        assert result.is_error and "is empty" in result.content[0].text, result.content[0].text
