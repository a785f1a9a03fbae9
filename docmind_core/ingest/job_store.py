"""The ``ingest_jobs`` and ``ingest_job_files`` tables: background ingestion jobs and their files.

Only rows here; the worker that runs them is ``docmind_core/ingest/jobs.py``.
Every state change is one transaction, so two engines on the same home (two
server processes, or a CLI next to a server) never both claim a job.
"""

from __future__ import annotations

import time
from typing import Sequence

from docmind_core.errors import NotFound
from docmind_core.ingest.job_types import IngestJob, IngestJobFile
from docmind_core.store.db import Database

_JOB_COLUMNS = ("id, kb_id, user_id, state, cancel_requested, lease_id, created_at, started_at, finished_at, note, "
                "embed_total, embed_done, embed_started_at, embed_updated_at")
_FILE_COLUMNS = ("id, job_id, position, name, path, owned_copy, size, state, stage, fraction, outcome, doc_id, "
                 "chunks, error, started_at, finished_at")


class JobStore:
    def __init__(self, db: Database):
        self.db = db

    # -- reading ---------------------------------------------------------------------------------
    def get(self, job_id: int) -> IngestJob:
        row = self.db.db.execute(f"SELECT {_JOB_COLUMNS} FROM ingest_jobs WHERE id = ?", [job_id]).fetchone()
        if row is None:
            raise NotFound(f"no ingest job #{job_id}")
        return self._job(row, self._files([job_id]).get(job_id, []))

    def list(self, kb_ids: Sequence[int] | None = None, limit: int = 50) -> list[IngestJob]:
        """Newest first; ``kb_ids=None``: every KB."""
        where, args = [], []
        if kb_ids is not None:
            if not kb_ids:
                return []
            where.append(f"kb_id IN ({','.join('?' * len(kb_ids))})")
            args += list(kb_ids)
        sql = f"SELECT {_JOB_COLUMNS} FROM ingest_jobs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        rows = self.db.db.execute(sql + " ORDER BY id DESC LIMIT ?", [*args, limit]).fetchall()
        files = self._files([r[0] for r in rows])
        return [self._job(r, files.get(r[0], [])) for r in rows]

    def active_count(self) -> int:
        return self.db.db.execute("SELECT COUNT(*) FROM ingest_jobs WHERE state IN ('queued', 'running')"
                                  ).fetchone()[0]

    def _files(self, job_ids: list[int]) -> dict[int, list[IngestJobFile]]:
        if not job_ids:
            return {}
        rows = self.db.db.execute(
            f"SELECT {_FILE_COLUMNS} FROM ingest_job_files WHERE job_id IN ({','.join('?' * len(job_ids))}) "
            "ORDER BY job_id, position", job_ids).fetchall()
        out: dict[int, list[IngestJobFile]] = {}
        names = _FILE_COLUMNS.split(", ")
        for row in rows:
            data = dict(zip(names, row))
            data["owned_copy"] = bool(data["owned_copy"])
            out.setdefault(data["job_id"], []).append(IngestJobFile(**data))
        return out

    @staticmethod
    def _job(row, files: list[IngestJobFile]) -> IngestJob:
        data = dict(zip(_JOB_COLUMNS.split(", "), row))
        data["cancel_requested"] = bool(data["cancel_requested"])
        return IngestJob(**data, files=files)

    # -- writing ---------------------------------------------------------------------------------
    def create(self, kb_id: int, user_id: int | None, files: Sequence[dict]) -> int:
        """A queued job; ``files`` are dicts of name, path, owned_copy, size and optionally state/error."""
        now = time.time()
        with self.db.transaction() as db:
            job_id = int(db["ingest_jobs"].insert({"kb_id": kb_id, "user_id": user_id, "state": "queued",
                                                   "created_at": now, "note": ""}).last_pk)
            for position, f in enumerate(files):
                state = f.get("state", "queued")
                db["ingest_job_files"].insert({
                    "job_id": job_id, "position": position, "name": f["name"], "path": f["path"],
                    "owned_copy": int(bool(f.get("owned_copy"))), "size": int(f.get("size", 0)), "state": state,
                    "error": f.get("error", ""), "outcome": "failed" if state == "failed" else "",
                    "fraction": 1.0 if state == "failed" else 0.0,
                    "finished_at": now if state == "failed" else None})
            if not any(f.get("state", "queued") == "queued" for f in files):
                db.execute("UPDATE ingest_jobs SET state = 'failed', finished_at = ?, note = ? WHERE id = ?",
                           [now, "every file was refused", job_id])
        return job_id

    def claim_next(self, lease_id: int) -> int | None:
        """Take the oldest queued job for the worker holding ``lease_id``; its id, or None."""
        with self.db.transaction() as db:
            # a job paused to let newer ones go first (it had begun its vectors: embed_total) waits behind them
            row = db.execute("SELECT id FROM ingest_jobs WHERE state = 'queued' ORDER BY embed_total > 0, id "
                             "LIMIT 1").fetchone()
            if row is None:
                return None
            db.execute("UPDATE ingest_jobs SET state = 'running', lease_id = ?, started_at = ?, embed_total = 0, "
                       "embed_done = 0, embed_started_at = NULL, embed_updated_at = NULL WHERE id = ?",
                       [lease_id, time.time(), row[0]])
            return int(row[0])

    def embedding_progress(self, job_id: int, embedded: int, total: int) -> None:
        """The run's vector backfill: ``embedded`` of ``total`` chunks; 0 starts its clock (a resumed run
        measures its own pace)."""
        now = time.time()
        with self.db.transaction() as db:
            if embedded <= 0:
                db.execute("UPDATE ingest_jobs SET embed_total = ?, embed_done = 0, embed_started_at = ?, "
                           "embed_updated_at = ? WHERE id = ?", [int(total), now, now, job_id])
            else:
                db.execute("UPDATE ingest_jobs SET embed_total = ?, embed_done = ?, embed_updated_at = ? "
                           "WHERE id = ?", [int(total), int(embedded), now, job_id])

    def file_progress(self, file_id: int, stage: str, fraction: float) -> None:
        with self.db.transaction() as db:
            db.execute("UPDATE ingest_job_files SET stage = ?, fraction = ?, state = 'running', "
                       "started_at = COALESCE(started_at, ?) WHERE id = ? AND state IN ('queued', 'running')",
                       [stage, fraction, time.time(), file_id])

    def file_finished(self, file_id: int, state: str, outcome: str = "", doc_id: int | None = None,
                      chunks: int = 0, error: str = "") -> None:
        with self.db.transaction() as db:
            db.execute("UPDATE ingest_job_files SET state = ?, outcome = ?, doc_id = ?, chunks = ?, error = ?, "
                       "fraction = 1.0, stage = ?, finished_at = ? WHERE id = ?",
                       [state, outcome, doc_id, chunks, error, state, time.time(), file_id])

    def finish(self, job_id: int, state: str, note: str = "", unfinished_files: str | None = None) -> None:
        """End a job; files not yet finished become ``unfinished_files`` (e.g. cancelled)."""
        now = time.time()
        with self.db.transaction() as db:
            if unfinished_files:
                db.execute("UPDATE ingest_job_files SET state = ?, stage = ?, finished_at = ? "
                           "WHERE job_id = ? AND state IN ('queued', 'running')",
                           [unfinished_files, unfinished_files, now, job_id])
            db.execute("UPDATE ingest_jobs SET state = ?, finished_at = ?, note = ?, lease_id = NULL WHERE id = ?",
                       [state, now, note, job_id])

    def request_cancel(self, job_id: int) -> str:
        """Cancel a queued job now, or ask the worker of a running one to stop; returns the job's state."""
        now = time.time()
        with self.db.transaction() as db:
            row = db.execute("SELECT state FROM ingest_jobs WHERE id = ?", [job_id]).fetchone()
            if row is None:
                raise NotFound(f"no ingest job #{job_id}")
            if row[0] == "queued":
                db.execute("UPDATE ingest_job_files SET state = 'cancelled', stage = 'cancelled', finished_at = ? "
                           "WHERE job_id = ? AND state IN ('queued', 'running')", [now, job_id])
                db.execute("UPDATE ingest_jobs SET state = 'cancelled', cancel_requested = 1, finished_at = ?, "
                           "note = 'cancelled before it started' WHERE id = ?", [now, job_id])
                return "cancelled"
            if row[0] == "running":
                db.execute("UPDATE ingest_jobs SET cancel_requested = 1 WHERE id = ?", [job_id])
            return row[0]

    def cancel_requested(self, job_id: int) -> bool:
        row = self.db.db.execute("SELECT cancel_requested FROM ingest_jobs WHERE id = ?", [job_id]).fetchone()
        return bool(row and row[0])

    def requeue(self, job_id: int, file_states: Sequence[str], note: str) -> int:
        """Queue a finished or orphaned job again with its files in ``file_states``; returns how many files."""
        with self.db.transaction() as db:
            marks = ",".join("?" * len(file_states))
            count = db.execute(
                f"UPDATE ingest_job_files SET state = 'queued', stage = '', fraction = 0, outcome = '', error = '', "
                f"doc_id = NULL, chunks = 0, started_at = NULL, finished_at = NULL "
                f"WHERE job_id = ? AND state IN ({marks})", [job_id, *file_states]).rowcount
            if count:
                db.execute("UPDATE ingest_jobs SET state = 'queued', cancel_requested = 0, lease_id = NULL, "
                           "started_at = NULL, finished_at = NULL, note = ? WHERE id = ?", [note, job_id])
            return count

    def running(self) -> list[tuple[int, int | None]]:
        """(job id, lease id) of every job marked running."""
        return [(int(r[0]), r[1]) for r in
                self.db.db.execute("SELECT id, lease_id FROM ingest_jobs WHERE state = 'running'").fetchall()]

    def has_fresh_queued(self) -> bool:
        """A queued job that has not begun writing vectors (one a running job's vectors should pause for)."""
        return self.db.db.execute("SELECT 1 FROM ingest_jobs WHERE state = 'queued' AND embed_total = 0 LIMIT 1"
                                  ).fetchone() is not None

    def pause(self, job_id: int, note: str) -> None:
        """Queue a running job again behind fresh ones, its unfinished files with it (its pace stays on record:
        ``embed_total`` orders it behind them in ``claim_next``)."""
        with self.db.transaction() as db:
            db.execute("UPDATE ingest_job_files SET state = 'queued' WHERE job_id = ? AND state IN ('queued', 'running')",
                       [job_id])
            db.execute("UPDATE ingest_jobs SET state = 'queued', lease_id = NULL, note = ?, "
                       "embed_total = MAX(embed_total, 1) WHERE id = ?", [note, job_id])

    def has_queued(self) -> bool:
        return self.db.db.execute("SELECT 1 FROM ingest_jobs WHERE state = 'queued' LIMIT 1").fetchone() is not None
