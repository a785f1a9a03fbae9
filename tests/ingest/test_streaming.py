"""Large inputs in bounded memory (issue 15): text files read, chunked and stored in pieces.

* the piece-wise text reader gives exactly what ``load_document`` gives, whatever the piece size;
* the sentence scanner and the chunker give the same spans and chunks for any split of the text;
* an ingest of a 24 MB text file never holds its text: traced Python memory stays far below its size;
* a streamed document's stored text and chunks are those of the whole-text path.
"""

from __future__ import annotations

import random
import threading
import tracemalloc
from pathlib import Path

import pytest

from docmind_core.errors import IngestCancelled, IngestError
from docmind_core.ingest.chunking import chunk_document, iter_stream_blocks
from docmind_core.ingest.loaders import load_document, open_text_file
from docmind_core.ingest.streaming import STREAM_MIN_BYTES
from docmind_core.settings import Settings
from docmind_core.text.tokens import SentenceScanner, split_sentences
from tests.ingest.test_pipeline import World

# Bits that exercise every rule of the sentence splitter, the chunker and the text tidying: periods that do
# or do not end a sentence, runs of line breaks and closing quotes, headings, blank pieces, long words,
# a long unpunctuated Chinese run, Unicode blanks and carriage returns.
ATOMS = ["Hello", "world", "e.g.", "Dr.", "3.14", "v2.4.1", "U.S.", "45 W.", "J. Smith", "。", "！", "？", "；", "…",
         "”", "’", ")", "\"", ".", "..", "!", "?", ";", "\n", "\n\n", "\n\n\n", " ", "  ", "\t", "\u3000", "\xa0",
         "# Title", "## 小节", "###### x", "#nohead", "功率", "价格", "无标点的中文文本" * 30, "a" * 50, "word" * 40,
         "example.com", "。”", "！）", "abc.def", "end.", "Mr. Brown", "   \n   ", "A.", "B. ", "\r", "\r\n", "\x00"]


def random_text(rng: random.Random) -> str:
    return "".join(rng.choice(ATOMS) + (" " if rng.random() < 0.5 else "") for _ in range(rng.randint(0, 300)))


def random_pieces(rng: random.Random, text: str) -> list[str]:
    if rng.random() < 0.2:
        return list(text)  # one character at a time
    cuts = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, rng.randint(0, 40))))
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]


def seed_split(count: int, fast: int) -> pytest.MarkDecorator:
    """The seeds of a property test as two cases: the first ``fast`` in make test-fast, the rest marked slow, so
    the full suite still tries all ``count``."""
    return pytest.mark.parametrize("seeds", [pytest.param(range(fast), id=f"seeds-0-{fast - 1}"),
                                             pytest.param(range(fast, count), id=f"seeds-{fast}-{count - 1}",
                                                          marks=pytest.mark.slow)])


@seed_split(400, 100)
def test_the_sentence_scanner_gives_the_same_spans_for_any_split(seeds):
    for seed in seeds:
        rng = random.Random(seed)
        text = random_text(rng)
        scanner = SentenceScanner()
        spans = []
        for piece in random_pieces(rng, text):
            scanner.feed(piece)
            spans.extend(scanner.spans())
            scanner.discard_before(scanner.end)  # the scanner keeps what it still needs itself
        scanner.finish()
        spans.extend(scanner.spans())
        assert spans == split_sentences(text), seed


@seed_split(400, 100)
def test_the_chunker_gives_the_same_chunks_for_any_split(seeds):
    for seed in seeds:
        rng = random.Random(seed)
        text = random_text(rng)
        sizes = rng.choice([5, 8, 20, 40]), rng.choice([0, 3, 8]), rng.choice([10, 60, 120])
        parents, children = chunk_document(1, "d", text, *sizes)
        blocks = list(iter_stream_blocks(1, "d", random_pieces(rng, text), *sizes))
        assert [p for p, _ in blocks] == parents, seed
        assert [c for _, kids in blocks for c in kids] == children, seed


@pytest.mark.slow  # a 640,000-character sentence cut token by token under tracemalloc
def test_chunking_a_text_in_pieces_holds_a_block_not_the_text():
    piece = "无标点的中文文本" * 2000  # no sentence end anywhere: one sentence of 640,000 characters
    pieces = (piece for _ in range(40))
    tracemalloc.start()
    try:
        count = sum(len(kids) for _, kids in iter_stream_blocks(1, "x.txt", pieces, 320, 40, 640))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert count == 40 * len(piece) // 320  # units of 320 one-character tokens, one per child
    assert peak < 40 * len(piece) * 2 / 4  # a quarter of the text's size as a str (2 bytes a character)


@seed_split(150, 40)
@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16", "utf-32"])
def test_the_text_read_in_pieces_is_the_text_read_whole(tmp_path, encoding, seeds):
    path = tmp_path / "t.txt"
    for seed in seeds:
        rng = random.Random(seed)
        path.write_bytes(random_text(rng).encode(encoding))
        try:
            expected = load_document(path).text
        except IngestError as exc:
            expected = str(exc)
        try:
            opened = open_text_file(path, path.name, piece_bytes=rng.choice([1, 2, 3, 7, 64]))
            assert opened is not None
            got = "".join(opened.pieces())
        except IngestError as exc:
            got = str(exc)
        assert got == expected, seed


def test_text_that_is_not_utf8_is_left_to_the_whole_file_reader(tmp_path):
    path = tmp_path / "gbk.txt"
    path.write_bytes("错误代码表示许可证已过期。".encode("gbk") * 10)
    assert open_text_file(path, path.name) is None
    bad_bom = tmp_path / "bom.txt"
    bad_bom.write_bytes(b"\xef\xbb\xbf" + "许可证".encode("gbk"))
    with pytest.raises(IngestError, match="byte-order mark"):
        open_text_file(bad_bom, bad_bom.name)


def write_english(path: Path, megabytes: float, seed: int = 15) -> None:
    rng = random.Random(seed)
    words = ("power draw price battery runtime sensor firmware version interface warranty temperature device "
             "network protocol storage display camera charging install configure error code").split()
    with path.open("w", encoding="utf-8") as out:
        written = 0
        while written < megabytes * 1_000_000:
            line = " ".join(rng.choice(words) for _ in range(rng.randint(8, 25))).capitalize() + ". "
            line += "\n\n" if rng.random() < 0.1 else ""
            out.write(line)
            written += len(line)


@pytest.mark.slow  # writes and reads a 24 MB file
def test_a_large_ingest_never_holds_the_text_of_the_file(tmp_path):
    world = World(tmp_path / "home")
    world.settings = Settings().with_overrides({"embedding.batch_size": 16})
    warm = tmp_path / "warm.txt"
    warm.write_text("Warm the stores up. " * 50, encoding="utf-8")
    world.ingest([warm])  # first-use allocations of the stores and caches are not the ingest's
    big = tmp_path / "big.txt"
    write_english(big, 24)
    cancel = threading.Event()
    batches = []

    def on_progress(event):
        if event.stage == "indexing":  # a streamed batch of chunk rows and keyword entries written
            batches.append(event.message)
            if len(batches) == 3:
                cancel.set()

    tracemalloc.start()
    try:
        with pytest.raises(IngestCancelled):
            world.ingest([big], progress=on_progress, cancel=cancel)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(batches) == 3  # it got past reading, counting and the first batches
    # The whole text alone is 24 MB as a str (and was read as 24 MB of bytes, then counted as a list of
    # about 4 million tokens); pieces of 64 KB and a few batches are what is held now.
    assert peak < 12_000_000, f"peak {peak / 1e6:.1f} MB"
    print(f"peak traced memory {peak / 1e6:.1f} MB")
    doc = world.store.find_document(world.kb().id, "big.txt")
    assert doc.status == "failed" and "cancelled" in doc.error
    assert world.footprint(world.kb().id, doc.id) == (0, 0, 0)
    assert world.store.document_text(doc.id) == ""


@pytest.mark.slow  # ingests 1.5 MB through the encoder
def test_a_streamed_document_stores_the_text_and_chunks_of_the_whole_path(tmp_path):
    world = World(tmp_path / "home")
    world.settings = Settings().with_overrides({"embedding.batch_size": 32, "rag.chunk_tokens": 400,
                                                "rag.parent_tokens": 1600})
    path = tmp_path / "big.md"
    write_english(path, 1.5)
    with path.open("a", encoding="utf-8") as out:
        out.write("\r\n\r\n# Appendix\r\n\r\nThe last line ends here. \u3000 \n\n")
    assert path.stat().st_size > STREAM_MIN_BYTES  # the piece-wise reader, not the whole-file one
    outcome = world.ingest([path])[0]
    assert outcome.status == "added", outcome.error
    text = load_document(path).text
    assert world.store.document_text(outcome.doc_id) == text
    s = world.settings.rag
    parents, children = chunk_document(world.kb().id, path.name, text, s.chunk_tokens, s.chunk_overlap_tokens,
                                       s.parent_tokens)
    assert [c.id for c in world.store.chunks_for_document(outcome.doc_id)] == [c.id for c in children]
    assert [c.id for c in world.store.chunks_for_document(outcome.doc_id, parents=True)] == [p.id for p in parents]
    assert world.ingestor.check_kb(world.kb().id).ok
    again = world.ingest([path])[0]  # hashed in pieces the same way: unchanged
    assert again.status == "unchanged"


def test_a_text_file_growing_while_it_is_ingested_is_read_only_as_far_as_it_was_checked(tmp_path, monkeypatch):
    """A log still being appended to: its checked size bounds every read (the size limit holds for what is read,
    and the text chunked is the text hashed), and a file longer than checked when hashed is refused."""
    import docmind_core.ingest.loaders as loaders

    path = tmp_path / "growing.txt"
    path.write_text("first line of the log\n" * 20_000, encoding="utf-8")
    checked = path.stat().st_size
    with path.open("a", encoding="utf-8") as handle:
        handle.write("appended after the check\n" * 20_000)
    monkeypatch.setattr(loaders, "checked_size", lambda p, max_bytes, name: checked)  # the check saw it shorter
    with pytest.raises(loaders.IngestError, match="changed while it was being read"):
        loaders.open_text_file(path, "growing.txt")
    text_file = loaders.TextFile(path=path, name="growing.txt", digest="", size=checked, encoding="utf-8",
                                 mime="text/plain", piece_bytes=4096)
    text = "".join(text_file.pieces())
    assert "appended" not in text and text.count("first line of the log") == 20_000
