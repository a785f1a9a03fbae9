"""The refining pass: one union of candidates in, the context out (every answer path ends here).

``EvidenceRefiner`` takes any union of candidates (one search, several tool
calls, web results) and: dedupes by chunk id -> reranks the whole union on one
[0, 1] scale -> MMR down to ``retrieval.final_top_k`` -> parent expansion ->
query-aware compression to ``rag.context_max_tokens``.  Every candidate comes
back in ``SearchResult.candidates`` with its stage scores and ``cut_by``:

* ``fusion``  beyond ``rerank_top_n`` after fusion (never reranked)
* ``rerank``  reranked, but below ``final_top_k`` in the final order (``final_relevance``)
* ``mmr``     within the top ``final_top_k`` of that order, displaced for redundancy
* ``merged``  a sibling folded into the parent block of a better-ranked chunk
* ``budget``  dropped by compression
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Sequence

import numpy as np

from docmind_core.backends.protocols import Reranker, rerank_scores
from docmind_core.text.tokens import chunk_terms
from docmind_core.deadline import elapsed_ms
from docmind_core.errors import StageError
from docmind_core.values import CutBy, RetrievedChunk, SearchResult, StageScores
from docmind_core.retrieval.compress import compress_to_budget
from docmind_core.retrieval.expand import expand_to_parents
from docmind_core.retrieval.fusion import min_max
from docmind_core.retrieval.mmr import mmr_select

if TYPE_CHECKING:
    from docmind_core.settings import Settings
    from docmind_core.store.kb_store import KnowledgeStore


def final_relevance(rerank: Sequence[float], fused: Sequence[float | None], fusion_weight: float) -> list[float]:
    """The relevance the final order (and MMR) reads: each reranker probability with its log-odds moved by
    ``fusion_weight * (f - 1)``, ``f`` the chunk's fused score min-max scaled over the pool.

    The best-fused chunk keeps its reranker score; the others give up to ``fusion_weight`` log-odds.  With the
    bundled encoder the reranker alone ordered SciFact and HotpotQA below fusion alone, and fusion alone loses
    the cross-language questions; the weight is fitted over both (bench/rerank_blend.py).  A chunk no fusion
    scored (a web result, a memory) counts the pool's mean, so it is neither lifted nor sunk.  The grader reads
    the reranker's own probability, not this.
    """
    if fusion_weight <= 0 or not rerank:
        return [float(s) for s in rerank]
    present = [i for i, f in enumerate(fused) if f is not None]
    scaled = dict(zip(present, min_max([float(fused[i]) for i in present])))
    neutral = sum(scaled.values()) / len(scaled) if scaled else 1.0
    out: list[float] = []
    for i, p in enumerate(rerank):
        p = min(max(float(p), 1e-9), 1.0 - 1e-9)
        z = math.log(p / (1.0 - p)) + fusion_weight * (scaled.get(i, neutral) - 1.0)
        out.append(1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z)))))
    return out


def final_order(rerank: Sequence[float], fused: Sequence[float | None],
                fusion_weight: float) -> tuple[list[int], list[float]]:
    """(positions best first, each position's ``final_relevance``): ties go to the better fused score, then to
    the earlier position."""
    relevance = final_relevance(rerank, fused, fusion_weight)
    order = sorted(range(len(relevance)), key=lambda i: (-relevance[i], -(fused[i] or 0.0), i))
    return order, relevance


def lexical_vectors(texts: Sequence[str], stored_terms: Sequence[str | None] | None = None) -> np.ndarray:
    """Binary term and adjacent-term-pair vectors over the batch's own vocabulary, L2-normalised: a
    cheap redundancy signal for MMR (no encoder call; overlapping windows of one passage come out near 1).

    ``stored_terms`` are the chunks' ingest-time tokens (``RetrievedChunk.terms``), so nothing is re-tokenised.
    """
    stored = list(stored_terms) if stored_terms is not None else [None] * len(texts)
    keys: list[np.ndarray] = []
    for text, kept in zip(texts, stored):
        terms, pairs, _lower = chunk_terms(text, kept)  # cached: the reranker just read these same chunks
        # adjacent-term pairs tell a near-duplicate from a chunk on the same topic; Python's 64-bit
        # string hashes stand in for the features (a clash within one batch is vanishingly unlikely)
        keys.append(np.fromiter(map(hash, (*terms, *pairs)), dtype=np.int64, count=len(terms) + len(pairs)))
    lengths = [len(k) for k in keys]
    if not sum(lengths):
        return np.zeros((len(texts), 1), dtype=np.float32)
    _unique, columns = np.unique(np.concatenate(keys), return_inverse=True)
    out = np.zeros((len(texts), len(_unique)), dtype=np.float32)
    out[np.repeat(np.arange(len(texts)), lengths), columns.ravel()] = 1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return out / norms


def _dedupe(chunks: Sequence[RetrievedChunk]) -> list[RetrievedChunk]:
    """One entry per chunk id, keeping the first occurrence and merging what later ones add."""
    seen: dict[str, int] = {}
    out: list[RetrievedChunk] = []
    for chunk in chunks:
        key = chunk.chunk_id or chunk.url or chunk.text
        if key not in seen:
            seen[key] = len(out)
            out.append(chunk)
            continue
        first = out[seen[key]]
        a, b = first.scores, chunk.scores
        merged = StageScores(
            vector=a.vector if a.vector is not None else b.vector,
            keyword=a.keyword if a.keyword is not None else b.keyword,
            vector_rank=a.vector_rank if a.vector_rank is not None else b.vector_rank,
            keyword_rank=a.keyword_rank if a.keyword_rank is not None else b.keyword_rank,
            fused=max((x for x in (a.fused, b.fused) if x is not None), default=None))
        alive = first.cut_by is None or chunk.cut_by is None  # kept by any source stays in play
        out[seen[key]] = first.model_copy(update={
            "scores": merged, "found_by": list(dict.fromkeys(first.found_by + chunk.found_by)),
            "kept": alive, "cut_by": None if alive else first.cut_by})
    return out


class EvidenceRefiner:
    """dedupe -> rerank -> MMR -> parent expansion -> compression, recording each stage on every candidate."""

    def __init__(self, store: KnowledgeStore | None, reranker: Reranker):
        # store None: no parent expansion (evaluation over bare chunks)
        self.store = store
        self.reranker = reranker

    def refine(self, query: str, chunks: Sequence[RetrievedChunk], settings: Settings) -> SearchResult:
        r, budget = settings.retrieval, settings.rag.context_max_tokens
        timings: dict[str, float] = {}
        union = _dedupe(chunks)
        pool = [c for c in union if c.cut_by is None]
        fusion_cut = [c if not c.kept else c.model_copy(update={"kept": False}) for c in union if c.cut_by is not None]

        start = time.perf_counter()
        try:
            scores, across = rerank_scores(self.reranker, query, pool) if pool else ([], [])
        except Exception as exc:
            raise StageError("rerank", exc) from exc
        pool = [c.model_copy(update={"scores": c.scores.model_copy(update={"rerank": round(float(s), 6),
                                                                          "rerank_across": bool(x)})})
                for c, s, x in zip(pool, scores, across)]
        order, relevance = final_order([c.scores.rerank for c in pool], [c.scores.fused for c in pool],
                                       r.rerank_fusion_weight)
        pool, relevance = [pool[i] for i in order], [relevance[i] for i in order]
        timings["rerank"] = elapsed_ms(start)

        start = time.perf_counter()
        picks = mmr_select(None, pool, lexical_vectors([c.text for c in pool], [c.terms for c in pool]),
                           r.mmr_lambda, r.final_top_k, relevance=relevance)
        picked = {p.index for p in picks}
        selected = [pool[p.index].model_copy(update={
            "scores": pool[p.index].scores.model_copy(update={"mmr": round(p.mmr, 6)})}) for p in picks]
        not_picked = [c.model_copy(update={"kept": False,
                                           "cut_by": CutBy.RERANK if i >= r.final_top_k else CutBy.MMR})
                      for i, c in enumerate(pool) if i not in picked]
        timings["mmr"] = elapsed_ms(start)

        start = time.perf_counter()
        merged: list[RetrievedChunk] = []
        if r.parent_expansion and self.store is not None:
            # Hydrated chunks already know their parent's id: one lookup instead of parent_of's two.
            with_parent = [c for c in selected if c.origin == "kb" and c.parent_id]
            records = self.store.get_chunks(c.parent_id for c in with_parent) if with_parent else {}
            parents = {c.chunk_id: records[c.parent_id] for c in with_parent if c.parent_id in records}
            expansion = expand_to_parents(selected, parents, budget)
            selected = expansion.chunks
            merged = [c.model_copy(update={"kept": False, "cut_by": CutBy.MERGED}) for c in expansion.merged]
        timings["expand"] = elapsed_ms(start)

        start = time.perf_counter()
        compression = compress_to_budget(query, selected, budget)
        timings["compress"] = elapsed_ms(start)

        kept = [c if c.kept and c.cut_by is None else c.model_copy(update={"kept": True, "cut_by": None})
                for c in compression.chunks]
        candidates = kept + compression.dropped + merged + not_picked + fusion_cut
        return SearchResult(query=query, chunks=kept, candidates=candidates, timings_ms=timings,
                            used_tokens=compression.used_tokens)
