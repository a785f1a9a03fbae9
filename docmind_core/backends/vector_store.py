"""Chroma as the vector store: embedded (PersistentClient) or a Chroma server (HttpClient).

One collection per knowledge base, named ``kb_<id>``, in cosine space.  We
always hand Chroma our own embeddings and create collections with
``embedding_function=None``: Chroma's default embedding function downloads an
ONNX model on first use, which must never happen here.  Filtering by document
happens inside Chroma through ``where`` so a query never returns chunks the
caller may not see.

A Chroma server is connected lazily and never at the cost of start-up: when it
cannot be reached, the store is built anyway, its status says "unreachable"
and names the URL, and every operation raises :class:`BackendUnavailable` with
that message (it does not fall back to the embedded store: searching an empty
local store would look like "nothing relevant").  It tries again at most every
``RECONNECT_AFTER_S`` seconds, each attempt bounded by ``CONNECT_TIMEOUT_S``.
A server that was reached and then dies or stops answering is the same case: a
refused connection or a request past ``request_timeout_s`` (the app passes
``retrieval.worker_timeout_ms``) raises that error, and the store then fails fast
until the next attempt, so one hung server costs a run one timeout, not one per
call.  Only Chroma's own "no such collection" means a KB has no vectors yet.

The embedded store is opened once per process, and Chroma's client keeps the
index it loaded: writes of another process (``docmind ingest`` beside the app)
reach its counts but not its searches.  So every vector write bumps a counter in
a small SQLite file next to Chroma's (``WRITES_FILE``), every operation reads it
(~20 us), and a process that sees it changed by someone else reopens its client.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import urlparse

import numpy as np

from docmind_core.backends.protocols import IndexedChunk
from docmind_core.errors import BackendUnavailable
from docmind_core.values import BackendStatus

log = logging.getLogger(__name__)

_COLLECTION_PREFIX = "kb_"
CONNECT_TIMEOUT_S = 5.0  # one attempt to reach a Chroma server (its HTTP client has no timeout of its own)
REQUEST_TIMEOUT_S = 60.0  # any later request to the server
RECONNECT_AFTER_S = 10.0  # after a failed attempt, calls fail fast this long before the next attempt
WRITES_FILE = "docmind_vector_writes.sqlite3"  # the embedded store's write counter (see the module docstring)


def collection_name(kb_id: int) -> str:
    return f"{_COLLECTION_PREFIX}{int(kb_id)}"


def parse_server_url(url: str) -> tuple[str, int, bool]:
    """``http://host:port`` → (host, port, ssl); the port defaults to 8000 (http) or 443 (https)."""
    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    parsed = urlparse(text)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise BackendUnavailable(f"vector_store.url {url!r} is not a valid http(s)://host:port address.")
    ssl = parsed.scheme == "https"
    try:
        port = parsed.port or (443 if ssl else 8000)
    except ValueError:
        raise BackendUnavailable(f"vector_store.url {url!r} has an invalid port.") from None
    return parsed.hostname, port, ssl


class ChromaVectorStore:
    """Implements the ``VectorStore`` protocol on Chroma."""

    def __init__(self, path: Path | str | None = None, url: str = "",
                 request_timeout_s: float = REQUEST_TIMEOUT_S):
        """``request_timeout_s``: how long one request to a Chroma server may take before the server counts as
        unreachable (the app passes ``retrieval.worker_timeout_ms``, so a hung server fails within it)."""
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        chroma_settings = ChromaSettings(anonymized_telemetry=False)
        self._chroma_settings = chroma_settings
        self.request_timeout_s = float(request_timeout_s)
        self.url = url.strip()
        self.path = Path(path) if path is not None else None
        self._live_client: Any = None
        self._batch: int | None = None
        self._unreachable = ""  # why the server could not be reached (empty: connected, or not tried yet)
        self._retry_at = 0.0
        self._connect_lock = threading.Lock()
        self._writes: WriteCounter | None = None
        self._seen_writes = 0
        self._collections: dict[int, Any] = {}
        if self.url:
            host, port, ssl = parse_server_url(self.url)
            self._server_args = dict(host=host, port=port, ssl=ssl, settings=chroma_settings)
            self.name = f"chroma server {host}:{port}"
            try:
                self._connect()
            except BackendUnavailable as exc:  # start anyway: status() and every call say why
                log.warning("%s", exc)
        else:
            if self.path is None:
                raise ValueError("ChromaVectorStore needs a path (embedded) or a url (server)")
            self.path.mkdir(parents=True, exist_ok=True)
            self._writes = WriteCounter(self.path / WRITES_FILE)
            self._seen_writes = self._writes.read()  # before opening: a write after this is seen at the next call
            self._live_client = chromadb.PersistentClient(path=str(self.path), settings=chroma_settings)
            self.name = "chroma embedded"

    # ------------------------------------------------------------------
    # Connection (server mode)
    # ------------------------------------------------------------------

    @property
    def _client(self) -> Any:
        if self._live_client is None:
            self._connect()
        return self._live_client

    @property
    def _max_batch(self) -> int:
        if self._batch is None:
            self._batch = int(self._client.get_max_batch_size())
        return self._batch

    def _connect(self) -> None:
        """Reach the server once, within CONNECT_TIMEOUT_S; raises BackendUnavailable naming the URL."""
        import chromadb

        with self._connect_lock:
            if self._live_client is not None:
                return
            if time.monotonic() < self._retry_at:
                raise BackendUnavailable(self._unreachable)
            outcome: dict[str, Any] = {}

            def attempt() -> None:
                try:
                    client = chromadb.HttpClient(**self._server_args)
                    client.heartbeat()
                    outcome["client"] = client
                except Exception as exc:  # connection refused, DNS, TLS ...
                    outcome["error"] = exc

            worker = threading.Thread(target=attempt, name="docmind-chroma-connect", daemon=True)
            worker.start()
            connect_s = min(CONNECT_TIMEOUT_S, self.request_timeout_s)
            worker.join(connect_s)
            client = outcome.get("client")
            if client is None:
                raise self._mark_unreachable(outcome.get("error") or f"no answer within {connect_s:g} s")
            _bound_requests(client)
            self._live_client = client
            self._unreachable = ""

    def _mark_unreachable(self, cause: object) -> BackendUnavailable:
        """Record that the server cannot be used (never reached, died, or hung) and return the error every call
        raises until the next attempt, RECONNECT_AFTER_S from now."""
        self._unreachable = (
            f"Cannot reach the Chroma server at {self.url}: {cause}. Start it with "
            "`chroma run --path <dir> --port <port>`, or clear vector_store.url "
            "(docmind config reset vector_store.url) to use the embedded store.")
        self._retry_at = time.monotonic() + RECONNECT_AFTER_S
        self._live_client = None
        self._collections.clear()
        return BackendUnavailable(self._unreachable)

    def _server_call(self, call, bounded: bool = True):
        """``call()``; a connection the server refused or dropped, or (``bounded``: a read) no answer within
        ``request_timeout_s``, marks it unreachable and raises BackendUnavailable (the same error as a server
        never reached).  A bounded call runs in a daemon thread that is left behind when the server hangs:
        the caller never waits on it past the timeout.  Writes wait up to REQUEST_TIMEOUT_S (a large batch may
        take a while on a busy server)."""
        if not self.url:
            return call()
        if bounded:
            call = _within(call, self.request_timeout_s)
        try:
            return call()
        except BackendUnavailable:
            raise
        except Exception as exc:
            if isinstance(exc, _NoAnswer):
                raise self._mark_unreachable(exc) from exc
            if _lost_connection(exc):
                raise self._mark_unreachable(f"{type(exc).__name__}: {exc}") from exc
            raise

    # ------------------------------------------------------------------
    # Embedded: another process's writes
    # ------------------------------------------------------------------

    def _see_other_writes(self) -> None:
        """Reopen the embedded client when another process wrote vectors since this one last looked."""
        if self._writes is None:
            return
        current = self._writes.read()
        if current == self._seen_writes:
            return
        import chromadb

        with self._connect_lock:
            if current == self._seen_writes:
                return
            # Chroma shares one client state per path within a process: closing ours lets the next client load
            # the index afresh (a call still running on the old handle fails and is retried by _fresh_retry)
            self._collections.clear()
            self._live_client.close()
            self._live_client = chromadb.PersistentClient(path=str(self.path), settings=self._chroma_settings)
            self._collections.clear()
            self._seen_writes = current

    def _wrote(self) -> None:
        """Count one vector write of this process, so other processes reopen (see the module docstring)."""
        if self._writes is None:
            return
        after = self._writes.bump()
        with self._connect_lock:
            if after == self._seen_writes + 1:  # nobody else wrote in between: this process is current
                self._seen_writes = after

    # ------------------------------------------------------------------
    # Collections
    # ------------------------------------------------------------------

    def _collection(self, kb_id: int, create: bool):
        cached = self._collections.get(kb_id)
        if cached is not None:
            return cached
        from chromadb.errors import NotFoundError

        name = collection_name(kb_id)
        client = self._client  # an unreachable server raises here, never reads as "no such collection"
        if create:
            col = self._server_call(lambda: client.get_or_create_collection(
                name, configuration={"hnsw": {"space": "cosine"}}, metadata={"kb_id": int(kb_id)},
                embedding_function=None), bounded=False)
        else:
            try:
                col = self._server_call(lambda: client.get_collection(name, embedding_function=None))
            except NotFoundError:  # only Chroma's own "no such collection": a dead server raised above
                return None
        self._collections[kb_id] = col
        return col

    def _fresh_retry(self, kb_id: int, create: bool, action, bounded: bool = True):
        """Run ``action(collection)``; if a cached handle went stale (the collection was deleted and
        perhaps re-created by another process), look the collection up again and retry once.
        Returns None when the collection does not exist and ``create`` is False.  A server that cannot be
        reached raises BackendUnavailable at once (no retry: that would wait on it twice)."""
        self._see_other_writes()
        for attempt in (1, 2):
            col = self._collection(kb_id, create=create)
            if col is None:
                return None
            try:
                return self._server_call(lambda: action(col), bounded=bounded)
            except BackendUnavailable:
                raise
            except Exception:
                self._collections.pop(kb_id, None)
                if attempt == 2:
                    raise
        return None

    def kb_ids(self) -> set[int]:
        """KBs that have a collection (used to drop collections of KBs deleted during a crash)."""
        ids = set()
        self._see_other_writes()
        client = self._client
        for col in self._server_call(client.list_collections):
            name = getattr(col, "name", col)
            if name.startswith(_COLLECTION_PREFIX) and name[len(_COLLECTION_PREFIX):].isdigit():
                ids.add(int(name[len(_COLLECTION_PREFIX):]))
        return ids

    # ------------------------------------------------------------------
    # VectorStore protocol
    # ------------------------------------------------------------------

    def add(self, chunks: Sequence[IndexedChunk], embeddings: np.ndarray) -> None:
        if len(chunks) != len(embeddings):
            raise ValueError(f"{len(chunks)} chunks but {len(embeddings)} embeddings")
        if not chunks:
            return
        vectors = np.asarray(embeddings, dtype=np.float32)
        by_kb: dict[int, list[int]] = {}
        for i, chunk in enumerate(chunks):
            by_kb.setdefault(chunk.kb_id, []).append(i)
        for kb_id, rows in by_kb.items():
            batch = self._server_call(lambda: self._max_batch)
            for start in range(0, len(rows), batch):
                part = rows[start:start + batch]
                # upsert: a retried batch must not fail on ids it already wrote
                self._fresh_retry(kb_id, True, lambda col: col.upsert(
                    ids=[chunks[i].chunk_id for i in part], embeddings=vectors[part],
                    metadatas=[{"kb_id": int(chunks[i].kb_id), "doc_id": int(chunks[i].doc_id)} for i in part]),
                    bounded=False)
                self._wrote()

    def query(self, kb_ids: Sequence[int], embedding: np.ndarray, top_k: int,
              doc_ids: Sequence[int] | None = None,
              exclude_doc_ids: Sequence[int] | None = None) -> list[tuple[str, float]]:
        if top_k <= 0:
            return []
        if doc_ids is not None and len(doc_ids) == 0:
            return []
        clauses = []
        if doc_ids is not None:
            clauses.append({"doc_id": {"$in": [int(d) for d in doc_ids]}})
        if exclude_doc_ids:
            clauses.append({"doc_id": {"$nin": [int(d) for d in exclude_doc_ids]}})
        where = clauses[0] if len(clauses) == 1 else ({"$and": clauses} if clauses else None)
        query = np.asarray(embedding, dtype=np.float32).reshape(1, -1)
        hits: list[tuple[str, float]] = []
        for kb_id in dict.fromkeys(kb_ids):
            result = self._fresh_retry(kb_id, False, lambda col: col.query(
                query_embeddings=query, n_results=int(top_k), where=where, include=["distances"]))
            if result is None:
                continue
            ids = result["ids"][0] if result["ids"] else []
            distances = result["distances"][0] if result["distances"] else []
            hits.extend((cid, 1.0 - float(dist)) for cid, dist in zip(ids, distances))
        hits.sort(key=lambda h: (-h[1], h[0]))
        return hits[:top_k]

    def delete_document(self, kb_id: int, doc_id: int) -> None:
        self._fresh_retry(kb_id, False, lambda col: col.delete(where={"doc_id": int(doc_id)}), bounded=False)
        self._wrote()

    def delete_kb(self, kb_id: int) -> None:
        from chromadb.errors import NotFoundError

        self._see_other_writes()
        self._collections.pop(kb_id, None)
        client = self._client
        try:
            self._server_call(lambda: client.delete_collection(collection_name(kb_id)), bounded=False)
        except NotFoundError:  # already gone
            return
        self._wrote()

    def count(self, kb_id: int) -> int:
        return self._fresh_retry(kb_id, False, lambda col: col.count()) or 0

    def document_ids(self, kb_id: int) -> set[int]:
        return self._fresh_retry(kb_id, False, self._document_ids) or set()

    def entries(self, kb_id: int) -> dict[str, int]:
        """chunk id -> doc id of every vector of the KB (metadata only; used by ``docmind kb check``)."""
        return self._fresh_retry(kb_id, False, self._entries) or {}

    def delete_chunks(self, kb_id: int, chunk_ids: Sequence[str]) -> None:
        ids = list(dict.fromkeys(chunk_ids))
        batch = self._server_call(lambda: self._max_batch)
        for start in range(0, len(ids), batch):
            part = ids[start:start + batch]
            self._fresh_retry(kb_id, False, lambda col: col.delete(ids=part), bounded=False)
        if ids:
            self._wrote()

    def get_embeddings(self, kb_id: int, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors of these chunks (missing ids are absent): lets the reranker skip re-encoding."""
        if not chunk_ids:
            return {}
        got = self._fresh_retry(kb_id, False, lambda col: col.get(ids=list(chunk_ids), include=["embeddings"]))
        if got is None:
            return {}
        return {cid: np.asarray(vec, dtype=np.float32) for cid, vec in zip(got["ids"], got["embeddings"])}

    @staticmethod
    def _entries(col) -> dict[str, int]:
        found: dict[str, int] = {}
        page, offset = 5000, 0
        while True:
            result = col.get(include=["metadatas"], limit=page, offset=offset)
            metas = result["metadatas"] or []
            for cid, meta in zip(result["ids"], metas):
                found[cid] = int(meta["doc_id"]) if meta and "doc_id" in meta else -1
            if len(result["ids"]) < page:
                return found
            offset += page

    @classmethod
    def _document_ids(cls, col) -> set[int]:
        return {doc_id for doc_id in cls._entries(col).values() if doc_id >= 0}

    def status(self) -> BackendStatus:
        if self.url:
            try:
                client = self._client
                self._server_call(client.heartbeat)
                return BackendStatus(role="vector_store", name=self.name, live=True, detail=self.url)
            except Exception as exc:
                return BackendStatus(role="vector_store", name=self.name, live=False,
                                     detail=f"unreachable: {self.url} ({exc})",
                                     how_to_enable=f"start the Chroma server at {self.url}, or "
                                                   "docmind config reset vector_store.url")
        return BackendStatus(role="vector_store", name=self.name, live=True,
                             detail="PersistentClient (set vector_store.url to use a Chroma server)")


class WriteCounter:
    """A counter of vector writes in a small SQLite file shared by every process on one embedded store.

    Reading never creates the file (a start that only reads writes nothing); the first bump does."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self._reader: sqlite3.Connection | None = None

    def read(self) -> int:
        with self._lock:
            if self._reader is None:
                if not self.path.exists():
                    return 0
                self._reader = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False,
                                               timeout=5.0)
            try:
                row = self._reader.execute("SELECT n FROM vector_writes").fetchone()
            except sqlite3.OperationalError:  # created by another process but its table not yet committed
                return 0
            return int(row[0]) if row else 0

    def bump(self) -> int:
        """Add one write; returns the counter after it."""
        conn = sqlite3.connect(str(self.path), timeout=30.0, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("CREATE TABLE IF NOT EXISTS vector_writes (n INTEGER NOT NULL)")
            if conn.execute("UPDATE vector_writes SET n = n + 1").rowcount == 0:
                conn.execute("INSERT INTO vector_writes (n) VALUES (1)")
            after = int(conn.execute("SELECT n FROM vector_writes").fetchone()[0])
            conn.execute("COMMIT")
            return after
        finally:
            conn.close()


class _NoAnswer(TimeoutError):
    """A bounded call to the server that did not return in time."""


def _within(call, timeout_s: float):
    """``call`` run in a daemon thread, given up on after ``timeout_s`` (raises _NoAnswer)."""
    def bounded():
        outcome: dict[str, Any] = {}

        def run() -> None:
            try:
                outcome["value"] = call()
            except BaseException as exc:  # handed to the caller below
                outcome["error"] = exc

        worker = threading.Thread(target=run, name="docmind-chroma-call", daemon=True)
        worker.start()
        worker.join(timeout_s)
        if worker.is_alive():
            raise _NoAnswer(f"no answer within {timeout_s:g} s")
        if "error" in outcome:
            raise outcome["error"]
        return outcome.get("value")
    return bounded


def _lost_connection(exc: BaseException) -> bool:
    """A request the server refused, dropped or did not answer in time (not an error it answered with)."""
    import httpx

    return isinstance(exc, (httpx.TransportError, ConnectionError, TimeoutError))


def _bound_requests(client: Any) -> None:
    """Give the server client's HTTP session a timeout: chromadb creates it with none, so a server that stops
    answering would hang a search for ever.  Best effort: the attribute path is chromadb's, not ours."""
    try:
        import httpx

        client._server._session.timeout = httpx.Timeout(REQUEST_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - an older or newer chromadb: keep its own behaviour
        log.debug("could not bound the Chroma client's request timeout: %s", exc)
