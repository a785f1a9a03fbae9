"""Parent expansion: give the answer model the surrounding block, not just the matched window.

Child chunks are small so retrieval is precise; their parent blocks are larger
so the answer has context.  Walking the kept chunks best first:

* siblings that share a parent collapse into one entry (the best-ranked child's
  id, the best scores of the group, ``found_by`` merged);
* an entry's text becomes its parent block when the total stays within the
  token budget (``expanded=True``, offsets become the parent's); otherwise the
  child text stays.

Merged-away siblings are returned separately so the caller can mark them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from docmind_core.values import ChunkRecord, RetrievedChunk, StageScores
from docmind_core.text.tokens import count_tokens


@dataclass
class Expansion:
    chunks: list[RetrievedChunk]
    merged: list[RetrievedChunk] = field(default_factory=list)  # siblings folded into a kept entry


def _best(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


def _merge_scores(a: StageScores, b: StageScores) -> StageScores:
    return StageScores(
        vector=_best(a.vector, b.vector), keyword=_best(a.keyword, b.keyword),
        vector_rank=min((r for r in (a.vector_rank, b.vector_rank) if r is not None), default=None),
        keyword_rank=min((r for r in (a.keyword_rank, b.keyword_rank) if r is not None), default=None),
        fused=_best(a.fused, b.fused), rerank=_best(a.rerank, b.rerank),
        rerank_across=a.rerank_across or b.rerank_across, mmr=a.mmr if a.mmr is not None else b.mmr)


def expand_to_parents(chunks: Sequence[RetrievedChunk], parents: dict[str, ChunkRecord],
                      max_tokens: int) -> Expansion:
    """``parents`` maps child chunk id -> parent block (as ``KnowledgeStore.parent_of`` returns).

    Siblings are folded together only when their parent replaces them, so no
    child text is ever lost to a merge that did not happen.
    """
    groups: list[list[RetrievedChunk]] = []
    by_parent: dict[str, int] = {}
    for chunk in chunks:
        parent = parents.get(chunk.chunk_id) if chunk.origin == "kb" else None
        if parent is not None and parent.id in by_parent:
            groups[by_parent[parent.id]].append(chunk)
            continue
        if parent is not None:
            by_parent[parent.id] = len(groups)
        groups.append([chunk])

    used = sum(count_tokens(c.text) for c in chunks)
    expand: set[int] = set()
    for g, group in enumerate(groups):  # best-ranked group first gets the budget
        parent = parents.get(group[0].chunk_id) if group[0].origin == "kb" else None
        if parent is None:
            continue
        extra = parent.token_count - sum(count_tokens(c.text) for c in group)  # stored at ingest: no recount
        if used + extra <= max_tokens:
            expand.add(g)
            used += extra

    out: list[RetrievedChunk] = []
    merged: list[RetrievedChunk] = []
    for g, group in enumerate(groups):
        if g not in expand:
            out.extend(group)
            continue
        head, parent = group[0], parents[group[0].chunk_id]
        scores, found_by = head.scores, list(head.found_by)
        for sibling in group[1:]:
            scores = _merge_scores(scores, sibling.scores)
            found_by = list(dict.fromkeys(found_by + sibling.found_by))
            merged.append(sibling)
        out.append(head.model_copy(update={
            "text": parent.text, "terms": None, "start": parent.start, "end": parent.end, "parent_id": parent.id,
            "expanded": True, "scores": scores, "found_by": found_by}))
    return Expansion(out, merged)
