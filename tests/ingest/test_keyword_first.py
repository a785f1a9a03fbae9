"""Issue 23 item 3: keyword-first ingestion, driven through the ingestor and the ingest job queue.

* Nothing of a file was searchable until every chunk was embedded: here the encoder is held on an event, and
  the document is found by keyword search meanwhile, with "N chunks still embedding" in the pending notice.
* Two 100-byte files uploaded with a large one waited behind it: here they are done before it.
* The ETA only grew: here a clock that moves only when the encoder works shows it falling, and right.
"""

from __future__ import annotations

import threading
import types
from pathlib import Path

from docmind_core.backends.rerankers import OfflineReranker
from docmind_core.ingest import job_store as job_store_module
from docmind_core.ingest.check import KbChecker
from docmind_core.ingest.job_store import JobStore
from docmind_core.ingest.jobs import Backfill, IngestJobQueue, JobInput
from docmind_core.retrieval.hybrid import HybridRetriever
from docmind_core.retrieval.refine import EvidenceRefiner
from tests.ingest.test_pipeline import EN, SMALL, HashingEmbedder, World

FACT = "The Kestrel K7 pump is rated for 310 litres per minute at 4 bar. "
FILLER = ("Routine maintenance covers seals, bearings and the intake filter of every station in the network. "
          "Operators log each visit with the date, the station code and the readings they took. ")


class GatedEmbedder(HashingEmbedder):
    """Encoder calls made by the ``held`` thread wait until ``go`` is set (queries from other threads pass)."""

    def __init__(self):
        super().__init__()
        self.go = threading.Event()
        self.entered = threading.Event()
        self.held: threading.Thread | None = None

    def embed(self, texts):
        if threading.current_thread() is self.held:
            self.entered.set()
            assert self.go.wait(30), "the test never let the encoder go"
        return super().embed(texts)


def _retriever(world: World) -> HybridRetriever:
    return HybridRetriever(world.store, world.embedder, world.vectors, world.keywords,
                           refiner=EvidenceRefiner(world.store, OfflineReranker(world.embedder)))


def _held_ingest(world: World, paths: list[Path], **kwargs) -> tuple[threading.Thread, list]:
    result: list = []
    thread = threading.Thread(target=lambda: result.append(world.ingest(paths, **kwargs)), daemon=True)
    world.embedder.held = thread
    thread.start()
    assert world.embedder.entered.wait(30), "the ingest never reached the encoder"
    return thread, result


def test_a_document_is_keyword_searchable_while_its_vectors_are_embedding(tmp_path):
    world = World(tmp_path / "home", embedder=GatedEmbedder())
    path = tmp_path / "kestrel.md"
    path.write_text(FILLER * 6 + FACT + FILLER * 6, encoding="utf-8")
    kb = world.kb()
    thread, result = _held_ingest(world, [path])
    try:
        doc = world.store.find_document(kb.id, "kestrel.md")
        assert doc is not None and doc.status == "embedding"
        retriever = _retriever(world)
        hits = retriever.keyword_candidates("Kestrel K7 litres per minute", [kb.id], 5)
        assert hits and hits[0].doc_id == doc.id and "Kestrel" in hits[0].text
        found = retriever.search("Kestrel K7 pump rating", [kb.id], SMALL)
        assert any("Kestrel" in c.text for c in found.chunks)
        assert found.index_gaps == []  # vectors on their way are not a broken index
        pending = world.store.pending_ingest([kb.id])
        assert len(pending) == 1 and pending[0].pending_documents == 0
        assert pending[0].embedding_chunks == doc.chunk_count > 0
        assert f"{doc.chunk_count} chunk(s) still embedding" in pending[0].message()
        assert world.store.get_kb(kb.id).document_count == 1  # it counts as searched
        checker = KbChecker(world.store, world.embedder, world.vectors, world.keywords, world.ingestor.leases)
        assert checker.check(kb.id).ok  # its entries are on their way, not orphans for `kb check --repair`
    finally:
        world.embedder.go.set()
        thread.join(30)
    assert [o.status for o in result[0]] == ["added"]
    doc = world.store.find_document(kb.id, "kestrel.md")
    assert doc.status == "complete" and world.store.pending_ingest([kb.id]) == []
    assert world.vectors.count(kb.id) == doc.chunk_count
    assert world.ingestor.check_kb(kb.id).ok


def test_a_replaced_document_never_shows_both_versions(tmp_path):
    world = World(tmp_path / "home", embedder=GatedEmbedder())
    path = tmp_path / "kestrel.md"
    path.write_text(FILLER * 4 + "The Kestrel K7 pump runs on the old Vireo gearbox. " + FILLER * 4, encoding="utf-8")
    world.embedder.go.set()
    assert [o.status for o in world.ingest([path])] == ["added"]
    kb = world.kb()
    world.embedder.go.clear()
    path.write_text(FILLER * 4 + FACT + FILLER * 4, encoding="utf-8")
    thread, result = _held_ingest(world, [path])
    try:
        retriever = _retriever(world)
        assert retriever.keyword_candidates("Vireo gearbox", [kb.id], 5) == []  # the old version is gone
        assert retriever.keyword_candidates("Kestrel litres per minute", [kb.id], 5)  # the new one is in
        assert world.vectors.count(kb.id) == 0  # no vector of the old version is left to meet a query
    finally:
        world.embedder.go.set()
        thread.join(30)
    assert [o.status for o in result[0]] == ["replaced"]


def test_small_files_are_done_before_the_large_one(tmp_path):
    world = World(tmp_path / "home")
    big = tmp_path / "big.txt"
    big.write_text(FILLER * 60, encoding="utf-8")
    small = []
    for name, text in (("a.txt", "Aurora ships in May."), ("b.txt", "Borealis ships in June.")):
        small.append(tmp_path / name)
        small[-1].write_text(text, encoding="utf-8")
    done: list[str] = []
    calls: dict[str, int] = {}

    def on_progress(p):
        if p.stage == "done":
            done.append(p.name)
            calls[p.name] = world.embedder.calls

    outcomes = world.ingest([big, *small], progress=on_progress)
    assert [o.name for o in outcomes] == ["big.txt", "a.txt", "b.txt"]  # outcomes stay in the given order
    assert all(o.status == "added" for o in outcomes)
    assert done.index("a.txt") < done.index("big.txt") and done.index("b.txt") < done.index("big.txt"), done
    # done with the first encoder batch, not after a full batch of the large file's chunks
    assert calls["a.txt"] == calls["b.txt"] == 1 and calls["big.txt"] > 2, calls


class StepClock:
    def __init__(self):
        self.now = 1_000_000.0

    def time(self) -> float:
        return self.now


class ClockedEmbedder(HashingEmbedder):
    """Each text takes ``seconds`` of the test's clock (a steady encoder); before each call, the job's ETA is
    read."""

    def __init__(self, clock: StepClock, seconds: float):
        super().__init__()
        self.clock, self.seconds = clock, seconds
        self.read_eta = None
        self.texts = 0
        self.samples: list[tuple[int, float | None]] = []  # (texts encoded before this call, ETA then)

    def embed(self, texts):
        if self.read_eta is not None:
            self.samples.append((self.texts, self.read_eta()))
        self.clock.now += self.seconds * len(texts)
        self.texts += len(texts)
        return super().embed(texts)


def test_the_eta_falls_at_a_steady_pace_and_is_right_from_the_first_batch(tmp_path, monkeypatch):
    clock = StepClock()
    monkeypatch.setattr(job_store_module, "time", types.SimpleNamespace(time=clock.time))
    embedder = ClockedEmbedder(clock, seconds=2.5)
    world = World(tmp_path / "home", embedder=embedder)
    kb = world.kb()
    jobs = JobStore(world.db)

    def run_files(kb_id, paths, names, progress, cancel, pause):
        return world.ingestor.ingest(kb_id, paths, world.settings, progress=progress, names=names, cancel=cancel,
                                     pause=pause)

    queue = IngestJobQueue(jobs, world.ingestor.leases, tmp_path / "uploads", run_files, lambda: world.settings,
                           Backfill(world.ingestor.needs_embedding, world.ingestor.finish_embedding))
    text = (EN * 12).encode("utf-8")
    started = threading.Event()
    job_ids: list[int] = []
    embedder.read_eta = lambda: (started.wait(10), jobs.get(job_ids[0]).eta_s(now=clock.time()))[1]
    job = queue.enqueue(kb.id, None, [JobInput("nimbus.md", data=text)])
    job_ids.append(job.id)
    started.set()
    final = queue.wait(job.id, 60)
    assert final.state == "done", final.summary()
    assert embedder.calls >= 5, embedder.calls  # enough batches to see a trend
    etas = [(done, eta) for done, eta in embedder.samples if done >= 1]
    assert len(etas) >= 4 and all(eta is not None for _, eta in etas), embedder.samples  # a pace from batch one
    for done, eta in etas:  # 2.5 s per chunk: the truth is 2.5 s per chunk left
        truth = (embedder.texts - done) * 2.5
        assert abs(eta - truth) <= 0.1 * truth + 1.0, (done, eta, truth, embedder.samples)
    values = [eta for _, eta in etas]
    assert all(b <= a for a, b in zip(values, values[1:])), values  # never grows at a steady pace


def test_small_files_of_a_newer_job_do_not_wait_for_a_large_job_s_vectors(tmp_path):
    """Two 100-byte files uploaded while a large file's vectors are written (another job): the large job pauses
    after its current encoder batch, the small job runs, then the large one resumes where it stopped."""
    world = World(tmp_path / "home", embedder=GatedEmbedder())
    kb = world.kb()
    jobs = JobStore(world.db)

    def run_files(kb_id, paths, names, progress, cancel, pause):
        return world.ingestor.ingest(kb_id, paths, world.settings, progress=progress, names=names, cancel=cancel,
                                     pause=pause)

    queue = IngestJobQueue(jobs, world.ingestor.leases, tmp_path / "uploads", run_files, lambda: world.settings,
                           Backfill(world.ingestor.needs_embedding, world.ingestor.finish_embedding))
    world.embedder.held = None
    worker_box: list = []
    real_start = queue.start

    def start():  # the worker thread is the one whose encoder calls are held
        real_start()
        if queue._thread is not None and not worker_box:
            worker_box.append(queue._thread)
            world.embedder.held = queue._thread

    queue.start = start
    big = queue.enqueue(kb.id, None, [JobInput("big.txt", data=(FILLER * 60).encode("utf-8"))])
    assert world.embedder.entered.wait(30), "the large job never reached the encoder"
    small = queue.enqueue(kb.id, None, [JobInput("a.txt", data=b"Aurora ships in May.".ljust(100)),
                                        JobInput("b.txt", data=b"Borealis ships in June.".ljust(100))])
    world.embedder.held = None  # from here the encoder runs freely
    world.embedder.go.set()
    done_small = queue.wait(small.id, 60)
    large_then = jobs.get(big.id)
    assert done_small.state == "done" and done_small.count("done") == 2, done_small.summary()
    assert large_then.state != "done", "the small files waited for the large file's vectors"
    assert "paused for a newer job" in large_then.note or large_then.state == "running", large_then
    final = queue.wait(big.id, 60)
    assert final.state == "done" and [f.outcome for f in final.files] == ["added"], final
    doc = world.store.find_document(kb.id, "big.txt")
    assert doc.status == "complete" and world.vectors.count(kb.id) == doc.chunk_count + 2
    assert world.ingestor.check_kb(kb.id).ok
