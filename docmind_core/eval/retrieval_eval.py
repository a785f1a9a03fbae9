"""Retrieval evaluation on BEIR-format folders, through the product's own stores and retriever.

For one dataset this builds a throw-away knowledge base in a temp directory
(SQLite chunks + the configured keyword index + Chroma, exactly the classes the
app uses), loads cached chunk embeddings (see ``beir.EmbeddingCache``), and runs
each system over every judged query:

* ``bm25``          keyword index alone
* ``vector``        vector store alone
* ``hybrid``        ``HybridRetriever.candidates`` (fusion as configured)
* ``hybrid_rerank`` hybrid, then the configured reranker over the first
                    ``retrieval.rerank_top_n`` fused chunks (the rest keep fusion order)

Chunks are ranked; a document's rank is that of its best chunk.  Metrics:
nDCG@10 (gain = the grade, as trec_eval and BEIR; log2 discount, ideal from the qrels), Recall@5/10/100,
MRR@10, and with answers, chunk-level answer recall@k: a top-k chunk contains
one of the gold answer strings.
"""

from __future__ import annotations

import math
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from docmind_core.backends.embedders import query_vectors
from docmind_core.backends.protocols import IndexedChunk
from docmind_core.eval.beir import (BeirDataset, EmbeddingCache, chunk_corpus, corpus_cache_key, load_beir,
                                    queries_cache_key)
from docmind_core.values import ChunkRecord, RetrievedChunk
from docmind_core.text.tokens import count_tokens, stored_terms

SYSTEMS = ("bm25", "vector", "hybrid", "hybrid_rerank")


# --------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------

def _positive(relevant: dict[str, int]) -> dict[str, int]:
    return {d: g for d, g in relevant.items() if g > 0}


def ndcg_at_k(ranked: Sequence[str], relevant: dict[str, int], k: int) -> float:
    """Gains are the grades themselves (trec_eval's ndcg_cut, which BEIR reports), not 2^grade - 1."""
    gains = _positive(relevant)
    dcg = sum(gains.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(gains.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at_k(ranked: Sequence[str], relevant: dict[str, int], k: int) -> float:
    gains = _positive(relevant)
    if not gains:
        return 0.0
    return len(set(ranked[:k]) & set(gains)) / len(gains)


def mrr_at_k(ranked: Sequence[str], relevant: dict[str, int], k: int) -> float:
    gains = _positive(relevant)
    for i, d in enumerate(ranked[:k]):
        if d in gains:
            return 1.0 / (i + 1)
    return 0.0


def answer_hit_at_k(chunk_texts: Sequence[str], answers: Sequence[str], k: int) -> float:
    wanted = [a.strip() for a in answers if a and a.strip()]
    return 1.0 if any(a in text for text in chunk_texts[:k] for a in wanted) else 0.0


def docs_from_chunks(chunk_doc_ids: Sequence[str]) -> list[str]:
    """Document ranking from a chunk ranking: each document at the rank of its best chunk."""
    return list(dict.fromkeys(chunk_doc_ids))


@dataclass
class SystemScores:
    values: dict[str, list[float]] = field(default_factory=dict)
    seconds: float = 0.0

    def add(self, name: str, value: float) -> None:
        self.values.setdefault(name, []).append(value)

    def summary(self) -> dict[str, float]:
        out = {name: round(float(np.mean(v)), 4) for name, v in self.values.items()}
        n = len(next(iter(self.values.values()), []))
        out["queries"] = n
        out["ms_per_query"] = round(1000.0 * self.seconds / max(1, n), 2)
        return out


# --------------------------------------------------------------------------
# The throw-away index
# --------------------------------------------------------------------------

class _PrecomputedQueries:
    """The embedder, but serving query vectors computed (and cached) up front."""

    def __init__(self, embedder, vectors: dict[str, np.ndarray]):
        self._embedder = embedder
        self._vectors = vectors
        self.id = embedder.id
        self.dim = embedder.dim

    def embed(self, texts):
        return self._embedder.embed(texts)

    def embed_query(self, texts):
        if len(texts) == 1 and texts[0] in self._vectors:
            return self._vectors[texts[0]][None, :]
        return query_vectors(self._embedder, texts)

    def status(self):
        return self._embedder.status()


@dataclass
class EvalIndex:
    dataset: BeirDataset
    retriever: object
    reranker: object
    kb_id: int
    beir_of_doc: dict[int, str]  # our document id -> BEIR document id
    seconds_embed: float = 0.0
    seconds_index: float = 0.0


def build_index(dataset: BeirDataset, workdir: Path, embedder, settings, cache: EmbeddingCache,
                progress: Callable[[str], None] | None = None) -> EvalIndex:
    from docmind_core.backends.factory import build_keyword_index, build_reranker
    from docmind_core.backends.vector_store import ChromaVectorStore
    from docmind_core.retrieval.hybrid import HybridRetriever
    from docmind_core.retrieval.refine import EvidenceRefiner
    from docmind_core.store.db import Database
    from docmind_core.store.kb_store import KnowledgeStore

    say = progress or (lambda _msg: None)
    max_tokens, overlap = settings.rag.chunk_tokens, settings.rag.chunk_overlap_tokens
    chunks = chunk_corpus(dataset, max_tokens, overlap)
    start = time.perf_counter()
    say(f"embedding {len(chunks)} chunks (cached after the first run)")
    vectors = cache.get_or_compute(embedder.id, corpus_cache_key(dataset, max_tokens, overlap),
                                   [c.text for c in chunks], embedder.embed,
                                   progress=lambda a, b: say(f"embedded {a}/{b}"))
    qvecs = cache.get_or_compute(embedder.id, queries_cache_key(dataset), [q.text for q in dataset.queries],
                                 lambda texts: query_vectors(embedder, texts))
    seconds_embed = time.perf_counter() - start

    start = time.perf_counter()
    db = Database(workdir / "eval.db")
    store = KnowledgeStore(db)
    kb = store.create_kb(f"eval-{dataset.name}", embedder.id, embedder.dim)
    by_doc: dict[str, list[int]] = {}
    for i, c in enumerate(chunks):
        by_doc.setdefault(c.doc_id, []).append(i)
    records: list[ChunkRecord] = []
    indexed: list[IndexedChunk] = []
    beir_of_doc: dict[int, str] = {}
    used_names: set[str] = set()
    for beir_id, (title, text) in dataset.corpus.items():
        body = f"{title}\n{text}" if title else text
        # the document is named by its title, as an ingested file is by its name (the reranker reads it)
        name = title.strip() or beir_id
        if name in used_names:
            name = f"{name} ({beir_id})"
        used_names.add(name)
        doc_id = store.begin_document(kb.id, name, source_path="", content_hash=beir_id, mime="text/plain",
                                      size=len(body), text=body)
        beir_of_doc[doc_id] = beir_id
        for n, i in enumerate(by_doc.get(beir_id, [])):
            c = chunks[i]
            terms = stored_terms(c.text)  # tokenised once, as the Ingestor does
            records.append(ChunkRecord(id=c.chunk_id, kb_id=kb.id, doc_id=doc_id, index=n, text=c.text,
                                       token_count=count_tokens(c.text), start=0, end=len(c.text), terms=terms))
            indexed.append(IndexedChunk(c.chunk_id, kb.id, doc_id, c.text, terms))
    store.add_chunks(records)
    store.set_kb_documents_status(kb.id, "complete")
    say("indexing keywords")
    keyword_index = build_keyword_index(settings, db)
    keyword_index.add(indexed)
    say("indexing vectors")
    vector_store = ChromaVectorStore(path=workdir / "chroma")
    vector_store.add(indexed, vectors)
    store.set_chunk_vectors([c.chunk_id for c in indexed], vectors)  # as the Ingestor keeps them
    seconds_index = time.perf_counter() - start

    query_embedder = _PrecomputedQueries(embedder, {q.text: v for q, v in zip(dataset.queries, qvecs)})
    reranker, _note = build_reranker(settings, query_embedder)
    refiner = EvidenceRefiner(store, reranker)
    retriever = HybridRetriever(store, query_embedder, vector_store, keyword_index, refiner)
    return EvalIndex(dataset, retriever, reranker, kb.id, beir_of_doc, seconds_embed, seconds_index)


# --------------------------------------------------------------------------
# Running the systems
# --------------------------------------------------------------------------

def rank_chunks(index: EvalIndex, system: str, query: str, settings, depth: int) -> list[RetrievedChunk]:
    retriever = index.retriever
    kb = [index.kb_id]
    if system == "bm25":
        return retriever.keyword_candidates(query, kb, depth)
    if system == "vector":
        return retriever.vector_candidates(query, kb, depth)
    fused = retriever.candidates(query, kb, settings)
    if system == "hybrid":
        return fused
    if system == "hybrid_rerank":
        return reranked(index.reranker, query, fused, settings)
    raise ValueError(f"unknown system {system!r}; choose from {', '.join(SYSTEMS)}")


def reranked(reranker, query: str, fused: Sequence[RetrievedChunk], settings) -> list[RetrievedChunk]:
    """The fused list with its head (``retrieval.rerank_top_n``) in the final order the refining pass gives it
    (``refine.final_order``: the reranker, keeping ``retrieval.rerank_fusion_weight`` of fusion), before MMR."""
    from docmind_core.retrieval.refine import final_order

    head, tail = list(fused[:settings.retrieval.rerank_top_n]), list(fused[settings.retrieval.rerank_top_n:])
    order, _relevance = final_order(reranker.score(query, head), [c.scores.fused for c in head],
                                    settings.retrieval.rerank_fusion_weight)
    return [head[i] for i in order] + tail


def evaluate(index: EvalIndex, systems: Sequence[str], settings, k: int = 10, answers: bool = False,
             depth: int = 100, answer_ks: Sequence[int] = (1, 5, 10)) -> dict[str, dict[str, float]]:
    # deep enough candidate lists for Recall@100; fusion and reranking still follow the settings
    deep = settings.with_overrides({
        "retrieval.vector_top_k": max(settings.retrieval.vector_top_k, depth),
        "retrieval.keyword_top_k": max(settings.retrieval.keyword_top_k, depth)})
    results: dict[str, dict[str, float]] = {}
    for system in systems:
        scores = SystemScores()
        start = time.perf_counter()
        for q in index.dataset.queries:
            ranked = rank_chunks(index, system, q.text, deep, depth)
            docs = docs_from_chunks([index.beir_of_doc.get(c.doc_id, "") for c in ranked])
            rel = index.dataset.qrels.get(q.id, {})
            scores.add(f"ndcg@{k}", ndcg_at_k(docs, rel, k))
            for cut in (5, 10, 100):
                scores.add(f"recall@{cut}", recall_at_k(docs, rel, cut))
            scores.add(f"mrr@{k}", mrr_at_k(docs, rel, k))
            if answers and q.answers:
                texts = [c.text for c in ranked]
                for cut in answer_ks:
                    scores.add(f"answer_recall@{cut}", answer_hit_at_k(texts, q.answers, cut))
        scores.seconds = time.perf_counter() - start
        results[system] = scores.summary()
    return results


def run_retrieval_eval(dataset_dir: Path, embedder, settings, cache_dir: Path, systems: Sequence[str] = SYSTEMS,
                       k: int = 10, limit: int | None = None, answers: bool = False,
                       progress: Callable[[str], None] | None = None) -> dict:
    """The whole evaluation; returns ``{"dataset": ..., "systems": {...}, ...}``."""
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        raise ValueError(f"unknown system(s) {', '.join(unknown)}; choose from {', '.join(SYSTEMS)}")
    dataset = load_beir(Path(dataset_dir), limit=limit)
    with tempfile.TemporaryDirectory(prefix="docmind-eval-") as tmp:
        index = build_index(dataset, Path(tmp), embedder, settings, EmbeddingCache(cache_dir), progress)
        systems_out = evaluate(index, systems, settings, k=k, answers=answers)
        chunk_count = len(dataset.chunks)
        # drop the stores before the temp dir goes (Chroma keeps files open)
        del index
    return {
        "dataset": dataset.name, "queries": len(dataset.queries), "documents": len(dataset.corpus),
        "chunks": chunk_count, "embedder": embedder.id,
        "settings": {key: settings.get(key) for key in (
            "retrieval.fusion", "retrieval.vector_weight", "retrieval.keyword_weight", "retrieval.rrf_k",
            "retrieval.rerank_top_n", "rag.chunk_tokens", "rag.chunk_overlap_tokens", "keyword.backend",
            "keyword.english_stemming", "reranker.provider", "reranker.cross_language",
            "retrieval.rerank_fusion_weight")},
        "systems": systems_out,
    }
