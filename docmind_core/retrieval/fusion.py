"""Fusing ranked lists from several retrievers into one ranking.

Two fusions, both weighted per retriever:

* ``rrf_fuse`` — reciprocal rank fusion, ``sum_i w_i / (k + rank_i)``.  It only
  sees ranks, so a retriever whose scores are weak everywhere still pushes its
  top items as hard as a confident one.
* ``convex_fuse`` — min-max normalise each list's scores to [0, 1] and take the
  weighted sum.  It keeps how far apart the scores are, which is why it beats
  RRF with the bundled encoder (see bench/RESULTS.md).  An item missing from a
  list contributes 0 for that list.

A list is a sequence of ``(item_id, score)`` best first; the result is
``[(item_id, fused_score)]`` best first, ties broken by first appearance.
"""

from __future__ import annotations

from typing import Hashable, Sequence

RankedList = Sequence[tuple[Hashable, float]]


def _check(lists: Sequence[RankedList], weights: Sequence[float] | None) -> list[float]:
    if weights is None:
        return [1.0] * len(lists)
    if len(weights) != len(lists):
        raise ValueError(f"{len(lists)} ranked lists but {len(weights)} weights")
    if any(w < 0 for w in weights):
        raise ValueError("fusion weights must not be negative")
    return [float(w) for w in weights]


def _ordered(scores: dict[Hashable, float], first_seen: dict[Hashable, int]) -> list[tuple[Hashable, float]]:
    return sorted(scores.items(), key=lambda kv: (-kv[1], first_seen[kv[0]]))


def rrf_fuse(lists: Sequence[RankedList], weights: Sequence[float] | None = None,
             k: int = 60) -> list[tuple[Hashable, float]]:
    """Weighted reciprocal rank fusion; ranks start at 1."""
    if k < 0:
        raise ValueError("rrf k must be >= 0")
    ws = _check(lists, weights)
    scores: dict[Hashable, float] = {}
    first_seen: dict[Hashable, int] = {}
    for w, ranked in zip(ws, lists):
        seen_here: set = set()
        for rank, (item, _score) in enumerate(ranked, start=1):
            if item in seen_here:  # a duplicate inside one list counts once, at its best rank
                continue
            seen_here.add(item)
            first_seen.setdefault(item, len(first_seen))
            scores[item] = scores.get(item, 0.0) + w / (k + rank)
    return _ordered(scores, first_seen)


def min_max(values: Sequence[float]) -> list[float]:
    """Scale to [0, 1]; a list whose scores are all equal maps to 1.0 (every item is the best it has)."""
    if not values:
        return []
    lo, hi = min(values), max(values)
    if hi - lo <= 1e-12:
        return [1.0] * len(values)
    return [(v - lo) / (hi - lo) for v in values]


def convex_fuse(lists: Sequence[RankedList], weights: Sequence[float] | None = None) -> list[tuple[Hashable, float]]:
    """Weighted sum of per-list min-max normalised scores."""
    ws = _check(lists, weights)
    scores: dict[Hashable, float] = {}
    first_seen: dict[Hashable, int] = {}
    for w, ranked in zip(ws, lists):
        best: dict[Hashable, float] = {}
        for item, score in ranked:
            if item not in best or score > best[item]:
                best[item] = float(score)
        items = list(best)
        for item, norm in zip(items, min_max([best[i] for i in items])):
            first_seen.setdefault(item, len(first_seen))
            scores[item] = scores.get(item, 0.0) + w * norm
    return _ordered(scores, first_seen)
