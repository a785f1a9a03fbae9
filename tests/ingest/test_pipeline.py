"""Ingestion end to end: formats, failures that leave nothing behind, replace/unchanged, delete, reconcile, CLI."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from docmind_core.backends.keyword_index import Fts5KeywordIndex
from docmind_core.backends.vector_store import ChromaVectorStore
from docmind_core.errors import EmbedderMismatch
from docmind_core.ingest.leases import LeaseBook
from docmind_core.ingest.pipeline import Ingestor
from docmind_core.values import BackendStatus
from docmind_core.settings import Settings
from docmind_core.store.db import Database
from docmind_core.store.kb_store import KnowledgeStore
from docmind_core.text.tokens import keyword_tokens
from tests.ingest.test_loaders import make_docx, make_pdf
from tests.paths import ROOT

REPO = ROOT
SMALL = Settings().with_overrides({"rag.chunk_tokens": 40, "rag.chunk_overlap_tokens": 8, "rag.parent_tokens": 120,
                                   "embedding.batch_size": 4})

EN = ("The Nimbus N2 edge appliance draws at most 45 W. It runs firmware 3.2.1 since February 2026. "
      "Fans spin down below 30 degrees. The chassis is fanless in the N2 Lite variant. ")
ZH = "错误代码 AUR-4012 表示许可证已过期。请联系管理员续订许可证。Aurora 默认保留数据 180 天。"


class HashingEmbedder:
    """Deterministic bag-of-words embedder: fast, no model, similar texts get similar vectors."""

    def __init__(self, dim: int = 64, id: str = "test:hashing-64"):
        self.dim = dim
        self.id = id
        self.calls = 0

    def embed(self, texts):
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for tok in keyword_tokens(text) or ["<empty>"]:
                out[row, int(hashlib.md5(tok.encode()).hexdigest(), 16) % self.dim] += 1.0
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def status(self):
        return BackendStatus(role="embedder", name=self.id, live=True)


class FailingVectorStore:
    """Wraps a real vector store and fails on the chunk containing ``marker``, after writing the chunks before it.

    Tied to content rather than to a call count, so the failure happens in the
    middle of one document every time, however the ingest groups its batches.
    """

    def __init__(self, inner, marker: str = "KABOOM"):
        self.inner = inner
        self.marker = marker
        self.name = inner.name

    def add(self, chunks, embeddings):
        for i, chunk in enumerate(chunks):
            if self.marker in chunk.text:
                self.inner.add(chunks[:i], embeddings[:i])  # some vectors really land before the failure
                raise RuntimeError("vector store went away")
        self.inner.add(chunks, embeddings)

    def __getattr__(self, name):
        return getattr(self.inner, name)


class World:
    """What the engine would build, from a temp folder (the integrator's Engine is not needed here)."""

    def __init__(self, home: Path, embedder=None, vector_store=None):
        self.home = home
        self.db = Database(home / "docmind.db")
        self.store = KnowledgeStore(self.db)
        self.embedder = embedder or HashingEmbedder()
        self.vectors = ChromaVectorStore(path=home / "chroma")
        self.keywords = Fts5KeywordIndex(self.db)
        self.ingestor = Ingestor(self.store, self.embedder, vector_store or self.vectors, self.keywords,
                                 LeaseBook(self.store.db))
        self.settings = SMALL

    def kb(self, name="kb"):
        found = self.store.find_kb(name)
        return found or self.store.create_kb(name, self.embedder.id, self.embedder.dim)

    def ingest(self, paths, kb_name="kb", **kwargs):
        return self.ingestor.ingest(self.kb(kb_name).id, paths, self.settings, **kwargs)

    def footprint(self, kb_id: int, doc_id: int) -> tuple[int, int, int]:
        """(chunk rows, vectors, keyword entries) of one document."""
        rows = (len(self.store.chunks_for_document(doc_id, any_status=True))
                + len(self.store.chunks_for_document(doc_id, parents=True, any_status=True)))
        vectors = int(doc_id in self.vectors.document_ids(kb_id))
        keywords = int(doc_id in self.keywords.document_ids(kb_id))
        return rows, vectors, keywords


@pytest.fixture
def world(tmp_path):
    return World(tmp_path / "home")


def _write_corpus(folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "notes.txt": folder / "notes.txt",
        "guide.md": folder / "guide.md",
        "faq.html": folder / "faq.html",
        "spec.pdf": folder / "spec.pdf",
        "release.docx": folder / "release.docx",
        "prices.csv": folder / "prices.csv",
        "gbk.txt": folder / "gbk.txt",
    }
    files["notes.txt"].write_text(EN * 2, encoding="utf-8")
    files["guide.md"].write_text("# Nimbus guide\n\n" + EN + "\n\n## 许可证\n\n" + ZH, encoding="utf-8")
    files["faq.html"].write_text(f"<html><body><h1>FAQ</h1><p>{EN}</p><script>x()</script></body></html>",
                                 encoding="utf-8")
    make_pdf(files["spec.pdf"], ["Nimbus N2 datasheet.", "Maximum power draw: 45 W.", "Operating range 0-40 C."])
    make_docx(files["release.docx"], "Release notes", ["Firmware 3.2.1 was released on 2026-02-10.",
                                                      "It fixes the fan controller."])
    files["prices.csv"].write_text("product,price\nAurora,1200\nNimbus N2,899\n", encoding="utf-8")
    files["gbk.txt"].write_bytes(ZH.encode("gbk"))
    return files


@pytest.mark.slow  # ingests a whole corpus
def test_every_format_ingests_and_is_searchable(world, tmp_path):
    files = _write_corpus(tmp_path / "docs")
    events = []
    outcomes = world.ingest([tmp_path / "docs"], progress=events.append)
    assert {o.name: o.status for o in outcomes} == {name: "added" for name in files}
    kb = world.kb()
    assert kb.document_count == len(files)
    for outcome in outcomes:
        text = world.store.document_text(outcome.doc_id)
        chunks = world.store.chunks_for_document(outcome.doc_id)
        assert outcome.chunks == len(chunks) > 0
        assert all(text[c.start:c.end] == c.text for c in chunks)
        assert world.footprint(kb.id, outcome.doc_id)[1:] == (1, 1)
    assert ZH.split("。")[0] in world.store.document_text(_doc(outcomes, "gbk.txt"))
    assert "Maximum power draw: 45 W." in world.store.document_text(_doc(outcomes, "spec.pdf"))
    # Each chunk is findable through both indexes.
    hits = world.keywords.search([kb.id], "AUR-4012", top_k=5)
    assert {world.store.get_chunks([h[0]])[h[0]].doc_id for h in hits} == {_doc(outcomes, "guide.md"),
                                                                           _doc(outcomes, "gbk.txt")}
    query = world.embedder.embed(["Firmware 3.2.1 was released on 2026-02-10."])[0]
    best = world.vectors.query([kb.id], query, top_k=1)[0][0]
    assert world.store.get_chunks([best])[best].doc_id == _doc(outcomes, "release.docx")
    # Progress: every file reports, and ends with done.
    assert {e.name for e in events} == set(files)
    assert all(e.file_count == len(files) for e in events)
    assert [e.stage for e in events if e.name == "spec.pdf"][-1] == "done"
    assert {"parsing", "chunking", "embedding", "indexing", "done"} <= {e.stage for e in events}


def _doc(outcomes, name):
    return next(o.doc_id for o in outcomes if o.name == name)


def test_bad_files_fail_clearly_while_the_batch_lands(world, tmp_path):
    good = tmp_path / "good.md"
    good.write_text(EN, encoding="utf-8")
    (tmp_path / "corrupt.pdf").write_bytes(b"%PDF-1.7\n%%garbage that is not a pdf body\n")
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "binary.txt").write_bytes(bytes(range(256)) * 8)
    (tmp_path / "photo.png").write_bytes(b"\x89PNG....")
    paths = [tmp_path / n for n in ("corrupt.pdf", "empty.txt", "good.md", "binary.txt", "photo.png")]
    outcomes = {o.name: o for o in world.ingest(paths)}
    assert outcomes["good.md"].status == "added"
    reasons = {
        "corrupt.pdf": "corrupt or unreadable PDF",
        "empty.txt": "the file is empty",
        "binary.txt": "binary file",
        "photo.png": "unsupported file type",
    }
    kb = world.kb()
    docs = {d.name: d for d in world.store.list_documents(kb.id)}
    for name, reason in reasons.items():
        assert outcomes[name].status == "failed"
        assert reason in outcomes[name].error and name in outcomes[name].error
        assert docs[name].status == "failed" and reason in docs[name].error  # the UI can show why
        assert world.footprint(kb.id, docs[name].id) == (0, 0, 0)
    assert kb.document_count == 1


def test_failure_mid_document_leaves_nothing_behind(tmp_path):
    base = World(tmp_path / "home")
    world = World.__new__(World)
    world.__dict__.update(base.__dict__)
    world.ingestor = Ingestor(base.store, base.embedder, FailingVectorStore(base.vectors), base.keywords,
                              base.ingestor.leases)
    first = tmp_path / "first.md"
    first.write_text(EN, encoding="utf-8")
    long = tmp_path / "long.md"
    long.write_text(EN * 6 + " KABOOM. " + EN * 6 + ZH * 6, encoding="utf-8")
    last = tmp_path / "last.md"
    last.write_text(ZH, encoding="utf-8")
    outcomes = {o.name: o for o in world.ingest([first, long, last])}
    assert outcomes["first.md"].status == "added"
    assert outcomes["last.md"].status == "added"
    assert outcomes["long.md"].status == "failed"
    assert "vector store went away" in outcomes["long.md"].error
    kb = world.kb()
    failed_id = outcomes["long.md"].doc_id
    assert world.footprint(kb.id, failed_id) == (0, 0, 0)
    assert world.store.get_document(failed_id).status == "failed"
    for name in ("first.md", "last.md"):
        assert world.footprint(kb.id, outcomes[name].doc_id)[1:] == (1, 1)
    # the vectors written for long.md before the failure were removed again
    assert base.vectors.count(kb.id) == outcomes["first.md"].chunks + outcomes["last.md"].chunks
    # With the store healthy again, the same file lands.
    retry = {o.name: o for o in base.ingest([long])}
    assert retry["long.md"].status == "added" and retry["long.md"].doc_id == failed_id


class DownVectorStore(FailingVectorStore):
    """Fails mid-document and refuses deletes too, as a store that went away would."""

    def delete_document(self, kb_id, doc_id):
        raise ConnectionError("vector store unreachable")


def test_failed_cleanup_leaves_the_document_pending_for_reconcile(tmp_path):
    base = World(tmp_path / "home")
    broken = Ingestor(base.store, base.embedder, DownVectorStore(base.vectors), base.keywords, base.ingestor.leases)
    path, other = tmp_path / "doc.md", tmp_path / "other.md"
    path.write_text(EN * 3 + " KABOOM. " + EN * 3, encoding="utf-8")
    other.write_text(ZH, encoding="utf-8")
    kb = base.kb()
    outcomes = broken.ingest(kb.id, [path, other], SMALL)
    assert outcomes[0].status == "failed" and "clean-up will finish at the next start" in outcomes[0].error
    assert base.store.get_document(outcomes[0].doc_id).status == "pending"
    assert outcomes[1].status == "added"  # the batch went on
    repairs = base.ingestor.reconcile()  # next start, store healthy again
    assert any("doc.md" in line for line in repairs)
    assert base.footprint(kb.id, outcomes[0].doc_id) == (0, 0, 0)
    assert base.vectors.count(kb.id) == base.keywords.count(kb.id) == outcomes[1].chunks


def test_small_documents_share_embedding_batches(world, tmp_path):
    paths = []
    for i in range(8):
        paths.append(tmp_path / f"note{i}.md")
        paths[-1].write_text(f"Short note number {i} about the Nimbus N{i}.", encoding="utf-8")
    outcomes = world.ingest(paths)  # batch_size 4 in SMALL
    assert [o.status for o in outcomes] == ["added"] * 8
    assert [o.name for o in outcomes] == [p.name for p in paths]
    assert world.embedder.calls == 2  # 8 one-chunk documents, two full batches
    kb = world.kb()
    assert world.vectors.count(kb.id) == 8 == world.keywords.count(kb.id)


def test_unchanged_reingest_is_a_noop_and_changed_file_replaces(world, tmp_path):
    path = tmp_path / "doc.md"
    path.write_text("# Doc\n\n" + EN * 3, encoding="utf-8")
    first = world.ingest([path])[0]
    ids = [c.id for c in world.store.chunks_for_document(first.doc_id)]
    calls = world.embedder.calls
    again = world.ingest([path])[0]
    assert again.status == "unchanged" and again.doc_id == first.doc_id and again.chunks == first.chunks
    assert world.embedder.calls == calls  # nothing was embedded
    assert [c.id for c in world.store.chunks_for_document(first.doc_id)] == ids
    kb = world.kb()
    assert world.vectors.count(kb.id) == len(ids) and world.keywords.count(kb.id) == len(ids)

    path.write_text("# Doc\n\n" + EN * 3 + "\n\nA new closing paragraph about Orion.", encoding="utf-8")
    replaced = world.ingest([path])[0]
    assert replaced.status == "replaced" and replaced.doc_id == first.doc_id
    new_ids = [c.id for c in world.store.chunks_for_document(first.doc_id)]
    assert world.vectors.count(kb.id) == len(new_ids) == world.keywords.count(kb.id)
    assert set(ids) & set(new_ids), "unchanged leading chunks keep their ids"
    assert world.keywords.search([kb.id], "Orion", top_k=3)


def test_same_text_in_a_fresh_kb_gives_the_same_ids(tmp_path):
    path = tmp_path / "doc.md"
    path.write_text(EN * 3, encoding="utf-8")
    a, b = World(tmp_path / "a"), World(tmp_path / "b")
    ids_a = [c.id for c in a.store.chunks_for_document(a.ingest([path])[0].doc_id)]
    ids_b = [c.id for c in b.store.chunks_for_document(b.ingest([path])[0].doc_id)]
    assert ids_a == ids_b


def test_delete_document_and_kb_remove_from_all_three_stores(world, tmp_path):
    files = _write_corpus(tmp_path / "docs")
    outcomes = world.ingest([files["notes.txt"], files["guide.md"]])
    world.ingest([files["gbk.txt"]], kb_name="other")
    kb, other = world.kb(), world.kb("other")
    notes = _doc(outcomes, "notes.txt")
    world.ingestor.delete_document(notes)
    assert world.footprint(kb.id, notes) == (0, 0, 0)
    assert [d.name for d in world.store.list_documents(kb.id)] == ["guide.md"]
    world.ingestor.delete_kb(kb.id)
    assert world.store.find_kb("kb") is None
    assert world.vectors.count(kb.id) == 0 and world.keywords.count(kb.id) == 0
    assert kb.id not in world.vectors.kb_ids()
    assert world.store.get_kb(other.id).document_count == 1  # the other KB is untouched
    assert world.keywords.count(other.id) > 0 and world.vectors.count(other.id) > 0


def test_folder_walk_skips_hidden_and_uses_relative_names(world, tmp_path):
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "a.md").write_text(EN, encoding="utf-8")
    (root / "sub" / "a.md").write_text(ZH, encoding="utf-8")
    (root / ".hidden.md").write_text(EN, encoding="utf-8")
    (root / ".git" / "config.txt").write_text(EN, encoding="utf-8")
    (root / "sub" / "draft.md").write_text(EN, encoding="utf-8")
    (root / "TODO.md").write_text(EN, encoding="utf-8")
    (root / ".docmindignore").write_text("# not content\nTODO.md\nsub/draft*\n", encoding="utf-8")
    names = sorted(o.name for o in world.ingest([root]))
    assert names == ["a.md", "sub/a.md"]


def test_display_names_for_uploaded_files(world, tmp_path):
    upload = tmp_path / "tmp123.md"
    upload.write_text(EN, encoding="utf-8")
    outcome = world.ingest([upload], names=["Nimbus overview.md"])[0]
    assert outcome.name == "Nimbus overview.md"
    assert world.store.get_document(outcome.doc_id).name == "Nimbus overview.md"


def test_embedder_mismatch_is_refused_and_reindex_fixes_it(world, tmp_path):
    path = tmp_path / "doc.md"
    path.write_text(EN, encoding="utf-8")
    world.ingest([path])
    kb = world.kb()
    other = HashingEmbedder(dim=32, id="test:hashing-32")
    switched = Ingestor(world.store, other, world.vectors, world.keywords, world.ingestor.leases)
    with pytest.raises(EmbedderMismatch, match="reindex"):
        switched.ingest(kb.id, [path], SMALL)
    count = switched.reindex_kb(kb.id)
    assert count == world.store.get_kb(kb.id).chunk_count
    assert world.store.get_kb(kb.id).embedder_id == "test:hashing-32"
    hit = world.vectors.query([kb.id], other.embed([EN])[0], top_k=1)
    assert hit and hit[0][1] > 0.5
    assert switched.ingest(kb.id, [path], SMALL)[0].status == "unchanged"


_CRASHING_INGEST = """
import os, sys
from pathlib import Path
from tests.ingest.test_pipeline import World, HashingEmbedder

class CrashingEmbedder(HashingEmbedder):
    def embed(self, texts):
        if self.calls == 2:      # the process dies half-way through the document
            os._exit(17)
        return super().embed(texts)

world = World(Path(sys.argv[1]), embedder=CrashingEmbedder())
world.ingest([Path(sys.argv[2])])
"""


@pytest.mark.slow  # kills a real ingest process
def test_reconcile_after_a_killed_ingest(tmp_path):
    home = tmp_path / "home"
    keep = tmp_path / "keep.md"
    keep.write_text(EN, encoding="utf-8")
    World(home).ingest([keep])
    doomed = tmp_path / "doomed.md"
    doomed.write_text(EN * 12, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-c", _CRASHING_INGEST, str(home), str(doomed)], cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 17, proc.stderr
    world = World(home)
    kb = world.kb()
    half = world.store.find_document(kb.id, "doomed.md")
    # killed while its vectors were written: searchable by keyword, some vectors stored, never removed
    assert half is not None and half.status == "embedding"
    assert world.footprint(kb.id, half.id) == (world.footprint(kb.id, half.id)[0], 1, 1)
    repairs = world.ingestor.reconcile()
    assert any("doomed.md" in line and "background" in line for line in repairs), repairs
    assert world.store.get_document(half.id).status == "embedding"
    assert world.ingestor.finish_embedding()  # what the job worker runs after the start
    assert world.store.get_document(half.id).status == "complete"
    assert world.store.get_kb(kb.id).document_count == 2
    assert world.ingestor.check_kb(kb.id).ok
    assert world.ingestor.reconcile() == []  # nothing left to repair
    assert world.ingest([doomed])[0].status == "unchanged"


def test_reconcile_removes_stray_index_entries(world, tmp_path):
    path = tmp_path / "doc.md"
    path.write_text(EN, encoding="utf-8")
    doc_id = world.ingest([path])[0].doc_id
    kb = world.kb()
    world.store.delete_document(doc_id)  # as if the process died after the row went but before the indexes
    repairs = world.ingestor.reconcile()
    assert repairs and world.vectors.count(kb.id) == 0 and world.keywords.count(kb.id) == 0


# --------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------


def _cli(home: Path):
    """The real ``docmind`` command on its own home, with the small chunk sizes of these tests."""
    from docmind_core.cli import cli
    from docmind_core.engine import Engine

    Engine.open(home, overrides={k: SMALL.get(k) for k in ("rag.chunk_tokens", "rag.chunk_overlap_tokens",
                                                           "rag.parent_tokens", "embedding.batch_size")}, env={},
                persist_overrides=True)  # stored: the command opens an engine of its own on this home

    def invoke(args, input=None):
        return CliRunner().invoke(cli, ["--home", str(home), *args], input=input)

    return invoke


@pytest.mark.slow  # the docmind CLI on a real engine
def test_cli_ingest_list_show_delete(tmp_path):
    files = _write_corpus(tmp_path / "docs")
    (tmp_path / "docs" / "broken.pdf").write_bytes(b"%PDF-1.4 nonsense")
    cli = _cli(tmp_path / "home")
    result = cli(["ingest", str(tmp_path / "docs"), "--kb", "demo", "--description", "Demo", "--no-progress"])
    assert result.exit_code == 1, result.output  # the others landed, one failed: not a clean ingest
    assert "created knowledge base 'demo'" in result.output
    assert "! broken.pdf: FAILED" in result.output and "corrupt or unreadable PDF" in result.output
    assert f"{len(files)} added, 1 failed" in result.output

    result = cli(["ingest", str(tmp_path / "docs"), "--kb", "demo", "--if-missing"])
    assert result.exit_code == 0 and "already has 7 documents" in result.output

    result = cli(["kb", "list"])
    assert result.exit_code == 0 and "demo" in result.output and "Demo" in result.output

    result = cli(["kb", "show", "demo"])
    assert result.exit_code == 0
    assert "[failed] broken.pdf" in result.output and "reason:" in result.output
    assert "[complete] spec.pdf" in result.output

    result = cli(["kb", "delete", "demo"], input="n\n")
    assert result.exit_code != 0 and "demo" in cli(["kb", "list"]).output
    result = cli(["kb", "delete", "demo", "--yes"])
    assert result.exit_code == 0 and "demo" not in cli(["kb", "list"]).output


@pytest.mark.slow  # the docmind CLI on a real engine
def test_cli_exit_code_two_when_nothing_lands(tmp_path):
    (tmp_path / "empty.txt").write_bytes(b"")
    result = _cli(tmp_path / "home")(["ingest", str(tmp_path / "empty.txt"), "--kb", "x", "--no-progress"])
    assert result.exit_code == 2
    assert "empty.txt: FAILED" in result.output


@pytest.mark.slow  # the docmind CLI on a real engine
def test_cli_unknown_kb_is_a_clear_error(tmp_path):
    result = _cli(tmp_path / "home")(["kb", "show", "nope"])
    assert result.exit_code == 2
    assert "no knowledge base named 'nope'" in result.output


# --------------------------------------------------------------------------
# Demo corpus
# --------------------------------------------------------------------------

DEMO = REPO / "data" / "demo"


def _demo_questions() -> list[dict[str, str]]:
    rows = []
    for line in (DEMO / "QUESTIONS.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0].startswith("q") and cells[0][1:].isdigit():
            rows.append(dict(zip(["id", "lang", "kind", "question", "source", "expected"], cells)))
    return rows


@pytest.mark.slow  # ingests a whole corpus
def test_demo_corpus_ingests_completely_and_keyword_search_finds_the_sources(world):
    outcomes = world.ingest([DEMO])
    assert len(outcomes) >= 10
    assert all(o.status == "added" for o in outcomes), [o.error for o in outcomes if o.error]
    assert "QUESTIONS.md" not in {o.name for o in outcomes}  # left out by data/demo/.docmindignore
    names = {o.doc_id: o.name for o in outcomes}
    kb = world.kb()
    questions = _demo_questions()
    assert len(questions) >= 12
    for q in questions:
        if q["source"] == "(none)" or q["kind"] == "cross-language":
            continue
        hits = world.keywords.search([kb.id], q["question"], top_k=5)
        found = {names[world.store.get_chunks([c])[c].doc_id] for c, _ in hits}
        for source in q["source"].split("+"):
            assert source.strip() in found, (q["id"], found)


@pytest.mark.slow  # runs the demo generator script in a subprocess
def test_demo_generator_is_deterministic(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "make_demo_docs.py"), "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for name in ("nimbus_n2_datasheet.pdf", "nimbus_manual_zh.docx"):
        assert (tmp_path / name).read_bytes() == (DEMO / name).read_bytes(), name


def test_concurrent_ingests_of_the_same_file_do_not_interleave(world, tmp_path):
    import threading

    path = tmp_path / "doc.md"
    path.write_text(EN * 4, encoding="utf-8")
    kb = world.kb()
    results = []
    threads = [threading.Thread(target=lambda: results.extend(world.ingestor.ingest(kb.id, [path], SMALL)))
               for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(o.status for o in results) == ["added", "unchanged", "unchanged"]
    doc = world.store.find_document(kb.id, "doc.md")
    assert world.vectors.count(kb.id) == doc.chunk_count == world.keywords.count(kb.id)


@pytest.mark.slow  # the docmind CLI on a real engine
def test_cli_reindex_and_json_listing(tmp_path):
    import json

    from docmind_core.store.db import Database
    from docmind_core.store.kb_store import KnowledgeStore

    path = tmp_path / "doc.md"
    path.write_text(EN, encoding="utf-8")
    home = tmp_path / "home"
    cli = _cli(home)
    assert cli(["ingest", str(path), "--kb", "demo", "--no-progress"]).exit_code == 0
    listed = json.loads(cli(["kb", "list", "--json"]).output)
    assert listed[0]["name"] == "demo" and listed[0]["document_count"] == 1
    live_embedder = listed[0]["embedder_id"]
    store = KnowledgeStore(Database(home / "docmind.db"))  # as if the KB had been indexed with another model
    store.update_kb(store.find_kb("demo").id, embedder_id="test:older-model")
    result = cli(["ingest", str(path), "--kb", "demo", "--no-progress"])
    assert result.exit_code != 0 and "docmind kb reindex demo" in result.output
    result = cli(["kb", "reindex", "demo"])
    assert result.exit_code == 0 and "re-embedded" in result.output and live_embedder in result.output
    shown = json.loads(cli(["kb", "show", "demo", "--json"]).output)
    assert shown["kb"]["embedder_id"] == live_embedder and shown["documents"][0]["status"] == "complete"


def test_a_pdf_stored_before_pages_were_kept_is_read_again(world, tmp_path):
    path = make_pdf(tmp_path / "spec.pdf", ["Nimbus N2 datasheet.", "Maximum power draw: 45 W."])
    first = world.ingest([path])[0]
    assert {c.place.label for c in world.store.chunks_for_document(first.doc_id)} == {"p. 1"}
    with world.store.db.transaction() as db:  # as a chunk row stored before migration m017 reads
        db.execute("UPDATE chunks SET page_first = NULL, page_last = NULL WHERE doc_id = ?", [first.doc_id])
    again = world.ingest([path])[0]
    assert again.status == "replaced" and again.doc_id == first.doc_id
    assert {c.place.label for c in world.store.chunks_for_document(first.doc_id)} == {"p. 1"}
    assert world.ingest([path])[0].status == "unchanged"
