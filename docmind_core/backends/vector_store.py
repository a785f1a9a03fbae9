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
"""

from __future__ import annotations

import logging
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

    def __init__(self, path: Path | str | None = None, url: str = ""):
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        chroma_settings = ChromaSettings(anonymized_telemetry=False)
        self.url = url.strip()
        self.path = Path(path) if path is not None else None
        self._live_client: Any = None
        self._batch: int | None = None
        self._unreachable = ""  # why the server could not be reached (empty: connected, or not tried yet)
        self._retry_at = 0.0
        self._connect_lock = threading.Lock()
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
            self._live_client = chromadb.PersistentClient(path=str(self.path), settings=chroma_settings)
            self.name = "chroma embedded"
        self._collections: dict[int, Any] = {}

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
            worker.join(CONNECT_TIMEOUT_S)
            client = outcome.get("client")
            if client is None:
                cause = outcome.get("error") or f"no answer within {CONNECT_TIMEOUT_S:g} s"
                self._unreachable = (
                    f"Cannot reach the Chroma server at {self.url}: {cause}. Start it with "
                    "`chroma run --path <dir> --port <port>`, or clear vector_store.url "
                    "(docmind config reset vector_store.url) to use the embedded store.")
                self._retry_at = time.monotonic() + RECONNECT_AFTER_S
                raise BackendUnavailable(self._unreachable)
            _bound_requests(client)
            self._live_client = client
            self._unreachable = ""

    # ------------------------------------------------------------------
    # Collections
    # ------------------------------------------------------------------

    def _collection(self, kb_id: int, create: bool):
        cached = self._collections.get(kb_id)
        if cached is not None:
            return cached
        name = collection_name(kb_id)
        client = self._client  # an unreachable server raises here, never reads as "no such collection"
        if create:
            col = client.get_or_create_collection(
                name, configuration={"hnsw": {"space": "cosine"}}, metadata={"kb_id": int(kb_id)},
                embedding_function=None)
        else:
            try:
                col = client.get_collection(name, embedding_function=None)
            except Exception:  # chromadb raises NotFoundError (a ValueError in some versions)
                return None
        self._collections[kb_id] = col
        return col

    def _fresh_retry(self, kb_id: int, create: bool, action):
        """Run ``action(collection)``; if a cached handle went stale (the collection was deleted and
        perhaps re-created by another process), look the collection up again and retry once.
        Returns None when the collection does not exist and ``create`` is False."""
        for attempt in (1, 2):
            col = self._collection(kb_id, create=create)
            if col is None:
                return None
            try:
                return action(col)
            except Exception:
                self._collections.pop(kb_id, None)
                if attempt == 2:
                    raise
        return None

    def kb_ids(self) -> set[int]:
        """KBs that have a collection (used to drop collections of KBs deleted during a crash)."""
        ids = set()
        for col in self._client.list_collections():
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
            for start in range(0, len(rows), self._max_batch):
                part = rows[start:start + self._max_batch]
                # upsert: a retried batch must not fail on ids it already wrote
                self._fresh_retry(kb_id, True, lambda col: col.upsert(
                    ids=[chunks[i].chunk_id for i in part], embeddings=vectors[part],
                    metadatas=[{"kb_id": int(chunks[i].kb_id), "doc_id": int(chunks[i].doc_id)} for i in part]))

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
        self._fresh_retry(kb_id, False, lambda col: col.delete(where={"doc_id": int(doc_id)}))

    def delete_kb(self, kb_id: int) -> None:
        self._collections.pop(kb_id, None)
        client = self._client
        try:
            client.delete_collection(collection_name(kb_id))
        except Exception:  # already gone
            pass

    def count(self, kb_id: int) -> int:
        return self._fresh_retry(kb_id, False, lambda col: col.count()) or 0

    def document_ids(self, kb_id: int) -> set[int]:
        return self._fresh_retry(kb_id, False, self._document_ids) or set()

    def entries(self, kb_id: int) -> dict[str, int]:
        """chunk id -> doc id of every vector of the KB (metadata only; used by ``docmind kb check``)."""
        return self._fresh_retry(kb_id, False, self._entries) or {}

    def delete_chunks(self, kb_id: int, chunk_ids: Sequence[str]) -> None:
        ids = list(dict.fromkeys(chunk_ids))
        for start in range(0, len(ids), self._max_batch):
            part = ids[start:start + self._max_batch]
            self._fresh_retry(kb_id, False, lambda col: col.delete(ids=part))

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
                self._client.heartbeat()
                return BackendStatus(role="vector_store", name=self.name, live=True, detail=self.url)
            except Exception as exc:
                return BackendStatus(role="vector_store", name=self.name, live=False,
                                     detail=f"unreachable: {self.url} ({exc})",
                                     how_to_enable=f"start the Chroma server at {self.url}, or "
                                                   "docmind config reset vector_store.url")
        return BackendStatus(role="vector_store", name=self.name, live=True,
                             detail="PersistentClient (set vector_store.url to use a Chroma server)")


def _bound_requests(client: Any) -> None:
    """Give the server client's HTTP session a timeout: chromadb creates it with none, so a server that stops
    answering would hang a search for ever.  Best effort: the attribute path is chromadb's, not ours."""
    try:
        import httpx

        client._server._session.timeout = httpx.Timeout(REQUEST_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - an older or newer chromadb: keep its own behaviour
        log.debug("could not bound the Chroma client's request timeout: %s", exc)
