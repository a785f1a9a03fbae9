"""The values of background ingest jobs (rows of ``ingest_jobs`` / ``ingest_job_files``), for every reader.

Plain typed values with their derived views (progress, ETA, the failure message naming a file once);
the rows are written by ``docmind_core/ingest/job_store.py`` and the worker is ``docmind_core/ingest/jobs.py``.
"""

from __future__ import annotations

import time
from typing import Literal

from pydantic import BaseModel, ConfigDict

JobState = Literal["queued", "running", "done", "failed", "cancelled", "interrupted"]
FileState = Literal["queued", "running", "done", "failed", "cancelled", "interrupted"]
FINISHED_JOB_STATES = ("done", "failed", "cancelled", "interrupted")
RETRYABLE_FILE_STATES = ("failed", "cancelled", "interrupted")


class IngestJobFile(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: int
    job_id: int
    position: int
    name: str
    path: str
    owned_copy: bool
    size: int
    state: FileState
    stage: str = ""
    fraction: float = 0.0
    outcome: str = ""  # added | replaced | unchanged | failed (the IngestOutcome status)
    doc_id: int | None = None
    chunks: int = 0
    error: str = ""
    started_at: float | None = None
    finished_at: float | None = None

    @property
    def progress(self) -> float:
        return 1.0 if self.state in ("done", "failed", "cancelled") else min(1.0, max(0.0, self.fraction))

    def eta_s(self, now: float | None = None) -> float | None:
        """Seconds left for this file while it is parsed and written, from its pace so far (None until there is
        a pace, and while its vectors are written: the job's ETA measures that)."""
        if self.state != "running" or self.started_at is None or self.fraction < 0.02 or self.stage == "embedding":
            return None
        elapsed = (now or time.time()) - self.started_at
        return max(0.0, elapsed * (1.0 - self.fraction) / self.fraction)

    @property
    def message(self) -> str:
        """The failure reason naming the file once (loader messages already start with its name)."""
        if not self.error:
            return ""
        return self.error if self.error.startswith(f"{self.name}:") else f"{self.name}: {self.error}"


class IngestJob(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: int
    kb_id: int
    user_id: int | None
    state: JobState
    cancel_requested: bool
    lease_id: int | None
    created_at: float
    started_at: float | None
    finished_at: float | None
    note: str
    files: list[IngestJobFile]
    # The run's vector backfill (keyword-first ingestion): chunks to embed, embedded, when it began and last moved.
    embed_total: int = 0
    embed_done: int = 0
    embed_started_at: float | None = None
    embed_updated_at: float | None = None

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_JOB_STATES

    def count(self, *states: str) -> int:
        return sum(1 for f in self.files if f.state in states)

    @property
    def embedding(self) -> bool:
        """Its files are searchable by keyword and their vectors are being written."""
        return self.state == "running" and self.embed_started_at is not None and self.embed_total > 0

    @property
    def progress(self) -> float:
        """Overall fraction done.  While vectors are written (most of the time a job takes): the chunks
        embedded out of all its run has to embed, after a tenth for parsing and keyword indexing; before
        that each file weighted by its size (a 50 MB file is most of a job)."""
        if self.embedding:
            return 0.1 + 0.9 * min(1.0, self.embed_done / self.embed_total)
        weights = [max(1, f.size) for f in self.files]
        total = sum(weights)
        return sum(w * f.progress for w, f in zip(weights, self.files)) / total if total else 1.0

    def eta_s(self, now: float | None = None) -> float | None:
        """Seconds left for the whole job: the chunks still to embed at the pace measured over this run's
        embedding so far (chunks per second), less the time since that was measured.

        None until there is a measured pace (while files are parsed and indexed by keyword, and during the
        first encoder batch): a guess from the parsing pace would be far off, since encoding is most of a job.
        """
        if not self.embedding or self.embed_updated_at is None:
            return None
        left = self.embed_total - self.embed_done
        if left <= 0:
            return 0.0
        spent = self.embed_updated_at - self.embed_started_at
        if self.embed_done <= 0 or spent <= 0:
            return None
        since = max(0.0, (now if now is not None else time.time()) - self.embed_updated_at)
        return max(0.0, left * spent / self.embed_done - since)

    def pace_text(self) -> str:
        """The measured encoding pace, in words ("" before there is one)."""
        if not self.embedding or not self.embed_done or self.embed_updated_at is None:
            return ""
        spent = self.embed_updated_at - self.embed_started_at
        return f"{self.embed_done / spent:.1f} chunks/s" if spent > 0 else ""

    def summary(self) -> str:
        parts = [f"{self.count('done')} done"]
        for state in ("failed", "cancelled", "interrupted", "running", "queued"):
            if self.count(state):
                parts.append(f"{self.count(state)} {state}")
        return f"{len(self.files)} file(s): " + ", ".join(parts)
