"""Chunk rows keep a copy of their embedding (migration m007), so the reranker's cosine for keyword-only
candidates is read from SQLite instead of asking Chroma; it is the very vector Chroma holds."""

from __future__ import annotations


import numpy as np
import pytest
import sqlite_utils

from docmind_core.backends.protocols import IndexedChunk
from docmind_core.backends.vector_store import ChromaVectorStore
from docmind_core.ingest.leases import LeaseBook
from docmind_core.ingest.pipeline import Ingestor
from docmind_core.values import ChunkRecord, RetrievedChunk
from docmind_core.retrieval.hybrid import stored_embeddings
from docmind_core.store.db import Database
from docmind_core.store.kb_store import KnowledgeStore
from docmind_core.text.tokens import count_tokens
from tests.backends.test_chunk_terms import database_before, ingest_products
from tests.retrieval.test_hybrid import PRODUCT_DOCS
from tests.ingest.test_pipeline import SMALL, HashingEmbedder

# Two vector hits per question, so most keyword hits are keyword-only and need a stored cosine.
FEW_VECTOR_HITS = SMALL.with_overrides({"retrieval.vector_top_k": 2})
QUESTIONS = ["How long is the AquaPump warranty?", "星河净水器 X5 的滤芯多久更换一次？", "What does error code E42 mean?",
             "Bluetooth pairing version", "filter cleaning schedule"]


@pytest.fixture
def kb(tmp_path, embedder):
    world = ingest_products(tmp_path, embedder)
    return {**world, "id": world["kb"]}


def _children(store, kb_id, parents=False):
    return [c for d in store.list_documents(kb_id) for c in store.chunks_for_document(d.id, parents=parents)]


def test_ingest_keeps_the_exact_vector_chroma_holds_for_every_child(kb):
    children = _children(kb["store"], kb["id"])
    copies = kb["store"].chunk_vectors(c.id for c in children)
    from_chroma = kb["vectors"].get_embeddings(kb["id"], [c.id for c in children])
    assert set(copies) == set(from_chroma) == {c.id for c in children}
    for cid, vec in copies.items():  # Chroma re-normalised its copy: equal to float32 rounding
        assert vec.dtype == np.float32 and np.allclose(vec, from_chroma[cid], rtol=0, atol=1e-6)
    assert kb["store"].chunk_vectors(c.id for c in _children(kb["store"], kb["id"], parents=True)) == {}


def _search_all(retriever, kb_id):
    out = []
    for question in QUESTIONS:
        result = retriever.search(question, [kb_id], FEW_VECTOR_HITS)
        out.append([(c.chunk_id, c.scores.vector, c.scores.rerank, c.cut_by) for c in result.candidates])
    return out


def _same_up_to_renormalising(a, b):
    """Chroma re-normalises the vectors it is given (cosine space), which moves their last bits: cosines
    from its copies and ours agree to ~1e-7, so the rounded scores may differ in the 6th decimal."""
    assert [[(cid, cut) for cid, _v, _r, cut in rows] for rows in a] == \
        [[(cid, cut) for cid, _v, _r, cut in rows] for rows in b]
    for rows_a, rows_b in zip(a, b):
        for (_, va, ra, _), (_, vb, rb, _) in zip(rows_a, rows_b):
            assert (va is None) == (vb is None) and (va is None or abs(va - vb) <= 2e-6)
            assert (ra is None) == (rb is None) and (ra is None or abs(ra - rb) <= 2e-6)


def test_search_reads_the_copies_and_scores_exactly_as_with_chroma(kb, monkeypatch):
    asked: list[list[str]] = []
    original = ChromaVectorStore.get_embeddings

    def spy(self, kb_id, ids):
        asked.append(list(ids))
        return original(self, kb_id, ids)

    monkeypatch.setattr(ChromaVectorStore, "get_embeddings", spy)
    with_copies = _search_all(kb["retriever"], kb["id"])
    assert asked == []  # Chroma was never asked for stored vectors
    kept = [row for rows in with_copies for row in rows if row[3] != "fusion"]
    assert len(kept) > 2 * len(QUESTIONS)  # more than the vector hits: keyword-only ones were scored
    assert all(v is not None for _, v, _, _ in kept)  # and every one has a cosine, read from the copies

    kb["store"].clear_chunk_vectors(kb["id"])  # as rows stored before m007 have none
    without = _search_all(kb["retriever"], kb["id"])
    assert asked  # now Chroma answered ...
    _same_up_to_renormalising(without, with_copies)  # ... with the same vectors, so the same ranking


def test_copies_come_first_and_chroma_fills_the_gaps(kb):
    children = _children(kb["store"], kb["id"])
    first, rest = children[:2], children[2:]
    kb["store"].clear_chunk_vectors(kb["id"])
    kb["store"].set_chunk_vectors([c.id for c in first], np.zeros((2, kb["retriever"].embedder.dim)))
    chunks = kb["retriever"].keyword_candidates("pump warranty filter X5", [kb["id"]], 50)
    got = stored_embeddings(kb["vectors"], chunks, kb["store"])
    for c in chunks:
        if c.chunk_id in {x.id for x in first}:
            assert not got[c.chunk_id].any()  # the copy, not Chroma's vector
        else:
            assert got[c.chunk_id].any()
    assert {c.chunk_id for c in chunks} <= set(got) and rest


def test_reindex_replaces_the_copies_with_the_new_models_vectors(kb):
    other = HashingEmbedder(dim=32, id="test:hashing-32")
    switched = Ingestor(kb["store"], other, kb["vectors"], kb["keywords"], LeaseBook(kb["store"].db))
    switched.reindex_kb(kb["id"])
    children = _children(kb["store"], kb["id"])
    copies = kb["store"].chunk_vectors(c.id for c in children)
    assert len(copies) == len(children)
    for c in children:
        assert copies[c.id].shape == (32,)
        assert np.allclose(copies[c.id], other.embed([c.text])[0], atol=1e-6)


def test_deleting_a_document_removes_its_copies(kb):
    doc = kb["store"].list_documents(kb["id"])[0]
    ids = [c.id for c in kb["store"].chunks_for_document(doc.id)]
    assert kb["store"].chunk_vectors(ids)
    kb["ingestor"].delete_document(doc.id)
    assert kb["store"].chunk_vectors(ids) == {}


def test_a_wrong_sized_copy_is_ignored_rather_than_scored(kb):
    chunk = _children(kb["store"], kb["id"])[0]
    kb["store"].set_chunk_vectors([chunk.id], np.ones((1, 7)))  # e.g. left over from another model
    result = kb["retriever"].search("AquaPump warranty E42 filter", [kb["id"]], SMALL)
    assert result.chunks  # no shape error; that chunk just gets its cosine elsewhere or none


def test_mismatched_ids_and_vectors_are_refused(kb):
    with pytest.raises(ValueError, match="2 chunk ids but 1 vectors"):
        kb["store"].set_chunk_vectors(["a", "b"], np.ones((1, 4)))


def test_a_database_from_before_m007_migrates_and_asks_chroma(tmp_path, embedder):
    """Chunks written before m007 have no copy: search still gets their cosines, from Chroma."""
    path = tmp_path / "old.db"
    database_before(path, "m007_chunk_vectors")
    assert "vector" not in {c.name for c in sqlite_utils.Database(path)["chunks"].columns}

    db = Database(path)
    assert "vector" in {c.name for c in db.db["chunks"].columns}
    store = KnowledgeStore(db)
    record = store.create_kb("legacy", embedder.id, embedder.dim)
    body = PRODUCT_DOCS["aquapump-manual.md"]
    doc_id = store.begin_document(record.id, "manual.md", source_path="", content_hash="h", mime="text/plain",
                                  size=len(body), text=body)
    store.add_chunks([ChunkRecord(id="c0", kb_id=record.id, doc_id=doc_id, index=0, text=body,
                                  token_count=count_tokens(body), start=0, end=len(body))])
    store.set_document_status(doc_id, "complete")
    vectors = ChromaVectorStore(path=tmp_path / "chroma")
    vectors.add([IndexedChunk("c0", record.id, doc_id, body)], embedder.embed([body]))
    chunk = RetrievedChunk.from_record(store.get_chunks(["c0"])["c0"], "manual.md")
    assert store.chunk_vectors(["c0"]) == {}
    got = stored_embeddings(vectors, [chunk], store)
    assert np.allclose(got["c0"], embedder.embed([body])[0], atol=1e-6)
