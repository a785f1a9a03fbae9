"""A large single cell or a long unbroken run of letters is ingested in time linear in its size."""

from __future__ import annotations

import time

from docmind_core.text.tokens import keyword_tokens, stored_terms


def _best_of(runs: int, work) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - started)
    return best


def test_keyword_tokens_of_one_long_run_cost_what_its_pieces_cost():
    # The same number of characters as one unbroken run (a base64 blob, a hex dump, a cell without
    # spaces) and as twelve short runs: linear tokenising costs about the same, a quadratic step 12x.
    run = "abcdefghij" * 600
    pieces = " ".join([run[:500]] * 12)
    assert stored_terms(run) == run  # one word, kept whole
    keyword_tokens(run, stem=False)  # warm the regex caches
    one = _best_of(5, lambda: keyword_tokens(run, stem=False))
    split = _best_of(5, lambda: keyword_tokens(pieces, stem=False))
    assert one < 4 * split + 0.002, (one, split)


def test_codes_are_still_found_whole():
    assert stored_terms("see DM-3000 v2.1.3 and a_b/c") == "dm-3000 v2.1.3 a_b/c see dm 3000 v2 1 3 b c"


# -- CSV read in pieces -------------------------------------------------------------------------------

import random  # noqa: E402

import pytest  # noqa: E402

from docmind_core.errors import IngestError  # noqa: E402
from docmind_core.ingest.loaders import CsvFile, load_document, open_text_file  # noqa: E402

_WORDS = ["alpha", "beta", "gamma", "delta", "温度", "保修", "x1", "a;b", "q\"uote", "line\nbreak", "  pad  ", ""]


def _random_csv(rng: random.Random) -> str:
    delimiter = rng.choice([",", ";", "\t", "|"])
    newline = rng.choice(["\n", "\r\n"])
    columns = rng.randint(1, 4)
    rows = []
    for _ in range(rng.randint(0, 12)):
        cells = []
        for _ in range(rng.randint(0, columns + 1)):
            cell = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(0, 6)))
            if any(c in cell for c in (delimiter, '"', "\n")) or rng.random() < 0.2:
                cell = '"' + cell.replace('"', '""') + '"'
            cells.append(cell)
        rows.append(delimiter.join(cells))
        if rng.random() < 0.1:
            rows.append("")
    return newline.join(rows) + (newline if rng.random() < 0.5 else "")


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16"])
def test_a_csv_read_in_pieces_is_the_csv_read_whole(tmp_path, encoding):
    path = tmp_path / "t.csv"
    for seed in range(120):
        rng = random.Random(seed)
        path.write_bytes(_random_csv(rng).encode(encoding))
        try:
            expected = load_document(path).text
        except IngestError as exc:
            expected = str(exc)
        try:
            opened = open_text_file(path, path.name, piece_bytes=rng.choice([1, 2, 3, 7, 64, 4096]))
            assert isinstance(opened, CsvFile)
            got = "".join(opened.pieces())
        except IngestError as exc:
            got = str(exc)
        assert got == expected, seed


def test_a_single_cell_of_megabytes_reaches_the_chunker_in_pieces(tmp_path):
    cell = ("The Aurora X2 battery lasts 18 hours. " * 40_000).strip()  # ~1.5 MB in one cell
    path = tmp_path / "cell.csv"
    path.write_text('notes\n"' + cell + '"\n', encoding="utf-8")
    opened = open_text_file(path, path.name)
    pieces = list(opened.pieces())
    assert len(pieces) > 20 and max(len(p) for p in pieces) <= (1 << 16) + 64  # + held-back blanks
    assert "".join(pieces) == load_document(path).text == f"notes: {cell}"
