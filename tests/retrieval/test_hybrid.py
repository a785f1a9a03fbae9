"""The hybrid retriever and refiner over the real stores (SQLite + FTS5 + embedded Chroma) on a small KB."""

from __future__ import annotations

import numpy as np
import pytest

from docmind_core.backends.keyword_index import Fts5KeywordIndex
from docmind_core.backends.protocols import IndexedChunk
from docmind_core.backends.rerankers import OfflineReranker
from docmind_core.backends.vector_store import ChromaVectorStore
from docmind_core.errors import EmbedderMismatch
from docmind_core.ingest.chunking import chunk_document
from docmind_core.retrieval.hybrid import HybridRetriever
from docmind_core.retrieval.refine import EvidenceRefiner, lexical_vectors
from docmind_core.settings import Settings
from docmind_core.store.db import Database
from docmind_core.store.kb_store import KnowledgeStore
from docmind_core.text.tokens import count_tokens
from tests.paths import write_texts

PRODUCT_DOCS = {
    "aquapump-manual.md": (
        "# AquaPump DM-3000 manual\n\n"
        "The AquaPump DM-3000 is a quiet garden pump rated at 3000 litres per hour. "
        "Its warranty period is two years from the date of purchase, and it covers the motor and the seals.\n\n"
        "Cleaning: rinse the intake filter every four weeks. A clogged filter makes the pump run hot.\n\n"
        "Error code E42 means the float switch is stuck; free it and restart the pump."),
    "产品说明.txt": (
        "星河净水器 X5 使用说明。\n"
        "星河净水器 X5 的滤芯每六个月更换一次，更换时请先关闭进水阀。\n"
        "X5 的额定功率为 48 瓦，噪音低于 40 分贝。\n"
        "如果指示灯闪烁红色，说明滤芯已到寿命，请尽快更换。"),
    "release-notes.md": (
        "# Release notes\n\n"
        "Version v2.4.1 (2024-03-18) fixed the CSV export of pump logs.\n\n"
        "Version v2.5.0 (2024-06-02) added Bluetooth pairing for the DM-3000 controller."),
}
OTHER_KB_DOCS = {
    "hr-policy.md": ("The warranty period for company laptops is three years. "
                     "Employees return laptops to the IT desk when they leave."),
}


def _ingest(store, vectors, keywords, embedder, kb_id, docs):
    for name, text in docs.items():
        doc_id = store.begin_document(kb_id, name, source_path=name, content_hash=name, mime="text/plain",
                                      size=len(text), text=text)
        parents, children = chunk_document(kb_id, name, text, 40, 8, 120)
        store.add_chunks([c.to_record(kb_id, doc_id) for c in parents + children])
        indexed = [IndexedChunk(c.id, kb_id, doc_id, c.text) for c in children]
        vectors.add(indexed, embedder.embed([c.text for c in children]))
        keywords.add(indexed)
        store.set_document_status(doc_id, "complete")


@pytest.fixture(scope="module")
def world(tmp_path_factory, embedder):
    root = tmp_path_factory.mktemp("hybrid")
    db = Database(root / "docmind.db")
    store = KnowledgeStore(db)
    vectors = ChromaVectorStore(path=root / "chroma")
    keywords = Fts5KeywordIndex(db)
    products = store.create_kb("products", embedder.id, embedder.dim)
    other = store.create_kb("hr", embedder.id, embedder.dim)
    _ingest(store, vectors, keywords, embedder, products.id, PRODUCT_DOCS)
    _ingest(store, vectors, keywords, embedder, other.id, OTHER_KB_DOCS)
    retriever = HybridRetriever(store, embedder, vectors, keywords,
                                EvidenceRefiner(store, OfflineReranker(embedder)))
    return {"store": store, "retriever": retriever, "products": products.id, "other": other.id,
            "vectors": vectors, "keywords": keywords}


@pytest.mark.parametrize("question, document, needle", [
    ("How long is the warranty of the DM-3000?", "aquapump-manual.md", "two years"),
    ("What does error code E42 mean?", "aquapump-manual.md", "float switch"),
    ("Which version fixed the CSV export?", "release-notes.md", "v2.4.1"),
    ("X5 的滤芯多久更换一次？", "产品说明.txt", "六个月"),
    ("净水器指示灯闪烁红色是什么意思？", "产品说明.txt", "滤芯已到寿命"),
])
def test_questions_retrieve_the_right_chunk(world, question, document, needle):
    result = world["retriever"].search(question, [world["products"]], Settings())
    top = result.chunks[0]
    assert top.document == document
    assert any(needle in c.text for c in result.chunks[:2])
    assert top.scores.rerank is not None and 0.0 <= top.scores.rerank <= 1.0


def test_provenance_fields_and_timings(world):
    settings = Settings()
    result = world["retriever"].search("DM-3000 warranty period", [world["products"]], settings)
    assert result.chunks and result.candidates
    for c in result.chunks:
        assert c.kept and c.cut_by is None
        assert c.chunk_id and c.kb_id == world["products"] and c.doc_id and c.document
        assert c.start is not None and c.end is not None and c.end > c.start
        assert c.found_by and set(c.found_by) <= {"vector", "keyword"}
        assert c.scores.fused is not None and c.scores.rerank is not None and c.scores.mmr is not None
        assert c.scores.vector is not None  # filled from the stored vectors even for keyword-only hits
    for c in result.candidates:
        assert c.kept == (c.cut_by is None)
        assert c.cut_by in (None, "fusion", "rerank", "mmr", "merged", "budget")
    assert {"vector", "keyword", "fusion", "rerank", "mmr", "expand", "compress", "total"} <= set(result.timings_ms)
    assert result.used_tokens == sum(count_tokens(c.text) for c in result.chunks)
    assert result.used_tokens <= settings.rag.context_max_tokens
    store = world["store"]
    for c in result.chunks:  # offsets point into the document text
        assert store.document_text(c.doc_id)[c.start:c.end] == c.text


def test_kb_filter_never_returns_another_kbs_chunk(world):
    for question in ("warranty period", "laptop warranty three years", "滤芯", "pump"):
        for kb in (world["products"], world["other"]):
            result = world["retriever"].search(question, [kb], Settings())
            assert all(c.kb_id == kb for c in result.candidates)
            assert all(c.kb_id == kb for c in world["retriever"].vector_candidates(question, [kb], 50))
            assert all(c.kb_id == kb for c in world["retriever"].keyword_candidates(question, [kb], 50))


def test_doc_filter(world):
    store = world["store"]
    notes = next(d for d in store.list_documents(world["products"]) if d.name == "release-notes.md")
    result = world["retriever"].search("DM-3000 warranty", [world["products"]], Settings(), doc_ids=[notes.id])
    assert result.candidates and all(c.doc_id == notes.id for c in result.candidates)


def test_fusion_cut_and_rrf(world):
    settings = Settings().with_overrides({"retrieval.rerank_top_n": 2, "retrieval.fusion": "rrf"})
    chunks = world["retriever"].candidates("pump filter warranty version", [world["products"]], settings)
    assert len(chunks) > 2
    assert [c.cut_by for c in chunks[:2]] == [None, None]
    assert all(c.cut_by == "fusion" and not c.kept for c in chunks[2:])
    assert all(a.scores.fused >= b.scores.fused for a, b in zip(chunks, chunks[1:]))


def test_refiner_parent_expansion_and_budget(world, embedder):
    settings = Settings()
    retriever = world["retriever"]
    result = retriever.search("How long is the warranty of the DM-3000?", [world["products"]], settings)
    assert any(c.expanded and c.parent_id for c in result.chunks)  # small KB: parents fit the budget
    tight = settings.with_overrides({"rag.context_max_tokens": 100, "retrieval.final_top_k": 8})
    small = retriever.search("How long is the warranty of the DM-3000?", [world["products"]], tight)
    assert small.used_tokens <= 100
    assert sum(count_tokens(c.text) for c in small.chunks) <= 100


def test_refiner_dedupes_a_union_and_scores_web_chunks(world, embedder):
    from docmind_core.values import RetrievedChunk

    retriever = world["retriever"]
    settings = Settings()
    a = retriever.keyword_candidates("DM-3000 warranty", [world["products"]], 5)
    b = retriever.vector_candidates("DM-3000 warranty", [world["products"]], 5)
    web = RetrievedChunk(chunk_id="web:1", origin="web", url="https://example.org", document="Example",
                         text="DM-3000 pumps have a two year warranty according to the vendor.")
    refiner = EvidenceRefiner(world["store"], OfflineReranker(embedder))
    result = refiner.refine("DM-3000 warranty", a + b + [web], settings)
    ids = [c.chunk_id for c in result.candidates]
    assert len(ids) == len(set(ids))
    merged = [c for c in result.candidates if set(c.found_by) == {"vector", "keyword"}]
    assert merged, "a chunk found by both retrievers carries both names"
    web_out = next(c for c in result.candidates if c.origin == "web")
    assert web_out.scores.rerank is not None and web_out.scores.rerank > 0.5


def test_a_kb_of_another_encoder_gets_no_vector_side(world, embedder):
    """Its vectors are in another space: keyword only, reported with the fix, and the strict check refuses."""
    store = world["store"]
    odd = store.create_kb("indexed-elsewhere", "st:some-other-model", 384)
    result = world["retriever"].search("pump", [odd.id], Settings())
    assert result.chunks == []
    [gap] = result.index_gaps
    assert gap.built_with == "st:some-other-model" and gap.live_encoder == embedder.id
    assert "keyword only" in gap.message() and "docmind kb reindex indexed-elsewhere" in gap.message()
    assert world["retriever"].vector_kbs([odd.id]) == []
    with pytest.raises(EmbedderMismatch, match="docmind kb reindex indexed-elsewhere"):
        world["retriever"].check_embedder([odd.id])


def test_lexical_vectors_see_duplicates():
    v = lexical_vectors(["the pump filter", "the pump filter", "星河净水器"])
    assert np.isclose(v[0] @ v[1], 1.0) and v[0] @ v[2] < 0.1


@pytest.mark.slow  # the docmind CLI on a real engine
def test_cli_search_shows_per_stage_scores(home, tmp_path):
    import json

    from click.testing import CliRunner

    from docmind_core.cli import cli

    docs = tmp_path / "docs"
    write_texts(docs, PRODUCT_DOCS)
    runner = CliRunner()
    out = runner.invoke(cli, ["--home", str(home), "ingest", str(docs), "--kb", "demo", "--no-progress"])
    assert out.exit_code == 0, out.output
    out = runner.invoke(cli, ["--home", str(home), "search", "X5 的滤芯多久更换一次？", "--kb", "demo", "--json"])
    assert out.exit_code == 0, out.output
    result = json.loads(out.output)
    assert result["chunks"][0]["document"] == "产品说明.txt"
    assert {"vector", "keyword", "fused", "rerank", "mmr"} <= set(result["chunks"][0]["scores"])
    out = runner.invoke(cli, ["--home", str(home), "search", "DM-3000 warranty", "--kb", "demo"])
    assert out.exit_code == 0 and "rerank" in out.output and "aquapump-manual.md" in out.output
    out = runner.invoke(cli, ["--home", str(home), "search", "pump", "--kb", "missing"])
    assert out.exit_code != 0 and "no knowledge base named 'missing'" in out.output


def test_crosses_language_reads_the_question_against_its_best_dense_hits():
    from docmind_core.retrieval.hybrid import crosses_language

    english = ["The AquaPump DM-3000 is a quiet garden pump.", "Its warranty period is two years."]
    chinese = ["星河净水器 X5 的滤芯每六个月更换一次。", "X5 的额定功率为 48 瓦。"]
    assert crosses_language("水泵的保修期是多久？", english + chinese[:1])
    assert crosses_language("How often is the X5 filter replaced?", chinese)
    assert not crosses_language("How long is the pump warranty?", english)
    assert not crosses_language("X5 的滤芯多久更换一次？", chinese + english[:1])
    assert not crosses_language("水泵的保修期是多久？", english[:1])  # one hit says too little


def _fused(world, question, weight, doc_ids=None):
    settings = Settings().with_overrides({"retrieval.cross_language_vector_weight": weight})
    return {c.chunk_id: c.scores.fused
            for c in world["retriever"].candidates(question, [world["products"]], settings, doc_ids=doc_ids)}


def test_a_cross_language_question_lets_the_dense_side_lead_and_a_same_language_one_is_unchanged(world):
    """The keyword side cannot match across languages: fusion weighs the dense side up only then."""
    same = "How long is the warranty of the DM-3000?"
    assert _fused(world, same, 0.15) == _fused(world, same, 0.9)
    english = [d.id for d in world["store"].list_documents(world["products"]) if d.name.endswith(".md")]
    across = "水泵的进水过滤网应该多久冲洗一次？"  # a Chinese question over the English documents only
    off, on = _fused(world, across, 0.15, english), _fused(world, across, 0.9, english)
    assert off and off != on
