"""Background ingest jobs (docmind_core/ingest/jobs.py): queue, progress, cancel, retry, restarts, limits.

Cancel is asked by a second Engine on the same home; restart is a real child process killed with
SIGKILL in the middle of a job, then a new Engine on the same home.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from docmind_core.engine import Engine
from docmind_core.errors import AccessDenied, IngestError
from docmind_core.ingest.chunking import chunk_document, iter_chunk_blocks
from docmind_core.ingest.jobs import JobInput
from docmind_core.ingest.streaming import STREAM_MIN_CHUNKS
from docmind_core.accounts.users import LOCAL_USER
from docmind_core.workbench import Workbench
from tests.paths import ROOT

pytestmark = pytest.mark.slow  # background jobs on real engines and worker threads, with waits: not in make test-fast
# Tiny chunks and batches: every file below is its own encoder batch, so a job of many files takes a
# few seconds and a cancel or a kill lands between files.
SMALL = {"rag.chunk_tokens": 20, "rag.chunk_overlap_tokens": 0, "embedding.batch_size": 8}
WORDS = "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega".split()


def text_file(i: int, sentences: int = 100) -> bytes:
    return " ".join(f"{WORDS[(i + j) % len(WORDS)]}{i} item{j} is noted." for j in range(sentences)).encode()


def open_engine(home: Path, **overrides) -> Engine:
    return Engine.open(home, overrides={**SMALL, **overrides}, env={}, warm=False)


def wait_until(predicate, timeout_s: float = 60.0, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_job_runs_in_the_background_with_per_file_results_and_one_name_per_error(tmp_path):
    engine = open_engine(tmp_path / "home")
    kb = engine.create_kb("k")
    job = engine.jobs.enqueue(kb.id, None, [JobInput("a.txt", data=text_file(1)), JobInput("b.txt", data=text_file(2)),
                                            JobInput("broken.pdf", data=b"%PDF-1.4 not really a pdf")])
    assert job.state in ("queued", "running")  # enqueue returns at once
    job = engine.jobs.wait(job.id, 120)
    assert job.state == "done" and job.note == "1 file(s) failed"
    by_name = {f.name: f for f in job.files}
    assert by_name["a.txt"].state == by_name["b.txt"].state == "done"
    assert by_name["a.txt"].outcome == "added" and by_name["a.txt"].chunks > 0 and by_name["a.txt"].doc_id
    broken = by_name["broken.pdf"]
    assert broken.state == "failed" and broken.message.count("broken.pdf") == 1, broken.message
    assert job.progress == 1.0 and job.eta_s() is None
    kb = engine.store.get_kb(kb.id)
    assert kb.document_count == 2 and kb.chunk_count == by_name["a.txt"].chunks + by_name["b.txt"].chunks
    # the copies of ingested files are gone; the failed one's stays for a retry
    left = [p.name for p in (tmp_path / "home" / "uploads").rglob("*") if p.is_file()]
    assert left == ["broken.pdf"]
    retried = engine.jobs.retry(job.id)
    assert retried.state in ("queued", "running")
    retried = engine.jobs.wait(job.id, 60)
    assert {f.name: f.state for f in retried.files} == {"a.txt": "done", "b.txt": "done", "broken.pdf": "failed"}
    clean = engine.jobs.wait(engine.jobs.enqueue(kb.id, None, [JobInput("c.txt", data=text_file(3))]).id, 60)
    with pytest.raises(IngestError, match="no failed"):
        engine.jobs.retry(clean.id)


def test_limits_refuse_up_front_with_the_key_named(tmp_path):
    engine = open_engine(tmp_path / "home", **{"ingest.max_file_mb": 0.01, "ingest.max_chunks_per_file": 5})
    kb = engine.create_kb("k")
    job = engine.jobs.enqueue(kb.id, None, [JobInput("big.txt", data=b"word " * 5000)])
    assert job.state == "failed"  # refused before it was queued: no worker ran
    assert "too large" in job.files[0].error and "ingest.max_file_mb" in job.files[0].error
    job = engine.jobs.wait(engine.jobs.enqueue(kb.id, None, [JobInput("many.txt", data=text_file(1, 200))]).id, 60)
    assert job.files[0].state == "failed"
    assert "ingest.max_chunks_per_file" in job.files[0].error and "about" in job.files[0].error
    assert engine.store.get_kb(kb.id).chunk_count == 0
    engine.config.set("ingest.max_queued_jobs", 1)
    engine.config.set("ingest.max_chunks_per_file", 100000)
    first = engine.jobs.enqueue(kb.id, None, [JobInput(f"f{i}.txt", data=text_file(i)) for i in range(6)])
    if not first.finished and engine.jobs.jobs.active_count():
        with pytest.raises(IngestError, match="ingest.max_queued_jobs"):
            engine.jobs.enqueue(kb.id, None, [JobInput("x.txt", data=text_file(9))])
    engine.jobs.wait(first.id, 120)


def test_cancel_from_a_second_engine_on_the_same_home_then_retry(tmp_path):
    home = tmp_path / "home"
    first = open_engine(home)
    second = open_engine(home)  # another Engine: its own worker and stores, the same database
    kb = first.create_kb("k")
    files = [JobInput(f"doc{i:02d}.txt", data=text_file(i)) for i in range(40)]
    job = first.jobs.enqueue(kb.id, None, files)
    wait_until(lambda: second.jobs.jobs.get(job.id).count("done") >= 1, what="a first file done")
    second.jobs.cancel(job.id)
    job = first.jobs.wait(job.id, 60)
    assert job.state == "cancelled", job
    assert job.count("cancelled") >= 1 and job.count("done") >= 1
    assert job.count("queued") == job.count("running") == 0
    statuses = {d.name: d.status for d in first.store.list_documents(kb.id)}
    assert "pending" not in statuses.values()  # the document being written was undone
    done = {f.name for f in job.files if f.state == "done"}
    assert all(statuses[name] == "complete" for name in done)
    # a retry asked on the second engine runs the cancelled files there
    second.jobs.retry(job.id)
    job = second.jobs.wait(job.id, 180)
    assert job.state == "done" and job.count("done") == 40, job.summary()
    assert first.store.get_kb(kb.id).document_count == 40


def test_a_cancelled_queued_job_never_runs(tmp_path):
    engine = open_engine(tmp_path / "home")
    kb = engine.create_kb("k")
    busy = engine.jobs.enqueue(kb.id, None, [JobInput(f"a{i}.txt", data=text_file(i)) for i in range(10)])
    waiting = engine.jobs.enqueue(kb.id, None, [JobInput("later.txt", data=text_file(99))])
    assert engine.jobs.cancel(waiting.id).state in ("cancelled", "running")
    engine.jobs.wait(busy.id, 120)
    waiting = engine.jobs.wait(waiting.id, 60)
    if waiting.note == "cancelled before it started":
        assert waiting.files[0].state == "cancelled"
        assert "later.txt" not in {d.name for d in engine.store.list_documents(kb.id)}


CHILD = textwrap.dedent("""
    import sys
    from pathlib import Path
    from docmind_core.engine import Engine
    from docmind_core.ingest.jobs import JobInput
    home, count = Path(sys.argv[1]), int(sys.argv[2])
    engine = Engine.open(home, overrides={overrides!r}, env={{}}, warm=False)
    kb = engine.create_kb("k")
    words = {words!r}
    def text(i):
        return " ".join(f"{{words[(i + j) % len(words)]}}{{i}} item{{j}} is noted." for j in range(100)).encode()
    job = engine.jobs.enqueue(kb.id, None, [JobInput(f"doc{{i:02d}}.txt", data=text(i)) for i in range(count)])
    print(job.id, flush=True)
    engine.jobs.wait(job.id, 600)
""")


def _killed_mid_job(home: Path, count: int = 40) -> tuple[int, int]:
    """A child process enqueues a job of ``count`` files and is killed once some (not all) are done."""
    script = CHILD.format(overrides=SMALL, words=WORDS)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ANONYMIZED_TELEMETRY": "False"}
    child = subprocess.Popen([sys.executable, "-c", script, str(home), str(count)], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, text=True)
    try:
        job_id = int(child.stdout.readline())
        watcher = Engine.open(home, env={}, warm=False)
        done = wait_until(lambda: watcher.jobs.jobs.get(job_id).count("done"), 120, "a first file done")
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        job = watcher.jobs.jobs.get(job_id)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
    assert job.state == "running" and job.count("done") < count, "the child finished before it was killed"
    return job_id, max(done, job.count("done"))


def test_a_job_killed_with_its_server_resumes_at_the_next_start(tmp_path):
    home = tmp_path / "home"
    job_id, done_before = _killed_mid_job(home)
    engine = Engine.open(home, env={}, warm=False)  # the next start
    assert any(f"ingest job #{job_id} resumed" in line for line in engine.start_report), engine.start_report
    job = engine.jobs.wait(job_id, 240)
    assert job.state == "done" and job.count("done") == 40, job.summary()
    assert job.note == ""
    docs = engine.store.list_documents(job.kb_id)
    assert len(docs) == 40 and all(d.status == "complete" for d in docs)


def test_a_killed_job_is_marked_interrupted_when_resume_is_off_and_retry_finishes_it(tmp_path):
    home = tmp_path / "home"
    job_id, _ = _killed_mid_job(home)
    engine = Engine.open(home, overrides={"ingest.resume_interrupted": False}, env={}, warm=False)
    job = engine.jobs.jobs.get(job_id)
    assert job.state == "interrupted" and job.count("interrupted") >= 1 and job.count("queued") == 0
    assert any("marked interrupted" in line for line in engine.start_report)
    Workbench(engine, LOCAL_USER, "cli").retry_job(job_id)
    job = engine.jobs.wait(job_id, 240)
    assert job.state == "done" and job.count("done") == 40


def test_a_job_of_a_live_worker_in_another_engine_is_left_alone(tmp_path):
    home = tmp_path / "home"
    first = open_engine(home)
    kb = first.create_kb("k")
    job = first.jobs.enqueue(kb.id, None, [JobInput(f"doc{i:02d}.txt", data=text_file(i)) for i in range(20)])
    wait_until(lambda: first.jobs.jobs.get(job.id).state == "running", what="running")
    second = Engine.open(home, env={}, warm=False)  # its start must not resume a job whose worker is alive
    assert not any(f"#{job.id}" in line for line in second.start_report)
    assert first.jobs.wait(job.id, 180).count("done") == 20


def test_large_documents_stream_to_the_same_chunks(tmp_path):
    text = "".join(f"第{i}段说明产品的功率和价格" + ("。" if i % 7 else "") for i in range(1000))
    blocks = list(iter_chunk_blocks(1, "big.txt", text, 20, 0, 60))
    parents, children = chunk_document(1, "big.txt", text, 20, 0, 60)
    assert [p for p, _ in blocks] == parents and [c for _, kids in blocks for c in kids] == children
    engine = open_engine(tmp_path / "home")
    kb = engine.create_kb("k")
    path = tmp_path / "big.txt"
    path.write_text(text, encoding="utf-8")
    assert len(children) > STREAM_MIN_CHUNKS  # the streamed path
    stages = []
    outcome = engine.ingest(kb.id, [path], progress=lambda p: stages.append((p.stage, p.fraction)))[0]
    assert outcome.status == "added" and outcome.chunks == len(children)
    stored = engine.store.chunks_for_document(outcome.doc_id)
    assert [c.id for c in stored] == [c.id for c in children]
    assert all(c.terms for c in stored)
    embedding = [f for s, f in stages if s == "embedding"]
    assert len(embedding) >= 3 and embedding == sorted(embedding)  # progress moves through the file
    assert engine.check_kb(kb.id).ok


def test_a_punctuation_free_chinese_text_is_chunked_lazily():
    text = "无标点的中文文本" * 20000  # one 160,000-character sentence
    blocks = iter_chunk_blocks(1, "x.txt", text, 320, 40, 640)
    parent, kids = next(blocks)  # the first block comes without cutting the whole text first
    assert len(parent.text) <= 640 and all(k.token_count <= 320 for k in kids)


def test_job_access_follows_the_ingest_rule(tmp_path):
    from tests.access_world import FAST_HASHER, PASSWORD
    from docmind_core.accounts.users import UserStore

    engine = open_engine(tmp_path / "home")
    users = UserStore(engine.db, hasher=FAST_HASHER)
    alice = users.add("alice", PASSWORD, department="r")
    bob = users.add("bob", PASSWORD, department="r")
    kb = Workbench(engine, alice, "cli").create_kb("shared", visibility="public")
    job = Workbench(engine, alice, "cli").enqueue_ingest(kb.id, [JobInput("a.txt", data=text_file(1))])
    with pytest.raises(AccessDenied):
        Workbench(engine, bob, "cli").enqueue_ingest(kb.id, [JobInput("b.txt", data=text_file(2))])
    with pytest.raises(AccessDenied):
        Workbench(engine, bob, "cli").cancel_job(job.id)
    assert Workbench(engine, bob, "cli").list_jobs() == []
    assert [j.id for j in Workbench(engine, alice, "cli").list_jobs()] == [job.id]
    engine.jobs.wait(job.id, 60)
