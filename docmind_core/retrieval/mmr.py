"""Maximal marginal relevance: pick chunks that are relevant but not repeats of each other.

Each step takes the candidate maximising

    lambda * relevance(c) - (1 - lambda) * max_{s in selected} cos(c, s)

where relevance is the candidate's rerank score when it has one (the reranker's
[0, 1] scale is what the rest of the pipeline trusts), else the cosine to the
query.  ``lambda_ = 1`` keeps the relevance order exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class MmrPick:
    index: int  # position in the input list
    mmr: float  # the marginal score at the moment it was picked


def mmr_select(query_vec: np.ndarray | None, chunks: Sequence, chunk_vecs: np.ndarray, lambda_: float,
               k: int, relevance: Sequence[float] | None = None) -> list[MmrPick]:
    """Indices (into ``chunks``) of at most ``k`` picks, in pick order, with their MMR scores.

    ``relevance`` overrides the per-chunk relevance; when it is None the chunk's
    ``scores.rerank`` is used, and failing that the cosine to ``query_vec``.
    """
    if not 0.0 <= lambda_ <= 1.0:
        raise ValueError("mmr lambda must be within [0, 1]")
    n = len(chunks)
    if n == 0 or k <= 0:
        return []
    vecs = np.asarray(chunk_vecs, dtype=np.float32)
    if vecs.shape[0] != n:
        raise ValueError(f"{n} chunks but {vecs.shape[0]} vectors")
    rel = _relevance(query_vec, chunks, vecs, relevance)
    sim = vecs @ vecs.T
    chosen: list[MmrPick] = []
    max_sim = np.full(n, -np.inf, dtype=np.float64)
    available = np.ones(n, dtype=bool)
    for _ in range(min(k, n)):
        redundancy = np.where(np.isfinite(max_sim), max_sim, 0.0)
        marginal = lambda_ * rel - (1.0 - lambda_) * redundancy
        marginal[~available] = -np.inf
        best = int(np.argmax(marginal))  # argmax takes the first maximum: ties keep input order
        chosen.append(MmrPick(best, float(marginal[best])))
        available[best] = False
        max_sim = np.maximum(max_sim, sim[best])
    return chosen


def _relevance(query_vec, chunks, vecs, relevance) -> np.ndarray:
    if relevance is not None:
        if len(relevance) != len(chunks):
            raise ValueError("relevance must have one value per chunk")
        return np.asarray(relevance, dtype=np.float64)
    out = np.zeros(len(chunks), dtype=np.float64)
    cos = None
    for i, chunk in enumerate(chunks):
        scores = getattr(chunk, "scores", None)
        value = getattr(scores, "rerank", None) if scores is not None else None
        if value is None:
            if query_vec is None:
                raise ValueError("mmr needs a query vector when chunks carry no rerank score")
            if cos is None:
                cos = vecs @ np.asarray(query_vec, dtype=np.float32).reshape(-1)
            value = float(cos[i])
        out[i] = value
    return out
