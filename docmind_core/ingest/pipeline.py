"""Ingestion: files → text → chunks → SQLite rows, vectors and keyword entries.

Atomic per document.  The document row is written first with status
``pending``; chunk rows, vectors and keyword entries follow; only then is the
row marked ``complete``.  Readers see complete documents only (the chunk reads
of ``KnowledgeStore`` filter on it), so a pending document is invisible to
every search even while its vectors and keyword entries exist.  If anything
fails, whatever was written for that document is removed from all three
stores again.

Ownership: every operation that makes documents pending (ingest, delete,
re-index, repair) holds a lease (``ingest/leases.py``) whose id the pending
rows carry, and completes a document only while it still owns it.  If the
process dies half-way, the row stays ``pending`` under a lease whose owner is
gone, and :meth:`Ingestor.reconcile` (run by every engine start; the repairs
are in ``ingest/reconcile.py``) removes it; documents whose owner is alive
(another process ingesting right now) are left alone.

The ingestor writes small documents in groups and streams a large one batch by
batch (``ingest/streaming.py``).  Re-index (``ingest/reindex.py``) and
``kb check`` (``ingest/check.py``) run under the same write lock.

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
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from docmind_core.backends.protocols import Embedder, IndexedChunk, KeywordIndex, VectorStore
from docmind_core.errors import DocMindError, EmbedderMismatch, IngestCancelled, IngestError
from docmind_core.ingest.check import KbCheckReport, KbChecker
from docmind_core.ingest.chunking import chunk_document
from docmind_core.ingest.indexing import IndexWriter
from docmind_core.ingest.leases import Lease, LeaseBook
from docmind_core.ingest.loaders import STREAMED_EXTENSIONS, load_document, mime_for, open_text_file, too_large
from docmind_core.ingest.prepared import (
    FileReporter, PreparedFile, ProgressCallback, check_cancel, describe_failure, file_outcome,
)
from docmind_core.ingest.reconcile import Reconciler
from docmind_core.ingest.reindex import Reindexer
from docmind_core.ingest.sources import SourceFile, expand_paths, read_bytes
from docmind_core.ingest.streaming import STREAM_MIN_BYTES, STREAM_MIN_CHUNKS, StreamedWriter
from docmind_core.values import IngestOutcome, KnowledgeBase
from docmind_core.settings import Settings
from docmind_core.text.tokens import stored_terms, uncached_count_tokens
from docmind_core.store.kb_store import DocumentBusy, KnowledgeStore

log = logging.getLogger(__name__)


def file_limit_refusal(name: str, size: int, settings: Settings) -> str | None:
    """Why a file of ``size`` bytes is refused by ``ingest.max_file_mb`` (None when it is within it)."""
    return too_large(name, size, int(settings.ingest.max_file_mb * 1024 * 1024))


def estimated_chunks(tokens: int, settings: Settings) -> int:
    """About how many child chunks a text of ``tokens`` makes (each child advances by chunk size minus overlap)."""
    step = max(1, settings.rag.chunk_tokens - min(settings.rag.chunk_overlap_tokens, settings.rag.chunk_tokens // 2))
    return math.ceil(tokens / step)


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
                 keyword_index: KeywordIndex, leases: LeaseBook):
        self.store = store
        self.embedder = embedder
        self.vector_store = vector_store
        self.keyword_index = keyword_index
        self.leases = leases  # the engine's one lease book, shared with the ingest job queue
        self.writer = IndexWriter(store, embedder, vector_store, keyword_index)
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
               progress: ProgressCallback | None = None, names: Sequence[str] | None = None,
               cancel: threading.Event | None = None) -> list[IngestOutcome]:
        """Ingest files and folders into a KB; one outcome per file, in order.

        Small documents are written in groups so that the encoder gets full
        batches (a batch of 8 texts costs twice as much per text as a batch
        of 64).  If a group fails, each of its documents is retried on its
        own, so one bad document never takes its neighbours down.  A large
        document is streamed on its own (``streaming.py``).

        ``cancel``: checked before each file and each encoder batch; when set,
        the document being written is undone and :class:`IngestCancelled` is
        raised carrying the outcomes so far (by position, None for the rest).
        """
        kb = self.store.get_kb(kb_id)
        self.check_embedder(kb)
        files = expand_paths(paths, names)
        outcomes: list[IngestOutcome | None] = [None] * len(files)
        group: list[PreparedFile] = []
        try:
            with self.leases.hold("ingest") as lease:
                for index, source in enumerate(files):
                    check_cancel(cancel)
                    reporter = FileReporter(progress, index, len(files), source.name)
                    prepared = self._prepare(kb, source, settings, reporter, lease)
                    if isinstance(prepared, IngestOutcome):
                        outcomes[index] = prepared
                        continue
                    prepared.position = index
                    if prepared.pieces is not None:
                        if group:
                            self._flush(kb, group, settings, outcomes, lease, cancel)
                            group = []
                        self._flush(kb, [prepared], settings, outcomes, lease, cancel)
                        continue
                    group.append(prepared)
                    if sum(len(p.children) for p in group) >= settings.embedding.batch_size:
                        self._flush(kb, group, settings, outcomes, lease, cancel)
                        group = []
                if group:
                    self._flush(kb, group, settings, outcomes, lease, cancel)
        except IngestCancelled as exc:
            raise IngestCancelled(str(exc), outcomes=list(outcomes)) from None
        return [o for o in outcomes if o is not None]

    def _prepare(self, kb: KnowledgeBase, source: SourceFile, settings: Settings,
                 reporter: FileReporter, lease: Lease) -> "PreparedFile | IngestOutcome":
        """Read, hash, parse and chunk one file; nothing is written yet (except a failed row).

        A large plain-text file is never read whole: it is hashed, then counted, in pieces, and a
        document that will be streamed keeps only the way to read its pieces again.
        """
        started = time.perf_counter()
        reporter("parsing", 0.0)
        digest, size = "", 0
        try:
            max_bytes = int(settings.ingest.max_file_mb * 1024 * 1024)
            opened = None
            if source.path.suffix.lower() in STREAMED_EXTENSIONS and _file_size(source.path) > STREAM_MIN_BYTES:
                opened = open_text_file(source.path, source.name, max_bytes)  # None: not UTF-8, read whole below
            if opened is not None:
                digest, size = opened.digest, opened.size
            else:
                data = read_bytes(source.path, max_bytes=max_bytes, name=source.name)
                digest, size = hashlib.sha256(data).hexdigest(), len(data)
            existing = self.store.find_document(kb.id, source.name)
            if existing is not None and existing.status == "complete" and existing.content_hash == digest:
                reporter("skipped", 1.0, "unchanged")
                return file_outcome(source, started, "unchanged", doc_id=existing.id, chunks=existing.chunk_count)
            if opened is not None:
                pieces, mime = opened.pieces, opened.mime
            else:
                loaded = load_document(source.path, data=data, max_bytes=max_bytes, name=source.name)
                del data  # the text is what is kept from here on
                pieces, mime = functools.partial(iter, [loaded.text]), loaded.mime
            reporter("chunking", 0.1)
            tokens = chars = 0
            for piece in pieces():
                tokens, chars = tokens + uncached_count_tokens(piece), chars + len(piece)
            estimate = estimated_chunks(tokens, settings)
            if estimate > settings.ingest.max_chunks_per_file:
                raise IngestError(f"{source.name}: about {estimate:,} chunks, over the limit of "
                                  f"{settings.ingest.max_chunks_per_file:,} per file (ingest.max_chunks_per_file); "
                                  f"split the file or raise the limit")
            if estimate > STREAM_MIN_CHUNKS:
                return PreparedFile(source=source, reporter=reporter, started=started, digest=digest, size=size,
                                 text="", mime=mime, parents=[], children=[], existing=existing,
                                 prepare_seconds=time.perf_counter() - started, pieces=pieces, chars=chars)
            text = "".join(pieces())
            parents, children = chunk_document(kb.id, source.name, text, settings.rag.chunk_tokens,
                                               settings.rag.chunk_overlap_tokens, settings.rag.parent_tokens)
            if not children:
                raise IngestError(f"{source.name}: no text could be extracted")
            # Tokenised once (part of "chunking"), outside the write lock; the keyword index
            # and query-time scoring reuse the tokens.
            children = [replace(c, terms=stored_terms(c.text)) for c in children]
        except Exception as exc:
            message = describe_failure(exc)
            if not isinstance(exc, DocMindError):  # a library's own error (MemoryError, csv.Error ...): say which file
                message = f"{source.name}: {message}"
            current = self.store.find_document(kb.id, source.name)
            if current is None or current.status != "complete":
                # Keep a row with the reason; an earlier good version, if any, stays untouched.
                try:
                    self.store.record_failed_document(kb.id, source.name, source_path=str(source.path),
                                                      content_hash=digest, mime=mime_for(source.path),
                                                      size=size, error=message, lease_id=lease.id,
                                                      owner_alive=self.leases.alive)
                except DocumentBusy:
                    pass  # another process is writing this name right now: its version stands
            reporter("failed", 1.0, message)
            return file_outcome(source, started, "failed", error=message)
        return PreparedFile(source=source, reporter=reporter, started=started, digest=digest, size=size,
                         text=text, mime=mime, parents=parents, children=children,
                         existing=existing, prepare_seconds=time.perf_counter() - started)

    def _flush(self, kb: KnowledgeBase, group: list[PreparedFile], settings: Settings,
               outcomes: list[IngestOutcome | None], lease: Lease, cancel: threading.Event | None = None) -> None:
        write_started = time.perf_counter()
        try:
            if len(group) == 1 and group[0].pieces is not None:
                StreamedWriter(self.store, self.writer, self.keyword_index, self.leases).write(
                    kb, group[0], settings, lease, cancel)
            else:
                self._write(kb, group, settings, lease, cancel)
        except BaseException as exc:
            if isinstance(exc, IngestCancelled):
                self._fail(kb, group, "ingest cancelled", outcomes, lease)
                raise
            if len(group) == 1 or not isinstance(exc, Exception):
                self._fail(kb, group, describe_failure(exc), outcomes, lease)
                if not isinstance(exc, Exception):  # KeyboardInterrupt and friends still stop the batch
                    raise
                return
            log.warning("ingest of %d documents failed (%s); retrying them one at a time", len(group), exc)
            for doc in group:
                self._flush(kb, [doc], settings, outcomes, lease, cancel)
            return
        write_seconds = time.perf_counter() - write_started
        total_chunks = max(1, sum(d.chunk_count for d in group))
        for doc in group:
            status = "replaced" if doc.existing is not None and doc.existing.status == "complete" else "added"
            # A grouped document's time: its own parsing plus its share of the group's writing.
            seconds = doc.prepare_seconds + write_seconds * doc.chunk_count / total_chunks
            outcomes[doc.position] = IngestOutcome(path=str(doc.source.path), name=doc.source.name, status=status,
                                                   doc_id=doc.doc_id, chunks=doc.chunk_count,
                                                   seconds=round(seconds, 3))
            doc.reporter("done", 1.0, f"{doc.chunk_count} chunks", outcome=outcomes[doc.position])


    def _write(self, kb: KnowledgeBase, group: list[PreparedFile], settings: Settings, lease: Lease,
               cancel: threading.Event | None = None) -> None:
        """Write a group of documents to all three stores; each stays pending until all of it is written."""
        for doc in group:
            # Pending under our lease before the other stores are touched: readers stop seeing an old
            # version, and a crash from here on is cleaned up by the next start's reconcile().
            retry = doc.doc_id is not None
            doc.doc_id = self.store.begin_document(kb.id, doc.source.name, source_path=str(doc.source.path),
                                                   content_hash=doc.digest, mime=doc.mime, size=doc.size,
                                                   text=doc.text, lease_id=lease.id, owner_alive=self.leases.alive)
            if retry or doc.existing is not None:  # an old version, or a failed group's part: a clean slate
                self.writer.purge(kb.id, doc.doc_id)
            self.store.add_chunks([c.to_record(kb.id, doc.doc_id) for c in doc.parents + doc.children])
        indexed = [(doc, IndexedChunk(c.id, kb.id, doc.doc_id, c.text, c.terms)) for doc in group for c in doc.children]
        # Equal batches rather than full ones plus a small remainder: per text, a batch of 8
        # costs the encoder twice what a batch of 16 or more does.
        batch = math.ceil(len(indexed) / math.ceil(len(indexed) / settings.embedding.batch_size))
        for start in range(0, len(indexed), batch):
            check_cancel(cancel)
            part = indexed[start:start + batch]
            for doc in dict.fromkeys(d for d, _ in part):
                done = sum(1 for d, _ in indexed[:start] if d is doc) / len(doc.children)
                doc.reporter("embedding", 0.15 + 0.75 * done)
            self.writer.embed([c for _, c in part])
        for doc in group:
            doc.reporter("indexing", 0.92)
        self.keyword_index.add([c for _, c in indexed])
        lost = [doc.source.name for doc in group if not self.store.complete_document(doc.doc_id, lease.id)]
        if lost:
            raise IngestError(f"{', '.join(lost)}: another process took this document over while it was being "
                              f"written (no heartbeat from this one for {self.leases.stale_after_s:.0f} s?)")

    def _fail(self, kb: KnowledgeBase, group: list[PreparedFile], message: str,
              outcomes: list[IngestOutcome | None], lease: Lease) -> None:
        for doc in group:
            reported = self._undo(kb.id, doc.doc_id, message, lease)
            doc.reporter("failed", 1.0, reported)
            outcomes[doc.position] = file_outcome(doc.source, doc.started, "failed", doc_id=doc.doc_id, error=reported)

    def _undo(self, kb_id: int, doc_id: int | None, message: str, lease: Lease) -> str:
        """Remove what a failed document wrote; returns the message to report."""
        if doc_id is None:
            return message
        if self.store.document_leases([doc_id]).get(doc_id) != lease.id:
            return message  # no longer ours (taken over, or removed): nothing of it is ours to remove
        try:
            self.writer.purge(kb_id, doc_id)
            self.store.set_document_status(doc_id, "failed", message)
        except Exception:  # e.g. the vector store is down: the row stays pending for reconcile()
            log.exception("could not clean up document %s after a failed ingest", doc_id)
            return message + " (clean-up will finish at the next start)"
        return message

    # ------------------------------------------------------------------
    # Delete, and start-up repair
    # ------------------------------------------------------------------

    @_serialised
    def delete_document(self, doc_id: int) -> None:
        with self.leases.hold("delete") as lease:
            doc = self.store.get_document(doc_id)
            owner = self.store.document_leases([doc_id]).get(doc_id)
            if doc.status == "pending" and self.leases.alive(owner):
                raise DocumentBusy(f"{doc.name} is being written by another process right now; "
                                   "delete it when that has finished")
            # pending under our lease first: a crash half-way leaves work for the next start's reconcile()
            if not self.store.claim_document(doc_id, lease.id, expect_status=doc.status, expect_lease=owner):
                raise DocumentBusy(f"{doc.name} changed while it was being deleted; try again")
            self.writer.purge(doc.kb_id, doc_id)
            self.store.delete_document(doc_id)

    @_serialised
    def delete_kb(self, kb_id: int) -> None:
        with self.leases.hold("delete") as lease:
            kb = self.store.get_kb(kb_id)
            busy = [d.name for d, owner in self.store.pending_documents() if d.kb_id == kb_id and self.leases.alive(owner)]
            busy += [f"re-index run {r['id']}" for r in self.store.reindex_runs(kb_id, state="running")
                     if self.leases.alive(r["lease_id"])]
            if busy:
                raise DocumentBusy(f"knowledge base '{kb.name}' is being written by another process right now "
                                   f"({', '.join(busy[:3])}{' ...' if len(busy) > 3 else ''}); delete it when that "
                                   "has finished")
            self.store.set_kb_documents_status(kb_id, "pending", lease_id=lease.id)
            self.vector_store.delete_kb(kb_id)
            self.keyword_index.delete_kb(kb_id)
            self.store.delete_kb(kb_id)

    @_serialised
    def reconcile(self) -> list[str]:
        """Repair what interrupted work left behind (:meth:`Reconciler.reconcile` says what); returns one
        line per repair (or problem found)."""
        return Reconciler(self.store, self.vector_store, self.keyword_index, self.writer, self.leases,
                          self._reindexer()).reconcile()

    # ------------------------------------------------------------------
    # Re-index, check and repair
    # ------------------------------------------------------------------

    @_serialised
    def reindex_kb(self, kb_id: int, progress: ProgressCallback | None = None, batch_size: int = 64) -> int:
        """Re-embed every chunk of a KB with the current embedder (:meth:`Reindexer.reindex_kb`); returns
        the number of chunks embedded."""
        return self._reindexer().reindex_kb(kb_id, progress, batch_size)

    def _reindexer(self) -> Reindexer:
        return Reindexer(self.store, self.embedder, self.vector_store, self.keyword_index, self.writer,
                         self.leases)

    @_serialised
    def check_kb(self, kb_id: int, repair: bool = False) -> KbCheckReport:
        """Compare the KB's chunk rows, keyword rows and vectors per document; with ``repair``, fix them."""
        checker = KbChecker(self.store, self.embedder, self.vector_store, self.keyword_index, self.leases)
        if not repair:
            return checker.check(kb_id)
        with self.leases.hold("repair") as lease:
            return checker.repair(kb_id, lease.id)


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # read_bytes reports it
