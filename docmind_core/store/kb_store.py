"""Knowledge bases, documents and chunks in SQLite.

The SQLite rows are the source of truth for what a knowledge base holds; the
vector store and the keyword index are derived from the ``chunks`` table and
kept in step by the :class:`~docmind_core.ingest.pipeline.Ingestor`.  A
document's extracted text lives in ``documents.text`` so that chunk offsets
always point into the text that was indexed, even after the file is gone.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Iterable, Sequence

import numpy as np

from docmind_core.errors import DocMindError, NotFound
from docmind_core.models import ChunkRecord, DocumentRecord, DocumentStatus, KnowledgeBase
from docmind_core.store.db import Database, utcnow

_VISIBILITIES = ("private", "department", "public")
_KB_FIELDS = ("name", "description", "embedder_id", "embedding_dim", "owner_id", "department", "visibility")
_DOC_COLUMNS = "id, kb_id, name, source_path, content_hash, mime, size, status, error, created_at"
_CHUNK_COLUMNS = "id, kb_id, doc_id, idx, is_parent, parent_id, text, token_count, start, end, terms"

# Counts shown beside a KB: complete documents only, and child chunks only
# (parents are context blocks, not retrieval units).
_KB_SELECT = """
SELECT k.*,
  (SELECT COUNT(*) FROM documents d WHERE d.kb_id = k.id AND d.status = 'complete') AS document_count,
  (SELECT COUNT(*) FROM chunks c JOIN documents d ON d.id = c.doc_id
     WHERE c.kb_id = k.id AND c.is_parent = 0 AND d.status = 'complete') AS chunk_count
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
            raise DocMindError("A knowledge base needs a name.")
        if visibility not in _VISIBILITIES:
            raise DocMindError(f"visibility must be one of {', '.join(_VISIBILITIES)}, not {visibility!r}.")
        try:
            with self.db.transaction() as db:
                kb_id = db["knowledge_bases"].insert({
                    "name": name, "description": description, "embedder_id": embedder_id,
                    "embedding_dim": int(embedding_dim), "owner_id": owner_id, "department": department,
                    "visibility": visibility, "created_at": utcnow(),
                }).last_pk
        except sqlite3.IntegrityError:
            raise DocMindError(f"A knowledge base named {name!r} already exists.") from None
        return self.get_kb(kb_id)

    def get_kb(self, kb_id: int) -> KnowledgeBase:
        rows = self._kb_rows("WHERE k.id = ?", [kb_id])
        if not rows:
            raise NotFound(f"No knowledge base with id {kb_id}.")
        return rows[0]

    def get_kb_by_name(self, name: str) -> KnowledgeBase:
        rows = self._kb_rows("WHERE k.name = ?", [name])
        if not rows:
            raise NotFound(f"No knowledge base named {name!r}.")
        return rows[0]

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
            raise DocMindError(f"visibility must be one of {', '.join(_VISIBILITIES)}, not {fields['visibility']!r}.")
        if fields:
            try:
                with self.db.transaction() as db:
                    db["knowledge_bases"].update(kb_id, fields)
            except sqlite3.IntegrityError:
                raise DocMindError(f"A knowledge base named {fields.get('name')!r} already exists.") from None
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

    def complete_document_ids(self, kb_id: int) -> set[int]:
        rows = self.db.db.execute(
            "SELECT id FROM documents WHERE kb_id = ? AND status = 'complete'", [kb_id]).fetchall()
        return {r[0] for r in rows}

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
                       size: int, text: str) -> int:
        """Insert (or take over) the row for ``name`` with status pending; returns its id.

        Re-ingesting a name reuses its row so the document keeps its id.
        The caller must already have removed the old chunks.
        """
        now = utcnow()
        with self.db.transaction() as db:
            row = db.execute("SELECT id FROM documents WHERE kb_id = ? AND name = ?", [kb_id, name]).fetchone()
            values = {"source_path": source_path, "content_hash": content_hash, "mime": mime, "size": size,
                      "status": "pending", "error": "", "text": text, "updated_at": now}
            if row is not None:
                db["documents"].update(row[0], values)
                return row[0]
            return db["documents"].insert({"kb_id": kb_id, "name": name, "created_at": now, **values}).last_pk

    def set_document_status(self, doc_id: int, status: DocumentStatus, error: str = "") -> None:
        values: dict[str, Any] = {"status": status, "error": error, "updated_at": utcnow()}
        if status == "failed":
            values["text"] = ""  # a failed document has no chunks pointing into its text
        with self.db.transaction() as db:
            db["documents"].update(doc_id, values)

    def set_kb_documents_status(self, kb_id: int, status: DocumentStatus) -> None:
        with self.db.transaction() as db:
            db.execute("UPDATE documents SET status = ?, updated_at = ? WHERE kb_id = ?", [status, utcnow(), kb_id])

    def record_failed_document(self, kb_id: int, name: str, *, source_path: str, content_hash: str,
                               mime: str, size: int, error: str) -> int:
        """Keep a row for a file that could not be read, so the UI can show why."""
        doc_id = self.begin_document(kb_id, name, source_path=source_path, content_hash=content_hash,
                                     mime=mime, size=size, text="")
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
                 "end": c.end, "terms": c.terms} for c in chunks]
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

    def chunks_for_document(self, doc_id: int, parents: bool = False) -> list[ChunkRecord]:
        return self._chunk_rows("WHERE doc_id = ? AND is_parent = ? ORDER BY idx", [doc_id, int(parents)])

    def chunk_count(self, doc_id: int) -> int:
        return self.db.db.execute(
            "SELECT COUNT(*) FROM chunks WHERE doc_id = ? AND is_parent = 0", [doc_id]).fetchone()[0]

    def get_chunks(self, ids: Iterable[str]) -> dict[str, ChunkRecord]:
        wanted = list(dict.fromkeys(ids))
        found: dict[str, ChunkRecord] = {}
        for i in range(0, len(wanted), 500):  # stay under SQLite's bound-parameter limit
            batch = wanted[i:i + 500]
            for chunk in self._chunk_rows(f"WHERE id IN ({_placeholders(len(batch))})", batch):
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
            "WHERE c.kb_id = ? AND c.is_parent = 0 AND d.status = 'complete' ORDER BY c.doc_id, c.idx",
            [kb_id]).fetchall()
        return [(r[0], r[1], r[2]) for r in rows]

    def _chunk_rows(self, where: str, params: list[Any]) -> list[ChunkRecord]:
        rows = self.db.db.execute(f"SELECT {_CHUNK_COLUMNS} FROM chunks {where}", params).fetchall()
        return [ChunkRecord(id=r[0], kb_id=r[1], doc_id=r[2], index=r[3], is_parent=bool(r[4]), parent_id=r[5],
                            text=r[6], token_count=r[7], start=r[8], end=r[9], terms=r[10]) for r in rows]
