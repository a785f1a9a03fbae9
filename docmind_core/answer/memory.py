"""Long-term memories per user: short facts and preferences, recalled by meaning.

Each memory is stored with its embedding (float32 BLOB, L2-normalised) and the
id of the embedder that made it.  Recall is a cosine search over *that user's
rows only* — the ``WHERE user_id = ?`` is in the SQL, so another user's memory
is never even read.  Memories are few per user (tens to hundreds), so a numpy
dot product over them is faster and simpler than a vector index.

Adding a memory that says the same as one already stored (same words after
normalisation, or embeddings at least :data:`DUPLICATE_SIMILARITY` apart)
keeps the existing one instead of piling up repeats from memory-write hints.
"""

from __future__ import annotations

import re
import unicodedata
from typing import NamedTuple

import numpy as np
from pydantic import BaseModel

from docmind_core.backends.protocols import Embedder
from docmind_core.errors import NotFound
from docmind_core.store.db import Database, utcnow

# Cosine at or above this is "the same memory".  With the bundled encoder a rewording such as
# "I prefer / I like short answers" scores ~0.93, while facts that differ in one word
# ("I work in finance / in sales", "my name is Alice / Bob") stay below ~0.7.
DUPLICATE_SIMILARITY = 0.92
MAX_MEMORY_CHARS = 1000
SINGLE_USER_ID = 0  # owner of memories when sign-in is off (user_id None)


class Memory(BaseModel):
    id: int
    user_id: int
    text: str
    source: str = ""
    created_at: str


class MemoryAdded(BaseModel):
    memory: Memory
    duplicate: bool = False  # True: an equivalent memory existed and was kept instead


class RecalledMemory(NamedTuple):
    """Unpacks as ``(text, similarity)``; ``.text`` and ``.similarity`` read better."""

    text: str
    similarity: float


class MemoryStore:
    def __init__(self, db: Database, embedder: Embedder):
        self._db = db
        self._embedder = embedder

    def add(self, user_id: int | None, text: str, source: str = "") -> MemoryAdded:
        """Store a memory for one user, unless an equivalent one is already stored."""
        owner = _owner(user_id)
        text = " ".join(text.split())[:MAX_MEMORY_CHARS]
        if not text:
            raise ValueError("a memory needs some text")
        vector = self._embed_one(text)
        key = _normalised(text)
        with self._db.transaction() as db:
            self._refresh_stale(db, owner)
            for memory_id, stored_text, blob in db.execute(
                    "SELECT id, text, embedding FROM memories WHERE user_id = ? AND embedder_id = ?",
                    [owner, self._embedder.id]).fetchall():
                if _normalised(stored_text) == key or float(_vector(blob) @ vector) >= DUPLICATE_SIMILARITY:
                    return MemoryAdded(memory=self._get(db, owner, memory_id), duplicate=True)
            cursor = db.execute(
                "INSERT INTO memories (user_id, text, embedding, embedder_id, source, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                [owner, text, _blob(vector), self._embedder.id, source, utcnow()])
            return MemoryAdded(memory=self._get(db, owner, int(cursor.lastrowid)))

    def recall(self, user_id: int | None, query: str, top_k: int = 5, min_similarity: float = 0.3) -> list[RecalledMemory]:
        """The user's memories most similar to ``query``, best first, at least ``min_similarity``."""
        owner = _owner(user_id)
        if not query.strip() or top_k <= 0:
            return []
        if self._db.db.execute("SELECT 1 FROM memories WHERE user_id = ? AND embedder_id != ? LIMIT 1",
                               [owner, self._embedder.id]).fetchone():
            with self._db.transaction() as db:
                self._refresh_stale(db, owner)
        rows = self._db.db.execute(
            "SELECT text, embedding FROM memories WHERE user_id = ? AND embedder_id = ?",
            [owner, self._embedder.id]).fetchall()
        if not rows:
            return []
        matrix = np.stack([_vector(r[1]) for r in rows])
        sims = matrix @ self._embed_one(query)
        order = np.argsort(-sims, kind="stable")[:top_k]
        return [RecalledMemory(text=rows[i][0], similarity=float(sims[i]))
                for i in order if sims[i] >= min_similarity]

    def list(self, user_id: int | None) -> list[Memory]:
        """All of the user's memories, newest first."""
        rows = self._db.db.execute(
            "SELECT id, user_id, text, source, created_at FROM memories WHERE user_id = ? ORDER BY id DESC",
            [_owner(user_id)]).fetchall()
        return [Memory(id=r[0], user_id=r[1], text=r[2], source=r[3], created_at=r[4]) for r in rows]

    def delete(self, user_id: int | None, memory_id: int) -> None:
        """Delete one of the user's memories; someone else's id is simply not found."""
        with self._db.transaction() as db:
            cursor = db.execute("DELETE FROM memories WHERE id = ? AND user_id = ?", [int(memory_id), _owner(user_id)])
            if cursor.rowcount == 0:
                raise NotFound(f"memory {memory_id} does not exist")

    def clear(self, user_id: int | None) -> int:
        """Forget everything about one user; returns how many memories were deleted."""
        with self._db.transaction() as db:
            return int(db.execute("DELETE FROM memories WHERE user_id = ?", [_owner(user_id)]).rowcount)

    # ------------------------------------------------------------------
    def _embed_one(self, text: str) -> np.ndarray:
        return np.asarray(self._embedder.embed([text])[0], dtype=np.float32)

    def _refresh_stale(self, db, owner: int) -> None:
        """Re-embed memories made by another embedder (the configured one changed) so they stay recallable."""
        stale = db.execute("SELECT id, text FROM memories WHERE user_id = ? AND embedder_id != ?",
                           [owner, self._embedder.id]).fetchall()
        if not stale:
            return
        vectors = np.asarray(self._embedder.embed([t for _, t in stale]), dtype=np.float32)
        for (memory_id, _), vector in zip(stale, vectors):
            db.execute("UPDATE memories SET embedding = ?, embedder_id = ? WHERE id = ?",
                       [_blob(vector), self._embedder.id, memory_id])

    @staticmethod
    def _get(db, owner: int, memory_id: int) -> Memory:
        r = db.execute("SELECT id, user_id, text, source, created_at FROM memories WHERE id = ? AND user_id = ?",
                       [memory_id, owner]).fetchone()
        return Memory(id=r[0], user_id=r[1], text=r[2], source=r[3], created_at=r[4])


def _owner(user_id: int | None) -> int:
    return SINGLE_USER_ID if user_id is None else int(user_id)


def _blob(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()


def _vector(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype=np.float32)


_PUNCTUATION = re.compile(r"[\W_]+", re.UNICODE)


def _normalised(text: str) -> str:
    """Case, width, spacing and punctuation do not make a memory different."""
    return _PUNCTUATION.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()
