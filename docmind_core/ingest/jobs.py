"""Ingestion as background jobs owned by the core (rows in ``ingest_jobs``), not by a page's script run.

Why: an ingest run inside the Streamlit script that received the upload would
stop when the user navigates away (``StopException``) and nobody could see it
from anywhere else.  So a page (or any entry point) *enqueues* a job and
returns; each Engine has one worker thread that claims queued jobs one at a
time, holding a lease (``leases.py``) so that other processes can tell it is
alive.
Progress per file is written to SQLite as the ingest reports it, so every
page, every browser session and ``docmind jobs`` see the same state.

* **Cancel** sets a flag in the row; the worker polls it while ingesting and
  stops before the next file or encoder batch (the document being written is
  undone).  A queued job is cancelled at once.
* **Retry** queues the failed, cancelled or interrupted files of a finished job again.
* **Restarts**: a job left ``running`` by a worker whose owner is provably gone
  (its process exited) is resumed by the next engine start (files already done
  stay done; unchanged files are skipped by content hash), or marked
  ``interrupted`` when ``ingest.resume_interrupted`` is off.
* Uploaded bytes are copied under ``<home>/uploads`` so a job outlives the
  upload widget and a restart; a copy is removed once its file is ingested.
* **Newer jobs first**: while a job writes its vectors, a newly queued job
  pauses it after the current encoder batch (its files stay searchable by
  keyword); the new job runs, then the paused one resumes where it stopped.
  So two small files uploaded after a large one wait seconds, not the large
  file's whole encoding.
* **Backfill**: a document left ``embedding`` (searchable by keyword, vectors
  missing) by a process that is gone gets its missing vectors from the worker
  once no job is queued (``backfill``: ``Ingestor.finish_embedding``); a
  resumed job takes over its own files' documents itself.
"""

from __future__ import annotations

import logging
import re
import shutil
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from docmind_core.errors import DocMindError, IngestCancelled, IngestError, IngestPaused
from docmind_core.ingest.leases import LeaseBook
from docmind_core.ingest.pipeline import file_limit_refusal
from docmind_core.values import IngestOutcome, IngestProgress
from docmind_core.settings import Settings
from docmind_core.ingest.job_types import RETRYABLE_FILE_STATES, IngestJob, IngestJobFile
from docmind_core.ingest.job_store import JobStore

log = logging.getLogger(__name__)

# Runs the ingest of a job's remaining files: (kb id, paths, names, progress, cancel, pause) -> outcomes in
# order; ``pause`` says whether a newer job waits (the run then stops its vectors and raises IngestPaused).
RunFiles = Callable[[int, list[Path], list[str], Callable[[IngestProgress], None], threading.Event,
                     Callable[[], bool]], list[IngestOutcome]]


@dataclass(frozen=True)
class Backfill:
    """The worker's other task: whether documents left ``embedding`` by a gone process wait for their vectors
    (``needed``, cheap: read at every start), and writing them (``run``; one line per document)."""

    needed: Callable[[], bool]
    run: Callable[[], list[str]]


CANCEL_POLL_S = 0.5  # how often a running job looks at its cancel flag
IDLE_EXIT_S = 1.0  # a worker with nothing queued waits this long for new work, then ends


@dataclass(frozen=True)
class JobInput:
    """One file for a job: its bytes (an upload, copied under the home) or a path read in place."""

    name: str
    data: bytes | None = None
    path: Path | None = None


class IngestJobQueue:
    """The queue of one Engine: enqueue, cancel, retry, recover at start, and the worker thread."""

    def __init__(self, jobs: JobStore, leases: LeaseBook, uploads_dir: Path, run_files: RunFiles,
                 settings: Callable[[], Settings], backfill: Backfill):
        self.jobs = jobs
        self.leases = leases
        self.uploads_dir = uploads_dir
        self._run_files = run_files
        self._settings = settings
        self._backfill = backfill
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    # -- what entry points call (through the Workbench) ------------------------------------------
    def enqueue(self, kb_id: int, user_id: int | None, inputs: Sequence[JobInput]) -> IngestJob:
        """A queued job for these files; a file over ``ingest.max_file_mb`` is refused now, in the job."""
        if not inputs:
            raise IngestError("an ingest job needs at least one file")
        settings = self._settings()
        if self.jobs.active_count() >= settings.ingest.max_queued_jobs:
            raise IngestError(f"{settings.ingest.max_queued_jobs} ingest jobs are already queued or running "
                              "(ingest.max_queued_jobs); wait for one to finish or cancel one")
        folder = self.uploads_dir / uuid.uuid4().hex
        rows = []
        try:
            for i, item in enumerate(inputs):
                name = upload_name(item.name, i)
                size = len(item.data) if item.data is not None else _size(item.path)
                refusal = file_limit_refusal(name, size, settings)
                row = {"name": name, "size": size, "path": str(item.path or ""), "owned_copy": False}
                if refusal:
                    row.update(state="failed", error=refusal)
                elif item.data is not None:
                    target = folder / str(i) / _copy_name(name)  # an index folder: two uploads may share a name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    try:
                        target.write_bytes(item.data)
                    except OSError as exc:
                        raise IngestError(f"{name}: could not keep the upload for the job "
                                          f"({exc.strerror or exc})") from None
                    row.update(path=str(target), owned_copy=True)
                rows.append(row)
            job_id = self.jobs.create(kb_id, user_id, rows)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)  # no job: none of its copies stays behind
            raise
        self.start()
        return self.jobs.get(job_id)

    def cancel(self, job_id: int) -> IngestJob:
        self.jobs.request_cancel(job_id)
        return self.jobs.get(job_id)

    def retry(self, job_id: int) -> IngestJob:
        """Queue a finished job's failed, cancelled and interrupted files again."""
        job = self.jobs.get(job_id)
        if not job.finished:
            raise IngestError(f"ingest job #{job_id} is {job.state}; only a finished job can be retried")
        if not self.jobs.requeue(job_id, RETRYABLE_FILE_STATES, note="retried"):
            raise IngestError(f"ingest job #{job_id} has no failed, cancelled or interrupted file to retry")
        self.start()
        return self.jobs.get(job_id)

    def wait(self, job_id: int, timeout_s: float) -> IngestJob:
        """The job once finished, or as it is when ``timeout_s`` runs out."""
        deadline = time.monotonic() + timeout_s
        while True:
            job = self.jobs.get(job_id)
            if job.finished or time.monotonic() >= deadline:
                return job
            time.sleep(0.1)

    # -- start-up ---------------------------------------------------------------------------------
    def recover(self) -> list[str]:
        """Resume (or mark interrupted) jobs whose worker is gone; start the worker if work is queued."""
        report = []
        resume = self._settings().ingest.resume_interrupted
        for job_id, lease_id in self.jobs.running():
            why = self.leases.owner_gone(lease_id)
            if why is None:
                continue  # its worker is alive (another process): its job
            if resume:
                self.jobs.requeue(job_id, ("queued", "running"), note=f"resumed at a start: {why}")
                report.append(f"ingest job #{job_id} resumed ({why})")
            else:
                self.jobs.finish(job_id, "interrupted", note=f"interrupted: {why}", unfinished_files="interrupted")
                report.append(f"ingest job #{job_id} marked interrupted ({why}); `docmind jobs retry {job_id}` "
                               "runs its remaining files")
        if self.jobs.has_queued() or self._backfill_needed():
            self.start()
        return report

    def _backfill_needed(self) -> bool:
        try:
            return self._backfill.needed()
        except Exception:  # noqa: BLE001 - a broken store: the next start looks again
            log.exception("could not tell whether documents wait for their vectors")
            return False

    # -- the worker -------------------------------------------------------------------------------
    def start(self) -> None:
        """Make sure this engine's worker thread runs (at most one)."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="docmind-ingest-jobs", daemon=True)
                self._thread.start()

    def _work(self) -> None:
        try:
            with self.leases.hold("ingest-job") as lease:
                idle_since = time.monotonic()
                backfilled = False  # once per worker: a document whose encoding fails waits for the next start
                while True:
                    job_id = self.jobs.claim_next(lease.id)
                    if job_id is not None:
                        self._run(job_id)
                        idle_since = time.monotonic()
                        continue
                    if not backfilled and self._backfill_needed():
                        backfilled = True
                        try:
                            self._backfill.run()
                        except Exception:  # noqa: BLE001 - left embedding: the next start tries again
                            log.exception("could not write the missing vectors of documents left embedding")
                        idle_since = time.monotonic()
                        continue
                    if time.monotonic() - idle_since < IDLE_EXIT_S:
                        time.sleep(0.2)
                        continue
                    with self._lock:  # decided under the lock: an enqueue after this starts a new worker
                        if not self.jobs.has_queued():
                            self._thread = None
                            return
        except Exception:  # noqa: BLE001 - a broken database: log it; the next enqueue or start tries again
            log.exception("the ingest job worker stopped")
        with self._lock:
            if self._thread is threading.current_thread():
                self._thread = None

    def _run(self, job_id: int) -> None:
        job = self.jobs.get(job_id)
        files = [f for f in job.files if f.state in ("queued", "running")]
        if job.cancel_requested:
            self.jobs.finish(job_id, "cancelled", note="cancelled", unfinished_files="cancelled")
            return
        cancel = threading.Event()
        last_poll = [0.0]
        landed_ids: set[int] = set()  # files whose whole outcome the progress already wrote

        def on_progress(p: IngestProgress) -> None:
            # file_index is the place of the file in the list this run was given (one path per job file)
            f = files[p.file_index] if p.file_index < len(files) else None
            if f is None or f.name != p.name:
                log.error("ingest job %s: progress for %r matches none of its files", job_id, p.name)
                return
            if p.run_to_embed is not None:  # the job's measured pace (its ETA)
                self.jobs.embedding_progress(job_id, p.run_embedded or 0, p.run_to_embed)
            if p.stage in ("done", "skipped"):
                # what landed is recorded now, not only when the whole run returns: a process killed after this
                # file still shows it as added (or replaced) with its document and chunks
                landed = p.outcome
                if landed is not None:
                    landed_ids.add(f.id)
                self.jobs.file_finished(f.id, "done", outcome=landed.status if landed else
                                        ("unchanged" if p.stage == "skipped" else ""),
                                        doc_id=landed.doc_id if landed else None, chunks=landed.chunks if landed else 0)
                if f.owned_copy:  # its document is complete: the copy goes now, not after the whole job (a
                    _remove_copy(Path(f.path), self.uploads_dir)  # process killed before that left it forever)
            elif p.stage == "failed":
                self.jobs.file_finished(f.id, "failed", outcome="failed", error=p.message)
            else:
                self.jobs.file_progress(f.id, p.stage, p.fraction)
            now = time.monotonic()
            if now - last_poll[0] >= CANCEL_POLL_S:
                last_poll[0] = now
                if self.jobs.cancel_requested(job_id):
                    cancel.set()

        outcomes: list[IngestOutcome | None]
        state, note = "done", ""
        try:
            outcomes = list(self._run_files(job.kb_id, [Path(f.path) for f in files], [f.name for f in files],
                                            on_progress, cancel, self.jobs.has_fresh_queued))
        except IngestPaused as exc:
            outcomes, state = list(exc.outcomes), "paused"
            note = "paused for a newer job; its files are searchable by keyword"
        except IngestCancelled as exc:
            outcomes, state, note = list(exc.outcomes), "cancelled", "cancelled while running"
        except Exception as exc:  # noqa: BLE001 - e.g. the KB was deleted, or the embedder no longer matches
            message = str(exc) if isinstance(exc, DocMindError) else f"{type(exc).__name__}: {exc}"
            log.warning("ingest job %s failed: %s", job_id, message)
            outcomes, state, note = [], "failed", message
        for f, outcome in _outcomes_by_file(files, outcomes):
            if f.id in landed_ids:
                continue
            failed = outcome.status == "failed"
            self.jobs.file_finished(f.id, "failed" if failed else "done", outcome=outcome.status,
                                    doc_id=outcome.doc_id, chunks=outcome.chunks, error=outcome.error)
            if not failed and f.owned_copy:
                _remove_copy(Path(f.path), self.uploads_dir)
        if state == "failed":
            self.jobs.finish(job_id, "failed", note=note, unfinished_files="failed")
            for f in self.jobs.get(job_id).files:  # every unfinished file says why
                if f.state == "failed" and not f.error:
                    self.jobs.file_finished(f.id, "failed", outcome="failed", error=note)
            return
        if state == "cancelled":
            self.jobs.finish(job_id, "cancelled", note=note, unfinished_files="cancelled")
            return
        if state == "paused":
            self.jobs.pause(job_id, note)
            return
        for f in self.jobs.get(job_id).files:  # a run that returned said nothing of it: failed, never done
            if f.state in ("queued", "running"):
                self.jobs.file_finished(f.id, "failed", outcome="failed",
                                        error="the ingest ended without a result for this file; retry the job")
        final = self.jobs.get(job_id)
        for f in final.files:  # a process killed between a file's "done" and its copy's removal left the copy
            if f.state == "done" and f.owned_copy and Path(f.path).exists():
                _remove_copy(Path(f.path), self.uploads_dir)
        failed = final.count("failed")
        if failed and not final.count("done"):
            self.jobs.finish(job_id, "failed", note="every file failed")
        else:
            self.jobs.finish(job_id, "done", note=f"{failed} file(s) failed" if failed else "")


def _outcomes_by_file(files: Sequence[IngestJobFile], outcomes: Sequence[IngestOutcome | None]
                      ) -> list[tuple[IngestJobFile, IngestOutcome]]:
    """Each outcome on the file it names (its path and document name), never by its place in the list: a run
    may report fewer outcomes than files, or in another order.  Files given twice (the same path and name) take
    their outcomes in turn."""
    waiting: dict[tuple[str, str], list[IngestJobFile]] = {}
    for f in files:
        waiting.setdefault((str(Path(f.path)), f.name), []).append(f)
    matched: list[tuple[IngestJobFile, IngestOutcome]] = []
    for outcome in outcomes:
        if outcome is None:
            continue  # cancelled or paused before it was reached
        candidates = waiting.get((str(Path(outcome.path)), outcome.name))
        if not candidates:
            log.error("an ingest outcome for %r (%s) matches none of the job's files", outcome.name, outcome.path)
            continue
        matched.append((candidates.pop(0), outcome))
    return matched


def upload_name(raw: str, index: int) -> str:
    """The document name of an upload: the last part of what the browser sent, never a path, "." or ".."."""
    name = Path(raw.replace("\x00", "")).name
    return name if name.strip() not in ("", ".", "..") else f"upload-{index}"


def _copy_name(name: str) -> str:
    """The file name of an upload's copy: its own name, or "file" plus its extension (which picks the loader)
    when the name is longer than a file system allows or cannot be encoded as a path."""
    try:
        if len(name.encode("utf-8")) <= 200:
            return name
    except UnicodeEncodeError:  # a lone surrogate
        pass
    suffix = Path(name).suffix
    return "file" + (suffix if re.fullmatch(r"\.[A-Za-z0-9]{1,16}", suffix) else "")


def _size(path: Path | None) -> int:
    if path is None:
        raise ValueError("a JobInput needs data or a path")
    try:
        return path.stat().st_size
    except OSError:
        return 0  # the ingest itself reports the unreadable file


def _remove_copy(path: Path, uploads_dir: Path) -> None:
    """Remove an uploaded copy and its now-empty folders (never anything outside the uploads folder)."""
    try:
        path.unlink(missing_ok=True)
        folder = path.parent
        while (folder != uploads_dir and uploads_dir in folder.parents
               and (not folder.is_dir() or not any(folder.iterdir()))):  # already gone: a copy removed twice
            shutil.rmtree(folder, ignore_errors=True)
            folder = folder.parent
    except OSError:
        log.warning("could not remove the uploaded copy %s", path, exc_info=True)
