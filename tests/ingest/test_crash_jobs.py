"""A background ingest job whose process is killed (SIGKILL) mid-way: what the next start leaves behind."""

from __future__ import annotations

import pytest

from docmind_core.engine import Engine
from tests.ingest.test_jobs import _killed_mid_job

pytestmark = pytest.mark.slow  # a child process killed mid-job, then a real engine start


def test_uploaded_copies_of_files_done_before_the_kill_are_removed(tmp_path):
    home = tmp_path / "home"
    job_id, done_before = _killed_mid_job(home, count=40)
    engine = Engine.open(home, env={}, warm=False)  # the next start resumes the job
    job = engine.jobs.wait(job_id, 240)
    assert job.state == "done" and job.count("done") == 40, job.summary()
    # every file is ingested, so no uploaded copy is needed any more: the ones finished before the kill
    # were kept forever (their copy was removed only when the whole job's run returned)
    left = sorted(p.relative_to(home).as_posix() for p in (home / "uploads").rglob("*") if p.is_file())
    assert left == []
    docs = engine.store.list_documents(job.kb_id)
    assert len(docs) == 40 and all(d.status == "complete" for d in docs)
    assert engine.check_kb(job.kb_id).ok


def test_files_done_before_the_kill_keep_what_landed(tmp_path):
    """A file finished before its process was killed shows how it landed (added, its document, its chunks), as a
    file finished by a run that returned does: its outcome was written only when the whole run returned."""
    home = tmp_path / "home"
    job_id, _ = _killed_mid_job(home, count=40)
    # not resumed: what stands is what the killed process wrote
    engine = Engine.open(home, env={}, overrides={"ingest.resume_interrupted": False}, warm=False)
    done = [f for f in engine.jobs.jobs.get(job_id).files if f.state == "done"]
    assert done, "no file was done before the kill"
    documents = {d.id: d for d in engine.store.list_documents(engine.jobs.jobs.get(job_id).kb_id)}
    for f in done:
        assert f.outcome == "added" and f.doc_id in documents and f.chunks == documents[f.doc_id].chunk_count > 0, f
