"""In-memory copies of FTS5 keyword tables, scored exactly like FTS5's ``bm25()``.

Why: FTS5 evaluates ``bm25()`` once per matching row (~3 µs each).  At 100k
chunks a typical query matches ~3,000 rows and costs 11-14 ms; the same
postings held as numpy arrays score in ~2 ms.

FTS5 stays the persistent, incremental index and the source of truth.  A copy
is built from a table's rows (the stored tokens: jieba never runs) in a
background thread, and it is used only while its generation equals the
table's, which every write to the table bumps in the same transaction.  With
no current copy (after a restart, or after a change until the rebuild lands)
FTS5 answers.  Both paths return the same hits with bit-identical scores: the
same formula in the same operation order, ``math.log`` (libm, as SQLite uses),
and ties broken towards the lower rowid in both.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

log = logging.getLogger(__name__)

# The constants of FTS5's bm25() (fts5_aux.c); the formula below mirrors its operation order.
K1 = 1.2
B = 0.75


@dataclass(frozen=True)
class PostingsCopy:
    """One FTS5 table's postings: for each distinct term, the rows holding it and how often.

    Terms are looked up by Python's 64-bit string hash (a copy lives in one
    process, so the per-process hash seed does not matter); two distinct terms
    of one KB sharing a hash is a ~1e-8 event at 100k chunks, and would merge
    their postings.
    """

    generation: int
    term_hashes: np.ndarray  # int64, sorted: one entry per distinct term
    starts: np.ndarray  # postings of term j are rows[starts[j]:starts[j + 1]]
    rows: np.ndarray  # int32 row positions (rowid order), ascending within a term
    freqs: np.ndarray  # float32 occurrences of the term in that row (exact small integers)
    norms: np.ndarray  # float64 per row: K1 * ((1 - B) + (B * D) / avgdl), as bm25() computes it
    chunk_ids: tuple[str, ...]
    doc_ids: np.ndarray  # int64 per row
    n_rows: int

    @classmethod
    def build(cls, generation: int, terms: Sequence[str], chunk_ids: Sequence[str],
              doc_ids: Sequence[int], extra_tokens_per_row: int = 1) -> "PostingsCopy":
        """From a table's rows in rowid order: ``terms`` is the space-separated indexed column.

        ``extra_tokens_per_row`` counts tokens of other indexed columns: bm25() takes a
        row's length over all its columns (the document-filter column adds one token).
        """
        n = len(terms)
        lengths = np.fromiter((t.count(" ") + 1 if t else 0 for t in terms), dtype=np.int64, count=n)
        # Hash the tokens a slice of rows at a time: 100k chunks hold ~5M tokens, and holding them all as
        # Python strings at once would add ~300 MB to the peak memory of the build.
        parts = []
        for i in range(0, n, 8192):
            joined = " ".join(t for t in terms[i:i + 8192] if t)
            if joined:
                parts.append(np.fromiter(map(hash, joined.split(" ")), dtype=np.int64))
        hashes = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        del parts
        # Dense term ids by hashing (pandas.factorize, linear time), renumbered in hash order so a
        # query term is found by binary search; then one sort of (term, row) keys groups the postings.
        import pandas as pd  # here, not with the module: only a KB past keyword.memory_min_chunks needs it

        codes, uniques = pd.factorize(hashes)
        del hashes
        by_hash = np.argsort(uniques)
        rank = np.empty(len(uniques), dtype=np.int64)
        rank[by_hash] = np.arange(len(uniques), dtype=np.int64)
        keys = rank[codes]
        del codes, rank
        keys *= max(n, 1)
        keys += np.repeat(np.arange(n, dtype=np.int64), lengths)
        keys.sort()
        first = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else np.zeros(0, dtype=np.int64)
        freqs = np.diff(np.append(first, len(keys))).astype(np.float32)  # repeats of (term, row): its frequency
        term_of, rows = np.divmod(keys[first], max(n, 1))
        del keys, first
        term_hashes = uniques[by_hash].astype(np.int64)
        starts = np.searchsorted(term_of, np.arange(len(uniques) + 1, dtype=np.int64)).astype(np.int64)
        rows = rows.astype(np.int32)
        sizes = (lengths + extra_tokens_per_row).astype(np.float64)
        # avgdl = (double)nToken / (double)nRow with integer totals, as xColumnTotalSize/xRowCount give them
        avgdl = float(int(sizes.sum())) / float(n) if n else 1.0
        norms = K1 * ((1.0 - B) + (B * sizes) / avgdl)
        return cls(generation=generation, term_hashes=term_hashes, starts=starts, rows=rows, freqs=freqs,
                   norms=norms, chunk_ids=tuple(chunk_ids), doc_ids=np.asarray(doc_ids, dtype=np.int64), n_rows=n)

    @property
    def nbytes(self) -> int:
        arrays = (self.term_hashes, self.starts, self.rows, self.freqs, self.norms, self.doc_ids)
        return sum(a.nbytes for a in arrays) + 8 * len(self.chunk_ids)

    def _postings(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        h = hash(term)
        j = int(np.searchsorted(self.term_hashes, h))
        if j >= len(self.term_hashes) or self.term_hashes[j] != h:
            return None
        a, b = self.starts[j], self.starts[j + 1]
        return self.rows[a:b], self.freqs[a:b]

    def search(self, terms: Sequence[str], top_k: int, doc_ids: Sequence[int] | None = None,
               exclude_doc_ids: Sequence[int] | None = None) -> list[tuple[str, float]]:
        """(chunk id, bm25 score) best first, as the FTS5 query over the same terms returns them."""
        if top_k <= 0 or not self.n_rows:
            return []
        scores = np.zeros(self.n_rows, dtype=np.float64)
        touched: list[np.ndarray] = []
        for term in dict.fromkeys(terms):  # phrase order of the FTS5 expression: the sum's order
            postings = self._postings(term)
            if postings is None:
                continue  # a phrase that matches nothing adds 0.0 to every row in bm25() too
            rows, freqs = postings
            hits = len(rows)
            idf = math.log((self.n_rows - hits + 0.5) / (hits + 0.5))
            if idf <= 0.0:
                idf = 1e-6
            tf = freqs.astype(np.float64)
            scores[rows] += idf * ((tf * (K1 + 1.0)) / (tf + self.norms[rows]))
            touched.append(rows)
        if not touched:
            return []
        candidates = np.unique(np.concatenate(touched))
        if doc_ids is not None:  # the filter applies before top-k, as inside the FTS5 query
            candidates = candidates[np.isin(self.doc_ids[candidates], np.asarray(list(doc_ids), dtype=np.int64))]
        if exclude_doc_ids:  # so does the exclusion (FTS5's NOT)
            candidates = candidates[~np.isin(self.doc_ids[candidates],
                                             np.asarray(list(exclude_doc_ids), dtype=np.int64))]
        if not len(candidates):
            return []
        values = scores[candidates]
        if len(candidates) > top_k:
            kth = np.partition(values, len(values) - top_k)[len(values) - top_k]
            keep = values >= kth  # every row tied with the k-th stays in, so the rowid tie-break decides
            candidates, values = candidates[keep], values[keep]
        order = np.lexsort((candidates, -values))[:top_k]  # score descending, then rowid ascending
        return [(self.chunk_ids[i], float(scores[i])) for i in candidates[order]]


RowsReader = Callable[[int], "tuple[int, Sequence[str], Sequence[str], Sequence[int]] | None"]


class PostingsCache:
    """Per-KB ``PostingsCopy`` objects, (re)built in a background thread when a KB's generation moves on.

    ``read_rows(kb_id)`` returns ``(generation, terms, chunk_ids, doc_ids)`` read in one
    transaction, or None when the table is gone; ``count_rows(kb_id)`` its row count.  KBs with
    fewer than ``min_rows`` rows are not copied (FTS5 takes ~1 ms on them), and that is decided
    in the caller's thread, once per generation, without a background thread.  After a build, the next one for the same KB waits
    at least ``cooldown_factor`` times the last build's duration, so a long ingest that changes
    the KB every second does not keep a core busy rebuilding.
    """

    def __init__(self, read_rows: RowsReader, count_rows: Callable[[int], int], min_rows: int = 5000,
                 cooldown_factor: float = 2.0, extra_tokens_per_row: int = 1):
        self.read_rows = read_rows
        self.count_rows = count_rows
        self.min_rows = min_rows
        self.cooldown_factor = cooldown_factor
        self.extra_tokens_per_row = extra_tokens_per_row
        self._copies: dict[int, PostingsCopy] = {}
        self._small: dict[int, int] = {}  # kb id -> generation at which it had fewer than min_rows rows
        self._building: set[int] = set()
        self._not_before: dict[int, float] = {}
        self._lock = threading.Lock()
        self.builds = 0  # completed builds, for tests and the status line

    def current(self, kb_id: int, generation: int) -> PostingsCopy | None:
        """The copy for this generation, or None (then a rebuild is scheduled when it is worth it)."""
        copy = self._copies.get(kb_id)
        if copy is not None and copy.generation == generation:
            return copy
        if self._small.get(kb_id) == generation or kb_id in self._building:
            return None
        # A KB with a (stale) copy was large a moment ago: skip the count (1 ms at 100k) on every search
        # until the rebuild lands; the build itself notices a KB that shrank.
        if copy is None and self.count_rows(kb_id) < self.min_rows:
            with self._lock:
                self._copies.pop(kb_id, None)
                self._small[kb_id] = generation
            return None
        self._schedule(kb_id)
        return None

    def _schedule(self, kb_id: int) -> None:
        with self._lock:
            if kb_id in self._building or time.monotonic() < self._not_before.get(kb_id, 0.0):
                return
            self._building.add(kb_id)
        threading.Thread(target=self._build_logged, args=(kb_id,), name=f"docmind-postings-{kb_id}",
                         daemon=True).start()

    def _build_logged(self, kb_id: int) -> None:
        start = time.monotonic()
        try:
            self.build(kb_id)
        except Exception:  # a copy is only a speed-up: FTS5 keeps answering
            log.exception("building the in-memory keyword postings of KB %s failed", kb_id)
        finally:
            with self._lock:
                self._building.discard(kb_id)
                self._not_before[kb_id] = time.monotonic() + self.cooldown_factor * (time.monotonic() - start)

    def build(self, kb_id: int) -> PostingsCopy | None:
        """Build (synchronously) and install the copy of one KB; None when the KB is gone or small."""
        read = self.read_rows(kb_id)
        if read is None:
            self.drop(kb_id)
            return None
        generation, terms, chunk_ids, doc_ids = read
        if len(terms) < self.min_rows:
            with self._lock:
                self._copies.pop(kb_id, None)
                self._small[kb_id] = generation
            return None
        copy = PostingsCopy.build(generation, terms, chunk_ids, doc_ids, self.extra_tokens_per_row)
        with self._lock:
            old = self._copies.get(kb_id)
            if old is None or old.generation <= generation:  # never replace a newer copy with an older one
                self._copies[kb_id] = copy
            self._small.pop(kb_id, None)
            self.builds += 1
        return copy

    def drop(self, kb_id: int) -> None:
        with self._lock:
            self._copies.pop(kb_id, None)
            self._small.pop(kb_id, None)

    def copies(self) -> dict[int, PostingsCopy]:
        return dict(self._copies)
