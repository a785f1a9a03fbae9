"""Issue 40 failure 5: after kill -9 during an ingest, ``kb check`` tells the truth about half-written documents.

A process killed while vectors were written leaves documents ``embedding`` (searchable by keyword, vectors
missing) under a lease whose process has exited.  ``kb check`` counted every ``embedding`` document as "being
written by a live process", compared none of them and said "consistent"; the repair left them as they were.
Now the check reports each one, ``--repair`` writes its missing vectors from the stored chunk rows and completes
it, and the next start of a process resumes them without a re-ingest.
"""

from __future__ import annotations

import numpy as np

from tests.ingest.test_check import _docs
from tests.ingest.test_leases import _lease_row
from tests.ingest.test_pipeline import World

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
