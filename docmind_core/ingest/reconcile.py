"""Start-up repair: what interrupted ingest, delete, re-index and repair work left behind is put right.

Every engine start runs :meth:`Reconciler.reconcile` (through ``Ingestor.reconcile``).  A document whose
owner (a lease, ``leases.py``) is provably gone is removed from all three stores; documents whose owner
is alive (another process ingesting right now) are left alone.  An interrupted re-index is finished
(``reindex.py``).  A document left ``embedding`` (searchable by keyword, some vectors missing) is kept:
its missing vectors are written in the background by the ingest job worker
(``Ingestor.finish_embedding``), not here, since that takes as long as its encoding.
"""

from __future__ import annotations

import logging

from docmind_core.backends.protocols import KeywordIndex, VectorStore
from docmind_core.ingest.indexing import IndexWriter
from docmind_core.ingest.leases import LeaseBook, LeaseOnDemand
from docmind_core.ingest.reindex import Reindexer
from docmind_core.store.kb_store import KnowledgeStore

log = logging.getLogger(__name__)


class Reconciler:
    """Repairs across SQLite, the vector store and the keyword index; the caller holds the write lock."""

    def __init__(self, store: KnowledgeStore, vector_store: VectorStore, keyword_index: KeywordIndex,
                 writer: IndexWriter, leases: LeaseBook, reindexer: Reindexer):
        self.store = store
        self.vector_store = vector_store
        self.keyword_index = keyword_index
        self.writer = writer
        self.leases = leases
        self.reindexer = reindexer

    def reconcile(self) -> list[str]:
        """Repair what interrupted work left behind; returns one line per repair (or problem found).

        * pending documents whose owner is provably gone (see ``leases.py``): removed from all stores,
          row deleted; pending documents of live owners (another process ingesting now) are left alone;
        * failed documents that still have chunk rows: the rows removed, the document kept;
        * vectors or keyword entries of documents that are neither searchable (complete, embedding) nor
          owned by a live operation (or no longer exist): removed;
        * documents left embedding by a gone owner: reported (the job worker of every start writes their
          missing vectors, ``Ingestor.finish_embedding``; ``kb check --repair`` does it at once);
        * collections and keyword entries of knowledge bases that no longer exist: dropped;
        * re-index runs whose owner is gone: finished (the missing vectors embedded);
        * knowledge bases with fewer vectors than chunks: reported (``docmind kb check NAME --repair``).
        """
        repairs: list[str] = []
        # The lease is taken at the first repair: a start that finds everything in order only reads.
        with self.leases.on_demand("reconcile") as lease:
            live_chunks: dict[int, int] = {}  # kb id -> chunk rows of documents live operations own
            for doc, owner in self.store.pending_documents():
                reason = self.leases.owner_gone(owner) if owner is None or owner != lease.held_id else None
                if reason is None:
                    live_chunks[doc.kb_id] = live_chunks.get(doc.kb_id, 0) + doc.chunk_count
                    continue
                # (False: another process judged it at the same moment and took it)
                if self.writer.remove_interrupted(doc.kb_id, doc.id, lease.take().id, owner):
                    repairs.append(f"removed interrupted document '{doc.name}' (kb {doc.kb_id}): {reason}")
            for doc in self.store.incomplete_documents():
                if doc.status == "failed" and doc.chunk_count and self.writer.clear_failed(doc, lease.take().id):
                    repairs.append(f"removed the chunks of failed document '{doc.name}' (kb {doc.kb_id})")
            half_written = [(doc, reason) for doc, owner in self.store.embedding_documents()
                            if (reason := self.leases.owner_gone(owner)) is not None]
            kb_names = {kb.id: kb.name for kb in self.store.list_kbs()} if half_written else {}
            for doc, reason in half_written:
                kb_name = kb_names.get(doc.kb_id, str(doc.kb_id))
                repairs.append(f"document '{doc.name}' (kb {doc.kb_id}) was left half-written, searchable by keyword "
                               f"only ({reason}): its missing vectors are written in the background, resumed at each "
                               f"start until done, or now by `docmind kb check {kb_name} --repair`")
            for run in self.store.reindex_runs(state="running"):
                reason = self.leases.owner_gone(run["lease_id"])
                if reason is not None and self.store.claim_reindex(run["id"], lease.take().id, run["lease_id"]):
                    repairs.append(self.reindexer.resume(run, reason))
            repairs += self._remove_stray_entries(lease, live_chunks)
            self.leases.sweep()  # writes only when a gone owner left a row
        for line in repairs:
            log.warning("reconcile: %s", line)
        return repairs

    def _remove_stray_entries(self, lease: LeaseOnDemand, live_chunks: dict[int, int]) -> list[str]:
        repairs: list[str] = []
        kbs = self.store.list_kbs()
        known_kbs = {kb.id for kb in kbs}
        keyword_count = getattr(self.keyword_index, "count", None)
        keyword_ids = getattr(self.keyword_index, "document_ids", None)
        for kb in kbs:
            kb_id = kb.id
            vectors = self.vector_store.count(kb_id)
            keywords = keyword_count(kb_id) if keyword_count is not None else kb.chunk_count
            # Chunks of documents a live operation is writing may already be indexed: only more
            # entries than that can be strays (then listing every entry's document is worth it).
            allowed = kb.chunk_count + live_chunks.get(kb_id, 0)
            if vectors > allowed or keywords > allowed:
                indexed = set(self.vector_store.document_ids(kb_id))
                if keyword_ids is not None:
                    indexed |= set(keyword_ids(kb_id))
                # Statuses are read after the listing: a document that began after it cannot be in it, and
                # one that completed meanwhile reads as complete.
                states = self.store.document_states(kb_id)
                for doc_id in sorted(indexed):
                    status, owner = states.get(doc_id, ("gone", None))
                    if status in ("complete", "embedding") or (status == "pending" and owner is not None
                                                and (owner == lease.held_id or self.leases.alive(owner))):
                        continue
                    lease.take()  # a repair: from here this start owns what it does
                    self.vector_store.delete_document(kb_id, doc_id)
                    self.keyword_index.delete_document(kb_id, doc_id)
                    repairs.append(f"removed stray index entries of document {doc_id} (kb {kb_id})")
                vectors = self.vector_store.count(kb_id)
            expected = kb.chunk_count - self.store.embedding_backlog([kb_id]).get(kb_id, 0)  # the rest is on its way
            if vectors < expected and not self.store.reindex_runs(kb_id, state="running"):
                repairs.append(f"knowledge base '{kb.name}' has {expected - vectors} of {kb.chunk_count} "
                               f"chunks without a vector (search misses them on its vector side): run "
                               f"`docmind kb check {kb.name} --repair`")
        for store in (self.vector_store, self.keyword_index):
            listed = getattr(store, "kb_ids", None)
            for kb_id in sorted(set(listed()) - known_kbs) if listed is not None else []:
                lease.take()
                store.delete_kb(kb_id)
                repairs.append(f"dropped {store.name} entries of deleted knowledge base {kb_id}")
        return repairs
