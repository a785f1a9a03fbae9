"""Issue 40 failure 5: after kill -9 during an ingest, ``kb check`` tells the truth about half-written documents.

A process killed while vectors were written leaves documents ``embedding`` (searchable by keyword, vectors
missing) under a lease whose process has exited.  ``kb check`` counted every ``embedding`` document as "being
written by a live process", compared none of them and said "consistent"; the repair left them as they were.
Now the check reports each one, ``--repair`` writes its missing vectors from the stored chunk rows and completes
it, and the next start of a process resumes them without a re-ingest.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

from tests.ingest.test_check import _docs
from tests.ingest.test_leases import _lease_row
from tests.ingest.test_pipeline import EN, World
from tests.paths import ROOT

EXITED_PID = 2 ** 22 + 7  # above Linux's pid_max: no such process


def left_embedding(world: World, kb_id: int, doc_id: int, keep: int) -> int:
    """Put a complete document back as a process killed while writing its vectors leaves it: ``embedding`` under
    the lease of an exited process, only its first ``keep`` chunks with a vector; returns how many lack one."""
    chunk_ids = [c.id for c in world.store.chunks_for_document(doc_id)]
    lost = chunk_ids[keep:]
    world.vectors.delete_chunks(kb_id, lost)
    exited = _lease_row(world.db, pid=EXITED_PID)
    with world.db.transaction() as tx:
        tx.conn.executemany("UPDATE chunks SET vector = NULL WHERE id = ?", [(cid,) for cid in lost])
        tx.execute("UPDATE documents SET status = 'embedding', lease_id = ? WHERE id = ?", [exited, doc_id])
    return len(lost)


def test_kb_check_reports_documents_left_embedding_by_an_exited_process_and_repair_finishes_them(tmp_path):
    world = World(tmp_path / "home")
    outcomes = world.ingest(_docs(tmp_path, 4))
    kb = world.kb()
    half = {o.name: o.doc_id for o in outcomes[:2]}
    lost = {name: left_embedding(world, kb.id, doc_id, keep=1) for name, doc_id in half.items()}
    assert all(lost.values())

    report = world.ingestor.check_kb(kb.id)
    assert not report.ok and report.in_progress_documents == 0, report.lines()
    assert sorted(line.split(":")[0] for line in report.half_written_documents) == sorted(half), report.lines()
    for name, missing in lost.items():
        line = next(line for line in report.half_written_documents if line.startswith(name))
        assert f"{missing} of " in line and "has exited" in line, line
    assert report.missing_vectors == sum(lost.values())
    assert any("half-written document" in line for line in report.lines())
    assert "consistent" not in report.lines()[-1]

    repaired = world.ingestor.check_kb(kb.id, repair=True)
    assert repaired.repair_verified, repaired.lines()
    assert sum("finished half-written document" in line for line in repaired.repaired) == 2, repaired.repaired
    for doc_id in half.values():
        assert world.store.get_document(doc_id).status == "complete"
        chunks = world.store.chunks_for_document(doc_id)
        stored = world.vectors.get_embeddings(kb.id, [c.id for c in chunks])
        assert len(stored) == len(chunks)
        expected = world.embedder.embed([c.text for c in chunks])
        assert np.allclose(np.stack([stored[c.id] for c in chunks]), expected, atol=1e-5)
    assert world.ingestor.check_kb(kb.id).ok
    assert not world.ingestor.needs_embedding()


# --------------------------------------------------------------------------
# kill -9 at instants chosen by what the database shows
# --------------------------------------------------------------------------

_SLOW_INGEST = """
import sys, time
from pathlib import Path
from tests.ingest.test_pipeline import World, HashingEmbedder

class SteadyEmbedder(HashingEmbedder):
    def embed(self, texts):
        time.sleep(0.03 * len(texts))  # an encoder's cost: the parent sees the vectors land batch by batch
        return super().embed(texts)

world = World(Path(sys.argv[1]), embedder=SteadyEmbedder())
write_keywords = world.keywords.add

def slow_keywords(chunks):  # a parser's and keyword writer's cost: documents open one by one
    time.sleep(0.05)
    return write_keywords(chunks)

world.keywords.add = slow_keywords
world.ingest([Path(sys.argv[2])])
"""

# name -> predicate over (documents by status, child chunks with a stored vector): when to kill
INSTANTS = {
    "3 documents searchable by keyword": lambda status, vectors: status.get("embedding", 0) >= 3,
    "12 vectors written": lambda status, vectors: vectors >= 12,
    "4 documents complete": lambda status, vectors: status.get("complete", 0) >= 4,
}


def corpus(folder: Path, count: int = 10) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (folder / f"doc{i:02d}.md").write_text(f"# Document {i}\n\n" + EN * (1 + i % 4) + f" Serial SN-{i:04d}.",
                                               encoding="utf-8")
    return folder


def database_state(home: Path) -> tuple[dict[str, int], int]:
    """(documents by status, child chunks with a stored vector), read as another process would."""
    path = home / "docmind.db"
    if not path.exists():
        return {}, 0
    with closing(sqlite3.connect(path, timeout=10)) as conn:
        try:
            status = dict(conn.execute("SELECT status, COUNT(*) FROM documents GROUP BY status").fetchall())
            vectors = conn.execute("SELECT COUNT(*) FROM chunks WHERE is_parent = 0 AND vector IS NOT NULL"
                                   ).fetchone()[0]
        except sqlite3.OperationalError:  # the schema is not there yet
            return {}, 0
    return status, vectors


def killed_at(home: Path, folder: Path, instant: str, timeout_s: float = 90.0) -> tuple[dict[str, int], int]:
    """Ingest ``folder`` in a child process and SIGKILL it once the database shows ``instant``; the state then."""
    World(home).kb()  # the KB and schema exist before the child starts
    errors = home.parent / "child.stderr"
    with errors.open("w") as sink:  # a file, not a pipe: a child that writes much never blocks on it
        child = subprocess.Popen([sys.executable, "-c", _SLOW_INGEST, str(home), str(folder)], cwd=ROOT,
                                 env={**os.environ, "PYTHONPATH": str(ROOT), "ANONYMIZED_TELEMETRY": "False"},
                                 stdout=subprocess.DEVNULL, stderr=sink)
    try:
        deadline = time.monotonic() + timeout_s
        while not INSTANTS[instant](*database_state(home)):
            assert child.poll() is None, f"the child ended before '{instant}': {errors.read_text()[-2000:]}"
            assert time.monotonic() < deadline, f"'{instant}' never came: {database_state(home)}"
            time.sleep(0.02)  # polling the database, bounded by the deadline
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(30)
    return database_state(home)


def half_written_names(world: World, kb_id: int) -> dict[str, str]:
    """name -> status of the documents a writer left pending or embedding."""
    return {d.name: d.status for d in world.store.list_documents(kb_id) if d.status in ("pending", "embedding")}


@pytest.mark.slow  # ingest processes killed with SIGKILL
@pytest.mark.parametrize("instant", list(INSTANTS))
def test_kb_check_after_kill_9_reports_exactly_the_half_written_documents(tmp_path, instant):
    home, folder = tmp_path / "home", corpus(tmp_path / "docs")
    killed_at(home, folder, instant)
    world = World(home)  # no engine start: nothing repairs before the check
    kb = world.kb()
    half = half_written_names(world, kb.id)
    assert half, f"nothing was half-written at '{instant}'"

    report = world.ingestor.check_kb(kb.id)
    reported = {line.split(":")[0]: "embedding" for line in report.half_written_documents}
    reported |= {line.split(" (pending")[0]: "pending" for line in report.interrupted_documents if "(pending" in line}
    assert reported == half, report.lines()
    assert report.in_progress_documents == 0 and not report.ok

    repaired = world.ingestor.check_kb(kb.id, repair=True)
    assert repaired.repair_verified, repaired.lines()
    assert half_written_names(world, kb.id) == {}
    assert world.ingestor.check_kb(kb.id).ok
    present = {d.name for d in world.store.list_documents(kb.id)}
    assert {name for name, status in half.items() if status == "embedding"} <= present  # finished, not removed
    # nothing a finished document holds is lost: ingesting the folder again only adds what was never written
    outcomes = {o.name: o.status for o in world.ingest([folder])}
    assert outcomes == {name: "unchanged" if name in present else "added" for name in outcomes}, outcomes


@pytest.mark.slow  # an ingest process killed with SIGKILL, then what a process start runs
def test_the_next_start_resumes_documents_left_embedding_without_a_re_ingest(tmp_path):
    home, folder = tmp_path / "home", corpus(tmp_path / "docs")
    killed_at(home, folder, "12 vectors written")
    world = World(home)
    kb = world.kb()
    half = half_written_names(world, kb.id)
    assert "embedding" in half.values(), half
    repairs = world.ingestor.reconcile()  # every start runs this, then its job worker runs finish_embedding
    said = [line for line in repairs if "half-written" in line and f"kb check {kb.name} --repair" in line]
    assert len(said) == list(half.values()).count("embedding"), repairs
    assert world.ingestor.needs_embedding()
    lines = world.ingestor.finish_embedding(batch_size=4)
    assert sorted(line.split("'")[1] for line in lines) == sorted(n for n, s in half.items() if s == "embedding")
    assert half_written_names(world, kb.id) == {} and world.ingestor.check_kb(kb.id).ok
