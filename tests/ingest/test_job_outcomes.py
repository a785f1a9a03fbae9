"""Issue 40 failure 4: a job reports each file by what happened to that file.

One upload batch of ``a.md``, ``a.md``, ``notes`` (no extension), ``c.md``, ``d.md``: the job said all five
were done, gave ``notes`` the document id of ``c.md`` although its document had failed, and deleted its upload
copy so a retry could not work.  The ingest dropped the files without an outcome from its list while the job
matched that list to its files by position.

Decided for two files of one batch with the same name (a knowledge base keeps one document per name): the
first is ingested; each later one fails with a reason naming the clash, keeps its upload copy, and a retry
ingests it on its own (it then replaces the first, or is unchanged when its bytes are the same).
"""

from __future__ import annotations

from pathlib import Path

from docmind_core.ingest.job_store import JobStore
from docmind_core.ingest.jobs import Backfill, IngestJobQueue, JobInput
from docmind_core.values import IngestOutcome
from tests.ingest.test_pipeline import EN, World


def _queue(world: World, uploads: Path, run_files=None) -> IngestJobQueue:
    def ingest_files(kb_id, paths, names, progress, cancel, pause):
        return world.ingestor.ingest(kb_id, paths, world.settings, progress=progress, names=names, cancel=cancel,
                                     pause=pause)

    return IngestJobQueue(JobStore(world.db), world.ingestor.leases, uploads, run_files or ingest_files,
                          lambda: world.settings, Backfill(world.ingestor.needs_embedding,
                                                           world.ingestor.finish_embedding))


def _copies(uploads: Path) -> list[str]:
    return sorted(p.name for p in uploads.rglob("*") if p.is_file())


def test_each_file_of_a_batch_gets_its_own_outcome(tmp_path):
    world = World(tmp_path / "home")
    kb = world.kb()
    uploads = tmp_path / "uploads"
    queue = _queue(world, uploads)
    batch = [JobInput("a.md", data=("# First a\n\n" + EN).encode()),
             JobInput("a.md", data=("# Second a\n\n" + EN * 2).encode()),
             JobInput("notes", data=b"plain words without an extension"),
             JobInput("c.md", data=("# C\n\n" + EN * 3).encode()),
             JobInput("d.md", data=("# D\n\n" + EN * 4).encode())]
    job = queue.wait(queue.enqueue(kb.id, None, batch).id, 60)
    assert job.finished, job.summary()
    files = job.files
    states = [(f.name, f.state, f.outcome) for f in files]
    assert states == [("a.md", "done", "added"), ("a.md", "failed", "failed"), ("notes", "failed", "failed"),
                      ("c.md", "done", "added"), ("d.md", "done", "added")], states
    documents = {d.id: d for d in world.store.list_documents(kb.id)}
    for f in files:
        if f.state == "done":  # its own document, complete, with its chunks
            doc = documents[f.doc_id]
            assert (doc.name, doc.status, doc.chunk_count) == (f.name, "complete", f.chunks), (f, doc)
        else:  # no other file's document, and the reason
            assert f.doc_id is None and f.error, f
    assert "same name" in files[1].message and "a.md" in files[1].message, files[1].message
    assert "notes" in files[2].message, files[2].message
    assert job.state == "done" and job.note == "2 file(s) failed"
    assert _copies(uploads) == ["a.md", "notes"]  # the failed files keep their copies for a retry

    retried = queue.wait(queue.retry(job.id).id, 60)
    again = [(f.name, f.state, f.outcome) for f in retried.files]
    assert again == [("a.md", "done", "added"), ("a.md", "done", "replaced"), ("notes", "failed", "failed"),
                     ("c.md", "done", "added"), ("d.md", "done", "added")], again
    assert retried.files[1].doc_id == retried.files[0].doc_id  # the same name: the same document, replaced
    assert world.store.document_text(retried.files[1].doc_id).startswith("# Second a")
    assert _copies(uploads) == ["notes"]


def test_outcomes_are_matched_to_files_by_what_they_name_not_their_place(tmp_path):
    """A run that reports its outcomes in another order, and none for one file: each outcome lands on its own file,
    and the file without one is failed with a reason, never done."""
    world = World(tmp_path / "home")
    kb = world.kb()

    def reordered(kb_id, paths, names, progress, cancel, pause):
        outcomes = [IngestOutcome(path=str(p), name=n, status="added", doc_id=100 + i, chunks=1 + i)
                    for i, (p, n) in enumerate(zip(paths, names))]
        return list(reversed(outcomes[1:]))  # the first file's outcome is missing

    queue = _queue(world, tmp_path / "uploads", run_files=reordered)
    job = queue.wait(queue.enqueue(kb.id, None, [JobInput(f"f{i}.md", data=b"x") for i in range(3)]).id, 30)
    by_name = {f.name: f for f in job.files}
    assert (by_name["f1.md"].doc_id, by_name["f1.md"].chunks) == (101, 2)
    assert (by_name["f2.md"].doc_id, by_name["f2.md"].chunks) == (102, 3)
    assert by_name["f0.md"].state == "failed" and by_name["f0.md"].doc_id is None and by_name["f0.md"].error
