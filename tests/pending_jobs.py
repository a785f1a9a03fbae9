"""A knowledge base "still being ingested", made deterministically: an ingest job of N files that a live lease
of this process holds as running, so no worker claims it and no start-up repair resumes it, and none of its
files lands until the test lets it go."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from docmind_core.ingest.job_store import JobStore
from docmind_core.ingest.leases import LeaseBook
from docmind_core.store.db import Database


@contextmanager
def pending_job(db: Database, kb_id: int, files: int) -> Iterator[int]:
    """A running job of ``files`` files not yet landed in ``kb_id`` for the duration; its id."""
    leases = LeaseBook(db)
    lease = leases.acquire("ingest-job")
    jobs = JobStore(db)
    job_id = jobs.create(kb_id, None, [{"name": f"incoming-{i:03d}.md", "path": "", "size": 2048}
                                       for i in range(files)])
    with db.transaction() as tx:  # running under our lease (claim_next would take the oldest queued job)
        tx.execute("UPDATE ingest_jobs SET state = 'running', lease_id = ?, started_at = created_at WHERE id = ?",
                   [lease.id, job_id])
    try:
        yield job_id
    finally:
        jobs.finish(job_id, "cancelled", note="test over", unfinished_files="cancelled")
        lease.release()
