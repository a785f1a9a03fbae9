"""Ingestion: files → text → chunks → SQLite rows, vectors and keyword entries.

Keyword first, then vectors.  The document row is written first with status
``pending``; its chunk rows and keyword entries follow, and the row becomes
``embedding``: keyword search reads it, the vector side reads whatever vectors
it has.  Its vectors follow in the same run, and the row becomes ``complete``
with its last one.  A pending document is invisible to every search (the chunk
reads of ``KnowledgeStore`` keep complete and embedding documents only).  If
anything fails, whatever was written for that document is removed from all
three stores again.

Ownership: every operation that makes documents pending or embedding (ingest,
delete, re-index, repair) holds a lease (``ingest/leases.py``) whose id the rows
carry, and completes a document only while it still owns it.  If the process
dies half-way, a ``pending`` row under a gone owner is removed by
:meth:`Ingestor.reconcile` (run by every engine start; the repairs are in
``ingest/reconcile.py``); an ``embedding`` row is kept, searchable, and
:meth:`Ingestor.finish_embedding` (the job worker, after the start) writes its
missing vectors.  Documents whose owner is alive (another process ingesting
right now) are left alone.

The ingestor streams a large document's chunk rows batch by batch
(``ingest/streaming.py``) and writes every run's vectors with the re-index loop
(``Reindexer.embed_missing``).  Re-index (``ingest/reindex.py``) and ``kb check``
(``ingest/check.py``) run under the same write lock.

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
from typing import Callable, Sequence

from docmind_core.backends.protocols import Embedder, IndexedChunk, KeywordIndex, VectorStore
from docmind_core.errors import DocMindError, EmbedderMismatch, IngestCancelled, IngestError, IngestPaused
from docmind_core.ingest.check import KbCheckReport, KbChecker
from docmind_core.ingest.budget import TextBudget
from docmind_core.ingest.chunking import chunk_document
from docmind_core.ingest.indexing import IndexWriter
from docmind_core.ingest.leases import Lease, LeaseBook
from docmind_core.ingest.loaders import STREAMED_EXTENSIONS, load_document, mime_for, open_text_file, too_large
from docmind_core.ingest.places import PlaceReader, place_kind
from docmind_core.ingest.prepared import (
    FileReporter, PreparedFile, ProgressCallback, check_cancel, describe_failure, file_outcome,
)
from docmind_core.ingest.reconcile import Reconciler
from docmind_core.ingest.reindex import Reindexer
from docmind_core.ingest.sources import SourceFile, expand_paths, read_bytes
from docmind_core.ingest.streaming import STREAM_MIN_BYTES, STREAM_MIN_CHUNKS, StreamedWriter
from docmind_core.values import DocumentRecord, IngestOutcome, KnowledgeBase
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


def _check_chunk_limit(name: str, estimate: int, settings: Settings) -> None:
    """Refuse a file whose text so far already makes more chunks than ``ingest.max_chunks_per_file``."""
    if estimate > settings.ingest.max_chunks_per_file:
        raise IngestError(f"{name}: about {estimate:,} chunks or more, over the limit of "
                          f"{settings.ingest.max_chunks_per_file:,} per file (ingest.max_chunks_per_file); "
                          f"split the file or raise the limit")


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
               cancel: threading.Event | None = None,
               pause: Callable[[], bool] | None = None) -> list[IngestOutcome]:
        """Ingest files and folders into a KB; one outcome per file, in the given order.

        Keyword first: every file is parsed, chunked and written (chunk rows and keyword entries) and
        becomes ``embedding``, searchable by keyword, smallest file first; then the vectors of all of
        them are written (``_embed``), smallest document first, in full encoder batches that run on
        from one document into the next (a batch of 8 texts costs twice as much per text as one of
        64).  A document is ``complete`` once its last vector is stored.  So a few small files uploaded
        with a large one are searched within seconds and done within a batch or two, and the large
        one is searched by keyword long before its last vector.

        ``cancel``: checked before each file and each encoder batch; when set, the documents not yet
        complete are undone and :class:`IngestCancelled` is raised carrying the outcomes so far (by
        position, None for the rest).

        ``pause``: asked after each encoder batch; when it says yes (a newer job waits), the vectors stop
        there and :class:`IngestPaused` is raised with the outcomes so far: the documents not yet complete
        stay searchable by keyword, and ingesting the same files again resumes them (``_resume``).
        """
        kb = self.store.get_kb(kb_id)
        self.check_embedder(kb)
        files = expand_paths(paths, names)
        outcomes: list[IngestOutcome | None] = [None] * len(files)
        self._refuse_repeated_names(files, outcomes, progress)
        opened: list[PreparedFile] = []
        try:
            with self.leases.hold("ingest") as lease:
                try:
                    for index in sorted(range(len(files)), key=lambda i: _file_size(files[i].path)):
                        if outcomes[index] is not None:
                            continue  # refused before any work
                        check_cancel(cancel)
                        source = files[index]
                        reporter = FileReporter(progress, index, len(files), source.name)
                        prepared = self._prepare(kb, source, settings, reporter, lease)
                        if isinstance(prepared, IngestOutcome):
                            outcomes[index] = prepared
                            continue
                        prepared.position = index
                        if self._open(kb, prepared, settings, outcomes, lease, cancel):
                            opened.append(prepared)
                    self._embed(kb, opened, settings, outcomes, lease, cancel, pause)
                except IngestPaused:
                    raise  # kept as they are: the lease ends here, so a later run takes them over
                except BaseException as exc:  # cancelled or stopped: what is not complete is undone
                    unfinished = [d for d in opened if outcomes[d.position] is None]
                    if isinstance(exc, IngestCancelled):  # their outcome stays None: cancelled, not failed
                        for doc in unfinished:
                            self._undo(kb.id, doc.doc_id, "ingest cancelled", lease)
                    else:
                        self._fail(kb, unfinished, describe_failure(exc), outcomes, lease)
                    raise
        except IngestCancelled as exc:
            raise IngestCancelled(str(exc), outcomes=list(outcomes)) from None
        except IngestPaused as exc:
            raise IngestPaused(str(exc), outcomes=list(outcomes)) from None
        return [o if o is not None else _unreported(files[i]) for i, o in enumerate(outcomes)]

    @staticmethod
    def _refuse_repeated_names(files: list[SourceFile], outcomes: list[IngestOutcome | None],
                               progress: ProgressCallback | None) -> None:
        """A KB keeps one document per name: of files of one batch sharing a name, the first is ingested and
        each later one fails here with the reason (ingested on its own, e.g. by a job's retry, it replaces the
        first).  Two of them written in one run would share one document row and one outcome."""
        first_of: dict[str, int] = {}
        for index, source in enumerate(files):
            first = first_of.setdefault(source.name, index)
            if first == index:
                continue
            message = (f"{source.name}: another file of this batch has the same name (file {first + 1} of "
                       f"{len(files)}), and a knowledge base keeps one document per name; rename this one, or "
                       "ingest it on its own to replace that document")
            FileReporter(progress, index, len(files), source.name)("failed", 1.0, message)
            outcomes[index] = file_outcome(source, time.perf_counter(), "failed", error=message)

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
            max_text = TextBudget.of_megabytes(source.name, settings.ingest.max_text_mb).max_chars
            opened = None
            if source.path.suffix.lower() in STREAMED_EXTENSIONS and _file_size(source.path) > STREAM_MIN_BYTES:
                # None: not UTF-8, read whole below
                opened = open_text_file(source.path, source.name, max_bytes, max_text_chars=max_text)
            if opened is not None:
                digest, size = opened.digest, opened.size
            else:
                data = read_bytes(source.path, max_bytes=max_bytes, name=source.name)
                digest, size = hashlib.sha256(data).hexdigest(), len(data)
            existing = self.store.find_document(kb.id, source.name)
            if existing is not None and existing.status == "complete" and existing.content_hash == digest \
                    and not self.store.lacks_places(existing.id):  # stored before pages were kept: read anew
                reporter("skipped", 1.0, "unchanged")
                return file_outcome(source, started, "unchanged", doc_id=existing.id, chunks=existing.chunk_count)
            if existing is not None and existing.status == "embedding" and existing.content_hash == digest:
                resumed = self._resume(existing, source, reporter, started, lease)
                if resumed is not None:
                    return resumed
            page_starts: tuple[int, ...] = ()
            original: bytes | None = None
            if opened is not None:
                pieces, mime = opened.pieces, opened.mime
            else:
                loaded = load_document(source.path, data=data, max_bytes=max_bytes, name=source.name,
                                       max_text_chars=max_text)
                original = data if loaded.mime == "application/pdf" else None  # its pages are shown as images
                del data  # the text is what is kept from here on
                pieces, mime = functools.partial(iter, [loaded.text]), loaded.mime
                page_starts = loaded.page_starts
            reporter("chunking", 0.1)
            tokens = chars = 0
            for piece in pieces():  # stops at the first piece past the limit, not after the whole text
                tokens, chars = tokens + uncached_count_tokens(piece), chars + len(piece)
                _check_chunk_limit(source.name, estimated_chunks(tokens, settings), settings)
            estimate = estimated_chunks(tokens, settings)
            if estimate > STREAM_MIN_CHUNKS:
                return PreparedFile(source=source, reporter=reporter, started=started, digest=digest, size=size,
                                 text="", mime=mime, parents=[], children=[], existing=existing,
                                 prepare_seconds=time.perf_counter() - started, pieces=pieces, chars=chars,
                                 original=original, page_starts=page_starts)
            text = "".join(pieces())
            parents, children = chunk_document(kb.id, source.name, text, settings.rag.chunk_tokens,
                                               settings.rag.chunk_overlap_tokens, settings.rag.parent_tokens,
                                               PlaceReader(place_kind(mime), page_starts))
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
            if current is None or current.status not in ("complete", "embedding"):
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
                         existing=existing, prepare_seconds=time.perf_counter() - started, original=original)

    def _resume(self, existing, source: SourceFile, reporter: FileReporter, started: float,
                lease: Lease) -> PreparedFile | None:
        """The same file's document left ``embedding`` by a run that stopped (a killed process, a resumed job):
        taken over as it is, its chunks and keyword entries kept, for ``_embed`` to write the missing vectors.
        None when its owner is still at work (the ordinary path then reports it busy)."""
        owner = self.store.document_leases([existing.id]).get(existing.id)
        if owner != lease.id and (self.leases.owner_gone(owner) is None
                                  or not self.store.claim_embedding(existing.id, lease.id, owner)):
            return None
        reporter("embedding", 0.1, "searchable by keyword; embedding the rest of its chunks")
        return PreparedFile(source=source, reporter=reporter, started=started, digest=existing.content_hash,
                            size=existing.size, text="", mime=existing.mime, parents=[], children=[],
                            existing=None, doc_id=existing.id, written_chunks=existing.chunk_count, resumed=True)

    def _open(self, kb: KnowledgeBase, doc: PreparedFile, settings: Settings, outcomes: list[IngestOutcome | None],
              lease: Lease, cancel: threading.Event | None) -> bool:
        """Write a prepared document's chunk rows and keyword entries and make it searchable by keyword
        (``embedding``); True if it is, False if it failed (undone, its outcome set)."""
        if doc.resumed:
            return True
        try:
            if doc.pieces is not None:
                StreamedWriter(self.store, self.writer, self.keyword_index, self.leases).write(
                    kb, doc, settings, lease, cancel)
            else:
                self._write_keywords(kb, doc, lease)
        except BaseException as exc:
            self._fail(kb, [doc], "ingest cancelled" if isinstance(exc, IngestCancelled) else describe_failure(exc),
                       outcomes, lease)
            if not isinstance(exc, Exception) or isinstance(exc, IngestCancelled):
                raise  # cancelled, KeyboardInterrupt and friends stop the batch
            return False
        doc.parents, doc.children, doc.text = [], [], ""  # in the store now; the backfill reads them back
        doc.reporter("embedding", 0.1, f"searchable by keyword; {doc.chunk_count} chunks to embed")
        return True

    def _write_keywords(self, kb: KnowledgeBase, doc: PreparedFile, lease: Lease) -> None:
        """Write one document's chunk rows and keyword entries; it is pending until they are all written,
        then ``embedding``."""
        doc.reporter("indexing", 0.05, f"writing {len(doc.children)} chunks and their keyword entries")
        # Pending under our lease before the other stores are touched: readers stop seeing an old
        # version, and a crash from here on is cleaned up by the next start's reconcile().
        doc.doc_id = self.store.begin_document(kb.id, doc.source.name, source_path=str(doc.source.path),
                                               content_hash=doc.digest, mime=doc.mime, size=doc.size,
                                               text=doc.text, lease_id=lease.id, owner_alive=self.leases.alive)
        if doc.existing is not None:  # an old version: a clean slate (its vectors too, so none meets a query)
            self.writer.purge(kb.id, doc.doc_id)
        self.store.add_chunks([c.to_record(kb.id, doc.doc_id) for c in doc.parents + doc.children])
        if doc.original is not None:
            self.store.keep_file(doc.doc_id, doc.original)
            doc.original = None
        self.keyword_index.add([IndexedChunk(c.id, kb.id, doc.doc_id, c.text, c.terms) for c in doc.children])
        doc.written_chunks = len(doc.children)
        if not self.store.open_for_search(doc.doc_id, lease.id):
            raise IngestError(f"{doc.source.name}: another process took this document over while it was being "
                              f"written (no heartbeat from this one for {self.leases.stale_after_s:.0f} s?)")

    def _embed(self, kb: KnowledgeBase, docs: list[PreparedFile], settings: Settings,
               outcomes: list[IngestOutcome | None], lease: Lease, cancel: threading.Event | None,
               pause: Callable[[], bool] | None = None) -> None:
        """Write the vectors of documents that are searchable by keyword, smallest first, and complete each
        one when its last vector is stored.

        The loop is the re-index's (``Reindexer.embed_missing``): the stored vector copy marks a chunk
        done, so whoever resumes (a resumed job, ``finish_embedding``) embeds only what is missing.  When a
        batch fails, each document still missing vectors is tried on its own, so one bad document never
        takes its neighbours down.
        """
        waiting = {d.doc_id: d for d in sorted(docs, key=lambda d: d.chunk_count)}
        if not waiting:
            return
        missing = self.store.missing_vector_counts(list(waiting))
        to_embed = sum(missing.values())
        embedded = [0]
        report = next(iter(waiting.values())).reporter
        report("embedding", 0.1, run_embedded=0, run_to_embed=to_embed)  # the clock of the job's ETA starts

        def landed(part: list[tuple[str, int, str]]) -> None:
            embedded[0] += len(part)
            touched = list(dict.fromkeys(doc_id for _, doc_id, _ in part))
            left = self.store.missing_vector_counts(touched)
            for doc_id in touched:
                doc = waiting.get(doc_id)
                if doc is None:
                    continue
                if left.get(doc_id, 0):
                    done = 1.0 - left[doc_id] / max(1, doc.chunk_count)
                    doc.reporter("embedding", 0.1 + 0.9 * done, f"{doc.chunk_count - left[doc_id]} of "
                                 f"{doc.chunk_count} chunks embedded", run_embedded=embedded[0], run_to_embed=to_embed)
                else:
                    self._complete(kb, waiting.pop(doc_id), outcomes, lease, embedded[0], to_embed)
            if waiting and pause is not None and pause():
                raise IngestPaused()

        batch = settings.embedding.batch_size
        reindexer = self._reindexer()
        try:
            reindexer.embed_missing(kb.id, None, batch, None, to_embed, doc_ids=list(waiting), after_batch=landed,
                                    cancel=cancel)
        except (IngestCancelled, IngestPaused):
            raise
        except Exception as exc:
            log.warning("embedding %d documents failed (%s); trying them one at a time", len(waiting), exc)
            for doc_id in list(waiting):
                check_cancel(cancel)
                try:
                    reindexer.embed_missing(kb.id, None, batch, None, to_embed, doc_ids=[doc_id], after_batch=landed,
                                            cancel=cancel)
                except (IngestCancelled, IngestPaused):
                    raise
                except Exception as one:
                    if doc_id in waiting:
                        self._fail(kb, [waiting.pop(doc_id)], describe_failure(one), outcomes, lease)
        for doc_id in [d for d in waiting if not self.store.missing_vector_counts([d])]:
            self._complete(kb, waiting.pop(doc_id), outcomes, lease, embedded[0], to_embed)  # none was missing
        for doc in waiting.values():  # never left searchable by keyword only without a word
            self._fail(kb, [doc], f"{doc.source.name}: its vectors could not all be written", outcomes, lease)

    def _complete(self, kb: KnowledgeBase, doc: PreparedFile, outcomes: list[IngestOutcome | None], lease: Lease,
                  embedded: int, to_embed: int) -> None:
        if not self.store.complete_document(doc.doc_id, lease.id):
            message = (f"{doc.source.name}: another process took this document over while it was being written "
                       f"(no heartbeat from this one for {self.leases.stale_after_s:.0f} s?)")
            doc.reporter("failed", 1.0, message)
            outcomes[doc.position] = file_outcome(doc.source, doc.started, "failed", doc_id=doc.doc_id, error=message)
            return
        replaced = doc.existing is not None and doc.existing.status in ("complete", "embedding")
        outcomes[doc.position] = file_outcome(doc.source, doc.started, "replaced" if replaced else "added",
                                              doc_id=doc.doc_id, chunks=doc.chunk_count)
        doc.reporter("done", 1.0, f"{doc.chunk_count} chunks", outcome=outcomes[doc.position],
                     run_embedded=embedded, run_to_embed=to_embed)

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
            # pending first (a searchable ``embedding`` document leaves every search at once): if the purge
            # fails, reconcile() removes it at the next start
            self.store.set_document_status(doc_id, "pending", lease_id=lease.id)
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
            if doc.status in ("pending", "embedding") and self.leases.alive(owner):
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
            busy = [d.name for d, owner in self.store.pending_documents() + self.store.embedding_documents()
                    if d.kb_id == kb_id and self.leases.alive(owner)]
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

    def finish_embedding(self, batch_size: int = 64, cancel: threading.Event | None = None) -> list[str]:
        """Write the missing vectors of documents left ``embedding`` by a process that is gone (killed while
        their vectors were being written), and complete them; returns one line per document.

        They stay searchable by keyword meanwhile.  Run in the background by the ingest job worker
        (``IngestJobQueue``) at every start, never in the start itself: a large document takes as long as its
        encoding.  A few documents at a time under the write lock (small ones share encoder batches), so an
        ingest, a delete or ``kb check`` of this process waits for one group, never for the whole backfill; each
        batch's vectors are stored as it lands, so a process that ends half-way leaves less for the next start.
        """
        lines: list[str] = []
        with self.leases.on_demand("backfill") as lease:
            while True:
                with self._write_lock:
                    group = self._claim_left_embedding(lease, budget=max(1, batch_size) * 4)
                    if not group:
                        break
                    try:
                        lines += self._finish_group(group, lease.held_id, batch_size, cancel)
                    except IngestCancelled:
                        break  # the rest stays embedding under a lease that ends with this run: the next run goes on
        for line in lines:
            log.warning("backfill: %s", line)
        return lines

    def _claim_left_embedding(self, lease, budget: int) -> list[tuple[DocumentRecord, str]]:
        """Take over documents of one KB left ``embedding`` by gone owners, about ``budget`` chunks of them (at
        least one document); [(document, why its owner is gone)]."""
        group: list[tuple[DocumentRecord, str]] = []
        chunks = 0
        for doc, owner in self.store.embedding_documents():
            if group and (doc.kb_id != group[0][0].kb_id or chunks >= budget):
                continue
            reason = self.leases.owner_gone(owner)
            if reason is None or not self.store.claim_embedding(doc.id, lease.take().id, owner):
                continue  # its owner is at work, or another process took it first
            group.append((doc, reason))
            chunks += doc.chunk_count
        return group

    def _finish_group(self, group: list[tuple[DocumentRecord, str]], lease_id: int, batch_size: int,
                      cancel: threading.Event | None) -> list[str]:
        """Embed what the claimed documents (one KB) miss, completing each with its last vector; one line each."""
        kb = self.store.get_kb(group[0][0].kb_id)
        same = kb.embedder_id == self.embedder.id and kb.embedding_dim == self.embedder.dim
        docs = {doc.id: (doc, reason) for doc, reason in group}
        missing = self.store.missing_vector_counts(list(docs))
        lines: list[str] = []

        def complete(doc_id: int) -> None:
            doc, reason = docs.pop(doc_id)
            self.store.complete_document(doc_id, lease_id)
            note = f"{missing.get(doc_id, 0)} missing vectors written" if same else (
                f"its vectors follow at `docmind kb reindex {kb.name}` (the KB was built with {kb.embedder_id})")
            lines.append(f"finished embedding '{doc.name}' (kb {kb.id}) after {reason}: {note}")

        def landed(part: list[tuple[str, int, str]]) -> None:
            touched = list(dict.fromkeys(doc_id for _, doc_id, _ in part))
            left = self.store.missing_vector_counts(touched)
            for doc_id in touched:
                if doc_id in docs and not left.get(doc_id):
                    complete(doc_id)

        if same:
            reindexer = self._reindexer()
            try:
                reindexer.embed_missing(kb.id, None, batch_size, None, sum(missing.values()), doc_ids=list(docs),
                                        after_batch=landed, cancel=cancel)
            except IngestCancelled:
                raise
            except Exception as exc:  # noqa: BLE001 - each one alone: one bad document never holds the others back
                log.warning("finishing %d documents failed (%s); trying them one at a time", len(docs), exc)
                for doc_id in list(docs):
                    try:
                        reindexer.embed_missing(kb.id, None, batch_size, None, missing.get(doc_id, 0),
                                                doc_ids=[doc_id], after_batch=landed, cancel=cancel)
                    except IngestCancelled:
                        raise
                    except Exception as one:  # noqa: BLE001 - left embedding: the next start tries again
                        log.exception("could not finish embedding %s", docs[doc_id][0].name)
                        lines.append(f"could not finish embedding '{docs.pop(doc_id)[0].name}' (kb {kb.id}): "
                                     f"{describe_failure(one)}")
        for doc_id in list(docs):  # nothing was missing, or another embedder: the re-index writes them
            left = self.store.missing_vector_counts([doc_id]).get(doc_id, 0) if same else 0
            if not left:
                complete(doc_id)
            else:  # left embedding: its lease ends with this run, so the next start tries again
                lines.append(f"could not finish embedding '{docs.pop(doc_id)[0].name}' (kb {kb.id}): {left} chunks "
                             "still without a vector")
        return lines

    def needs_embedding(self) -> bool:
        """True when a document is left ``embedding`` by an owner that is gone (``finish_embedding`` has work)."""
        return any(self.leases.owner_gone(owner) is not None for _doc, owner in self.store.embedding_documents())

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


def _unreported(source: SourceFile) -> IngestOutcome:
    """The outcome of a file the run ended without one for: failed, never silently left out (a caller that
    matches outcomes to its files must never be handed a shorter list)."""
    log.error("the ingest ended without an outcome for %s", source.name)
    return file_outcome(source, time.perf_counter(), "failed",
                        error=f"{source.name}: the ingest ended without a result for this file; ingest it again")


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # read_bytes reports it
