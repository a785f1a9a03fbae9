"""A file on its way into a knowledge base: read and chunked, waiting to be written, and its progress.

Shared by the ingestor (``pipeline.py``) and the streamed writer (``streaming.py``): the prepared file,
the reporter that sends its :class:`IngestProgress`, and the words a failure is reported with.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterable

from docmind_core.errors import DocMindError, IngestCancelled
from docmind_core.ingest.chunking import TextChunk
from docmind_core.ingest.sources import SourceFile
from docmind_core.values import DocumentRecord, IngestOutcome, IngestProgress

log = logging.getLogger(__name__)

ProgressCallback = Callable[[IngestProgress], None]


@dataclass(eq=False)  # compared and hashed by identity: one per file
class PreparedFile:
    """A parsed and chunked file waiting to be written."""

    source: SourceFile
    reporter: FileReporter
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
    written_chunks: int = 0  # child chunks written (its chunks in memory are dropped once written)
    resumed: bool = False  # an ``embedding`` document of a stopped run, taken over as it is
    original: bytes | None = None  # a PDF's bytes, kept with the document for page images (then dropped here)
    page_starts: tuple[int, ...] = ()  # a PDF: where each page begins in its text (for a streamed one's places)

    @property
    def chunk_count(self) -> int:
        return self.written_chunks or len(self.children)


def check_cancel(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise IngestCancelled()


def file_outcome(source: SourceFile, started: float, status: str, **extra) -> IngestOutcome:
    return IngestOutcome(path=str(source.path), name=source.name, status=status,
                         seconds=round(time.perf_counter() - started, 3), **extra)


class FileReporter:
    """Sends IngestProgress for one file; a failing callback must not fail the ingest."""

    def __init__(self, callback: ProgressCallback | None, index: int, count: int, name: str):
        self.callback, self.index, self.count, self.name = callback, index, count, name

    def __call__(self, stage: str, fraction: float, message: str = "", outcome: IngestOutcome | None = None,
                 run_embedded: int | None = None, run_to_embed: int | None = None) -> None:
        if self.callback is None:
            return
        try:
            self.callback(IngestProgress(file_index=self.index, file_count=self.count, name=self.name,
                                         stage=stage, fraction=min(1.0, max(0.0, fraction)), message=message,
                                         outcome=outcome, run_embedded=run_embedded, run_to_embed=run_to_embed))
        except Exception:
            log.exception("ingest progress callback failed")


def describe_failure(exc: BaseException) -> str:
    if isinstance(exc, DocMindError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
