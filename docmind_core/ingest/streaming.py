"""Streamed ingest: one large document read, chunked and written one batch at a time.

The ingestor (``pipeline.py``) streams a document estimated to make more than ``STREAM_MIN_CHUNKS``
child chunks, and reads a plain-text file larger than ``STREAM_MIN_BYTES`` in pieces; memory then
holds a couple of batches and their text, never the whole document.  This writes its chunk rows and
keyword entries; its vectors follow in the ingestor's backfill, read back from the chunk rows.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from dataclasses import replace
from typing import Iterable, Iterator, TypeVar

from docmind_core.backends.protocols import IndexedChunk, KeywordIndex
from docmind_core.errors import IngestError
from docmind_core.ingest.chunking import TextChunk, iter_stream_blocks
from docmind_core.ingest.indexing import IndexWriter
from docmind_core.ingest.leases import Lease, LeaseBook
from docmind_core.ingest.places import PlaceReader, place_kind
from docmind_core.ingest.prepared import PreparedFile, check_cancel
from docmind_core.values import KnowledgeBase
from docmind_core.settings import Settings
from docmind_core.store.kb_store import KnowledgeStore
from docmind_core.text.tokens import stored_terms

# A document estimated to make more child chunks than this is streamed: chunked, tokenised and written one
# batch at a time (bounded memory), with the next batch prepared while the last one is written.
STREAM_MIN_CHUNKS = 512
# Child chunks per streamed batch: no encoder runs here, so batches are larger than an encoder batch
# (fewer transactions), still small enough for bounded memory.
STREAM_BATCH_CHUNKS = 512
# A plain-text file larger than this is never read whole: hashed, counted, chunked and stored in pieces.
STREAM_MIN_BYTES = 1 << 20


class StreamedWriter:
    """Writes a large prepared document to SQLite, the vector store and the keyword index."""

    def __init__(self, store: KnowledgeStore, writer: IndexWriter, keyword_index: KeywordIndex, leases: LeaseBook):
        self.store = store
        self.writer = writer
        self.keyword_index = keyword_index
        self.leases = leases

    def write(self, kb: KnowledgeBase, doc: PreparedFile, settings: Settings, lease: Lease,
              cancel: threading.Event | None) -> None:
        """Write one large document's chunk rows and keyword entries batch by batch: memory holds a couple of
        batches and their text.

        A producer thread reads, chunks and tokenises the next batch while this thread writes the current
        one.  The text goes to a spool in SQLite piece by piece and becomes the document's text at the end.
        The document stays pending until its last batch is written, then becomes ``embedding`` (searched by
        keyword), exactly as in :meth:`Ingestor._write_keywords`.
        """
        retry = doc.doc_id is not None
        doc.doc_id = self.store.begin_document(kb.id, doc.source.name, source_path=str(doc.source.path),
                                               content_hash=doc.digest, mime=doc.mime, size=doc.size,
                                               text="", lease_id=lease.id, owner_alive=self.leases.alive)
        if retry or doc.existing is not None:
            self.writer.purge(kb.id, doc.doc_id)
        self.store.store_spooled_text(doc.doc_id, keep=False)  # whatever a failed attempt left
        if doc.original is not None:  # a large PDF: its pages are shown as images too
            self.store.keep_file(doc.doc_id, doc.original)
            doc.original = None
        written = 0
        try:
            for parents, children, end, text in _prefetched(
                    _batches(kb.id, doc.source.name, doc.pieces(), settings, PlaceReader(place_kind(doc.mime), doc.page_starts)),
                    depth=2, stop=cancel):
                check_cancel(cancel)
                self.store.spool_document_text(doc.doc_id, text)
                self.store.add_chunks([c.to_record(kb.id, doc.doc_id) for c in parents + children])
                indexed = [IndexedChunk(c.id, kb.id, doc.doc_id, c.text, c.terms) for c in children]
                if indexed:
                    self.keyword_index.add(indexed)
                written += len(children)
                doc.reporter("indexing", 0.02 + 0.08 * end / max(1, doc.chars), f"{written} chunks written")
            check_cancel(cancel)
            if not written:
                raise IngestError(f"{doc.source.name}: no text could be extracted")
            self.store.store_spooled_text(doc.doc_id)
        except BaseException:
            with contextlib.suppress(Exception):  # the failure being raised is the one to report
                self.store.store_spooled_text(doc.doc_id, keep=False)
            raise
        doc.written_chunks = written
        if not self.store.open_for_search(doc.doc_id, lease.id):
            raise IngestError(f"{doc.source.name}: another process took this document over while it was being "
                              f"written (no heartbeat from this one for {self.leases.stale_after_s:.0f} s?)")


def _batches(kb_id: int, name: str, pieces: Iterable[str], settings: Settings,
             places: PlaceReader | None = None) -> Iterator[tuple[list[TextChunk], list[TextChunk], int, list[str]]]:
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
                                           settings.rag.chunk_overlap_tokens, settings.rag.parent_tokens, places):
        parents.append(parent)
        children.extend(replace(c, terms=stored_terms(c.text)) for c in kids)
        end = parent.end
        if len(children) >= STREAM_BATCH_CHUNKS:
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
