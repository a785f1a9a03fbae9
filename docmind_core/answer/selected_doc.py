"""SELECTED_DOC path: read the user's chosen documents directly, no search, and grade what was read.

Chunks come in document order; when a document does not fit its share of the
token budget, chunks are sampled evenly so the head, the middle and the tail are
all represented (a summary needs every part, not just the best-matching one).
All chunks are kept: the user chose these documents.  A request about the
documents as a whole (a summary, an overview) has its relevance given by that
choice (tier HIGH).  A question asked of them is graded like retrieved evidence
(top rerank score and lexical coverage): the chosen document may simply not hold
the answer, and the tier must say so.  Neither asks for web compensation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Generator, Sequence

from docmind_core.answer.grade import CragGrader
from docmind_core.answer.run_context import RunContext
from docmind_core.backends.protocols import Reranker, rerank_scores
from docmind_core.events import Event, Graded, Reranked, Retrieved
from docmind_core.values import ChunkRecord, GradeResult, Mode, RetrievedChunk, StageScores, Tier
from docmind_core.text.tokens import truncate_to_tokens

if TYPE_CHECKING:
    from docmind_core.store.kb_store import KnowledgeStore


# How a graded question's reason starts, so a stored run tells a graded tier from a given one.
QUESTION_GRADED = "a question about the selected documents, graded on what they hold"


@dataclass
class SelectedDocReading:
    sources: list[RetrievedChunk]
    grade: GradeResult


class SelectedDocPath:
    """Reads the selected documents (minus excluded ones) within the context budget, scores and grades them."""

    def __init__(self, store: KnowledgeStore | None, reranker: Reranker, grader: CragGrader):
        self.store = store  # None: the pipeline has no documents to read (evaluation over bare chunks)
        self.reranker = reranker
        self.grader = grader

    def read(self, query: str, doc_ids: Sequence[int], run: RunContext,
             question: bool = False) -> Generator[Event, None, SelectedDocReading]:
        """``question``: the user asks something of the documents (graded); otherwise a request about them
        as a whole (a summary), whose relevance the choice of documents gives.  The run's excluded documents
        are never read."""
        settings, excluded = run.settings, run.exclude_doc_ids
        wanted = [d for d in doc_ids if d not in excluded][: settings.rag.selected_doc_max]
        chunks = read_selected_documents(self.store, wanted, settings.rag.context_max_tokens)
        yield Retrieved(mode=Mode.SELECTED_DOC, candidate_count=len(chunks), kb_chunks=len(chunks))
        scores, across = rerank_scores(self.reranker, query, chunks) if chunks else ([], [])
        scored = [c.model_copy(update={"scores": c.scores.model_copy(update={"rerank": s, "rerank_across": x})})
                  for c, s, x in zip(chunks, scores, across)]
        yield Reranked(candidates=scored, reranker=self.reranker.name)
        if question and scored:
            graded = self.grader.grade(query, scored, settings.grader, web_compensation_on_low=False)
            grade = graded.model_copy(update={
                "web_compensation_needed": False,
                "reason": f"{QUESTION_GRADED}: {graded.reason}"})
        else:
            grade = GradeResult(
                tier=Tier.HIGH if scored else Tier.LOW, top_score=max(scores, default=0.0),
                lex_coverage=1.0 if scored else 0.0, kb_entity_weak=False, web_compensation_needed=False,
                reason="the selected documents are read directly; their relevance is given by the user's choice"
                if scored else "the selected documents have no text")
        yield Graded(grade=grade)
        return SelectedDocReading(scored, grade)


def evenly_spaced(count: int, take: int) -> list[int]:
    """``take`` indices spread over ``range(count)``, always including the first and the last."""
    if take >= count:
        return list(range(count))
    if take <= 0:
        return []
    if take == 1:
        return [0]
    step = (count - 1) / (take - 1)
    return sorted({round(i * step) for i in range(take)})


def sample_within_budget(chunks: Sequence[ChunkRecord], budget: int) -> list[ChunkRecord]:
    """The largest evenly spaced subset of ``chunks`` whose tokens fit ``budget``."""
    if not chunks or budget <= 0:
        return []
    if sum(c.token_count for c in chunks) <= budget:
        return list(chunks)
    lo, hi, best = 1, len(chunks), [chunks[0]]
    while lo <= hi:  # token counts vary, so search the largest sample size that fits
        mid = (lo + hi) // 2
        picked = [chunks[i] for i in evenly_spaced(len(chunks), mid)]
        if sum(c.token_count for c in picked) <= budget:
            best, lo = picked, mid + 1
        else:
            hi = mid - 1
    return best


def read_selected_documents(store, doc_ids: Sequence[int], budget_tokens: int) -> list[RetrievedChunk]:
    """Chunks of the selected documents, in order, sampled to fit ``budget_tokens`` shared equally."""
    if not doc_ids:
        return []
    share = max(1, budget_tokens // len(doc_ids))
    names = store.doc_names(list(doc_ids))
    out: list[RetrievedChunk] = []
    for doc_id in doc_ids:
        records = store.chunks_for_document(doc_id, parents=False)
        picked = sample_within_budget(records, share)
        if not picked and records:  # a single chunk larger than the share: keep its head
            first = records[0]
            picked = [first.model_copy(update={"text": truncate_to_tokens(first.text, share), "terms": None})]
        for rec in picked:
            out.append(RetrievedChunk.from_record(rec, names.get(doc_id, str(doc_id)), origin="kb",
                                                  scores=StageScores(), found_by=["direct_read"]))
    return out
