"""Ingestion: files → text → chunks → SQLite rows, vectors and keyword entries.

Atomic per document.  The document row is written first with status
``pending``; chunk rows, vectors and keyword entries follow; only then is the
row marked ``complete``.  Readers see complete documents only (the chunk reads
of ``KnowledgeStore`` filter on it), so a pending document is invisible to
every search even while its vectors and keyword entries exist.  If anything
fails, whatever was written for that document is removed from all three
stores again.

Ownership: every operation that makes documents pending (ingest, delete,
re-index, repair) holds a lease (``leases.py``) whose id the pending rows
carry, and completes a document only while it still owns it.  If the process
dies half-way, the row stays ``pending`` under a lease whose owner is gone, and
:meth:`Ingestor.reconcile` (run by every engine start) removes it; documents
whose owner is alive (another process ingesting right now) are left alone.

Re-indexing is a recorded operation (``kb_reindex_runs``): each chunk's stored
vector copy marks it done, so an interrupted re-index is finished by the next
start instead of leaving the KB with part of its vectors.

Failed files: when a file cannot be read, the batch goes on.  A file that was
never in the KB gets a ``failed`` row carrying the reason (no chunks), so the
knowledge-base page can show it; a file whose earlier version is in the KB
keeps that version untouched when the new one cannot be parsed.  Every failure
is also in the returned :class:`IngestOutcome` list.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import math
import queue
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence, TypeVar

from docmind_core.backends.protocols import Embedder, IndexedChunk, KeywordIndex, VectorStore
from docmind_core.errors import DocMindError, EmbedderMismatch, IngestCancelled, IngestError
from docmind_core.ingest.check import KbCheckReport, KbChecker
from docmind_core.ingest.chunking import TextChunk, chunk_document, iter_stream_blocks
from docmind_core.ingest.indexing import IndexWriter
from docmind_core.ingest.leases import Lease, LeaseBook, LeaseOnDemand
from docmind_core.ingest.loaders import STREAMED_EXTENSIONS, load_document, mime_for, open_text_file, too_large
from docmind_core.ingest.sources import SourceFile, expand_paths, read_bytes
from docmind_core.models import DocumentRecord, IngestOutcome, IngestProgress, KnowledgeBase
from docmind_core.settings import Settings
from docmind_core.text import stored_terms, uncached_count_tokens
from docmind_core.store.kb_store import DocumentBusy, KnowledgeStore

log = logging.getLogger(__name__)

ProgressCallback = Callable[[IngestProgress], None]
# A document estimated to make more child chunks than this is streamed: chunked, tokenised, encoded and
# written one batch at a time (bounded memory), with the next batch prepared while the encoder runs.
STREAM_MIN_CHUNKS = 512
# A plain-text file larger than this is never read whole: hashed, counted, chunked and stored in pieces.
STREAM_MIN_BYTES = 1 << 20


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
        document is streamed on its own (:meth:`_write_streamed`).

        ``cancel``: checked before each file and each encoder batch; when set,
        the document being written is undone and :class:`IngestCancelled` is
        raised carrying the outcomes so far (by position, None for the rest).
        """
        kb = self.store.get_kb(kb_id)
        self.check_embedder(kb)
        files = expand_paths(paths, names)
        outcomes: list[IngestOutcome | None] = [None] * len(files)
        group: list[_Prepared] = []
        try:
            with self.leases.hold("ingest") as lease:
                for index, source in enumerate(files):
                    _check_cancel(cancel)
                    reporter = _Reporter(progress, index, len(files), source.name)
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
                 reporter: "_Reporter", lease: Lease) -> "_Prepared | IngestOutcome":
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
                return _outcome(source, started, "unchanged", doc_id=existing.id, chunks=existing.chunk_count)
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
                return _Prepared(source=source, reporter=reporter, started=started, digest=digest, size=size,
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
            message = _describe(exc)
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
            return _outcome(source, started, "failed", error=message)
        return _Prepared(source=source, reporter=reporter, started=started, digest=digest, size=size,
                         text=text, mime=mime, parents=parents, children=children,
                         existing=existing, prepare_seconds=time.perf_counter() - started)

    def _flush(self, kb: KnowledgeBase, group: list["_Prepared"], settings: Settings,
               outcomes: list[IngestOutcome | None], lease: Lease, cancel: threading.Event | None = None) -> None:
        write_started = time.perf_counter()
        try:
            if len(group) == 1 and group[0].pieces is not None:
                self._write_streamed(kb, group[0], settings, lease, cancel)
            else:
                self._write(kb, group, settings, lease, cancel)
        except BaseException as exc:
            if isinstance(exc, IngestCancelled):
                self._fail(kb, group, "ingest cancelled", outcomes, lease)
                raise
            if len(group) == 1 or not isinstance(exc, Exception):
                self._fail(kb, group, _describe(exc), outcomes, lease)
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

    def _write_streamed(self, kb: KnowledgeBase, doc: "_Prepared", settings: Settings, lease: Lease,
                        cancel: threading.Event | None) -> None:
        """Write one large document batch by batch: memory holds a couple of batches and their text.

        A producer thread reads, chunks and tokenises the next batch (pure Python, holding the GIL)
        while this thread encodes the current one (numpy, which releases it) and writes it.  The text
        goes to a spool in SQLite piece by piece and becomes the document's text at the end.  The
        document stays pending until its last batch is written, exactly as in :meth:`_write`.
        """
        retry = doc.doc_id is not None
        doc.doc_id = self.store.begin_document(kb.id, doc.source.name, source_path=str(doc.source.path),
                                               content_hash=doc.digest, mime=doc.mime, size=doc.size,
                                               text="", lease_id=lease.id, owner_alive=self.leases.alive)
        if retry or doc.existing is not None:
            self.writer.purge(kb.id, doc.doc_id)
        self.store.store_spooled_text(doc.doc_id, keep=False)  # whatever a failed attempt left
        written = 0
        try:
            for parents, children, end, text in _prefetched(
                    _batches(kb.id, doc.source.name, doc.pieces(), settings), depth=2, stop=cancel):
                _check_cancel(cancel)
                self.store.spool_document_text(doc.doc_id, text)
                self.store.add_chunks([c.to_record(kb.id, doc.doc_id) for c in parents + children])
                indexed = [IndexedChunk(c.id, kb.id, doc.doc_id, c.text, c.terms) for c in children]
                if indexed:
                    self.writer.embed(indexed)
                    self.keyword_index.add(indexed)
                written += len(children)
                doc.reporter("embedding", 0.12 + 0.83 * end / max(1, doc.chars), f"{written} chunks")
            _check_cancel(cancel)
            if not written:
                raise IngestError(f"{doc.source.name}: no text could be extracted")
            self.store.store_spooled_text(doc.doc_id)
        except BaseException:
            with contextlib.suppress(Exception):  # the failure being raised is the one to report
                self.store.store_spooled_text(doc.doc_id, keep=False)
            raise
        doc.streamed_chunks = written
        doc.reporter("indexing", 0.97)
        if not self.store.complete_document(doc.doc_id, lease.id):
            raise IngestError(f"{doc.source.name}: another process took this document over while it was being "
                              f"written (no heartbeat from this one for {self.leases.stale_after_s:.0f} s?)")

    def _write(self, kb: KnowledgeBase, group: list["_Prepared"], settings: Settings, lease: Lease,
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
            _check_cancel(cancel)
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

    def _fail(self, kb: KnowledgeBase, group: list["_Prepared"], message: str,
              outcomes: list[IngestOutcome | None], lease: Lease) -> None:
        for doc in group:
            reported = self._undo(kb.id, doc.doc_id, message, lease)
            doc.reporter("failed", 1.0, reported)
            outcomes[doc.position] = _outcome(doc.source, doc.started, "failed", doc_id=doc.doc_id, error=reported)

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
    # Delete and repair
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
        """Repair what interrupted work left behind; returns one line per repair (or problem found).

        * pending documents whose owner is provably gone (see ``leases.py``): removed from all stores,
          row deleted; pending documents of live owners (another process ingesting now) are left alone;
        * failed documents that still have chunk rows: the rows removed, the document kept;
        * vectors or keyword entries of documents that are neither complete nor owned by a live
          operation (or no longer exist): removed;
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
            for run in self.store.reindex_runs(state="running"):
                reason = self.leases.owner_gone(run["lease_id"])
                if reason is not None and self.store.claim_reindex(run["id"], lease.take().id, run["lease_id"]):
                    repairs.append(self._resume_reindex(run, reason))
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
                    if status == "complete" or (status == "pending" and owner is not None
                                                and (owner == lease.held_id or self.leases.alive(owner))):
                        continue
                    lease.take()  # a repair: from here this start owns what it does
                    self.vector_store.delete_document(kb_id, doc_id)
                    self.keyword_index.delete_document(kb_id, doc_id)
                    repairs.append(f"removed stray index entries of document {doc_id} (kb {kb_id})")
                vectors = self.vector_store.count(kb_id)
            if vectors < kb.chunk_count and not self.store.reindex_runs(kb_id, state="running"):
                repairs.append(f"knowledge base '{kb.name}' has {kb.chunk_count - vectors} of {kb.chunk_count} "
                               f"chunks without a vector (search misses them on its vector side): run "
                               f"`docmind kb check {kb.name} --repair`")
        for store in (self.vector_store, self.keyword_index):
            listed = getattr(store, "kb_ids", None)
            for kb_id in sorted(set(listed()) - known_kbs) if listed is not None else []:
                lease.take()
                store.delete_kb(kb_id)
                repairs.append(f"dropped {store.name} entries of deleted knowledge base {kb_id}")
        return repairs

    # ------------------------------------------------------------------
    # Re-index, check and repair
    # ------------------------------------------------------------------

    @_serialised
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
            embedded = self._embed_missing(kb_id, run_id, batch_size, _Reporter(progress, 0, 1, kb.name), total)
            self.store.update_kb(kb_id, embedder_id=self.embedder.id, embedding_dim=self.embedder.dim)
            self.store.finish_reindex(run_id, "done")
            _Reporter(progress, 0, 1, kb.name)("done", 1.0, f"{embedded} chunks re-embedded")
            return embedded

    def _embed_missing(self, kb_id: int, run_id: int | None, batch_size: int, reporter: "_Reporter",
                       total: int) -> int:
        """Embed the KB's chunks that have no stored vector copy yet (the copy marks a chunk done)."""
        embedded = 0
        seen: set[str] = set()
        while True:
            part = self.store.chunks_without_vectors(kb_id, max(1, batch_size))
            if not part:
                return embedded
            if any(cid in seen for cid, _, _ in part):  # a write that did not stick: never loop forever
                raise IngestError(f"could not store the vectors of knowledge base {kb_id}")
            seen.update(cid for cid, _, _ in part)
            reporter("embedding", embedded / max(1, total))
            self.writer.embed([IndexedChunk(cid, kb_id, doc_id, text) for cid, doc_id, text in part])
            embedded += len(part)
            if run_id is not None:
                self.store.reindex_progress(run_id, embedded)

    def _resume_reindex(self, run: dict, reason: str) -> str:
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
            embedded = self._embed_missing(kb.id, None, 64, _Reporter(None, 0, 1, kb.name), total)
            restored = KbChecker(self.store, self.embedder, self.vector_store, self.keyword_index,
                                 self.leases).restore_vectors(kb.id)
            self.store.update_kb(kb.id, embedder_id=self.embedder.id, embedding_dim=self.embedder.dim)
        except Exception as exc:  # left running: the next start tries again
            log.exception("could not finish the interrupted re-index of %s", kb.name)
            return (f"could not finish the interrupted re-index of '{kb.name}' ({_describe(exc)}); "
                    "the next start tries again")
        note = (f"finished by process {self.leases.identity.pid} after {reason}: {restarted}{embedded} of {total} "
                f"chunks embedded, {restored} vectors restored from their stored copies")
        self.store.finish_reindex(run["id"], "done", note)
        return f"finished the interrupted re-index of '{kb.name}' ({note})"

    @_serialised
    def check_kb(self, kb_id: int, repair: bool = False) -> KbCheckReport:
        """Compare the KB's chunk rows, keyword rows and vectors per document; with ``repair``, fix them."""
        checker = KbChecker(self.store, self.embedder, self.vector_store, self.keyword_index, self.leases)
        if not repair:
            return checker.check(kb_id)
        with self.leases.hold("repair") as lease:
            return checker.repair(kb_id, lease.id)


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
    # A large document, read, chunked and written batch by batch: its text in pieces, read again on each call.
    pieces: Callable[[], Iterable[str]] | None = None
    chars: int = 0  # its length
    streamed_chunks: int = 0

    @property
    def chunk_count(self) -> int:
        return self.streamed_chunks if self.pieces is not None else len(self.children)


def _check_cancel(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise IngestCancelled()


def _batches(kb_id: int, name: str, pieces: Iterable[str],
             settings: Settings) -> Iterator[tuple[list[TextChunk], list[TextChunk], int, list[str]]]:
    """(parents, children with their keyword terms, end offset, the text read since the previous batch) of
    about one encoder batch each; the texts of all batches join to the whole text."""
    taken: list[str] = []

    def read() -> Iterator[str]:
        for piece in pieces:
            taken.append(piece)
            yield piece

    parents: list[TextChunk] = []
    children: list[TextChunk] = []
    end = 0
    for parent, kids in iter_stream_blocks(kb_id, name, read(), settings.rag.chunk_tokens,
                                           settings.rag.chunk_overlap_tokens, settings.rag.parent_tokens):
        parents.append(parent)
        children.extend(replace(c, terms=stored_terms(c.text)) for c in kids)
        end = parent.end
        if len(children) >= settings.embedding.batch_size:
            yield parents, children, end, taken[:]
            parents, children, taken[:] = [], [], []
    if parents or taken:
        yield parents, children, end, taken[:]


_T = TypeVar("_T")
_END = object()


def _prefetched(items: Iterable[_T], depth: int, stop: threading.Event | None = None) -> Iterator[_T]:
    """``items``, produced by a helper thread up to ``depth`` ahead of the consumer.

    An exception in the producer is raised in the consumer; a consumer that stops early (or an
    exception in it) ends the producer at its next item.
    """
    box: queue.Queue = queue.Queue(maxsize=max(1, depth))
    done = threading.Event()

    def put(item: object) -> bool:
        while not done.is_set():
            try:
                box.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put(item) or (stop is not None and stop.is_set()):
                    return
            put(_END)
        except BaseException as exc:  # handed to the consumer
            put(exc)

    thread = threading.Thread(target=produce, name="docmind-ingest-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            try:
                item = box.get(timeout=0.5)
            except queue.Empty:
                if not thread.is_alive() and box.empty():
                    return  # the producer stopped (cancel)
                continue
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        done.set()
        thread.join(timeout=5)


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # read_bytes reports it


def _outcome(source: SourceFile, started: float, status: str, **extra) -> IngestOutcome:
    return IngestOutcome(path=str(source.path), name=source.name, status=status,
                         seconds=round(time.perf_counter() - started, 3), **extra)


class _Reporter:
    """Sends IngestProgress for one file; a failing callback must not fail the ingest."""

    def __init__(self, callback: ProgressCallback | None, index: int, count: int, name: str):
        self.callback, self.index, self.count, self.name = callback, index, count, name

    def __call__(self, stage: str, fraction: float, message: str = "", outcome: IngestOutcome | None = None) -> None:
        if self.callback is None:
            return
        try:
            self.callback(IngestProgress(file_index=self.index, file_count=self.count, name=self.name,
                                         stage=stage, fraction=min(1.0, max(0.0, fraction)), message=message,
                                         outcome=outcome))
        except Exception:
            log.exception("ingest progress callback failed")


def _describe(exc: BaseException) -> str:
    if isinstance(exc, DocMindError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
