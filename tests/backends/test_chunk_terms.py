"""Chunks are tokenised once, at ingest: the stored tokens feed the keyword index, the reranker and MMR,
and query-time scoring gives the same answers as re-tokenising would, without running jieba on chunks."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import jieba
import pytest

import docmind_core.text.tokens as text_module
from docmind_core.text.tokens import chunk_terms
from docmind_core.backends.keyword_index import Fts5KeywordIndex, index_terms
from docmind_core.backends.rerankers import OfflineReranker
from docmind_core.backends.vector_store import ChromaVectorStore
from docmind_core.ingest.loaders import load_document
from docmind_core.ingest.leases import LeaseBook
from docmind_core.ingest.pipeline import Ingestor
from docmind_core.values import ChunkRecord, RetrievedChunk
from docmind_core.retrieval.compress import compress_to_budget
from docmind_core.retrieval.expand import expand_to_parents
from docmind_core.retrieval.hybrid import HybridRetriever
from docmind_core.retrieval.refine import EvidenceRefiner, lexical_vectors
from docmind_core.settings import Settings
from docmind_core.store.db import Database
from docmind_core.store.kb_store import KnowledgeStore
from docmind_core.store.migrations import MIGRATIONS
from docmind_core.text.tokens import keyword_tokens, split_terms, stem_tokens, stored_terms
from tests.retrieval.test_hybrid import PRODUCT_DOCS
from tests.ingest.test_pipeline import SMALL
from tests.paths import ROOT, write_texts

REPO = ROOT


def ingest_products(root: Path, embedder) -> dict:
    """The product documents ingested into a KB "products" under ``root`` (SQLite, FTS5, embedded Chroma)."""
    docs = root / "docs"
    write_texts(docs, PRODUCT_DOCS)
    db = Database(root / "docmind.db")
    store = KnowledgeStore(db)
    vectors, keywords = ChromaVectorStore(path=root / "chroma"), Fts5KeywordIndex(db)
    kb = store.create_kb("products", embedder.id, embedder.dim)
    ingestor = Ingestor(store, embedder, vectors, keywords, LeaseBook(store.db))
    outcomes = ingestor.ingest(kb.id, sorted(docs.iterdir()), SMALL)
    assert all(o.status == "added" for o in outcomes)
    return {"db": db, "store": store, "vectors": vectors, "keywords": keywords, "kb": kb.id, "ingestor": ingestor,
            "retriever": HybridRetriever(store, embedder, vectors, keywords,
                                         EvidenceRefiner(store, OfflineReranker(embedder)))}


@pytest.fixture(scope="module")
def ingested(tmp_path_factory, embedder):
    return ingest_products(tmp_path_factory.mktemp("terms"), embedder)


def _chunks(store, kb_id, parents=False):
    return [c for d in store.list_documents(kb_id) for c in store.chunks_for_document(d.id, parents=parents)]


def test_ingest_stores_each_childs_tokens_and_none_for_parents(ingested):
    children = _chunks(ingested["store"], ingested["kb"])
    assert children and all(c.terms == stored_terms(c.text) for c in children)
    assert any(text_module.is_cjk(t[0]) for c in children for t in split_terms(c.terms))  # the Chinese document too
    assert all(c.terms is None for c in _chunks(ingested["store"], ingested["kb"], parents=True))


@pytest.mark.parametrize("path", sorted(p for p in (REPO / "data" / "demo").iterdir()
                                        if not p.name.startswith(".")), ids=lambda p: p.name)
def test_stemming_stored_tokens_equals_tokenising_with_stemming(path):
    body = load_document(path).text  # the demo holds GBK text, a PDF and a DOCX too
    assert stem_tokens(keyword_tokens(body, stem=False)) == keyword_tokens(body, stem=True)
    assert split_terms(stored_terms(body)) == keyword_tokens(body, stem=False)  # no token holds a space
    for stem in (True, False):
        assert index_terms(body, stem, stored_terms(body)) == index_terms(body, stem)


def test_keyword_index_rows_are_the_same_from_stored_tokens(ingested):
    table = f"keyword_fts_{ingested['kb']}"
    rows = dict(ingested["db"].db.execute(f"SELECT chunk_id, terms FROM {table}").fetchall())
    children = _chunks(ingested["store"], ingested["kb"])
    assert len(rows) == len(children)
    for c in children:
        assert rows[c.id] == " ".join(index_terms(c.text, True))


def test_search_does_not_tokenise_chunks_again(ingested, monkeypatch):
    question = "X5 的滤芯多久更换一次？"
    seen: list[str] = []
    real = jieba.lcut

    def recording(segment, *args, **kwargs):
        seen.append(segment)
        return real(segment, *args, **kwargs)

    chunk_terms.cache_clear()
    text_module.forget_cached_tokens()  # an earlier test may have tokenised this question already
    monkeypatch.setattr(jieba, "lcut", recording)
    result = ingested["retriever"].search(question, [ingested["kb"]], Settings())
    assert "六个月" in result.chunks[0].text
    assert seen, "the question itself is Chinese, so jieba ran on it"
    assert all(segment in question for segment in seen), seen


def test_scores_do_not_depend_on_where_the_tokens_came_from(ingested, embedder):
    result = ingested["retriever"].search("How long is the DM-3000 warranty?", [ingested["kb"]], Settings())
    pool = [c for c in result.candidates if c.terms is not None]
    assert len(pool) >= 3
    bare = [c.model_copy(update={"terms": None}) for c in pool]
    reranker = OfflineReranker(embedder)
    question = "How long is the DM-3000 warranty?"
    assert reranker.score(question, pool) == reranker.score(question, bare)

    def similarities(chunks):  # MMR's redundancy matrix
        vecs = lexical_vectors([c.text for c in chunks], [c.terms for c in chunks])
        return (vecs @ vecs.T).round(6).tolist()

    assert similarities(pool) == similarities(bare)


def test_rewritten_text_drops_the_stored_tokens():
    long_text = " ".join(f"Sentence {i} talks about pump seals and filters." for i in range(40))
    chunk = RetrievedChunk(chunk_id="c1", kb_id=1, doc_id=1, document="d", text=long_text,
                           terms=stored_terms(long_text), parent_id="p1")
    shortened = compress_to_budget("pump seals", [chunk], 60).chunks[0]
    assert shortened.text != long_text and shortened.terms is None

    short = chunk.model_copy(update={"text": "pump seals", "terms": stored_terms("pump seals")})
    parent = ChunkRecord(id="p1", kb_id=1, doc_id=1, index=0, is_parent=True, text="pump seals and more",
                         token_count=4, start=0, end=19)
    expanded = expand_to_parents([short], {"c1": parent}, 100).chunks[0]
    assert expanded.expanded and expanded.text == parent.text and expanded.terms is None


def database_before(path: Path, migration: str) -> None:
    """Write a database at ``path`` as DocMind left it before ``migration`` existed."""
    import sqlite_utils

    old = sqlite_utils.Database(sqlite3.connect(path))
    old.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    for fn in MIGRATIONS:
        if fn.__name__ == migration:
            break
        fn(old)
        old.execute("INSERT INTO _migrations VALUES (?, '2026-01-01')", [fn.__name__])
    old.conn.commit()
    old.conn.close()


def test_chunks_stored_before_the_migration_still_rank(tmp_path, embedder):
    # A database as it was before m006: the chunks table has no terms column.
    path = tmp_path / "old.db"
    database_before(path, "m006_chunk_terms")

    db = Database(path)
    columns = {c.name for c in db.db["chunks"].columns}
    assert "terms" in columns
    store = KnowledgeStore(db)
    kb = store.create_kb("legacy", embedder.id, embedder.dim)
    doc_id = store.begin_document(kb.id, "manual.md", source_path="", content_hash="h", mime="text/plain",
                                  size=10, text=PRODUCT_DOCS["aquapump-manual.md"])
    body = PRODUCT_DOCS["aquapump-manual.md"]
    store.add_chunks([ChunkRecord(id="c0", kb_id=kb.id, doc_id=doc_id, index=0, text=body,
                                  token_count=text_module.count_tokens(body), start=0, end=len(body))])
    store.set_document_status(doc_id, "complete")
    assert store.get_chunks(["c0"])["c0"].terms is None
    keywords = Fts5KeywordIndex(db)
    from docmind_core.backends.protocols import IndexedChunk

    keywords.add([IndexedChunk("c0", kb.id, doc_id, body)])
    vectors = ChromaVectorStore(path=tmp_path / "chroma")
    vectors.add([IndexedChunk("c0", kb.id, doc_id, body)], embedder.embed([body]))
    retriever = HybridRetriever(store, embedder, vectors, keywords,
                                EvidenceRefiner(store, OfflineReranker(embedder)))
    result = retriever.search("error code E42", [kb.id], Settings())
    assert result.chunks and result.chunks[0].chunk_id == "c0" and result.chunks[0].scores.rerank > 0.5
