"""Keyword (BM25) indexes over jieba / English word tokens.

Two implementations of the ``KeywordIndex`` protocol:

* :class:`Fts5KeywordIndex` (default): an SQLite FTS5 table in the DocMind
  database holding each child chunk's *pre-tokenised* text
  (``text.keyword_tokens`` joined by spaces), ranked by FTS5's ``bm25()``.
  Persistent and incremental, so a restart needs no rebuild; KB and document
  filters are part of the SQL.  bench/keyword_backends.py measures it at a few
  milliseconds per query over 100k chunks.
* :class:`RankBM25KeywordIndex`: the rank-bm25 library, in memory, rebuilt
  lazily per KB from the ``chunks`` table on the first query after the KB
  changed.  Simple, but each query scores every chunk of the KB in Python
  (~100 ms at 100k chunks), so it suits small KBs only.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np

from docmind_core.backends.protocols import IndexedChunk
from docmind_core.models import BackendStatus
from docmind_core.store.db import Database
from docmind_core.text import keyword_tokens

FTS_TABLE = "keyword_fts"
_META_TABLE = "keyword_index_meta"
# Tokens arrive already split; these characters occur inside our tokens (codes
# such as aur-4012 or 3.2.1) and must not split them again inside FTS5.
_TOKEN_CHARS = "-_./"


def index_terms(text: str, stem: bool) -> list[str]:
    """The terms one text contributes: keyword tokens, apostrophes dropped (FTS5 would split on them)."""
    return [t.replace("'", "") for t in keyword_tokens(text, stem=stem) if t.replace("'", "")]


def _quoted(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _kb_token(kb_id: int) -> str:
    # A leading underscore never starts a keyword token, so filter tokens cannot collide with content.
    return f"_kb{int(kb_id)}"


def _doc_token(doc_id: int) -> str:
    return f"_doc{int(doc_id)}"


def match_expression(terms: Sequence[str], kb_ids: Sequence[int], doc_ids: Sequence[int] | None = None) -> str:
    """FTS5 query: any of the terms (BM25's OR semantics), restricted to the KBs (and documents).

    The KB and document filters are tokens of their own indexed columns, so
    FTS5 intersects posting lists instead of reading every matching row to
    test an UNINDEXED column (three times slower at 10k chunks).
    """
    expr = "terms : (" + " OR ".join(_quoted(t) for t in dict.fromkeys(terms)) + ")"
    expr += " AND kb : (" + " OR ".join(_kb_token(k) for k in dict.fromkeys(kb_ids)) + ")"
    if doc_ids is not None:
        expr += " AND doc : (" + " OR ".join(_doc_token(d) for d in dict.fromkeys(doc_ids)) + ")"
    return expr


_LAYOUT = "2"  # bump when the table's columns change; the index is then rebuilt from the chunks table
_INSERT = f"INSERT INTO {FTS_TABLE} (terms, kb, doc, chunk_id, kb_id, doc_id) VALUES (?, ?, ?, ?, ?, ?)"


class Fts5KeywordIndex:
    """Persistent BM25 keyword index in SQLite FTS5."""

    name = "fts5"

    def __init__(self, db: Database, stem: bool = True):
        self.db = db
        self.stem = stem
        self._ensure_schema()

    def _ensure_schema(self) -> None:
        wanted = {"stem": "1" if self.stem else "0", "layout": _LAYOUT}
        with self.db.transaction() as db:
            db.execute(f"CREATE TABLE IF NOT EXISTS {_META_TABLE} (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            stored = dict(db.execute(f"SELECT key, value FROM {_META_TABLE}").fetchall())
            exists = db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", [FTS_TABLE]).fetchone() is not None
            stale = exists and any(stored.get(k) != v for k, v in wanted.items())
            if stale:
                # Other columns or the other stemming setting: its terms would not match our queries.
                db.execute(f"DROP TABLE {FTS_TABLE}")
            db.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS_TABLE} USING fts5("
                f"terms, kb, doc, chunk_id UNINDEXED, kb_id UNINDEXED, doc_id UNINDEXED, "
                f"tokenize = \"unicode61 remove_diacritics 0 tokenchars '{_TOKEN_CHARS}'\")")
            if stale:
                self._rebuild_from_chunks(db)
            db.conn.executemany(f"INSERT OR REPLACE INTO {_META_TABLE} (key, value) VALUES (?, ?)",
                                list(wanted.items()))

    def _row(self, chunk_id: str, kb_id: int, doc_id: int, text: str) -> tuple:
        return (" ".join(index_terms(text, self.stem)), _kb_token(kb_id), _doc_token(doc_id), chunk_id,
                int(kb_id), int(doc_id))

    def _rebuild_from_chunks(self, db) -> None:
        rows = db.execute(
            "SELECT c.id, c.kb_id, c.doc_id, c.text FROM chunks c JOIN documents d ON d.id = c.doc_id "
            "WHERE c.is_parent = 0 AND d.status = 'complete'").fetchall()
        db.conn.executemany(_INSERT, [self._row(*r) for r in rows])

    def add(self, chunks: Sequence[IndexedChunk]) -> None:
        rows = [self._row(c.chunk_id, c.kb_id, c.doc_id, c.text) for c in chunks]
        with self.db.transaction() as db:
            db.conn.executemany(_INSERT, rows)

    def search(self, kb_ids: Sequence[int], query: str, top_k: int,
               doc_ids: Sequence[int] | None = None) -> list[tuple[str, float]]:
        terms = index_terms(query, self.stem)
        if not terms or not kb_ids or top_k <= 0 or (doc_ids is not None and len(doc_ids) == 0):
            return []
        # bm25() is lower-is-better (negative); negate so higher is better as the protocol says.
        # Weights: only the terms column scores; kb/doc are filters.
        rows = self.db.db.execute(
            f"SELECT chunk_id, -bm25({FTS_TABLE}, 1.0, 0.0, 0.0) AS score FROM {FTS_TABLE} "
            f"WHERE {FTS_TABLE} MATCH ? ORDER BY bm25({FTS_TABLE}, 1.0, 0.0, 0.0) LIMIT ?",
            [match_expression(terms, kb_ids, doc_ids), int(top_k)]).fetchall()
        return [(r[0], float(r[1])) for r in rows]

    def _delete_matching(self, expr: str) -> None:
        with self.db.transaction() as db:
            db.execute(f"DELETE FROM {FTS_TABLE} WHERE rowid IN "
                       f"(SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH ?)", [expr])

    def delete_document(self, kb_id: int, doc_id: int) -> None:
        self._delete_matching(f"kb : {_kb_token(kb_id)} AND doc : {_doc_token(doc_id)}")

    def delete_kb(self, kb_id: int) -> None:
        self._delete_matching(f"kb : {_kb_token(kb_id)}")

    def document_ids(self, kb_id: int) -> set[int]:
        rows = self.db.db.execute(f"SELECT DISTINCT doc_id FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH ?",
                                  [f"kb : {_kb_token(kb_id)}"])
        return {int(r[0]) for r in rows.fetchall()}

    def kb_ids(self) -> set[int]:
        return {int(r[0]) for r in self.db.db.execute(f"SELECT DISTINCT kb_id FROM {FTS_TABLE}").fetchall()}

    def count(self, kb_id: int) -> int:
        return self.db.db.execute(f"SELECT COUNT(*) FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH ?",
                                  [f"kb : {_kb_token(kb_id)}"]).fetchone()[0]

    def status(self) -> BackendStatus:
        return BackendStatus(role="keyword_index", name="SQLite FTS5 bm25", live=True,
                             detail=f"persistent, jieba + English tokens, stemming {'on' if self.stem else 'off'}")


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
            "WHERE kb_id = ? AND status = 'complete'", [int(kb_id)]).fetchone())

    def _model(self, kb_id: int) -> _KbModel:
        signature = self._signature(kb_id)
        with self._lock:
            model = self._models.get(kb_id)
            if model is not None and model.signature == signature:
                return model
            rows = self.db.db.execute(
                "SELECT c.id, c.doc_id, c.text FROM chunks c JOIN documents d ON d.id = c.doc_id "
                "WHERE c.kb_id = ? AND c.is_parent = 0 AND d.status = 'complete' ORDER BY c.doc_id, c.idx",
                [int(kb_id)]).fetchall()
            corpus = [index_terms(r[2], self.stem) for r in rows]
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
               doc_ids: Sequence[int] | None = None) -> list[tuple[str, float]]:
        terms = index_terms(query, self.stem)
        if not terms or top_k <= 0 or (doc_ids is not None and len(doc_ids) == 0):
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
