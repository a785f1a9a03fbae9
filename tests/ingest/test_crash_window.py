"""Issue 12 item 2 with two real processes: a process that is already running (its retriever warm, the keyword
index's in-memory postings copy built) never serves the rows another process wrote before it crashed in the
keyword-write window (chunk and keyword rows written, the document still pending).

Issue 23 item 3 adds the embedding window: a process killed while a document's vectors are written leaves it
searchable by keyword (status embedding, some vectors stored); it is served as such, never removed, and the
next start's backfill writes the missing vectors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from docmind_core.answer.selected_doc import read_selected_documents
from tests.ingest.test_leases import ENV, PENDING_TEXT, REPO, served  # noqa: F401  (served is a fixture)
from tests.ingest.test_pipeline import SMALL


_CRASH_AFTER_KEYWORDS = """
import os, sys
from pathlib import Path
from tests.ingest.test_pipeline import World

world = World(Path(sys.argv[1]))
write_keywords = world.keywords.add

def add_then_die(chunks):
    write_keywords(chunks)
    os._exit(17)  # killed in the keyword-write window: rows written, the document not yet searchable

world.keywords.add = add_then_die
world.ingest([Path(sys.argv[2])])
"""


@pytest.mark.slow  # a second process ingests and is killed half-way
def test_a_running_engine_never_serves_what_a_crashed_process_left_half_written(served, tmp_path):
    """Issue 12 item 2 with two real processes: this one searches (warm, postings copy built); another one
    crashes after writing chunk and keyword rows (vectors come after them); none of that document reaches this
    one's reads."""
    world, kb, retriever, _ = served
    assert world.keywords.warm([kb.id]) == 1  # the in-memory postings copy is in use
    path = tmp_path / "crashed.md"
    path.write_text(PENDING_TEXT.replace("Zephyr", "Quasar") * 3, encoding="utf-8")
    crashed = subprocess.run([sys.executable, "-c", _CRASH_AFTER_KEYWORDS, str(world.home), str(path)], cwd=REPO,
                             env=ENV, capture_output=True, text=True, timeout=120)
    assert crashed.returncode == 17, crashed.stderr[-2000:]
    doc = world.store.find_document(kb.id, "crashed.md")
    assert doc is not None and doc.status == "pending"
    rows, vectors, keywords = world.footprint(kb.id, doc.id)
    assert rows > 0 and keywords == 1 and vectors == 0
    query = "Quasar Z9 QX-7781 calibration"
    raw = world.keywords.search([kb.id], query, 5)
    its_chunks = {c.id for c in world.store.chunks_for_document(doc.id, any_status=True)}
    assert its_chunks & {cid for cid, _ in raw}  # the keyword index does hold its rows
    assert retriever.keyword_candidates(query, [kb.id], 5) == []
    assert all(c.doc_id != doc.id for c in retriever.vector_candidates(query, [kb.id], 5))
    result = retriever.search(query, [kb.id], SMALL)
    assert all(c.doc_id != doc.id for c in result.candidates)
    assert all("Quasar" not in c.text for c in result.chunks)
    assert read_selected_documents(world.store, [doc.id], 2000) == []


_CRASH_WHILE_EMBEDDING = """
import os, sys
from pathlib import Path
from tests.ingest.test_pipeline import World

world = World(Path(sys.argv[1]))
embed = world.embedder.embed
calls = []

def embed_then_die(texts):
    calls.append(len(texts))
    if len(calls) > 2:
        os._exit(17)  # killed in the embedding window: keyword-searchable, two batches of vectors stored
    return embed(texts)

world.embedder.embed = embed_then_die
world.ingest([Path(sys.argv[2])])
"""


@pytest.mark.slow  # a second process ingests and is killed half-way
def test_a_document_killed_while_embedding_is_served_by_keyword_and_finished_by_the_next_start(served, tmp_path):
    world, kb, retriever, _ = served
    path = tmp_path / "embedding.md"
    path.write_text(PENDING_TEXT.replace("Zephyr", "Quasar") * 20, encoding="utf-8")
    crashed = subprocess.run([sys.executable, "-c", _CRASH_WHILE_EMBEDDING, str(world.home), str(path)], cwd=REPO,
                             env=ENV, capture_output=True, text=True, timeout=120)
    assert crashed.returncode == 17, crashed.stderr[-2000:]
    doc = world.store.find_document(kb.id, "embedding.md")
    assert doc is not None and doc.status == "embedding"
    stored = len(world.store.chunk_vectors(c.id for c in world.store.chunks_for_document(doc.id)))
    assert 0 < stored < doc.chunk_count  # half embedded
    query = "Quasar Z9 QX-7781 calibration"
    assert any(c.doc_id == doc.id for c in retriever.keyword_candidates(query, [kb.id], 5))  # searchable now
    pending = world.store.pending_ingest([kb.id])
    assert pending and pending[0].embedding_chunks == doc.chunk_count - stored
    repairs = world.ingestor.reconcile()  # the next start keeps it (and says its vectors follow) ...
    assert any("embedding.md" in line and "background" in line for line in repairs), repairs
    assert world.store.get_document(doc.id).status == "embedding"
    assert world.ingestor.needs_embedding()
    lines = world.ingestor.finish_embedding()  # ... and the job worker's backfill writes the missing vectors
    assert lines and f"{doc.chunk_count - stored} missing vectors written" in lines[0], lines
    assert world.store.get_document(doc.id).status == "complete" and not world.ingestor.needs_embedding()
    assert all(p.embedding_chunks == 0 for p in world.store.pending_ingest([kb.id]))  # (the fixture's pending doc stays)
