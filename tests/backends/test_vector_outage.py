"""Issue 36 item 1: a vector store that dies, hangs or is written by another process is never hidden.

A real ``chroma run`` server on loopback is killed (SIGKILL) or frozen (SIGSTOP): every call then raises the same
named error as a server never reached, a frozen one within the request timeout, and a run over it reports the
failed search, says retrieval was incomplete in a notice and is not HIGH.  The embedded store sees the vectors
another process wrote after it opened."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from docmind_core import events as ev
from docmind_core.backends.vector_store import ChromaVectorStore
from docmind_core.errors import BackendUnavailable
from docmind_core.values import Tier
from tests.backends.test_vector_store import _fill, _unit, start_chroma_server

FACT = "The Quillfeather QX-7 relay switches at 240 V and weighs 410 g."
QUESTION = "What voltage does the Quillfeather QX-7 relay switch at?"
HANG_CAP_S = 45.0  # only catches a hang: the old code waited on a frozen server for 60 s per call


@pytest.fixture
def chroma_process(tmp_path):
    """A Chroma server of this test only (it is killed or frozen): (process, url)."""
    proc, url = start_chroma_server(tmp_path / "chroma-server", start_within_s=60)
    yield proc, url
    if proc.poll() is None:
        proc.send_signal(signal.SIGCONT)
        proc.kill()
    proc.wait(timeout=30)


def _kill(proc) -> None:
    proc.kill()
    proc.wait(timeout=30)


def test_a_server_killed_after_connecting_is_the_named_error(chroma_process):
    proc, url = chroma_process
    store = ChromaVectorStore(url=url)
    vectors = _fill(store, 1, {10: 3})
    probe = next(iter(vectors.values()))
    assert store.query([1], probe, top_k=1)  # connected, collection handle cached
    _kill(proc)
    with pytest.raises(BackendUnavailable, match="Cannot reach the Chroma server"):
        store.query([1], probe, top_k=1)  # not "no such collection", not "no hits"
    with pytest.raises(BackendUnavailable, match="Cannot reach the Chroma server"):
        store.count(1)
    assert store.status().live is False


def test_a_frozen_server_fails_within_the_request_timeout(chroma_process):
    proc, url = chroma_process
    store = ChromaVectorStore(url=url, request_timeout_s=1.0)
    vectors = _fill(store, 1, {10: 3})
    probe = next(iter(vectors.values()))
    proc.send_signal(signal.SIGSTOP)
    try:
        started = time.monotonic()
        with pytest.raises(BackendUnavailable, match="no answer within 1 s"):
            store.query([1], probe, top_k=1)
        # later calls fail at once until the next attempt: a run waits on a frozen server once, not per call
        with pytest.raises(BackendUnavailable, match="Cannot reach the Chroma server"):
            store.get_embeddings(1, list(vectors))
        assert time.monotonic() - started < HANG_CAP_S
    finally:
        proc.send_signal(signal.SIGCONT)


def _server_engine(home, url: str, corpus):
    from docmind_core.engine import Engine

    engine = Engine.open(home, overrides={"vector_store.url": url, "retrieval.worker_timeout_ms": 2000},
                         env={}, warm=False)
    kb = engine.create_kb("relays")
    outcomes = engine.ingest(kb.id, [corpus])
    assert outcomes and all(o.status == "added" for o in outcomes), [o.error for o in outcomes]
    return engine, kb.id


def _ask(engine, kb_id: int, mode: str = "rule") -> tuple[list, ev.Done]:
    events = list(engine.ask(QUESTION, [kb_id], mode=mode))
    assert isinstance(events[-1], ev.Done), [e.kind for e in events]
    return events, events[-1]


@pytest.fixture
def corpus(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "qx7.md").write_text(f"# QX-7 relay\n\n{FACT}\n\nIt is rated for 100,000 cycles.\n",
                                   encoding="utf-8")
    (folder / "other.md").write_text("# Warranty\n\nEvery relay carries a two-year warranty.\n", encoding="utf-8")
    return folder


def _vector_search_failed(events) -> list[ev.ErrorRaised]:
    return [e for e in events if isinstance(e, ev.ErrorRaised) and e.stage == "retrieval.doc_search"]


@pytest.mark.parametrize("outage", ["killed", "frozen"])
def test_a_run_over_a_lost_vector_server_says_so_and_is_not_high(chroma_process, tmp_path, corpus, outage):
    proc, url = chroma_process
    engine, kb_id = _server_engine(tmp_path / "home", url, corpus)
    _, healthy = _ask(engine, kb_id)
    assert healthy.sources and not _vector_search_failed(_)
    assert any("vector" in s.found_by for s in healthy.sources)
    assert healthy.grade is not None and healthy.grade.tier is Tier.HIGH, healthy.grade
    if outage == "killed":
        _kill(proc)
    else:
        proc.send_signal(signal.SIGSTOP)
    try:
        started = time.monotonic()
        events, done = _ask(engine, kb_id)
        elapsed = time.monotonic() - started
    finally:
        if outage == "frozen":
            proc.send_signal(signal.SIGCONT)
    assert elapsed < HANG_CAP_S  # the old code waited on the frozen server for 60 s per call
    assert done.grade is not None and done.grade.tier is not Tier.HIGH, done.grade
    assert "high_but_keyword_only" in done.grade.reason  # the keyword evidence alone would have been HIGH
    retrieved = next(e for e in events if isinstance(e, ev.Retrieved))
    failures = _vector_search_failed(events)
    assert len(failures) == 1, retrieved.workers
    failed = failures[0]
    if outage == "killed" or failed.message.startswith("error"):
        assert "Cannot reach the Chroma server" in failed.message or "no answer within" in failed.message
    else:  # the worker's own timeout may come first; the store's bounded call frees it either way
        assert failed.message.startswith("timeout")
    notices = [e for e in events if isinstance(e, ev.Notice)]
    assert [n.code for n in notices] == ["retrieval_incomplete"]
    assert "retrieval was incomplete" in notices[0].text.lower()
    assert [n.code for n in done.notices] == ["retrieval_incomplete"]
    assert not any("vector" in s.found_by for s in done.sources)


def test_an_agentic_run_over_a_frozen_vector_server_is_bounded(chroma_process, tmp_path, corpus):
    proc, url = chroma_process
    engine, kb_id = _server_engine(tmp_path / "home", url, corpus)
    _, healthy = _ask(engine, kb_id, mode="agentic")
    assert healthy.grade is not None and healthy.grade.tier is Tier.HIGH, healthy.grade
    proc.send_signal(signal.SIGSTOP)
    try:
        started = time.monotonic()
        events, done = _ask(engine, kb_id, mode="agentic")
        elapsed = time.monotonic() - started
    finally:
        proc.send_signal(signal.SIGCONT)
    assert elapsed < HANG_CAP_S  # the old code: 60 s per call to the frozen server, 204 s measured
    assert done.grade is not None and done.grade.tier is not Tier.HIGH
    assert [n.code for n in done.notices] == ["retrieval_incomplete"]


_WRITER = textwrap.dedent("""
    import sys
    import numpy as np
    from docmind_core.backends.protocols import IndexedChunk
    from docmind_core.backends.vector_store import ChromaVectorStore
    store = ChromaVectorStore(path=sys.argv[1])
    vectors = np.load(sys.argv[2])
    store.add([IndexedChunk(f"new-{i}", 1, 20, "text") for i in range(len(vectors))], vectors)
""")


def test_the_embedded_store_finds_what_another_process_wrote(tmp_path):
    searcher = ChromaVectorStore(path=tmp_path / "chroma")  # opened before the other process writes
    old = _fill(searcher, 1, {10: 20})
    assert searcher.query([1], next(iter(old.values())), top_k=1)  # its index is loaded
    new = _unit(np.random.default_rng(99).normal(size=(5, 16)))
    np.save(tmp_path / "new.npy", new)
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    subprocess.run([sys.executable, "-c", _WRITER, str(tmp_path / "chroma"), str(tmp_path / "new.npy")],
                   check=True, env=env, timeout=300)
    assert searcher.count(1) == 25
    found = [searcher.query([1], vector, top_k=1)[0][0] for vector in new]
    assert found == [f"new-{i}" for i in range(5)]
    # and this process's own writes still count without a reopen on every call
    mine = _fill(searcher, 1, {11: 2}, seed=3)
    assert searcher.query([1], next(iter(mine.values())), top_k=1)[0][0] in mine
