"""Keyword (BM25) indexes over jieba / English word tokens.

Two implementations of the ``KeywordIndex`` protocol:

* :class:`Fts5KeywordIndex` (default): one SQLite FTS5 table per knowledge
  base in the DocMind database, holding each child chunk's *pre-tokenised*
  text (``text.keyword_tokens`` joined by spaces), ranked by FTS5's
  ``bm25()``.  Persistent and incremental: a restart needs no rebuild, and a
  document filter is part of the FTS5 query.
* :class:`RankBM25KeywordIndex`: the rank-bm25 library, in memory, rebuilt
  lazily per KB from the ``chunks`` table on the first query after the KB
  changed.  Each query scores every chunk of the KB in Python, so it suits
  small KBs only.

Measured by bench/keyword_backends.py (100k mixed zh/en chunks, top-40, two
cores shared with other work, so CPU time per query is the steadier figure):
FTS5 8.4 ms CPU p50 (28 ms p95), index build 13 s after tokenising, first
query after a restart 0.05 s; rank-bm25 266 ms CPU p50 and a 17 s rebuild
after every restart or change; bm25s (reference only, in memory, no
incremental add) 4.9 ms.  Tokenising 100k chunks with jieba took 176 s on the
busy machine and is the same for every backend.  FTS5 with the in-memory
postings copy of ``keyword_memory`` (large KBs): 2.0 ms p50 at 100k, same hits
and scores.
"""

from __future__ import annotations

import math
import re
import sqlite3
import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np

from docmind_core.backends.keyword_memory import PostingsCache, PostingsCopy
from docmind_core.backends.protocols import IndexedChunk
from docmind_core.values import BackendStatus
from docmind_core.store.db import Database
from docmind_core.text.tokens import keyword_tokens, split_terms, stem_tokens

FTS_PREFIX = "keyword_fts_"  # one FTS5 table per knowledge base: keyword_fts_<kb id>
_META_TABLE = "keyword_index_meta"
# kb id -> generation, bumped in the same transaction as every write to that KB's table.  Values come
# from one counter that never goes back (a KB row is never deleted), so a re-created KB with a reused
# id can never match an old in-memory copy.
_GENERATIONS_TABLE = "keyword_index_generations"
_LAYOUT = "3"  # bump when the tables' columns change; the index is then rebuilt from the chunks table
# Tokens arrive already split; these characters occur inside our tokens (codes
# such as aur-4012 or 3.2.1) and must not split them again inside FTS5.
_TOKEN_CHARS = "-_./"
_TABLE_RE = re.compile(rf"^{FTS_PREFIX}(\d+)$")


def index_terms(text: str, stem: bool, stored: str | None = None) -> list[str]:
    """The terms one text contributes: keyword tokens, apostrophes dropped (FTS5 would split on them).

    ``stored`` is the chunk's tokens as the Ingestor kept them (``ChunkRecord.terms``): when given,
    jieba does not run again.
    """
    if stored is None:
        tokens = keyword_tokens(text, stem=stem)
    else:
        tokens = stem_tokens(split_terms(stored)) if stem else split_terms(stored)
    return [t.replace("'", "") for t in tokens if t.replace("'", "")]


def query_terms(query: str, stem: bool, top_k: int, doc_ids: Sequence[int] | None) -> list[str]:
    """The terms a search looks for; none when it cannot find anything (no top_k, an empty document filter)."""
    if top_k <= 0 or (doc_ids is not None and len(doc_ids) == 0):
        return []
    return index_terms(query, stem)


def _quoted(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _doc_token(doc_id: int) -> str:
    # A leading underscore never starts a keyword token, so filter tokens cannot collide with content.
    return f"_doc{int(doc_id)}"


def match_expression(terms: Sequence[str], doc_ids: Sequence[int] | None = None,
                     exclude_doc_ids: Sequence[int] | None = None) -> str:
    """FTS5 query: any of the terms (BM25's OR semantics), optionally restricted to some documents
    and without others.

    The document filter is a token of its own indexed column, so FTS5
    intersects posting lists instead of reading every matching row.
    """
    expr = "terms : (" + " OR ".join(_quoted(t) for t in dict.fromkeys(terms)) + ")"
    if doc_ids is not None:
        expr += " AND doc : (" + " OR ".join(_doc_token(d) for d in dict.fromkeys(doc_ids)) + ")"
    if exclude_doc_ids:
        expr = "(" + expr + ") NOT doc : (" + " OR ".join(_doc_token(d) for d in dict.fromkeys(exclude_doc_ids)) + ")"
    return expr


def _table(kb_id: int) -> str:
    return f"{FTS_PREFIX}{int(kb_id)}"


class Fts5KeywordIndex:
    """Persistent BM25 keyword index in SQLite FTS5, one table per knowledge base.

    A table per KB keeps the KB filter out of the query (filtering a shared
    table by KB doubled the query time), gives each KB its own BM25
    statistics, and makes deleting a KB a DROP TABLE.

    KBs of at least ``memory_min_rows`` chunks are also served from an
    in-memory copy of their postings (``keyword_memory``), which returns the
    same hits and scores ~5x faster; ``memory_min_rows=None`` turns that off.
    """

    name = "fts5"

    def __init__(self, db: Database, stem: bool = True, memory_min_rows: int | None = 5000):
        self.db = db
        self.stem = stem
        self._ensure_layout()
        self._memory = None if memory_min_rows is None else PostingsCache(
            self._read_rows, self.count, min_rows=memory_min_rows)

    # -- schema ------------------------------------------------------------
    def _ensure_layout(self) -> None:
        wanted = {"stem": "1" if self.stem else "0", "layout": _LAYOUT}
        try:  # every start after the first finds the layout it wants: a read, no write lock to wait for
            laid_out = dict(self.db.db.execute(f"SELECT key, value FROM {_META_TABLE}").fetchall()) == wanted
            # (the generations table came later under the same layout number: an older database lacks it)
            if laid_out and self.db.db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                                               [_GENERATIONS_TABLE]).fetchone():
                return
        except sqlite3.OperationalError:  # no such table yet
            pass
        with self.db.transaction() as db:
            db.execute(f"CREATE TABLE IF NOT EXISTS {_META_TABLE} (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            db.execute(f"CREATE TABLE IF NOT EXISTS {_GENERATIONS_TABLE} "
                       "(kb_id INTEGER PRIMARY KEY, generation INTEGER NOT NULL)")
            stored = dict(db.execute(f"SELECT key, value FROM {_META_TABLE}").fetchall())
            if stored and stored != wanted:
                # Built with other columns or the other stemming setting: its terms would not match our queries.
                for name in self._all_tables(db, include_legacy=True):
                    db.execute(f"DROP TABLE {name}")
                self._rebuild_from_chunks(db)
            db.conn.executemany(f"INSERT OR REPLACE INTO {_META_TABLE} (key, value) VALUES (?, ?)",
                                list(wanted.items()))

    @staticmethod
    def _all_tables(db, include_legacy: bool = False) -> list[str]:
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()]
        found = [n for n in names if _TABLE_RE.match(n)]
        if include_legacy and "keyword_fts" in names:  # the single shared table of layout 2
            found.append("keyword_fts")
        return found

    def _create_table(self, db, kb_id: int) -> None:
        db.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {_table(kb_id)} USING fts5("
            f"terms, doc, chunk_id UNINDEXED, doc_id UNINDEXED, "
            f"tokenize = \"unicode61 remove_diacritics 0 tokenchars '{_TOKEN_CHARS}'\")")

    def _existing(self, kb_ids: Sequence[int]) -> list[int]:
        wanted = [int(k) for k in dict.fromkeys(kb_ids)]
        if not wanted:
            return []
        rows = self.db.db.execute(
            f"SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ({', '.join('?' * len(wanted))})",
            [_table(k) for k in wanted]).fetchall()
        present = {r[0] for r in rows}
        return [k for k in wanted if _table(k) in present]

    def _row(self, chunk_id: str, doc_id: int, text: str, terms: str | None = None) -> tuple:
        return (" ".join(index_terms(text, self.stem, terms)), _doc_token(doc_id), chunk_id, int(doc_id))

    def _insert(self, db, kb_id: int, rows: list[tuple]) -> None:
        self._create_table(db, kb_id)
        db.conn.executemany(
            f"INSERT INTO {_table(kb_id)} (terms, doc, chunk_id, doc_id) VALUES (?, ?, ?, ?)", rows)
        self._bump(db, kb_id)

    @staticmethod
    def _bump(db, kb_id: int) -> None:
        """Mark the KB's table changed (inside the caller's write transaction)."""
        db.execute(f"INSERT INTO {_GENERATIONS_TABLE} (kb_id, generation) VALUES "
                   f"(?, (SELECT COALESCE(MAX(generation), 0) + 1 FROM {_GENERATIONS_TABLE})) "
                   "ON CONFLICT(kb_id) DO UPDATE SET generation = excluded.generation", [int(kb_id)])

    def _generations(self, conn, kb_ids: Sequence[int]) -> dict[int, int]:
        rows = conn.execute(f"SELECT kb_id, generation FROM {_GENERATIONS_TABLE} WHERE kb_id IN "
                            f"({', '.join('?' * len(kb_ids))})", [int(k) for k in kb_ids]).fetchall()
        return {int(k): int(g) for k, g in rows}

    def _read_rows(self, kb_id: int):
        """(generation, terms, chunk ids, doc ids) of one table in rowid order, read in one transaction."""
        conn = self.db.db.conn  # this thread's own connection
        own = not conn.in_transaction  # inside the caller's transaction its reads are consistent already
        if own:
            conn.execute("BEGIN")
        try:
            if not self._existing([kb_id]):
                return None
            generation = self._generations(conn, [kb_id]).get(int(kb_id), 0)
            rows = conn.execute(f"SELECT terms, chunk_id, doc_id FROM {_table(kb_id)} ORDER BY rowid").fetchall()
        finally:
            if own:
                conn.execute("COMMIT")
        if not rows:
            return generation, [], [], []
        terms, chunk_ids, doc_ids = zip(*rows)
        return generation, terms, chunk_ids, doc_ids

    def generation(self, kb_id: int) -> int:
        """The KB's generation: it moves with every write to the KB's table (0 before the first)."""
        return self._generations(self.db.db.conn, [kb_id]).get(int(kb_id), 0)

    def warm(self, kb_ids: Sequence[int]) -> int:
        """Build the in-memory copies of these KBs now, in this thread; returns how many are in use."""
        if self._memory is None:
            return 0
        return sum(self._memory.build(int(k)) is not None for k in dict.fromkeys(kb_ids))

    def postings_copies(self) -> dict[int, PostingsCopy]:
        """The in-memory postings copies in use now, by KB id (none when they are turned off)."""
        return {} if self._memory is None else self._memory.copies()

    def _rebuild_from_chunks(self, db) -> None:
        rows = db.execute(
            "SELECT c.kb_id, c.id, c.doc_id, c.text, c.terms FROM chunks c JOIN documents d ON d.id = c.doc_id "
            "WHERE c.is_parent = 0 AND d.status IN ('complete', 'embedding') ORDER BY c.kb_id").fetchall()
        by_kb: dict[int, list[tuple]] = {}
        for kb_id, chunk_id, doc_id, text, terms in rows:
            by_kb.setdefault(kb_id, []).append(self._row(chunk_id, doc_id, text, terms))
        for kb_id, kb_rows in by_kb.items():
            self._insert(db, kb_id, kb_rows)

    # -- KeywordIndex protocol ------------------------------------------------
    def add(self, chunks: Sequence[IndexedChunk]) -> None:
        by_kb: dict[int, list[tuple]] = {}
        for c in chunks:  # tokenise before taking the write lock
            by_kb.setdefault(int(c.kb_id), []).append(self._row(c.chunk_id, c.doc_id, c.text, c.terms))
        with self.db.transaction() as db:
            for kb_id, rows in by_kb.items():
                self._insert(db, kb_id, rows)

    def search(self, kb_ids: Sequence[int], query: str, top_k: int,
               doc_ids: Sequence[int] | None = None,
               exclude_doc_ids: Sequence[int] | None = None) -> list[tuple[str, float]]:
        if not (terms := query_terms(query, self.stem, top_k, doc_ids)):
            return []
        expr = match_expression(terms, doc_ids, exclude_doc_ids)
        hits: list[tuple[str, float]] = []
        existing = self._existing(kb_ids)
        generations = {}
        if self._memory is not None:
            for gone in set(int(k) for k in kb_ids) - set(existing):  # e.g. deleted by another process
                self._memory.drop(gone)
            generations = self._generations(self.db.db.conn, existing) if existing else {}
        for kb_id in existing:
            copy = self._memory.current(kb_id, generations.get(kb_id, 0)) if self._memory is not None else None
            if copy is not None:
                hits.extend(copy.search(terms, top_k, doc_ids, exclude_doc_ids))
                continue
            table = _table(kb_id)
            # bm25() is lower-is-better (negative); negate so higher is better as the protocol says.
            # Only the terms column scores (the doc column is a filter).  Ranking in a subquery
            # reads chunk_id for the top rows only, not for every match.  Ties go to the lower
            # rowid, as in the in-memory copy.
            rows = self.db.db.execute(
                f"SELECT t.chunk_id, -top.score FROM (SELECT rowid AS id, bm25({table}, 1.0, 0.0) AS score "
                f"FROM {table} WHERE {table} MATCH ? ORDER BY score, rowid LIMIT ?) AS top "
                f"JOIN {table} AS t ON t.rowid = top.id ORDER BY top.score, top.id",
                [expr, int(top_k)]).fetchall()
            hits.extend((r[0], float(r[1])) for r in rows)
        if len(kb_ids) > 1:
            hits.sort(key=lambda h: (-h[1], h[0]))
        return hits[:top_k]

    def delete_document(self, kb_id: int, doc_id: int) -> None:
        if not self._existing([kb_id]):
            return
        table = _table(kb_id)
        with self.db.transaction() as db:
            db.execute(f"DELETE FROM {table} WHERE rowid IN (SELECT rowid FROM {table} WHERE {table} MATCH ?)",
                       [f"doc : {_doc_token(doc_id)}"])
            self._bump(db, kb_id)

    def delete_kb(self, kb_id: int) -> None:
        with self.db.transaction() as db:
            db.execute(f"DROP TABLE IF EXISTS {_table(kb_id)}")
            self._bump(db, kb_id)
        if self._memory is not None:
            self._memory.drop(int(kb_id))

    def document_ids(self, kb_id: int) -> set[int]:
        if not self._existing([kb_id]):
            return set()
        rows = self.db.db.execute(f"SELECT DISTINCT doc_id FROM {_table(kb_id)}").fetchall()
        return {int(r[0]) for r in rows}

    def kb_ids(self) -> set[int]:
        return {int(_TABLE_RE.match(n).group(1)) for n in self._all_tables(self.db.db)}

    def entries(self, kb_id: int) -> list[tuple[str, int]]:
        """(chunk id, doc id) of every row of the KB's table, duplicates included (``docmind kb check``)."""
        if not self._existing([kb_id]):
            return []
        rows = self.db.db.execute(f"SELECT chunk_id, doc_id FROM {_table(kb_id)} ORDER BY rowid").fetchall()
        return [(r[0], int(r[1])) for r in rows]

    def delete_chunks(self, kb_id: int, chunk_ids: Sequence[str]) -> None:
        """Remove every row of these chunks (repairs orphans and duplicates)."""
        ids = list(dict.fromkeys(chunk_ids))
        if not ids or not self._existing([kb_id]):
            return
        table = _table(kb_id)
        with self.db.transaction() as db:
            for start in range(0, len(ids), 500):
                part = ids[start:start + 500]
                # chunk_id is UNINDEXED: a scan of the table's rows, acceptable for a repair
                db.execute(f"DELETE FROM {table} WHERE chunk_id IN ({', '.join('?' * len(part))})", part)
            self._bump(db, kb_id)

    def count(self, kb_id: int) -> int:
        if not self._existing([kb_id]):
            return 0
        return self.db.db.execute(f"SELECT COUNT(*) FROM {_table(kb_id)}").fetchone()[0]

    def status(self) -> BackendStatus:
        memory = "off" if self._memory is None else (
            f"for KBs of {self._memory.min_rows}+ chunks ({len(self._memory.copies())} loaded)")
        return BackendStatus(role="keyword_index", name="SQLite FTS5 bm25", live=True,
                             detail=f"persistent, jieba + English tokens, stemming {'on' if self.stem else 'off'}, "
                                    f"in-memory postings {memory}")


@lru_cache(maxsize=1)
def _positive_idf_bm25():
    """The BM25 class, built on first use so rank_bm25 is imported only when this backend is chosen."""
    from rank_bm25 import BM25Okapi

    class PositiveIdfBM25(BM25Okapi):
        """BM25Okapi with Lucene's idf, log(1 + (N - n + 0.5) / (n + 0.5)).

        rank-bm25's own idf is zero or negative for a term in half the chunks or
        more, which in a small KB wipes out every score (a two-chunk KB matches nothing).
        """

        def _calc_idf(self, nd):
            self.idf = {word: math.log(1 + (self.corpus_size - freq + 0.5) / (freq + 0.5))
                        for word, freq in nd.items()}

    return PositiveIdfBM25


@dataclass
class _KbModel:
    signature: tuple
    chunk_ids: list[str]
    doc_ids: np.ndarray
    bm25: object | None  # rank_bm25.BM25Okapi, None for an empty KB


class RankBM25KeywordIndex:
    """In-memory rank-bm25 index, one model per KB, rebuilt from the chunks table when the KB changes.

    Only complete documents are indexed and nothing is persisted, so there is
    never anything to reconcile.  Scores of different KBs come from different
    models (each with its own idf); they are merged as they are.
    """

    name = "rank_bm25"

    def __init__(self, db: Database, stem: bool = True):
        self.db = db
        self.stem = stem
        self._models: dict[int, _KbModel] = {}
        self._lock = threading.Lock()

    def _signature(self, kb_id: int) -> tuple:
        # Cheap change detector: any completed, replaced or deleted document changes it.
        return tuple(self.db.db.execute(
            "SELECT COUNT(*), COALESCE(SUM(id), 0), COALESCE(MAX(updated_at), '') FROM documents "
            "WHERE kb_id = ? AND status IN ('complete', 'embedding')", [int(kb_id)]).fetchone())

    def _model(self, kb_id: int) -> _KbModel:
        signature = self._signature(kb_id)
        with self._lock:
            model = self._models.get(kb_id)
            if model is not None and model.signature == signature:
                return model
            rows = self.db.db.execute(
                "SELECT c.id, c.doc_id, c.text, c.terms FROM chunks c JOIN documents d ON d.id = c.doc_id "
                "WHERE c.kb_id = ? AND c.is_parent = 0 AND d.status IN ('complete', 'embedding') ORDER BY c.doc_id, c.idx",
                [int(kb_id)]).fetchall()
            corpus = [index_terms(r[2], self.stem, r[3]) for r in rows]
            bm25 = None
            if rows:
                # rank-bm25 divides by the average length; an all-empty corpus would fail
                bm25 = _positive_idf_bm25()([terms or ["\u0000"] for terms in corpus])
            model = _KbModel(signature, [r[0] for r in rows], np.array([r[1] for r in rows], dtype=np.int64), bm25)
            self._models[kb_id] = model
            return model

    def add(self, chunks: Sequence[IndexedChunk]) -> None:
        # The chunks table is the source of truth; drop the cached models so the next query rebuilds.
        with self._lock:
            for kb_id in {c.kb_id for c in chunks}:
                self._models.pop(kb_id, None)

    def search(self, kb_ids: Sequence[int], query: str, top_k: int,
               doc_ids: Sequence[int] | None = None,
               exclude_doc_ids: Sequence[int] | None = None) -> list[tuple[str, float]]:
        if not (terms := query_terms(query, self.stem, top_k, doc_ids)):
            return []
        hits: list[tuple[str, float]] = []
        for kb_id in dict.fromkeys(kb_ids):
            model = self._model(kb_id)
            if model.bm25 is None:
                continue
            scores = np.asarray(model.bm25.get_scores(terms), dtype=np.float64)
            mask = scores > 0
            if doc_ids is not None:
                mask &= np.isin(model.doc_ids, np.array([int(d) for d in doc_ids], dtype=np.int64))
            if exclude_doc_ids:
                mask &= ~np.isin(model.doc_ids, np.array([int(d) for d in exclude_doc_ids], dtype=np.int64))
            candidates = np.flatnonzero(mask)
            if len(candidates) > top_k:
                candidates = candidates[np.argpartition(-scores[candidates], top_k - 1)[:top_k]]
            hits.extend((model.chunk_ids[i], float(scores[i])) for i in candidates)
        hits.sort(key=lambda h: (-h[1], h[0]))
        return hits[:top_k]

    def delete_document(self, kb_id: int, doc_id: int) -> None:
        with self._lock:
            self._models.pop(kb_id, None)

    def delete_kb(self, kb_id: int) -> None:
        with self._lock:
            self._models.pop(kb_id, None)

    def status(self) -> BackendStatus:
        return BackendStatus(role="keyword_index", name="rank-bm25 (in memory)", live=True,
                             detail=f"rebuilt per KB after changes, stemming {'on' if self.stem else 'off'}")
