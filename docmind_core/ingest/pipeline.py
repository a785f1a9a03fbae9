"""Ingestion: files → text → chunks → SQLite rows, vectors and keyword entries.

Atomic per document.  The document row is written first with status
``pending``; chunk rows, vectors and keyword entries follow; only then is the
row marked ``complete``.  If anything fails, whatever was written for that
document is removed from all three stores again.  If the process dies
half-way, the row is still ``pending`` and :meth:`Ingestor.reconcile` (run by
the engine at start-up) removes it.

Failed files: when a file cannot be read, the batch goes on.  A file that was
never in the KB gets a ``failed`` row carrying the reason (no chunks), so the
knowledge-base page can show it; a file whose earlier version is in the KB
keeps that version untouched when the new one cannot be parsed.  Every failure
is also in the returned :class:`IngestOutcome` list.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

from docmind_core.backends.protocols import Embedder, IndexedChunk, KeywordIndex, VectorStore
from docmind_core.errors import DocMindError, EmbedderMismatch, IngestError
from docmind_core.ingest.chunking import TextChunk, chunk_document
from docmind_core.ingest.loaders import load_document, mime_for
from docmind_core.ingest.sources import SourceFile, expand_paths, read_bytes
from docmind_core.models import DocumentRecord, IngestOutcome, IngestProgress, KnowledgeBase
from docmind_core.settings import Settings
from docmind_core.text import stored_terms
from docmind_core.store.kb_store import KnowledgeStore

log = logging.getLogger(__name__)

ProgressCallback = Callable[[IngestProgress], None]


def _serialised(method):
    """Run an Ingestor method under its write lock."""

    @functools.wraps(method)
    def locked(self, *args, **kwargs):
        with self._write_lock:
            return method(self, *args, **kwargs)

    return locked


class Ingestor:
    """Keeps SQLite, the vector store and the keyword index in step for ingest and delete."""

    def __init__(self, store: KnowledgeStore, embedder: Embedder, vector_store: VectorStore,
                 keyword_index: KeywordIndex):
        self.store = store
        self.embedder = embedder
        self.vector_store = vector_store
        self.keyword_index = keyword_index
        # One writer at a time: two sessions ingesting the same file name would otherwise
        # interleave their purge and write steps.  Searches never take this lock.
        self._write_lock = threading.RLock()

    # ------------------------------------------------------------------
    # Ingest
    # ------------------------------------------------------------------

    def check_embedder(self, kb: KnowledgeBase) -> None:
        if kb.embedder_id != self.embedder.id or kb.embedding_dim != self.embedder.dim:
            raise EmbedderMismatch(
                f"Knowledge base '{kb.name}' was indexed with {kb.embedder_id} ({kb.embedding_dim}-d), but the "
                f"configured embedder is {self.embedder.id} ({self.embedder.dim}-d). Re-index it with "
                f"`docmind kb reindex {kb.name}`, or switch the embedding settings back.")

    @_serialised
    def ingest(self, kb_id: int, paths: Sequence[Path | str], settings: Settings,
               progress: ProgressCallback | None = None, names: Sequence[str] | None = None) -> list[IngestOutcome]:
        """Ingest files and folders into a KB; one outcome per file, in order.

        Small documents are written in groups so that the encoder gets full
        batches (a batch of 8 texts costs twice as much per text as a batch
        of 64).  If a group fails, each of its documents is retried on its
        own, so one bad document never takes its neighbours down.
        """
        kb = self.store.get_kb(kb_id)
        self.check_embedder(kb)
        files = expand_paths(paths, names)
        outcomes: list[IngestOutcome | None] = [None] * len(files)
        group: list[_Prepared] = []
        for index, source in enumerate(files):
            reporter = _Reporter(progress, index, len(files), source.name)
            prepared = self._prepare(kb, source, settings, reporter)
            if isinstance(prepared, IngestOutcome):
                outcomes[index] = prepared
                continue
            prepared.position = index
            group.append(prepared)
            if sum(len(p.children) for p in group) >= settings.embedding.batch_size:
                self._flush(kb, group, settings, outcomes)
                group = []
        if group:
            self._flush(kb, group, settings, outcomes)
        return [o for o in outcomes if o is not None]

    def _prepare(self, kb: KnowledgeBase, source: SourceFile, settings: Settings,
                 reporter: "_Reporter") -> "_Prepared | IngestOutcome":
        """Read, hash, parse and chunk one file; nothing is written yet (except a failed row)."""
        started = time.perf_counter()
        reporter("parsing", 0.0)
        data, digest = b"", ""
        try:
            data = read_bytes(source.path)
            digest = hashlib.sha256(data).hexdigest()
            existing = self.store.find_document(kb.id, source.name)
            if existing is not None and existing.status == "complete" and existing.content_hash == digest:
                reporter("skipped", 1.0, "unchanged")
                return _outcome(source, started, "unchanged", doc_id=existing.id, chunks=existing.chunk_count)
            loaded = load_document(source.path, data=data)
            reporter("chunking", 0.1)
            parents, children = chunk_document(kb.id, source.name, loaded.text, settings.rag.chunk_tokens,
                                               settings.rag.chunk_overlap_tokens, settings.rag.parent_tokens)
            if not children:
                raise IngestError(f"{source.name}: no text could be extracted")
            # Tokenised once (part of "chunking"), outside the write lock; the keyword index
            # and query-time scoring reuse the tokens.
            children = [replace(c, terms=stored_terms(c.text)) for c in children]
        except Exception as exc:
            message = _describe(exc)
            current = self.store.find_document(kb.id, source.name)
            if current is None or current.status != "complete":
                # Keep a row with the reason; an earlier good version, if any, stays untouched.
                self.store.record_failed_document(kb.id, source.name, source_path=str(source.path),
                                                  content_hash=digest, mime=mime_for(source.path),
                                                  size=len(data), error=message)
            reporter("failed", 1.0, message)
            return _outcome(source, started, "failed", error=message)
        return _Prepared(source=source, reporter=reporter, started=started, digest=digest, size=len(data),
                         text=loaded.text, mime=loaded.mime, parents=parents, children=children,
                         existing=existing, prepare_seconds=time.perf_counter() - started)

    def _flush(self, kb: KnowledgeBase, group: list["_Prepared"], settings: Settings,
               outcomes: list[IngestOutcome | None]) -> None:
        write_started = time.perf_counter()
        try:
            self._write(kb, group, settings)
        except BaseException as exc:
            if len(group) == 1 or not isinstance(exc, Exception):
                self._fail(kb, group, _describe(exc), outcomes)
                if not isinstance(exc, Exception):  # KeyboardInterrupt and friends still stop the batch
                    raise
                return
            log.warning("ingest of %d documents failed (%s); retrying them one at a time", len(group), exc)
            for doc in group:
                self._flush(kb, [doc], settings, outcomes)
            return
        write_seconds = time.perf_counter() - write_started
        total_chunks = sum(len(d.children) for d in group)
        for doc in group:
            doc.reporter("done", 1.0, f"{len(doc.children)} chunks")
            status = "replaced" if doc.existing is not None and doc.existing.status == "complete" else "added"
            # A grouped document's time: its own parsing plus its share of the group's writing.
            seconds = doc.prepare_seconds + write_seconds * len(doc.children) / total_chunks
            outcomes[doc.position] = IngestOutcome(path=str(doc.source.path), name=doc.source.name, status=status,
                                                   doc_id=doc.doc_id, chunks=len(doc.children),
                                                   seconds=round(seconds, 3))

    def _write(self, kb: KnowledgeBase, group: list["_Prepared"], settings: Settings) -> None:
        """Write a group of documents to all three stores; each stays pending until all of it is written."""
        for doc in group:
            if doc.existing is not None and doc.doc_id is None:
                # Pending before the other stores are touched, so a crash here is cleaned up by reconcile().
                self.store.set_document_status(doc.existing.id, "pending")
                self._purge_document(kb.id, doc.existing.id)
            elif doc.doc_id is not None:  # a retry after a failed group: start from a clean slate
                self._purge_document(kb.id, doc.doc_id)
            doc.doc_id = self.store.begin_document(kb.id, doc.source.name, source_path=str(doc.source.path),
                                                   content_hash=doc.digest, mime=doc.mime, size=doc.size,
                                                   text=doc.text)
            self.store.add_chunks([c.to_record(kb.id, doc.doc_id) for c in doc.parents + doc.children])
        indexed = [(doc, IndexedChunk(c.id, kb.id, doc.doc_id, c.text, c.terms)) for doc in group for c in doc.children]
        # Equal batches rather than full ones plus a small remainder: per text, a batch of 8
        # costs the encoder twice what a batch of 16 or more does.
        batch = math.ceil(len(indexed) / math.ceil(len(indexed) / settings.embedding.batch_size))
        for start in range(0, len(indexed), batch):
            part = indexed[start:start + batch]
            for doc in dict.fromkeys(d for d, _ in part):
                done = sum(1 for d, _ in indexed[:start] if d is doc) / len(doc.children)
                doc.reporter("embedding", 0.15 + 0.75 * done)
            vectors = self.embedder.embed([c.text for _, c in part])
            if vectors.shape != (len(part), self.embedder.dim):
                raise IngestError(f"the embedder returned vectors of shape {vectors.shape}, "
                                  f"expected ({len(part)}, {self.embedder.dim})")
            self.vector_store.add([c for _, c in part], vectors)
            self.store.set_chunk_vectors([c.chunk_id for _, c in part], vectors)
        for doc in group:
            doc.reporter("indexing", 0.92)
        self.keyword_index.add([c for _, c in indexed])
        for doc in group:
            self.store.set_document_status(doc.doc_id, "complete")

    def _fail(self, kb: KnowledgeBase, group: list["_Prepared"], message: str,
              outcomes: list[IngestOutcome | None]) -> None:
        for doc in group:
            reported = self._undo(kb.id, doc.doc_id, message)
            doc.reporter("failed", 1.0, reported)
            outcomes[doc.position] = _outcome(doc.source, doc.started, "failed", doc_id=doc.doc_id, error=reported)

    def _undo(self, kb_id: int, doc_id: int | None, message: str) -> str:
        """Remove what a failed document wrote; returns the message to report."""
        if doc_id is None:
            return message
        try:
            self._purge_document(kb_id, doc_id)
            self.store.set_document_status(doc_id, "failed", message)
        except Exception:  # e.g. the vector store is down: the row stays pending for reconcile()
            log.exception("could not clean up document %s after a failed ingest", doc_id)
            return message + " (clean-up will finish at the next start)"
        return message

    # ------------------------------------------------------------------
    # Delete and repair
    # ------------------------------------------------------------------

    def _purge_document(self, kb_id: int, doc_id: int) -> None:
        """Remove a document's chunks from all three stores (its row stays)."""
        self.vector_store.delete_document(kb_id, doc_id)
        self.keyword_index.delete_document(kb_id, doc_id)
        self.store.delete_chunks_of_document(doc_id)

    @_serialised
    def delete_document(self, doc_id: int) -> None:
        doc = self.store.get_document(doc_id)
        self.store.set_document_status(doc_id, "pending")  # a crash half-way leaves work for reconcile()
        self._purge_document(doc.kb_id, doc_id)
        self.store.delete_document(doc_id)

    @_serialised
    def delete_kb(self, kb_id: int) -> None:
        self.store.get_kb(kb_id)
        self.store.set_kb_documents_status(kb_id, "pending")
        self.vector_store.delete_kb(kb_id)
        self.keyword_index.delete_kb(kb_id)
        self.store.delete_kb(kb_id)

    @_serialised
    def reconcile(self) -> list[str]:
        """Repair what an interrupted ingest or delete left behind; returns one line per repair.

        * pending documents (the process died mid-document): removed from all stores, row deleted;
        * failed documents: any stray chunk, vector or keyword entry removed, the row kept;
        * vectors or keyword entries of documents that are not complete (or no longer exist): removed;
        * collections and keyword entries of knowledge bases that no longer exist: dropped.
        """
        repairs: list[str] = []
        for doc in self.store.incomplete_documents():
            self._purge_document(doc.kb_id, doc.id)
            if doc.status == "pending":
                self.store.delete_document(doc.id)
                repairs.append(f"removed interrupted document '{doc.name}' (kb {doc.kb_id})")
        kbs = self.store.list_kbs()
        known_kbs = {kb.id for kb in kbs}
        keyword_count = getattr(self.keyword_index, "count", None)
        for kb in kbs:
            kb_id = kb.id
            # Counts agree in the normal case; only then is listing every vector's document skipped.
            if self.vector_store.count(kb_id) == kb.chunk_count and (
                    keyword_count is None or keyword_count(kb_id) == kb.chunk_count):
                continue
            complete = self.store.complete_document_ids(kb_id)
            stray = set(self.vector_store.document_ids(kb_id)) - complete
            keyword_ids = getattr(self.keyword_index, "document_ids", None)
            if keyword_ids is not None:
                stray |= set(keyword_ids(kb_id)) - complete
            for doc_id in sorted(stray):
                self.vector_store.delete_document(kb_id, doc_id)
                self.keyword_index.delete_document(kb_id, doc_id)
                repairs.append(f"removed stray index entries of document {doc_id} (kb {kb_id})")
        for store in (self.vector_store, self.keyword_index):
            listed = getattr(store, "kb_ids", None)
            for kb_id in sorted(set(listed()) - known_kbs) if listed is not None else []:
                store.delete_kb(kb_id)
                repairs.append(f"dropped {store.name} entries of deleted knowledge base {kb_id}")
        for line in repairs:
            log.warning("reconcile: %s", line)
        return repairs

    @_serialised
    def reindex_kb(self, kb_id: int, progress: ProgressCallback | None = None, batch_size: int = 64) -> int:
        """Re-embed every chunk of a KB with the current embedder (after the embedding model changed).

        Chunk rows and keyword entries are kept; vectors are rebuilt and the
        KB's embedder id and dimension updated.  Returns the number of chunks embedded.
        """
        kb = self.store.get_kb(kb_id)
        self.vector_store.delete_kb(kb_id)
        self.store.clear_chunk_vectors(kb_id)  # the old model's vectors must never meet the new one's query
        rows = self.store.child_texts(kb_id)
        reporter = _Reporter(progress, 0, 1, kb.name)
        for start in range(0, len(rows), batch_size):
            part = rows[start:start + batch_size]
            reporter("embedding", start / max(1, len(rows)))
            vectors = self.embedder.embed([text for _, _, text in part])
            self.vector_store.add([IndexedChunk(cid, kb_id, doc_id, text) for cid, doc_id, text in part], vectors)
            self.store.set_chunk_vectors([cid for cid, _, _ in part], vectors)
        self.store.update_kb(kb_id, embedder_id=self.embedder.id, embedding_dim=self.embedder.dim)
        reporter("done", 1.0, f"{len(rows)} chunks re-embedded")
        return len(rows)


@dataclass(eq=False)  # compared and hashed by identity: one per file
class _Prepared:
    """A parsed and chunked file waiting to be written."""

    source: SourceFile
    reporter: "_Reporter"
    started: float
    digest: str
    size: int
    text: str
    mime: str
    parents: list[TextChunk]
    children: list[TextChunk]
    existing: DocumentRecord | None
    prepare_seconds: float = 0.0
    position: int = 0
    doc_id: int | None = None


def _outcome(source: SourceFile, started: float, status: str, **extra) -> IngestOutcome:
    return IngestOutcome(path=str(source.path), name=source.name, status=status,
                         seconds=round(time.perf_counter() - started, 3), **extra)


class _Reporter:
    """Sends IngestProgress for one file; a failing callback must not fail the ingest."""

    def __init__(self, callback: ProgressCallback | None, index: int, count: int, name: str):
        self.callback, self.index, self.count, self.name = callback, index, count, name

    def __call__(self, stage: str, fraction: float, message: str = "") -> None:
        if self.callback is None:
            return
        try:
            self.callback(IngestProgress(file_index=self.index, file_count=self.count, name=self.name,
                                         stage=stage, fraction=min(1.0, max(0.0, fraction)), message=message))
        except Exception:
            log.exception("ingest progress callback failed")


def _describe(exc: BaseException) -> str:
    if isinstance(exc, DocMindError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
