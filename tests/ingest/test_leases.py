"""Nothing lost, nothing silently wrong (issue 12, items 1-3).

1. An engine starting in another process while an ingest runs removes none of the ingest's documents:
   pending documents carry the lease of the process that owns them, and only documents whose owner is
   provably gone are cleaned up.
2. A running engine never serves a half-written document: every read path (vector search, keyword search
   on FTS5 and on its in-memory postings copy, parent expansion, direct read, chunk listing) sees complete
   documents only.
3. An interrupted re-index is finished by the next start, which says so; a search over a KB with missing
   vectors says so too.
"""

from __future__ import annotations

import json
import os
import random
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from docmind_core.backends.keyword_index import Fts5KeywordIndex
from docmind_core.backends.protocols import IndexedChunk
from docmind_core.answer.selected_doc import read_selected_documents
from docmind_core.ingest.pipeline import Ingestor
from docmind_core.values import ChunkRecord
from docmind_core.retrieval.hybrid import HybridRetriever
from docmind_core.retrieval.refine import EvidenceRefiner
from docmind_core.backends.rerankers import OfflineReranker
from docmind_core.settings import Settings
from tests.ingest.test_pipeline import EN, SMALL, ZH, HashingEmbedder, World
from tests.paths import ROOT

REPO = ROOT
ENV = {**os.environ, "PYTHONPATH": str(REPO), "ANONYMIZED_TELEMETRY": "False", "HF_HUB_OFFLINE": "1"}


# --------------------------------------------------------------------------
# 1. Engine starts in another process during an ingest
# --------------------------------------------------------------------------

_STARTER = """
import json, os, sqlite3, sys, time, traceback
from docmind_core.engine import Engine

home, stop, ready = sys.argv[1], sys.argv[2], sys.argv[3]
open(ready, "w").close()  # imported: the test starts the ingest now, so the core's imports do not eat its window
opens = saw_pending = 0
errors = []
deadline = time.monotonic() + 120
while not os.path.exists(stop) and time.monotonic() < deadline:
    if not os.path.exists(os.path.join(home, "docmind.db")):  # the ingest has not started yet
        time.sleep(0.05)
        continue
    conn = sqlite3.connect(os.path.join(home, "docmind.db"), timeout=30)
    try:
        # in progress: chunks being written (pending) or vectors being written (embedding)
        pending = conn.execute("SELECT COUNT(*) FROM documents WHERE status IN ('pending', 'embedding')"
                               ).fetchone()[0]
    except sqlite3.OperationalError:  # the ingest has not created the schema yet
        pending = 0
    conn.close()
    try:
        # every start reconciles; opened as the CLI opens it (issue 12 ran `docmind kb list`): no warm-up thread,
        # which would keep encoding beside the next start and let a busy machine fit one start in the ingest
        Engine.open(home, warm=False)
    except Exception:  # Chroma's own client can fail to open while another process writes: not a loss
        errors.append(traceback.format_exc()[-600:])
        continue
    opens += 1
    saw_pending += pending > 0
    time.sleep(0.05)
print(json.dumps({"opens": opens, "saw_pending": saw_pending, "errors": errors}))
"""


def _corpus(folder: Path, count: int) -> list[Path]:
    folder.mkdir(parents=True)
    rng = random.Random(7)
    words = ("nimbus aurora firmware power draw fan chassis license server edge appliance watt degree release "
             "controller backup retention").split()
    paths = []
    for i in range(count):
        body = " ".join(f"{rng.choice(words)}{rng.randint(0, 50)}" for _ in range(300))
        path = folder / f"note{i:03d}.md"
        path.write_text(f"# Note {i}\n\n{body}\n", encoding="utf-8")
        paths.append(path)
    return paths


@pytest.mark.slow
def test_engine_starts_in_another_process_during_an_ingest_remove_nothing(tmp_path):
    home = tmp_path / "home"
    files = _corpus(tmp_path / "files", 60)
    stop, ready = tmp_path / "stop", tmp_path / "ready"
    starter = subprocess.Popen([sys.executable, "-c", _STARTER, str(home), str(stop), str(ready)], cwd=REPO,
                               env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # the starter imports the core first; started and ready before the ingest, all of its opens can overlap it
    deadline = time.monotonic() + 120
    while not ready.exists() and starter.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    ingest = subprocess.Popen([sys.executable, "-m", "docmind_core.cli", "--home", str(home), "ingest",
                               str(tmp_path / "files"), "--kb", "extra", "--no-progress"],
                              cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = ingest.communicate(timeout=240)
    finally:
        stop.touch()
        s_out, s_err = starter.communicate(timeout=120)
    assert starter.returncode == 0, s_err[-3000:]
    starts = json.loads(s_out.strip().splitlines()[-1])
    assert starts["saw_pending"] > 0, (starts, "no engine start overlapped a pending document: the test proved nothing")
    assert len(starts["errors"]) <= starts["opens"], starts["errors"][:1]  # a failed open is rare, never the rule
    assert ingest.returncode == 0, err[-3000:]
    assert "60 added" in out and "failed" not in out, out[-2000:]
    assert "removed interrupted document" not in err + s_err
    # Every document that was reported added is there, complete, and fully indexed.
    world = World(home, embedder=HashingEmbedder())
    kb = world.store.find_kb("extra")
    docs = world.store.list_documents(kb.id)
    assert sorted(d.name for d in docs) == sorted(p.name for p in files)
    assert {d.status for d in docs} == {"complete"}
    assert kb.document_count == 60
    assert world.vectors.count(kb.id) == kb.chunk_count == world.keywords.count(kb.id)
    assert world.vectors.document_ids(kb.id) == {d.id for d in docs}


def _lease_row(db, **fields) -> int | None:
    """A lease row (this live process unless ``fields`` say otherwise); None on a schema without leases."""
    if "ingest_leases" not in db.db.table_names():
        return None
    from docmind_core.ingest.leases import process_start

    now = time.time()
    row = {"operation": "ingest", "pid": os.getpid(), "host": socket.gethostname(),
           "process_start": process_start(os.getpid()), "acquired_at": now, "heartbeat_at": now, **fields}
    with db.transaction() as tx:
        return tx["ingest_leases"].insert(row).last_pk


def _pending_doc(world: World, kb_id: int, name: str, lease_id: int | None, text: str = EN * 3) -> int:
    """A document as an ingest leaves it after writing chunks, vectors and keyword rows, before completing."""
    doc_id = world.store.begin_document(kb_id, name, source_path="", content_hash=name, mime="text/markdown",
                                        size=len(text), text=text)
    if "lease_id" in world.db.db["documents"].columns_dict:
        with world.db.transaction() as tx:
            tx.execute("UPDATE documents SET lease_id = ? WHERE id = ?", [lease_id, doc_id])
    parent = ChunkRecord(id=f"{name}-p", kb_id=kb_id, doc_id=doc_id, index=0, is_parent=True, text=text,
                         token_count=60, start=0, end=len(text))
    children = [ChunkRecord(id=f"{name}-c{i}", kb_id=kb_id, doc_id=doc_id, index=i, parent_id=parent.id,
                            text=part, token_count=20, start=0, end=len(part))
                for i, part in enumerate([text[: len(text) // 2], text[len(text) // 2:]])]
    world.store.add_chunks([parent, *children])
    indexed = [IndexedChunk(c.id, kb_id, doc_id, c.text) for c in children]
    vectors = world.embedder.embed([c.text for c in children])
    world.vectors.add(indexed, vectors)
    world.store.set_chunk_vectors([c.id for c in children], vectors)
    world.keywords.add(indexed)
    return doc_id


def test_reconcile_keeps_documents_of_live_owners_and_removes_those_of_gone_ones(tmp_path):
    world = World(tmp_path / "home")
    kb = world.kb()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    live = _lease_row(world.db)  # this very process, heartbeat fresh
    exited = _lease_row(world.db, pid=dead_pid, process_start="x")
    reused = _lease_row(world.db, process_start="another-boot:1")  # our pid, but another start time
    silent = _lease_row(world.db, host="another-host", heartbeat_at=time.time() - 10_000)
    remote = _lease_row(world.db, host="another-host")  # cannot be probed; heartbeat fresh: alive
    docs = {name: _pending_doc(world, kb.id, name, lease) for name, lease in [
        ("live.md", live), ("exited.md", exited), ("reused.md", reused), ("silent.md", silent),
        ("remote.md", remote), ("ownerless.md", None), ("released.md", 999_999)]}
    repairs = world.ingestor.reconcile()
    removed = {line.split("'")[1] for line in repairs if line.startswith("removed interrupted document")}
    assert removed == {"exited.md", "reused.md", "silent.md", "ownerless.md", "released.md"}
    assert any("has exited" in line for line in repairs if "exited.md" in line)
    assert any("another process" in line for line in repairs if "reused.md" in line)
    assert any("no heartbeat" in line for line in repairs if "silent.md" in line)
    for name in ("live.md", "remote.md"):
        doc = world.store.find_document(kb.id, name)
        assert doc is not None and doc.status == "pending"
        assert world.footprint(kb.id, docs[name]) == (3, 1, 1)  # not even their index entries were touched
    for name in removed:
        assert world.store.find_document(kb.id, name) is None
        assert world.footprint(kb.id, docs[name]) == (0, 0, 0)
    # the rows of gone owners are swept; live ones stay
    assert {r.id for r in world.ingestor.leases.records()} == {live, remote}


def test_a_lease_beats_while_held_and_is_released_after(tmp_path):
    from docmind_core.ingest.leases import LeaseBook

    world = World(tmp_path / "home")
    book = LeaseBook(world.db, heartbeat_s=0.05, stale_after_s=1.0)
    with book.hold("ingest") as lease:
        first = book.get(lease.id).heartbeat_at
        deadline = time.monotonic() + 5
        while book.get(lease.id).heartbeat_at == first and time.monotonic() < deadline:
            time.sleep(0.02)
        assert book.get(lease.id).heartbeat_at > first
        assert book.owner_gone(lease.id) is None
    assert book.get(lease.id) is None and book.owner_gone(lease.id) is not None


def test_a_document_taken_over_from_a_stale_owner_does_not_complete(tmp_path):
    from docmind_core.ingest.leases import LeaseBook

    world = World(tmp_path / "home")
    kb = world.kb()
    path = tmp_path / "doc.md"
    path.write_text(EN * 4, encoding="utf-8")

    class TakeOverEmbedder(HashingEmbedder):
        """While the ingest embeds, another process declares it stale and finishes its document itself."""

        taken = False

        def embed(self, texts):
            if not self.taken:
                self.taken = True
                other = World(world.home)
                other.ingestor.leases = LeaseBook(other.db, heartbeat_s=0.01, stale_after_s=0.02)
                time.sleep(0.05)
                other.ingestor.reconcile()
                doc = other.store.find_document(kb.id, "doc.md")
                assert doc.status == "embedding", doc  # searchable by keyword: kept, not removed
                assert other.ingestor.finish_embedding() and other.store.get_document(doc.id).status == "complete"
            return super().embed(texts)

    slow = Ingestor(world.store, TakeOverEmbedder(), world.vectors, world.keywords,
                    LeaseBook(world.db, heartbeat_s=30, stale_after_s=60))
    outcome = slow.ingest(kb.id, [path], SMALL)[0]
    assert outcome.status == "failed"
    assert "another process took this document over" in outcome.error
    doc = world.store.find_document(kb.id, "doc.md")  # completed once, by the process that took it over
    assert doc.status == "complete" and world.ingestor.check_kb(kb.id).ok


def test_a_document_another_live_process_is_writing_is_not_written_twice(tmp_path):
    world = World(tmp_path / "home")
    kb = world.kb()
    doc_id = _pending_doc(world, kb.id, "doc.md", _lease_row(world.db, host="another-host"))
    path = tmp_path / "doc.md"
    path.write_text(ZH, encoding="utf-8")
    outcome = world.ingest([path])[0]
    assert outcome.status == "failed" and "another process" in outcome.error
    assert world.footprint(kb.id, doc_id) == (3, 1, 1)  # the other process's work is untouched


# --------------------------------------------------------------------------
# 2. A running engine never serves a pending document
# --------------------------------------------------------------------------

PENDING_TEXT = ("The Zephyr Z9 quantum flux capacitor needs calibration code QX-7781 every ninety days. "
                "Zephyr Z9 owners report the QX-7781 procedure takes ten minutes. ")


@pytest.fixture
def served(tmp_path):
    """A KB with complete documents, searched by a retriever built before a crash window opened."""
    world = World(tmp_path / "home", embedder=HashingEmbedder())
    world.keywords = Fts5KeywordIndex(world.db, memory_min_rows=1)  # large-KB path: the in-memory postings copy
    world.ingestor = Ingestor(world.store, world.embedder, world.vectors, world.keywords, world.ingestor.leases)
    paths = []
    for i, text in enumerate([EN, ZH, EN.replace("Nimbus", "Aurora")]):
        paths.append(tmp_path / f"ready{i}.md")
        paths[-1].write_text(text * 2, encoding="utf-8")
    world.ingest(paths)
    kb = world.kb()
    refiner = EvidenceRefiner(world.store, OfflineReranker(world.embedder))
    retriever = HybridRetriever(world.store, world.embedder, world.vectors, world.keywords, refiner=refiner)
    assert retriever.search("Nimbus N2 power", [kb.id], SMALL).chunks  # already running and warm
    # The crash window: chunks, vectors and keyword rows written, document still pending.
    doc_id = _pending_doc(world, kb.id, "pending.md", _lease_row(world.db), text=PENDING_TEXT * 3)
    return world, kb, retriever, doc_id


def test_vector_search_skips_pending_documents(served):
    world, kb, retriever, doc_id = served
    raw = world.vectors.query([kb.id], world.embedder.embed([PENDING_TEXT])[0], 3)
    assert raw and all(cid.startswith("pending.md") for cid, _ in raw[:2])  # the store does hold them
    hits = retriever.vector_candidates(PENDING_TEXT, [kb.id], 3)
    assert hits and all(c.doc_id != doc_id for c in hits)
    assert len(hits) == 3  # fetched deeper so top_k still counts ready chunks


@pytest.mark.parametrize("postings_copy", [False, True])
def test_keyword_search_skips_pending_documents(served, postings_copy):
    world, kb, retriever, doc_id = served
    keywords = world.keywords
    generation = keywords.generation(kb.id)
    if postings_copy:
        assert keywords.warm([kb.id]) == 1
        assert keywords.postings_copies()[kb.id].generation == generation
    else:  # the same database, searched by FTS5 alone
        keywords = Fts5KeywordIndex(world.db, memory_min_rows=None)
        retriever = HybridRetriever(world.store, world.embedder, world.vectors, keywords, refiner=retriever.refiner)
    raw = keywords.search([kb.id], "Zephyr QX-7781 calibration", 5)
    assert raw and {cid.split("-c")[0] for cid, _ in raw} == {"pending.md"}  # only the pending doc matches
    copy = keywords.postings_copies().get(kb.id)
    assert (copy is not None and copy.generation == generation) == postings_copy
    assert retriever.keyword_candidates("Zephyr QX-7781 calibration", [kb.id], 5) == []


def test_fused_search_expansion_and_direct_read_skip_pending_documents(served):
    world, kb, retriever, doc_id = served
    result = retriever.search("Zephyr Z9 QX-7781 calibration", [kb.id], SMALL)
    assert all(c.doc_id != doc_id for c in result.candidates)
    assert all("QX-7781" not in c.text for c in result.chunks)  # expansion brought no pending parent in
    assert world.store.parent_of([f"pending.md-c0"]) == {}
    assert world.store.get_chunks(["pending.md-c0", "pending.md-p"]) == {}
    assert world.store.chunks_for_document(doc_id) == []
    assert world.store.chunks_for_document(doc_id, parents=True) == []
    assert read_selected_documents(world.store, [doc_id], 2000) == []
    # ... and every path sees the document the moment it completes
    world.store.set_document_status(doc_id, "complete")
    result = retriever.search("Zephyr Z9 QX-7781 calibration", [kb.id], SMALL)
    assert result.chunks and result.chunks[0].doc_id == doc_id
    assert len(read_selected_documents(world.store, [doc_id], 2000)) == 2


def test_the_old_version_of_a_replaced_document_is_invisible_while_the_new_one_is_written(tmp_path):
    world = World(tmp_path / "home")
    path = tmp_path / "doc.md"
    path.write_text(EN, encoding="utf-8")
    kb = world.kb()
    doc_id = world.ingest([path])[0].doc_id
    seen = []

    class Watching(HashingEmbedder):
        def embed(self, texts):
            seen.append([c.text for c in world.store.chunks_for_document(doc_id)])
            return super().embed(texts)

    path.write_text(ZH * 3, encoding="utf-8")
    Ingestor(world.store, Watching(), world.vectors, world.keywords, world.ingestor.leases).ingest(kb.id, [path], SMALL)
    # while its vectors are written, the new version is read whole (keyword first) and the old one never
    assert seen and all(texts and all("Nimbus" not in t for t in texts) for texts in seen), seen
    assert world.store.chunks_for_document(doc_id)


@pytest.mark.slow  # two real engine starts
def test_an_engine_start_that_finds_nothing_to_repair_takes_no_write_lock(tmp_path, sql_writes):
    """A CLI command or a server starting while another process holds a write transaction: with nothing to
    repair, the start only reads (the start-up repairs take their lease at the first repair), so it neither
    waits for the writer nor skips its checks with "database is locked"."""
    from docmind_core.engine import Engine

    home = tmp_path / "home"
    Engine.open(home, env={}, warm=False)  # the first start writes its layout, keys and migrations
    assert sql_writes  # (the harness sees writes)
    sql_writes.clear()
    assert Engine.open(home, env={}, warm=False).start_report == []
    assert sql_writes == []
