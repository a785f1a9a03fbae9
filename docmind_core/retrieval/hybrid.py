"""The hybrid retrieval engine: candidates from two retrievers, then one refining pass.

``HybridRetriever`` fetches vector and keyword candidates (in parallel
threads; KB and document filters go down into the stores), fuses them and
marks everything past ``retrieval.rerank_top_n`` as cut by fusion.

``search`` then runs the refining pass (:mod:`docmind_core.retrieval.refine`) over them, the same
pass every answer path ends in.

Only chunks of complete documents come back: every hit of either store is
hydrated through ``KnowledgeStore.get_chunks``, which leaves out documents that
are still being written (or were left half-written by a crash), and a list that
lost hits that way is fetched again deeper so ``top_k`` still means ready
chunks.  ``index_gaps`` says which KBs have fewer vectors than chunks (an
interrupted re-index, a lost collection): their search is partly keyword-only.

Documents whose vectors are still being written (status ``embedding``,
keyword-first ingestion) are searched like complete ones: the keyword side
finds all their chunks, the vector side the chunks that have a vector.  They
are no index gap; ``KnowledgeStore.pending_ingest`` counts their chunks as
"still embedding" and that notice reaches the hit test, answers and MCP.

Vectors of two encoders never meet: a KB built by another encoder than the
live one has no vector side (``vector_kbs`` leaves it out of vector search and
of the stored-vector cosines) and is searched by keyword only; ``index_gaps``
reports it with the command that fixes it, ``docmind kb reindex NAME``.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Sequence

import numpy as np

from docmind_core.deadline import elapsed_ms
from docmind_core.errors import EmbedderMismatch, StageError
from docmind_core.values import CutBy, IndexGap, RetrievedChunk, SearchResult, StageScores
from docmind_core.retrieval.fusion import convex_fuse, rrf_fuse
from docmind_core.retrieval.refine import EvidenceRefiner
from docmind_core.text.tokens import crosses_language
from docmind_core.backends.embedders import query_vectors
from docmind_core.backends.protocols import Embedder, KeywordIndex, VectorStore

if TYPE_CHECKING:
    from docmind_core.store.kb_store import KnowledgeStore


_GAP_TTL_S = 30.0  # a KB's counts are re-read at least this often, changed or not
_GAP_MIN_INTERVAL_S = 2.0  # ... and at most this often while it changes (a long ingest changes it every second)
_REFETCH_ROUNDS = 3  # deeper fetches when hits of not-ready documents were left out


class HybridRetriever:
    """Vector + keyword candidates, fused; ``search`` adds the refining pass."""

    def __init__(self, store: KnowledgeStore, embedder: Embedder, vector_store: VectorStore,
                 keyword_index: KeywordIndex, refiner: EvidenceRefiner):
        # Every collaborator comes from the composition root: no hidden defaults, so hit testing
        # and answers always use the configured reranker.
        self.store = store
        self.embedder = embedder
        self.vector_store = vector_store
        self.keyword_index = keyword_index
        self.refiner = refiner
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="docmind-retrieval")
        self._gaps: dict[int, tuple[tuple, int, int, float]] = {}  # kb id -> (signature, chunks, vectors, at)

    # -- guards ------------------------------------------------------------
    def _encoder_of(self, kb_id: int) -> tuple[bool, str]:
        """(built by the live encoder, the encoder that built it) for one KB, read afresh on every call (one
        row by key, ~20 us): a re-index in this process or another one counts from its next search."""
        _name, built_with = self.store.kb_encoder(kb_id)
        return built_with == self.embedder.id, built_with

    def vector_kbs(self, kb_ids: Sequence[int]) -> list[int]:
        """The KBs whose vectors live in the live encoder's space; the others are searched by keyword only."""
        return [kb_id for kb_id in dict.fromkeys(kb_ids) if self._encoder_of(kb_id)[0]]

    def check_embedder(self, kb_ids: Sequence[int]) -> None:
        """Raise ``EmbedderMismatch`` (naming the fix) for a KB built by another encoder than the live one."""
        for kb_id in dict.fromkeys(kb_ids):
            same, built_with = self._encoder_of(kb_id)
            if not same:
                raise EmbedderMismatch(encoder_notice(self.store.kb_encoder(kb_id)[0], built_with, self.embedder.id))

    # -- single retrievers --------------------------------------------------
    def vector_candidates(self, query: str, kb_ids: Sequence[int], top_k: int,
                          doc_ids: Sequence[int] | None = None,
                          exclude_doc_ids: Sequence[int] | None = None) -> list[RetrievedChunk]:
        return self._hydrate(*self._vector_hits(query, kb_ids, top_k, doc_ids, exclude_doc_ids), "vector")

    def keyword_candidates(self, query: str, kb_ids: Sequence[int], top_k: int,
                           doc_ids: Sequence[int] | None = None,
                           exclude_doc_ids: Sequence[int] | None = None) -> list[RetrievedChunk]:
        return self._hydrate(*self._keyword_hits(query, kb_ids, top_k, doc_ids, exclude_doc_ids), "keyword")

    def _vector_hits(self, query, kb_ids, top_k, doc_ids, exclude_doc_ids=None) -> tuple[list[tuple[str, float]], dict]:
        kb_ids = self.vector_kbs(kb_ids)
        if not kb_ids:  # every KB was built by another encoder: keyword search only
            return [], {}
        qvec = query_vectors(self.embedder, [query])[0]
        extra = {"exclude_doc_ids": list(exclude_doc_ids)} if exclude_doc_ids else {}
        return self._ready_hits(lambda k: self.vector_store.query(list(kb_ids), qvec, k, doc_ids=doc_ids, **extra),
                                top_k, exclude_doc_ids)

    def _keyword_hits(self, query, kb_ids, top_k, doc_ids, exclude_doc_ids=None) -> tuple[list[tuple[str, float]], dict]:
        extra = {"exclude_doc_ids": list(exclude_doc_ids)} if exclude_doc_ids else {}
        return self._ready_hits(lambda k: self.keyword_index.search(list(kb_ids), query, k, doc_ids=doc_ids, **extra),
                                top_k, exclude_doc_ids)

    def _ready_hits(self, fetch, top_k: int,
                    exclude_doc_ids: Sequence[int] | None = None) -> tuple[list[tuple[str, float]], dict]:
        """The first ``top_k`` hits whose chunk belongs to a complete document, with those chunk rows.

        ``get_chunks`` leaves out chunks of documents being written or left half-written; when that
        cost hits and the store may hold more, it is asked again, deeper (a few rounds at most).
        Excluded documents are filtered inside the stores; they are dropped here too, so a store that
        ignores the filter can never bring a left-out (gold) document back.
        """
        excluded = frozenset(int(d) for d in exclude_doc_ids or ())
        depth = top_k
        for _round in range(_REFETCH_ROUNDS):
            hits = fetch(depth)
            records = self.store.get_chunks([cid for cid, _ in hits])
            if excluded:
                records = {cid: rec for cid, rec in records.items() if rec.doc_id not in excluded}
            ready = [(cid, score) for cid, score in hits if cid in records]
            if len(ready) >= top_k or len(ready) == len(hits) or len(hits) < depth:
                break
            depth = depth * 2 + (len(hits) - len(ready))
        return ready[:top_k], records

    def _hydrate(self, hits: Sequence[tuple[str, float]], records: dict, source: str) -> list[RetrievedChunk]:
        """RetrievedChunks for (id, score) hits of ready chunks (``records``: their rows)."""
        if not hits:
            return []
        names = self.store.doc_names({r.doc_id for r in records.values()})
        out: list[RetrievedChunk] = []
        for rank, (cid, score) in enumerate(hits, start=1):
            rec = records.get(cid)
            if rec is None:
                continue
            scores = StageScores(vector=score, vector_rank=rank) if source == "vector" else \
                StageScores(keyword=score, keyword_rank=rank)
            out.append(RetrievedChunk.from_record(rec, names.get(rec.doc_id, ""), scores=scores, found_by=[source]))
        return out

    # -- fused candidates ------------------------------------------------------
    def candidates(self, query: str, kb_ids: Sequence[int], settings,
                   doc_ids: Sequence[int] | None = None,
                   exclude_doc_ids: Sequence[int] | None = None) -> list[RetrievedChunk]:
        return self.candidates_timed(query, kb_ids, settings, doc_ids, exclude_doc_ids)[0]

    def candidates_timed(self, query: str, kb_ids: Sequence[int], settings,
                         doc_ids: Sequence[int] | None = None,
                         exclude_doc_ids: Sequence[int] | None = None
                         ) -> tuple[list[RetrievedChunk], dict[str, float]]:
        r = settings.retrieval
        kb_ids = list(kb_ids)
        timings: dict[str, float] = {}
        if not kb_ids:
            return [], timings

        def timed(fn, *args):
            start = time.perf_counter()
            return fn(*args), elapsed_ms(start)

        vec_future = self._pool.submit(timed, self._vector_hits, query, kb_ids, r.vector_top_k, doc_ids,
                                       exclude_doc_ids)
        kw_future = self._pool.submit(timed, self._keyword_hits, query, kb_ids, r.keyword_top_k, doc_ids,
                                      exclude_doc_ids)
        try:
            (vec_hits, vec_records), timings["vector"] = vec_future.result()
        except EmbedderMismatch:
            raise
        except Exception as exc:
            raise StageError("vector search", exc) from exc
        try:
            (kw_hits, kw_records), timings["keyword"] = kw_future.result()
        except Exception as exc:
            raise StageError("keyword search", exc) from exc

        start = time.perf_counter()
        lists = [vec_hits, kw_hits]
        weights = [r.vector_weight, r.keyword_weight]
        if crosses_language(query, [vec_records[cid].text for cid, _ in vec_hits[:3] if cid in vec_records]):
            # the keyword side can only bring same-language passages here: let the dense side lead
            dense = max(r.vector_weight, r.cross_language_vector_weight)
            weights = [dense, min(r.keyword_weight, 1.0 - dense)]
        fused = rrf_fuse(lists, weights, k=r.rrf_k) if r.fusion == "rrf" else convex_fuse(lists, weights)
        vec = {cid: (score, rank) for rank, (cid, score) in enumerate(vec_hits, start=1)}
        kw = {cid: (score, rank) for rank, (cid, score) in enumerate(kw_hits, start=1)}
        records = {**kw_records, **vec_records}  # both lists hold ready chunks only (``_ready_hits``)
        names = self.store.doc_names({records[cid].doc_id for cid, _ in fused if cid in records})
        out: list[RetrievedChunk] = []
        for cid, fused_score in fused:
            rec = records.get(cid)
            if rec is None:
                continue
            v, k = vec.get(cid), kw.get(cid)
            cut = len(out) >= r.rerank_top_n
            out.append(RetrievedChunk.from_record(
                rec, names.get(rec.doc_id, ""),
                scores=StageScores(vector=v[0] if v else None, vector_rank=v[1] if v else None,
                                   keyword=k[0] if k else None, keyword_rank=k[1] if k else None,
                                   fused=round(float(fused_score), 6)),
                found_by=[name for name, hit in (("vector", v), ("keyword", k)) if hit],
                kept=not cut, cut_by=CutBy.FUSION if cut else None))
        self._fill_cosines(query, [c for c in out if c.cut_by is None and c.scores.vector is None])
        timings["fusion"] = elapsed_ms(start)
        return out, timings

    def _fill_cosines(self, query: str, chunks: list[RetrievedChunk]) -> None:
        """Give keyword-only candidates their cosine from the stored vectors (no re-encoding), in place.

        The reranker needs a cosine for every candidate; encoding ~20 chunks per
        query with the bundled encoder would cost a second, a lookup costs ms.
        """
        if not chunks:
            return
        same = set(self.vector_kbs({c.kb_id for c in chunks if c.kb_id is not None}))
        # another encoder's stored vectors are in another space: those chunks keep no cosine
        chunks = [c for c in chunks if c.kb_id is None or c.kb_id in same]
        if not chunks:
            return
        stored = stored_embeddings(self.vector_store, chunks, self.store)
        if not stored:
            return
        qvec = query_vectors(self.embedder, [query])[0]  # served from the embedder's query cache
        for i, chunk in enumerate(chunks):
            vec = stored.get(chunk.chunk_id)
            if vec is not None and vec.shape == qvec.shape:
                chunks[i].scores.vector = round(float(np.dot(vec, qvec)), 6)

    def search(self, query: str, kb_ids: Sequence[int], settings,
               doc_ids: Sequence[int] | None = None,
               exclude_doc_ids: Sequence[int] | None = None) -> SearchResult:
        start = time.perf_counter()
        chunks, timings = self.candidates_timed(query, kb_ids, settings, doc_ids, exclude_doc_ids)
        timings["candidates"] = elapsed_ms(start)
        result = self.refiner.refine(query, chunks, settings)
        result.timings_ms = {**timings, **result.timings_ms, "total": elapsed_ms(start)}
        result.index_gaps = self.index_gaps(kb_ids)
        return result

    # -- index completeness ---------------------------------------------------
    def index_gaps(self, kb_ids: Sequence[int]) -> list[IndexGap]:
        """KBs whose vector store holds fewer vectors than they have ready chunks (their search is then
        keyword-only for the rest).

        Cheap on the query path: the counts (1.4 ms for the chunks at 10k) are taken again only
        when the KB changed (the keyword index's generation, or its documents, and its re-index
        runs tell: ~0.05 ms), no more than every ``_GAP_MIN_INTERVAL_S`` seconds, and at least
        every ``_GAP_TTL_S`` seconds (vectors can go missing without any SQLite change).
        """
        gaps: list[IndexGap] = []
        now = time.monotonic()
        generation = getattr(self.keyword_index, "generation", None)
        for kb_id in dict.fromkeys(kb_ids):
            try:
                same, built_with = self._encoder_of(kb_id)
                if not same:  # no vector of the live encoder at all, until it is re-indexed
                    kb = self.store.get_kb(kb_id)
                    gaps.append(IndexGap(kb_id=kb_id, kb_name=kb.name, missing_vectors=kb.chunk_count,
                                         total=kb.chunk_count, built_with=built_with, live_encoder=self.embedder.id))
                    continue
                changes = generation(kb_id) if generation is not None else self.store.kb_change_signature(kb_id)
                signature = (changes, self.store.reindex_signature(kb_id))
                cached = self._gaps.get(kb_id)  # (signature, chunks, vectors, counted at)
                if cached is not None and now - cached[3] < _GAP_TTL_S and (
                        cached[0] == signature or now - cached[3] < _GAP_MIN_INTERVAL_S):
                    chunks, vectors = cached[1], cached[2]
                else:
                    # chunks of documents still embedding have their vectors on the way: not a gap (the
                    # pending notice counts them as "still embedding")
                    backlog = self.store.embedding_backlog([kb_id]).get(kb_id, 0)
                    chunks, vectors = self.store.ready_chunk_count(kb_id) - backlog, self.vector_store.count(kb_id)
                    self._gaps[kb_id] = (signature, chunks, vectors, now)
            except Exception:  # a store that cannot answer is reported by the search itself
                continue
            if vectors < chunks:  # rare: the name lookup (which also counts the KB's chunks) is affordable here
                gaps.append(IndexGap(kb_id=kb_id, kb_name=self.store.get_kb(kb_id).name,
                                     missing_vectors=chunks - vectors, total=chunks))
        return gaps


def encoder_notice(kb_name: str, built_with: str, live_encoder: str) -> str:
    """What a user reads about a KB built by another encoder than the live one."""
    return (f"knowledge base '{kb_name}' was indexed with {built_with} but the live encoder is {live_encoder}: "
            f"it is searched by keyword only until you run `docmind kb reindex {kb_name}` "
            f"(or switch the embedding settings back)")


def stored_embeddings(vector_store, chunks: Sequence[RetrievedChunk], store=None) -> dict[str, np.ndarray]:
    """Stored vectors of these chunks: the copies kept with the chunk rows (``store``) first, then
    whatever the vector store can return for the rest; {} when neither can."""
    out: dict[str, np.ndarray] = {}
    kb_chunks = [c for c in chunks if c.kb_id is not None]
    if store is not None and kb_chunks:
        try:
            out = store.chunk_vectors(c.chunk_id for c in kb_chunks)
        except Exception:  # an optional speed-up, like the vector store's copies below
            out = {}
    by_kb: dict[int, list[str]] = {}
    for c in kb_chunks:
        if c.chunk_id not in out:
            by_kb.setdefault(c.kb_id, []).append(c.chunk_id)
    try:
        for kb_id, ids in by_kb.items():
            out.update(vector_store.get_embeddings(kb_id, ids))
    except Exception:  # an optional speed-up: without it the reranker encodes the text itself
        return out
    return out
