"""ChromaVectorStore: the same suite against the embedded client and a real `chroma run` server."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import chromadb
import numpy as np
import pytest
from chromadb.config import Settings as ChromaSettings

from docmind_core.backends.protocols import IndexedChunk, VectorStore
from docmind_core.backends.vector_store import ChromaVectorStore, collection_name, parse_server_url
from docmind_core.errors import BackendUnavailable

DIM = 16


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _chroma_cli() -> str:
    candidate = Path(sys.executable).parent / "chroma"
    return str(candidate) if candidate.exists() else (shutil.which("chroma") or "")


def start_chroma_server(data: Path, start_within_s: float = 30) -> tuple[subprocess.Popen, str]:
    """A real Chroma server on 127.0.0.1 storing under ``data``, once it answers its heartbeat: (process, url)."""
    cli = _chroma_cli()
    if not cli:
        pytest.skip("the chroma CLI is not installed")
    port = _free_port()
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    proc = subprocess.Popen([cli, "run", "--path", str(data), "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + start_within_s
    while True:
        try:
            with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1) as resp:
                if resp.status == 200:
                    return proc, url
        except OSError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            pytest.fail("chroma server did not start")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory):
    """A real Chroma server on 127.0.0.1, killed after the module."""
    proc, url = start_chroma_server(tmp_path_factory.mktemp("chroma-server"))
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(params=["embedded", pytest.param("server", marks=pytest.mark.slow)])  # a Chroma server process
def store(request, tmp_path):
    if request.param == "embedded":
        yield ChromaVectorStore(path=tmp_path / "chroma")
    else:
        url = request.getfixturevalue("chroma_server")
        vs = ChromaVectorStore(url=url)
        yield vs
        for kb_id in vs.kb_ids():  # the server outlives one test: leave it empty
            vs.delete_kb(kb_id)


def _unit(vectors: np.ndarray) -> np.ndarray:
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def _fill(store, kb_id: int, docs: dict[int, int], seed: int = 0):
    """Add ``docs[doc_id]`` random unit vectors per document; returns {chunk_id: vector}."""
    rng = np.random.default_rng(seed + kb_id)
    chunks, vecs = [], []
    for doc_id, n in docs.items():
        for i in range(n):
            chunks.append(IndexedChunk(f"k{kb_id}-d{doc_id}-{i}", kb_id, doc_id, f"text {i}"))
            vecs.append(rng.normal(size=DIM))
    vectors = _unit(np.array(vecs))
    store.add(chunks, vectors)
    return {c.chunk_id: v for c, v in zip(chunks, vectors)}


def test_implements_protocol(store):
    assert isinstance(store, VectorStore)
    assert store.status().live
    assert store.status().role == "vector_store"


def test_query_returns_cosine_similarity_best_first(store):
    vectors = _fill(store, 1, {10: 5, 11: 5})
    target_id, target = next(iter(vectors.items()))
    hits = store.query([1], target, top_k=4)
    assert hits[0][0] == target_id
    assert hits[0][1] == pytest.approx(1.0, abs=1e-4)
    expected = sorted(((cid, float(v @ target)) for cid, v in vectors.items()), key=lambda h: -h[1])[:4]
    assert [h[0] for h in hits] == [e[0] for e in expected]
    for (_, got), (_, want) in zip(hits, expected):
        assert got == pytest.approx(want, abs=1e-4)


def test_kb_and_document_filters_happen_in_the_store(store):
    _fill(store, 1, {10: 4, 11: 4})
    other = _fill(store, 2, {20: 4})
    query = next(iter(other.values()))
    only_kb1 = store.query([1], query, top_k=50)
    assert len(only_kb1) == 8 and all(cid.startswith("k1-") for cid, _ in only_kb1)
    only_doc = store.query([1], query, top_k=50, doc_ids=[11])
    assert len(only_doc) == 4 and all("-d11-" in cid for cid, _ in only_doc)
    both = store.query([1, 2], query, top_k=3)
    assert both[0][1] == pytest.approx(1.0, abs=1e-4) and both[0][0].startswith("k2-")
    assert store.query([1], query, top_k=5, doc_ids=[]) == []
    assert store.query([99], query, top_k=5) == []  # unknown KB: nothing, no error


def test_counts_delete_document_and_kb(store):
    _fill(store, 1, {10: 3, 11: 2})
    _fill(store, 2, {20: 2})
    assert store.count(1) == 5 and store.document_ids(1) == {10, 11}
    store.delete_document(1, 10)
    assert store.count(1) == 2 and store.document_ids(1) == {11}
    store.delete_kb(1)
    assert store.count(1) == 0 and store.document_ids(1) == set()
    assert store.kb_ids() == {2}
    store.delete_kb(1)  # deleting twice is harmless


def test_add_is_idempotent(store):
    _fill(store, 3, {30: 3})
    _fill(store, 3, {30: 3})
    assert store.count(3) == 3


def test_embedded_store_persists_across_reopen(tmp_path):
    first = ChromaVectorStore(path=tmp_path / "chroma")
    vectors = _fill(first, 1, {10: 3})
    del first
    again = ChromaVectorStore(path=tmp_path / "chroma")
    cid, vec = next(iter(vectors.items()))
    assert again.count(1) == 3
    assert again.query([1], vec, top_k=1)[0][0] == cid


def test_collections_never_get_a_default_embedding_function(tmp_path):
    store = ChromaVectorStore(path=tmp_path / "chroma")
    _fill(store, 1, {10: 1})
    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"),
                                       settings=ChromaSettings(anonymized_telemetry=False))
    collection = client.get_collection(collection_name(1))  # as any other client of the store sees it
    assert collection.configuration.get("embedding_function") is None
    assert collection.configuration["hnsw"]["space"] == "cosine"


def test_server_url_parsing():
    assert parse_server_url("http://127.0.0.1:8123") == ("127.0.0.1", 8123, False)
    assert parse_server_url("https://chroma.example.com") == ("chroma.example.com", 443, True)
    assert parse_server_url("localhost:9000") == ("localhost", 9000, False)
    with pytest.raises(BackendUnavailable):
        parse_server_url("ftp://host")


def test_unreachable_server_is_a_clear_error():
    port = _free_port()
    store = ChromaVectorStore(url=f"http://127.0.0.1:{port}")  # built anyway: start-up never fails on it
    status = store.status()
    assert status.live is False and "unreachable" in status.detail and str(port) in status.detail
    with pytest.raises(BackendUnavailable, match="Cannot reach the Chroma server"):
        store.query([1], np.ones(4, dtype=np.float32), 3)  # refused, never read as "no hits"


def test_a_collection_deleted_by_another_client_is_looked_up_again(tmp_path):
    app = ChromaVectorStore(path=tmp_path / "chroma")
    vectors = _fill(app, 1, {10: 2})
    cid, vec = next(iter(vectors.items()))
    assert app.query([1], vec, top_k=1)[0][0] == cid  # the app now holds a cached handle
    cli = ChromaVectorStore(path=tmp_path / "chroma")  # e.g. `docmind kb delete` + re-ingest elsewhere
    cli.delete_kb(1)
    assert app.query([1], vec, top_k=1) == []
    again = _fill(cli, 1, {11: 2}, seed=5)
    cid2, vec2 = next(iter(again.items()))
    assert app.query([1], vec2, top_k=1)[0][0] == cid2
    _fill(app, 1, {12: 1}, seed=9)
    assert app.count(1) == 3
