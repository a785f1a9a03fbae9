"""Re-index: every chunk of a knowledge base embedded again with the current embedder.

Chunk rows and keyword entries are kept; vectors are rebuilt.  A re-index is a recorded operation
(``kb_reindex_runs``): each chunk's stored vector copy marks it done, so an interrupted re-index is
finished by the next start (:class:`~docmind_core.ingest.reconcile.Reconciler` calls :meth:`Reindexer.resume`)
instead of leaving the KB with part of its vectors.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Sequence

from docmind_core.backends.protocols import Embedder, IndexedChunk, KeywordIndex, VectorStore
from docmind_core.errors import IngestError
from docmind_core.ingest.check import KbChecker
from docmind_core.ingest.indexing import IndexWriter
from docmind_core.ingest.leases import LeaseBook
from docmind_core.ingest.prepared import FileReporter, ProgressCallback, check_cancel, describe_failure
from docmind_core.store.kb_store import DocumentBusy, KnowledgeStore

log = logging.getLogger(__name__)


class Reindexer:
    """Re-embeds a KB's chunks; the caller (``Ingestor``) holds the write lock."""

    def __init__(self, store: KnowledgeStore, embedder: Embedder, vector_store: VectorStore,
                 keyword_index: KeywordIndex, writer: IndexWriter, leases: LeaseBook):
        self.store = store
        self.embedder = embedder
        self.vector_store = vector_store
        self.keyword_index = keyword_index
        self.writer = writer
        self.leases = leases

    def reindex_kb(self, kb_id: int, progress: ProgressCallback | None = None, batch_size: int = 64) -> int:
        """Re-embed every chunk of a KB with the current embedder (after the embedding model changed).

        Chunk rows and keyword entries are kept; vectors are rebuilt and the KB's embedder id and
        dimension updated.  The run is a row of ``kb_reindex_runs``: if it is interrupted, the next
        start finishes it.  Returns the number of chunks embedded.
        """
        with self.leases.hold("reindex") as lease:
            kb = self.store.get_kb(kb_id)
            for run in self.store.reindex_runs(kb_id, state="running"):
                if self.leases.alive(run["lease_id"]):
                    raise DocumentBusy(f"knowledge base '{kb.name}' is being re-indexed by another process "
                                       "right now")
                if self.store.claim_reindex(run["id"], lease.id, run["lease_id"]):
                    self.store.finish_reindex(run["id"], "failed", "interrupted; superseded by a new re-index")
            total = self.store.ready_chunk_count(kb_id)
            run_id = self.store.begin_reindex(kb_id, lease.id, self.embedder.id, self.embedder.dim,
                                              kb.embedder_id, total)
            self.vector_store.delete_kb(kb_id)
            self.store.clear_chunk_vectors(kb_id)  # the old model's vectors must never meet the new one's query
            # An exception from here on leaves the run 'running': the next start finishes it.
            embedded = self.embed_missing(kb_id, run_id, batch_size, FileReporter(progress, 0, 1, kb.name), total)
            self.store.update_kb(kb_id, embedder_id=self.embedder.id, embedding_dim=self.embedder.dim)
            self.store.finish_reindex(run_id, "done")
            FileReporter(progress, 0, 1, kb.name)("done", 1.0, f"{embedded} chunks re-embedded")
            return embedded

    def embed_missing(self, kb_id: int, run_id: int | None, batch_size: int, reporter: FileReporter | None,
                      total: int, doc_ids: Sequence[int] | None = None,
                      after_batch: Callable[[list[tuple[str, int, str]]], None] | None = None,
                      cancel: threading.Event | None = None) -> int:
        """Embed the KB's chunks that have no stored vector copy yet (the copy marks a chunk done).

        ``doc_ids``: only those documents' chunks, in that order (a batch goes on into the next document, so
        small documents share full encoder batches); ``after_batch`` is called with each batch once its
        vectors are stored; ``cancel`` is checked before each batch.  Also the vector backfill of keyword-first
        ingestion (``Ingestor``): the same loop, so both resume from the stored copies after a crash.
        """
        embedded = 0
        seen: set[str] = set()
        while True:
            check_cancel(cancel)
            part = self.store.chunks_without_vectors(kb_id, max(1, batch_size), doc_ids)
            if not part:
                return embedded
            if any(cid in seen for cid, _, _ in part):  # a write that did not stick: never loop forever
                raise IngestError(f"could not store the vectors of knowledge base {kb_id}")
            seen.update(cid for cid, _, _ in part)
            if reporter is not None:
                reporter("embedding", embedded / max(1, total))
            self.writer.embed([IndexedChunk(cid, kb_id, doc_id, text) for cid, doc_id, text in part])
            embedded += len(part)
            if run_id is not None:
                self.store.reindex_progress(run_id, embedded)
            if after_batch is not None:
                after_batch(part)

    def resume(self, run: dict, reason: str) -> str:
        """Finish an interrupted re-index (already claimed by the caller); returns the line to report."""
        kb = self.store.get_kb(run["kb_id"])
        try:
            if run["embedder_id"] != self.embedder.id or run["embedding_dim"] != self.embedder.dim:
                # Another embedder is configured now: its vectors and the partial run's must not mix.
                self.vector_store.delete_kb(kb.id)
                self.store.clear_chunk_vectors(kb.id)
                restarted = f"restarted with {self.embedder.id} (it was re-embedding with {run['embedder_id']}); "
            else:
                restarted = ""
            total = self.store.ready_chunk_count(kb.id)
            embedded = self.embed_missing(kb.id, None, 64, FileReporter(None, 0, 1, kb.name), total)
            restored = KbChecker(self.store, self.embedder, self.vector_store, self.keyword_index,
                                 self.leases).restore_vectors(kb.id)
            self.store.update_kb(kb.id, embedder_id=self.embedder.id, embedding_dim=self.embedder.dim)
        except Exception as exc:  # left running: the next start tries again
            log.exception("could not finish the interrupted re-index of %s", kb.name)
            return (f"could not finish the interrupted re-index of '{kb.name}' ({describe_failure(exc)}); "
                    "the next start tries again")
        note = (f"finished by process {self.leases.identity.pid} after {reason}: {restarted}{embedded} of {total} "
                f"chunks embedded, {restored} vectors restored from their stored copies")
        self.store.finish_reindex(run["id"], "done", note)
        return f"finished the interrupted re-index of '{kb.name}' ({note})"
