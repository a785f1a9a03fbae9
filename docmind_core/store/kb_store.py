"""Knowledge bases, documents and chunks in SQLite.

The SQLite rows are the source of truth for what a knowledge base holds; the
vector store and the keyword index are derived from the ``chunks`` table and
kept in step by the :class:`~docmind_core.ingest.pipeline.Ingestor`.  A
document's extracted text lives in ``documents.text`` so that chunk offsets
always point into the text that was indexed, even after the file is gone.

Readers see searchable documents only: every chunk read (``get_chunks``,
``chunks_for_document``, ``parent_of``) joins the document row and keeps the
chunks of ``complete`` and ``embedding`` documents, so a document being
written, deleted or left half-written by a crash never reaches a search, an
expansion or a direct read, even though its chunks may already sit in the
vector store and the keyword index.  The Ingestor's own checks ask for
``any_status=True``.

``embedding``: every chunk row and keyword entry of the document is written and
its vectors are on their way (keyword-first ingestion).  It is searched by
keyword and by the vectors it already has; it is owned by a lease like a
pending document, so a process killed half-way leaves it for a backfill
(``Ingestor.finish_embedding``), never half-searchable for good.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from docmind_core.errors import CallerError, DocumentBusy, NotFound
from docmind_core.values import ChunkPlace, ChunkRecord, DocumentRecord, DocumentStatus, KnowledgeBase, PendingIngest
from docmind_core.store.db import Database, utcnow, where_sql

_VISIBILITIES = ("private", "department", "public")
_KB_FIELDS = ("name", "description", "embedder_id", "embedding_dim", "owner_id", "department", "visibility")
_TEXT_SPOOL_TABLE = "CREATE TEMP TABLE IF NOT EXISTS document_text_parts (doc_id INTEGER NOT NULL, piece TEXT)"
_DOC_COLUMNS = "id, kb_id, name, source_path, content_hash, mime, size, status, error, created_at"
_CHUNK_COLUMNS = ("id, kb_id, doc_id, idx, is_parent, parent_id, text, token_count, start, end, terms, "
                  "page_first, page_last, section, row_first, row_last")
# CROSS JOIN keeps SQLite's planner on the chunk rows first (by id or by document), then one primary-key
# lookup of each row's document: left to itself, with a few dozen ids it scans the documents by status
# and takes 6 ms rather than 0.15 ms for 40 chunks of a 10k-chunk KB.
_READY_JOIN = "CROSS JOIN documents d ON d.id = c.doc_id AND d.status IN ('complete', 'embedding')"
# The statuses a search reads (SQL list): complete documents and those whose vectors are still being written.
SEARCHABLE = "('complete', 'embedding')"

# Counts shown beside a KB: searchable documents only, and child chunks only
# (parents are context blocks, not retrieval units).
_KB_SELECT = f"""
SELECT k.*,
  (SELECT COUNT(*) FROM documents d WHERE d.kb_id = k.id AND d.status IN {SEARCHABLE}) AS document_count,
  (SELECT COUNT(*) FROM documents d CROSS JOIN chunks c ON c.doc_id = d.id AND c.is_parent = 0
     WHERE d.kb_id = k.id AND d.status IN {SEARCHABLE}) AS chunk_count
FROM knowledge_bases k
"""


def _placeholders(n: int) -> str:
    return ", ".join("?" * n)


class KnowledgeStore:
    """CRUD for knowledge bases, documents and chunks (no vector or keyword work here)."""

    def __init__(self, db: Database):
        self.db = db

    # ------------------------------------------------------------------
    # Knowledge bases
    # ------------------------------------------------------------------

    def create_kb(self, name: str, embedder_id: str, embedding_dim: int, description: str = "",
                  owner_id: int | None = None, department: str = "", visibility: str = "private") -> KnowledgeBase:
        name = name.strip()
        if not name:
            raise CallerError("A knowledge base needs a name.")
        if visibility not in _VISIBILITIES:
            raise CallerError(f"visibility must be one of {', '.join(_VISIBILITIES)}, not {visibility!r}.")
        try:
            with self.db.transaction() as db:
                kb_id = db["knowledge_bases"].insert({
                    "name": name, "description": description, "embedder_id": embedder_id,
                    "embedding_dim": int(embedding_dim), "owner_id": owner_id, "department": department,
                    "visibility": visibility, "created_at": utcnow(),
                }).last_pk
        except sqlite3.IntegrityError:
            raise CallerError(f"A knowledge base named {name!r} already exists.") from None
        return self.get_kb(kb_id)

    def get_kb(self, kb_id: int) -> KnowledgeBase:
        rows = self._kb_rows("WHERE k.id = ?", [kb_id])
        if not rows:
            raise NotFound(f"No knowledge base with id {kb_id}.")
        return rows[0]

    def kb_encoder(self, kb_id: int) -> tuple[str, str]:
        """(name, embedder id) of a KB: the encoder that built its vectors, read on every search (one row by key,
        without the counts ``get_kb`` adds)."""
        row = self.db.db.execute("SELECT name, embedder_id FROM knowledge_bases WHERE id = ?", [kb_id]).fetchone()
        if row is None:
            raise NotFound(f"No knowledge base with id {kb_id}.")
        return row[0], row[1]

    def find_kb(self, name: str) -> KnowledgeBase | None:
        rows = self._kb_rows("WHERE k.name = ?", [name])
        return rows[0] if rows else None

    def list_kbs(self) -> list[KnowledgeBase]:
        return self._kb_rows("ORDER BY k.name", [])

    def update_kb(self, kb_id: int, **fields: Any) -> KnowledgeBase:
        unknown = set(fields) - set(_KB_FIELDS)
        if unknown:
            raise ValueError(f"not a knowledge base field: {', '.join(sorted(unknown))}")
        self.get_kb(kb_id)
        if "visibility" in fields and fields["visibility"] not in _VISIBILITIES:
            raise CallerError(f"visibility must be one of {', '.join(_VISIBILITIES)}, not {fields['visibility']!r}.")
        if fields:
            try:
                with self.db.transaction() as db:
                    db["knowledge_bases"].update(kb_id, fields)
            except sqlite3.IntegrityError:
                raise CallerError(f"A knowledge base named {fields.get('name')!r} already exists.") from None
        return self.get_kb(kb_id)

    def delete_kb(self, kb_id: int) -> None:
        """Remove the KB row; documents and chunks go with it (ON DELETE CASCADE)."""
        with self.db.transaction() as db:
            db.execute("DELETE FROM knowledge_bases WHERE id = ?", [kb_id])

    def _kb_rows(self, where: str, params: list[Any]) -> list[KnowledgeBase]:
        cursor = self.db.db.execute(f"{_KB_SELECT} {where}", params)
        names = [c[0] for c in cursor.description]
        return [KnowledgeBase(**dict(zip(names, row))) for row in cursor.fetchall()]

    # ------------------------------------------------------------------
    # Documents
    # ------------------------------------------------------------------

    def list_documents(self, kb_id: int, status: DocumentStatus | None = None) -> list[DocumentRecord]:
        where, params = "WHERE d.kb_id = ?", [kb_id]
        if status is not None:
            where += " AND d.status = ?"
            params.append(status)
        return self._doc_rows(f"{where} ORDER BY d.name", params)

    def get_document(self, doc_id: int) -> DocumentRecord:
        rows = self._doc_rows("WHERE d.id = ?", [doc_id])
        if not rows:
            raise NotFound(f"No document with id {doc_id}.")
        return rows[0]

    def find_document(self, kb_id: int, name: str) -> DocumentRecord | None:
        rows = self._doc_rows("WHERE d.kb_id = ? AND d.name = ?", [kb_id, name])
        return rows[0] if rows else None

    def incomplete_documents(self) -> list[DocumentRecord]:
        """Documents left pending (an interrupted ingest or delete) or failed, across all KBs."""
        return self._doc_rows("WHERE d.status != 'complete' ORDER BY d.id", [])

    def pending_ingest(self, kb_ids: Sequence[int]) -> list[PendingIngest]:
        """The KBs among ``kb_ids`` that are not fully searchable yet: how many documents are not searched, how
        many chunks are searched by keyword only (still embedding) and how many documents were searched.

        Pending: a file of a queued or running ingest job that has not landed, or a document whose chunks
        are still being written (any writer: a job, ``docmind ingest``, a replace); one name counts once.  A
        file whose document is already ``embedding`` is not pending: it is searched, and its chunks without
        a vector are counted as still embedding.
        """
        ids = list(dict.fromkeys(int(k) for k in kb_ids))
        if not ids:
            return []
        marks = _placeholders(len(ids))
        names: dict[int, set[str]] = {}
        rows = self.db.db.execute(
            f"SELECT kb_id, name FROM documents WHERE status = 'pending' AND kb_id IN ({marks}) "
            f"UNION SELECT j.kb_id, f.name FROM ingest_job_files f JOIN ingest_jobs j ON j.id = f.job_id "
            f"WHERE j.state IN ('queued', 'running') AND f.state IN ('queued', 'running') AND j.kb_id IN ({marks}) "
            f"AND NOT EXISTS (SELECT 1 FROM documents e WHERE e.kb_id = j.kb_id AND e.name = f.name "
            f"AND e.status = 'embedding')",
            ids + ids).fetchall()
        for kb_id, name in rows:
            names.setdefault(int(kb_id), set()).add(name)
        embedding = self.embedding_backlog(ids)
        if not names and not embedding:
            return []
        searched = dict(self.db.db.execute(
            f"SELECT kb_id, COUNT(*) FROM documents WHERE status IN {SEARCHABLE} AND kb_id IN ({marks}) "
            f"GROUP BY kb_id", ids).fetchall())
        kb_names = dict(self.db.db.execute(f"SELECT id, name FROM knowledge_bases WHERE id IN ({marks})",
                                           ids).fetchall())
        return [PendingIngest(kb_id=k, kb_name=kb_names.get(k, ""), pending_documents=len(names.get(k, ())),
                              searched_documents=int(searched.get(k, 0)), embedding_chunks=embedding.get(k, 0))
                for k in ids if k in names or k in embedding]

    def embedding_backlog(self, kb_ids: Sequence[int]) -> dict[int, int]:
        """kb id -> child chunks of its ``embedding`` documents that have no vector yet (KBs with none left out)."""
        ids = list(dict.fromkeys(int(k) for k in kb_ids))
        if not ids:
            return {}
        rows = self.db.db.execute(
            f"SELECT d.kb_id, COUNT(*) FROM documents d CROSS JOIN chunks c ON c.doc_id = d.id AND c.is_parent = 0 "
            f"WHERE d.status = 'embedding' AND d.kb_id IN ({_placeholders(len(ids))}) AND c.vector IS NULL "
            f"GROUP BY d.kb_id", ids).fetchall()
        return {int(k): int(n) for k, n in rows if n}

    def embedding_documents(self) -> list[tuple[DocumentRecord, int | None]]:
        """Documents whose vectors are still being written, across all KBs, with the lease that owns each."""
        docs = self._doc_rows("WHERE d.status = 'embedding' ORDER BY d.id", [])
        leases = self.document_leases([d.id for d in docs])
        return [(d, leases.get(d.id)) for d in docs]

    def pending_documents(self) -> list[tuple[DocumentRecord, int | None]]:
        """Pending documents across all KBs with the id of the lease that owns each (None: no owner)."""
        docs = self._doc_rows("WHERE d.status = 'pending' ORDER BY d.id", [])
        leases = self.document_leases([d.id for d in docs])
        return [(d, leases.get(d.id)) for d in docs]

    def document_leases(self, doc_ids: Iterable[int]) -> dict[int, int | None]:
        ids = list(dict.fromkeys(doc_ids))
        found: dict[int, int | None] = {}
        for i in range(0, len(ids), 500):
            batch = ids[i:i + 500]
            rows = self.db.db.execute(f"SELECT id, lease_id FROM documents WHERE id IN ({_placeholders(len(batch))})",
                                      batch).fetchall()
            found.update({r[0]: r[1] for r in rows})
        return found

    def document_states(self, kb_id: int) -> dict[int, tuple[str, int | None]]:
        """doc id -> (status, lease id) of every document of the KB."""
        rows = self.db.db.execute("SELECT id, status, lease_id FROM documents WHERE kb_id = ?", [kb_id]).fetchall()
        return {r[0]: (r[1], r[2]) for r in rows}

    def document_text(self, doc_id: int) -> str:
        row = self.db.db.execute("SELECT text FROM documents WHERE id = ?", [doc_id]).fetchone()
        if row is None:
            raise NotFound(f"No document with id {doc_id}.")
        return row[0]

    def doc_names(self, doc_ids: Iterable[int]) -> dict[int, str]:
        ids = list(set(doc_ids))
        if not ids:
            return {}
        rows = self.db.db.execute(
            f"SELECT id, name FROM documents WHERE id IN ({_placeholders(len(ids))})", ids).fetchall()
        return {r[0]: r[1] for r in rows}

    def begin_document(self, kb_id: int, name: str, *, source_path: str, content_hash: str, mime: str,
                       size: int, text: str, lease_id: int | None = None,
                       owner_alive: Callable[[int | None], bool] | None = None) -> int:
        """Insert (or take over) the row for ``name`` with status pending, owned by ``lease_id``; returns its id.

        Re-ingesting a name reuses its row so the document keeps its id; its old chunks are the
        caller's to remove (the row is pending from here on, so no reader sees them).  A row that is
        pending under another lease whose owner ``owner_alive`` says is still working raises
        :class:`DocumentBusy`: two processes never write one document at once.
        """
        now = utcnow()
        with self.db.transaction() as db:
            row = db.execute("SELECT id, status, lease_id FROM documents WHERE kb_id = ? AND name = ?",
                             [kb_id, name]).fetchone()
            values = {"source_path": source_path, "content_hash": content_hash, "mime": mime, "size": size,
                      "status": "pending", "error": "", "text": text, "updated_at": now, "lease_id": lease_id}
            if row is not None:
                if (row[1] in ("pending", "embedding") and row[2] is not None and row[2] != lease_id and owner_alive is not None
                        and owner_alive(row[2])):
                    raise DocumentBusy(f"{name} is being written or deleted by another process right now; "
                                       "try again when it has finished")
                db["documents"].update(row[0], values)
                return row[0]
            return db["documents"].insert({"kb_id": kb_id, "name": name, "created_at": now, **values}).last_pk

    def spool_document_text(self, doc_id: int, pieces: Sequence[str]) -> None:
        """Keep the next pieces of a document's text, for :meth:`store_spooled_text` (a large document's
        text never passes through Python whole).  The spool is a temp table of this thread's connection:
        spool and store from one thread."""
        with self.db.transaction() as db:
            db.execute(_TEXT_SPOOL_TABLE)
            db.conn.executemany("INSERT INTO temp.document_text_parts VALUES (?, ?)", [(doc_id, p) for p in pieces])

    def store_spooled_text(self, doc_id: int, keep: bool = True) -> None:
        """Set the document's text to its spooled pieces in order (``keep=False``: just drop them)."""
        with self.db.transaction() as db:
            db.execute(_TEXT_SPOOL_TABLE)
            if keep:
                # Sized once, then written in place piece by piece: a group_concat of the pieces held the
                # whole text about four times over (+200 MB for a 50 MB text).
                size = db.execute("SELECT coalesce(sum(length(CAST(piece AS BLOB))), 0) "
                                  "FROM temp.document_text_parts WHERE doc_id = ?", [doc_id]).fetchone()[0]
                db.execute("UPDATE documents SET text = CAST(zeroblob(?) AS TEXT) WHERE id = ?", [size, doc_id])
                if size:
                    with db.conn.blobopen("documents", "text", doc_id) as text:
                        for (piece,) in db.conn.execute("SELECT piece FROM temp.document_text_parts "
                                                        "WHERE doc_id = ? ORDER BY rowid", [doc_id]):
                            text.write(piece.encode("utf-8"))
            db.execute("DELETE FROM temp.document_text_parts WHERE doc_id = ?", [doc_id])

    def set_document_status(self, doc_id: int, status: DocumentStatus, error: str = "",
                            lease_id: int | None = None) -> None:
        """Set a status; ``lease_id`` is the owner of a pending document (every other status has none)."""
        values: dict[str, Any] = {"status": status, "error": error, "updated_at": utcnow(),
                                  "lease_id": lease_id if status in ("pending", "embedding") else None}
        if status == "failed":
            values["text"] = ""  # a failed document has no chunks pointing into its text
        with self.db.transaction() as db:
            db["documents"].update(doc_id, values)

    def claim_document(self, doc_id: int, lease_id: int, *, expect_status: DocumentStatus,
                       expect_lease: int | None) -> bool:
        """Make the document pending under ``lease_id`` if it is still as the caller saw it; True if so.

        Compare-and-set in one statement: of two processes that judged the same document, one wins.
        """
        with self.db.transaction() as db:
            cursor = db.execute(
                "UPDATE documents SET status = 'pending', lease_id = ?, updated_at = ? "
                "WHERE id = ? AND status = ? AND lease_id IS ?", [lease_id, utcnow(), doc_id, expect_status,
                                                                  expect_lease])
            return cursor.rowcount == 1

    def complete_document(self, doc_id: int, lease_id: int | None) -> bool:
        """pending or embedding -> complete, only while ``lease_id`` still owns it; False when another process
        took it over."""
        with self.db.transaction() as db:
            cursor = db.execute(
                "UPDATE documents SET status = 'complete', error = '', lease_id = NULL, updated_at = ? "
                "WHERE id = ? AND status IN ('pending', 'embedding') AND lease_id IS ?", [utcnow(), doc_id, lease_id])
            return cursor.rowcount == 1

    def open_for_search(self, doc_id: int, lease_id: int | None) -> bool:
        """pending -> embedding (keyword-searchable, vectors on their way), only while ``lease_id`` owns it."""
        with self.db.transaction() as db:
            cursor = db.execute(
                "UPDATE documents SET status = 'embedding', updated_at = ? "
                "WHERE id = ? AND status = 'pending' AND lease_id IS ?", [utcnow(), doc_id, lease_id])
            return cursor.rowcount == 1

    def claim_embedding(self, doc_id: int, lease_id: int, expect_lease: int | None) -> bool:
        """Take over an ``embedding`` document from a gone owner (compare-and-set on its lease); True if taken.
        It stays searchable meanwhile."""
        with self.db.transaction() as db:
            cursor = db.execute(
                "UPDATE documents SET lease_id = ? WHERE id = ? AND status = 'embedding' AND lease_id IS ?",
                [lease_id, doc_id, expect_lease])
            return cursor.rowcount == 1

    def set_kb_documents_status(self, kb_id: int, status: DocumentStatus, lease_id: int | None = None) -> None:
        with self.db.transaction() as db:
            db.execute("UPDATE documents SET status = ?, lease_id = ?, updated_at = ? WHERE kb_id = ?",
                       [status, lease_id if status == "pending" else None, utcnow(), kb_id])

    def record_failed_document(self, kb_id: int, name: str, *, source_path: str, content_hash: str,
                               mime: str, size: int, error: str, lease_id: int | None = None,
                               owner_alive: Callable[[int | None], bool] | None = None) -> int:
        """Keep a row for a file that could not be read, so the UI can show why."""
        doc_id = self.begin_document(kb_id, name, source_path=source_path, content_hash=content_hash,
                                     mime=mime, size=size, text="", lease_id=lease_id, owner_alive=owner_alive)
        self.set_document_status(doc_id, "failed", error)
        return doc_id

    def delete_document(self, doc_id: int) -> None:
        with self.db.transaction() as db:
            db.execute("DELETE FROM documents WHERE id = ?", [doc_id])

    def _doc_rows(self, where: str, params: list[Any]) -> list[DocumentRecord]:
        sql = (f"SELECT {', '.join('d.' + c for c in _DOC_COLUMNS.split(', '))}, "
               "(SELECT COUNT(*) FROM chunks c WHERE c.doc_id = d.id AND c.is_parent = 0) AS chunk_count "
               f"FROM documents d {where}")
        cursor = self.db.db.execute(sql, params)
        names = [c[0] for c in cursor.description]
        return [DocumentRecord(**dict(zip(names, row))) for row in cursor.fetchall()]

    # ------------------------------------------------------------------
    # Chunks
    # ------------------------------------------------------------------

    def add_chunks(self, chunks: Sequence[ChunkRecord]) -> None:
        rows = [{"id": c.id, "kb_id": c.kb_id, "doc_id": c.doc_id, "idx": c.index, "is_parent": int(c.is_parent),
                 "parent_id": c.parent_id, "text": c.text, "token_count": c.token_count, "start": c.start,
                 "end": c.end, "terms": c.terms, "page_first": c.place.page_first, "page_last": c.place.page_last,
                 "section": c.place.section, "row_first": c.place.row_first, "row_last": c.place.row_last}
                for c in chunks]
        with self.db.transaction() as db:
            db["chunks"].insert_all(rows, batch_size=500)

    def set_chunk_vectors(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Keep a copy of these chunks' embeddings with their rows (see migration m007)."""
        if len(ids) != len(vectors):
            raise ValueError(f"{len(ids)} chunk ids but {len(vectors)} vectors")
        blobs = np.asarray(vectors, dtype="<f4")
        with self.db.transaction() as db:
            db.conn.executemany("UPDATE chunks SET vector = ? WHERE id = ?",
                                [(blobs[i].tobytes(), cid) for i, cid in enumerate(ids)])

    def clear_chunk_vectors(self, kb_id: int) -> None:
        with self.db.transaction() as db:
            db.execute("UPDATE chunks SET vector = NULL WHERE kb_id = ?", [kb_id])

    def chunk_vectors(self, ids: Iterable[str]) -> dict[str, np.ndarray]:
        """The stored embedding copies of those chunks that have one."""
        wanted = list(dict.fromkeys(ids))
        found: dict[str, np.ndarray] = {}
        for i in range(0, len(wanted), 500):
            batch = wanted[i:i + 500]
            rows = self.db.db.execute(
                f"SELECT id, vector FROM chunks WHERE vector IS NOT NULL AND id IN ({_placeholders(len(batch))})",
                batch).fetchall()
            for cid, blob in rows:
                found[cid] = np.frombuffer(blob, dtype="<f4")
        return found

    def delete_chunks_of_document(self, doc_id: int) -> None:
        with self.db.transaction() as db:
            db.execute("DELETE FROM chunks WHERE doc_id = ?", [doc_id])
            db.execute("DELETE FROM document_files WHERE doc_id = ?", [doc_id])  # a clean slate: its file too

    def keep_file(self, doc_id: int, data: bytes) -> None:
        """Keep the document's original bytes (a PDF: its pages are shown as images)."""
        with self.db.transaction() as db:
            db.execute("INSERT OR REPLACE INTO document_files (doc_id, data) VALUES (?, ?)", [doc_id, data])

    def document_file(self, doc_id: int) -> bytes | None:
        row = self.db.db.execute("SELECT data FROM document_files WHERE doc_id = ?", [doc_id]).fetchone()
        return bytes(row[0]) if row else None

    def chunks_for_document(self, doc_id: int, parents: bool = False, any_status: bool = False) -> list[ChunkRecord]:
        return self._chunk_rows("WHERE c.doc_id = ? AND c.is_parent = ? ORDER BY c.idx", [doc_id, int(parents)],
                                any_status)

    def lacks_places(self, doc_id: int) -> bool:
        """True when the document's chunks were stored without the pages or rows a PDF or CSV chunk now
        keeps (before migration m017): ingesting the same file again reads it anew."""
        row = self.db.db.execute(
            "SELECT 1 FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.doc_id = ? AND c.page_first IS NULL "
            "AND c.row_first IS NULL AND d.mime IN ('application/pdf', 'text/csv') LIMIT 1", [doc_id]).fetchone()
        return row is not None

    def chunk_count(self, doc_id: int) -> int:
        return self.db.db.execute(
            "SELECT COUNT(*) FROM chunks WHERE doc_id = ? AND is_parent = 0", [doc_id]).fetchone()[0]

    def child_chunks(self, ids: Iterable[str]) -> list[tuple[str, int, int, str, str | None]]:
        """(chunk id, kb id, doc id, text, terms) of these child chunk rows, any status (index repair)."""
        wanted = list(dict.fromkeys(ids))
        out: list[tuple[str, int, int, str, str | None]] = []
        for i in range(0, len(wanted), 500):
            batch = wanted[i:i + 500]
            out += [tuple(r) for r in self.db.db.execute(
                f"SELECT id, kb_id, doc_id, text, terms FROM chunks WHERE is_parent = 0 AND id IN "
                f"({_placeholders(len(batch))}) ORDER BY doc_id, idx", batch).fetchall()]
        return out

    def get_chunks(self, ids: Iterable[str], any_status: bool = False) -> dict[str, ChunkRecord]:
        """Chunks by id; those of documents that are not complete are absent unless ``any_status``."""
        wanted = list(dict.fromkeys(ids))
        found: dict[str, ChunkRecord] = {}
        for i in range(0, len(wanted), 500):  # stay under SQLite's bound-parameter limit
            batch = wanted[i:i + 500]
            for chunk in self._chunk_rows(f"WHERE c.id IN ({_placeholders(len(batch))})", batch, any_status):
                found[chunk.id] = chunk
        return found

    def parent_of(self, chunk_ids: Iterable[str]) -> dict[str, ChunkRecord]:
        """The parent block of each child chunk that has one."""
        children = self.get_chunks(chunk_ids)
        parents = self.get_chunks(c.parent_id for c in children.values() if c.parent_id)
        return {cid: parents[c.parent_id] for cid, c in children.items() if c.parent_id in parents}

    def child_texts(self, kb_id: int) -> list[tuple[str, int, str]]:
        """(chunk_id, doc_id, text) of every child chunk of the KB's complete documents, in a stable order."""
        rows = self.db.db.execute(
            "SELECT c.id, c.doc_id, c.text FROM chunks c JOIN documents d ON d.id = c.doc_id "
            f"WHERE c.kb_id = ? AND c.is_parent = 0 AND d.status IN {SEARCHABLE} ORDER BY c.doc_id, c.idx",
            [kb_id]).fetchall()
        return [(r[0], r[1], r[2]) for r in rows]

    def child_chunk_index(self, kb_id: int) -> list[tuple[str, int, bool]]:
        """(chunk id, doc id, has a stored vector copy) of every child chunk row of the KB, any status."""
        rows = self.db.db.execute(
            "SELECT id, doc_id, vector IS NOT NULL FROM chunks WHERE kb_id = ? AND is_parent = 0 ORDER BY doc_id, idx",
            [kb_id]).fetchall()
        return [(r[0], r[1], bool(r[2])) for r in rows]

    def chunks_without_vectors(self, kb_id: int, limit: int,
                               doc_ids: Sequence[int] | None = None) -> list[tuple[str, int, str]]:
        """(chunk id, doc id, text) of up to ``limit`` child chunks of searchable documents with no vector copy;
        with ``doc_ids``, of those documents only, taken in that order (each one's chunks in text order).

        With ``doc_ids``, a batch that holds some documents already ends before one that does not fit in
        what is left of it: small documents share a batch and are done with it, and a large one starts
        in the next (one short batch, rather than the small ones waiting for a full batch of the large one).
        """
        if doc_ids is None:
            rows = self.db.db.execute(
                "SELECT c.id, c.doc_id, c.text FROM chunks c JOIN documents d ON d.id = c.doc_id "
                f"WHERE c.kb_id = ? AND c.is_parent = 0 AND d.status IN {SEARCHABLE} AND c.vector IS NULL "
                "ORDER BY c.doc_id, c.idx LIMIT ?", [kb_id, int(limit)]).fetchall()
            return [(r[0], r[1], r[2]) for r in rows]
        out: list[tuple[str, int, str]] = []
        for doc_id in doc_ids:  # one indexed read per document: no sort of every missing chunk per batch
            if len(out) >= limit:
                break
            room = limit - len(out)
            rows = self.db.db.execute(
                "SELECT c.id, c.doc_id, c.text FROM chunks c JOIN documents d ON d.id = c.doc_id "
                f"WHERE c.doc_id = ? AND c.kb_id = ? AND c.is_parent = 0 AND d.status IN {SEARCHABLE} "
                "AND c.vector IS NULL ORDER BY c.idx LIMIT ?", [int(doc_id), kb_id, room + 1]).fetchall()
            if out and len(rows) > room:
                break
            out += [(r[0], r[1], r[2]) for r in rows[:room]]
        return out

    def missing_vector_counts(self, doc_ids: Sequence[int]) -> dict[int, int]:
        """doc id -> its child chunks without a vector copy (documents with none are left out)."""
        ids = list(dict.fromkeys(int(d) for d in doc_ids))
        if not ids:
            return {}
        rows = self.db.db.execute(
            f"SELECT doc_id, COUNT(*) FROM chunks WHERE doc_id IN ({_placeholders(len(ids))}) AND is_parent = 0 "
            "AND vector IS NULL GROUP BY doc_id", ids).fetchall()
        return {int(d): int(n) for d, n in rows}

    def ready_chunk_count(self, kb_id: int) -> int:
        """Child chunks of the KB's searchable documents (what the vector store should hold once the
        ``embedding`` ones are done)."""
        # documents first, then the chunks_doc index: 1.4 ms at 10k chunks where chunks-first took 6 ms
        return self.db.db.execute(
            "SELECT COUNT(*) FROM documents d CROSS JOIN chunks c ON c.doc_id = d.id AND c.is_parent = 0 "
            f"WHERE d.kb_id = ? AND d.status IN {SEARCHABLE}", [kb_id]).fetchone()[0]

    def kb_change_signature(self, kb_id: int) -> tuple:
        """Changes whenever a document of the KB is added, completed, replaced or removed (~1 ms at 1,000
        documents; the keyword index's generation is the cheaper signal where there is one)."""
        return tuple(self.db.db.execute("SELECT COUNT(*), COALESCE(MAX(updated_at), ''), COALESCE(SUM(id), 0) "
                                        "FROM documents WHERE kb_id = ?", [kb_id]).fetchone())

    def reindex_signature(self, kb_id: int) -> tuple:
        """Changes whenever a re-index of the KB starts, progresses or ends."""
        return tuple(self.db.db.execute("SELECT COUNT(*), COALESCE(MAX(updated_at), '') FROM kb_reindex_runs "
                                        "WHERE kb_id = ?", [kb_id]).fetchone())

    # ------------------------------------------------------------------
    # Re-index runs (migration m009): a re-index is recorded so an interrupted one is finished
    # ------------------------------------------------------------------

    def begin_reindex(self, kb_id: int, lease_id: int, embedder_id: str, embedding_dim: int,
                      previous_embedder_id: str, total_chunks: int) -> int:
        now = utcnow()
        with self.db.transaction() as db:
            return int(db["kb_reindex_runs"].insert({
                "kb_id": kb_id, "lease_id": lease_id, "state": "running", "embedder_id": embedder_id,
                "embedding_dim": int(embedding_dim), "previous_embedder_id": previous_embedder_id,
                "total_chunks": int(total_chunks), "embedded_chunks": 0, "started_at": now, "updated_at": now,
            }).last_pk)

    def reindex_progress(self, run_id: int, embedded_chunks: int) -> None:
        with self.db.transaction() as db:
            db.execute("UPDATE kb_reindex_runs SET embedded_chunks = ?, updated_at = ? WHERE id = ?",
                       [int(embedded_chunks), utcnow(), run_id])

    def claim_reindex(self, run_id: int, lease_id: int, expect_lease: int | None, **changes: Any) -> bool:
        """Take over a running re-index from a gone owner (compare-and-set on its lease); True if taken."""
        sets = ", ".join(f"{k} = ?" for k in changes)
        with self.db.transaction() as db:
            cursor = db.execute(
                f"UPDATE kb_reindex_runs SET lease_id = ?, updated_at = ?{', ' + sets if sets else ''} "
                "WHERE id = ? AND state = 'running' AND lease_id IS ?",
                [lease_id, utcnow(), *changes.values(), run_id, expect_lease])
            return cursor.rowcount == 1

    def finish_reindex(self, run_id: int, state: str, note: str = "") -> None:
        now = utcnow()
        with self.db.transaction() as db:
            db.execute("UPDATE kb_reindex_runs SET state = ?, note = ?, lease_id = NULL, updated_at = ?, "
                       "finished_at = ? WHERE id = ?", [state, note, now, now, run_id])

    def reindex_runs(self, kb_id: int | None = None, state: str | None = None) -> list[dict[str, Any]]:
        where, params = where_sql({"kb_id = ?": kb_id, "state = ?": state})
        sql = "SELECT * FROM kb_reindex_runs" + where + " ORDER BY id"
        cursor = self.db.db.execute(sql, params)
        names = [c[0] for c in cursor.description]
        return [dict(zip(names, row)) for row in cursor.fetchall()]

    def _chunk_rows(self, where: str, params: list[Any], any_status: bool = False) -> list[ChunkRecord]:
        # The one place a chunk is read for a search, an expansion or a direct read: the join keeps the
        # chunks of complete documents only (see the module docstring).
        columns = ", ".join(f"c.{name}" for name in _CHUNK_COLUMNS.split(", "))
        join = "" if any_status else _READY_JOIN
        rows = self.db.db.execute(f"SELECT {columns} FROM chunks c {join} {where}", params).fetchall()
        return [ChunkRecord(id=r[0], kb_id=r[1], doc_id=r[2], index=r[3], is_parent=bool(r[4]), parent_id=r[5],
                            text=r[6], token_count=r[7], start=r[8], end=r[9], terms=r[10],
                            place=ChunkPlace(page_first=r[11], page_last=r[12], section=r[13] or "",
                                             row_first=r[14], row_last=r[15])) for r in rows]
