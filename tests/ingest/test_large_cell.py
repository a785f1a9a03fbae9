"""A large single cell or a long unbroken run of letters is ingested in time linear in its size."""

from __future__ import annotations

import time

from docmind_core.text import keyword_tokens, stored_terms


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
