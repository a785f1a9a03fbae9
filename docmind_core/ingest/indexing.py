"""The writes that keep a document's chunks in step across SQLite, the vector store and the keyword index.

One place for what ingest, re-index, start-up clean-up (``Ingestor.reconcile``) and ``kb check --repair``
(``KbChecker``) all do: embed chunks into the vector store with their stored vector copies, purge a
document from the three stores, and remove what an interrupted or failed write left behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from docmind_core.backends.protocols import Embedder, IndexedChunk, KeywordIndex, VectorStore
from docmind_core.errors import IngestError
from docmind_core.values import DocumentRecord

if TYPE_CHECKING:
    from docmind_core.store.kb_store import KnowledgeStore


@dataclass(frozen=True)
class IndexWriter:
    store: "KnowledgeStore"
    embedder: Embedder
    vector_store: VectorStore
    keyword_index: KeywordIndex

    def embed(self, chunks: Sequence[IndexedChunk]) -> np.ndarray:
        """Embed the chunks' texts, add the vectors to the vector store and keep their copies on the chunk rows."""
        vectors = self.embedder.embed([c.text for c in chunks])
        if vectors.shape != (len(chunks), self.embedder.dim):
            raise IngestError(f"the embedder returned vectors of shape {vectors.shape}, "
                              f"expected ({len(chunks)}, {self.embedder.dim})")
        self.vector_store.add(list(chunks), vectors)
        self.store.set_chunk_vectors([c.chunk_id for c in chunks], vectors)
        return vectors

    def purge(self, kb_id: int, doc_id: int) -> None:
        """Remove a document's chunks from all three stores (its row stays)."""
        self.vector_store.delete_document(kb_id, doc_id)
        self.keyword_index.delete_document(kb_id, doc_id)
        self.store.delete_chunks_of_document(doc_id)

    def remove_interrupted(self, kb_id: int, doc_id: int, lease_id: int, owner: int | None) -> bool:
        """Remove a pending document whose ``owner`` is gone, row and all, if it is still pending under that
        owner (compare-and-set: of two processes judging it, one does it); True if this one did."""
        if not self.store.claim_document(doc_id, lease_id, expect_status="pending", expect_lease=owner):
            return False
        self.purge(kb_id, doc_id)
        self.store.delete_document(doc_id)
        return True

    def clear_failed(self, doc: DocumentRecord, lease_id: int) -> bool:
        """Remove the chunks a failed document still has (it stays, failed, with its reason); True if any."""
        if not doc.chunk_count or not self.store.claim_document(doc.id, lease_id, expect_status="failed",
                                                                expect_lease=None):
            return False
        self.purge(doc.kb_id, doc.id)
        self.store.set_document_status(doc.id, "failed", doc.error)
        return True
