"""Hostile files through the ingest pipeline and the job queue: each is refused (or read) with a message naming
it, the other files of the same ingest still land, the KB stays consistent, and memory stays bounded."""

from __future__ import annotations

import io
import os
import threading
import zipfile
from pathlib import Path

import pytest

from docmind_core.engine import Engine
from docmind_core.ingest.jobs import JobInput
from docmind_core.accounts.users import LOCAL_USER
from docmind_core.workbench import Workbench

GOOD = "The Nimbus N1 costs 100 dollars and draws 12 watts."


def _engine(home: Path, **overrides) -> Engine:
    return Engine.open(home, overrides=overrides, env={}, warm=False)


def _outcomes(engine: Engine, kb_id: int, paths: list[Path]) -> dict[str, object]:
    return {o.name: o for o in engine.ingest(kb_id, paths)}


def test_a_fifo_given_directly_is_refused_without_blocking_and_the_other_file_lands(tmp_path):
    engine = _engine(tmp_path / "home")
    kb = engine.create_kb("k")
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    good = tmp_path / "good.txt"
    good.write_text(GOOD)
    result: dict = {}
    worker = threading.Thread(target=lambda: result.update(_outcomes(engine, kb.id, [fifo, good])), daemon=True)
    worker.start()
    worker.join(timeout=60)
    if worker.is_alive():  # unblock the old code's open() so the thread can end, then fail
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("ingesting a FIFO blocked")
    assert result["pipe.txt"].status == "failed" and "pipe.txt: not a regular file" in result["pipe.txt"].error
    assert result["good.txt"].status == "added"
    assert engine.check_kb(kb.id).ok


def _docx_with_body(text_bytes: int) -> bytes:
    """A valid .docx whose one paragraph holds ``text_bytes`` letters (a few KB once zipped)."""
    import docx

    buffer = io.BytesIO()
    document = docx.Document()
    document.add_paragraph("placeholder")
    document.save(buffer)
    out = io.BytesIO()
    with zipfile.ZipFile(buffer) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename == "word/document.xml":
                data = data.replace(b"placeholder", b"word " * (text_bytes // 5))
            target.writestr(info, data)
    return out.getvalue()


def test_a_docx_that_unpacks_past_the_file_limit_is_refused_before_it_is_parsed(tmp_path):
    engine = _engine(tmp_path / "home", **{"ingest.max_file_mb": 1})
    kb = engine.create_kb("k")
    bomb = tmp_path / "bomb.docx"
    bomb.write_bytes(_docx_with_body(3 * 1024 * 1024))
    assert bomb.stat().st_size < 100_000  # small on disk
    small = tmp_path / "small.docx"
    small.write_bytes(_docx_with_body(2000))
    out = _outcomes(engine, kb.id, [bomb, small])
    assert out["bomb.docx"].status == "failed"
    error = out["bomb.docx"].error
    assert error.startswith("bomb.docx: unpacks to ") and "over the limit of 1 MB (ingest.max_file_mb)" in error
    assert out["small.docx"].status == "added"
    assert engine.check_kb(kb.id).ok


@pytest.mark.slow  # encodes a 280 KB document (~17 s of CPU)
def test_csv_with_a_huge_cell_is_read_and_a_ragged_row_keeps_its_extra_values(tmp_path):
    engine = _engine(tmp_path / "home")
    kb = engine.create_kb("k")
    big = tmp_path / "bigcell.csv"
    big.write_text('name,notes\nwidget,"' + "gadget " * 40_000 + '"\n')  # 280 KB in one cell (the csv cap: 128 KiB)
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("a,b\n1,2\n3,4,extra7\n")
    out = _outcomes(engine, kb.id, [big, ragged])
    assert out["bigcell.csv"].status == "added", out["bigcell.csv"].error
    assert out["ragged.csv"].status == "added"
    doc = next(d for d in engine.store.list_documents(kb.id) if d.name == "ragged.csv")
    texts = " ".join(c.text for c in engine.store.chunks_for_document(doc.id))
    assert "column 3: extra7" in texts
    assert engine.check_kb(kb.id).ok


def test_uploads_with_hostile_names_are_queued_each_with_its_own_outcome(tmp_path):
    engine = _engine(tmp_path / "home")
    bench = Workbench(engine, LOCAL_USER, channel="web")
    kb = bench.create_kb("k")
    names = ["..", "a/..", "nul\x00.txt", "L" * 300 + ".txt", "中" * 100 + ".txt", "new\nline\x1b[31m\u202e.txt",
             "good.txt", "zero.txt"]
    inputs = [JobInput(name, data=(b"" if name == "zero.txt" else f"{GOOD} ({i})".encode()))
              for i, name in enumerate(names)]
    job = engine.jobs.wait(bench.enqueue_ingest(kb.id, inputs).id, 120)
    assert job.finished and len(job.files) == len(names)
    by_name = {f.name: f for f in job.files}
    assert by_name["zero.txt"].state == "failed" and "zero.txt: the file is empty" in by_name["zero.txt"].error
    assert by_name["good.txt"].state == "done" and by_name["L" * 300 + ".txt"].state == "done"
    assert by_name["中" * 100 + ".txt"].state == "done" and by_name["nul.txt"].state == "done"
    for dots in ("upload-0", "upload-1"):  # ".." never names a document or a path; without an extension: refused
        assert by_name[dots].state == "failed" and "unsupported file type" in by_name[dots].error
    assert engine.check_kb(kb.id).ok
    left = [p for p in (tmp_path / "home" / "uploads").rglob("*") if p.is_file()]
    assert sorted(p.suffix for p in left) == ["", "", ".txt"]  # only the failed files' copies stay, for a retry
