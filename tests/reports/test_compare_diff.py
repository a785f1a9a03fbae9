"""Side by side: the comparison carries a diff of the two answers and of their (cited) sources, as data."""

from __future__ import annotations

import json

from docmind_core.reports.compare import answer_diff, compare_runs, source_diff
from docmind_core.values import CitationResult, UsedSource
from docmind_core.settings import Settings
from tests.reports.test_compare import SOURCES, _chunk, sample_run


def _run(run_id, mode, answer, sources=SOURCES):
    return {"meta": {"run_id": run_id}, "config": Settings().flat(),
            "events": sample_run(run_id, mode, sources=sources, answer=answer)}


def _text(pieces, side):
    """The answer one side reads, rebuilt from the diff pieces (markers are not part of the diff)."""
    return "".join(p.text for p in pieces if p.op in ("equal", side))


def test_answer_diff_marks_words_only_one_answer_has_and_ignores_citation_numbers():
    a = "Aurora X2 supports a battery life of 18 hours [1]."
    b = "Aurora X2 supports a battery life of 20 hours [2] and charges over USB-C [1]."
    diff = answer_diff(a, b)
    assert _text(diff.pieces, "delete") == "Aurora X2 supports a battery life of 18 hours."
    assert _text(diff.pieces, "insert") == "Aurora X2 supports a battery life of 20 hours and charges over USB-C."
    assert [p.text for p in diff.pieces if p.op == "delete"] == ["18"]
    assert "20" in "".join(p.text for p in diff.pieces if p.op == "insert")
    assert 0.5 < diff.similarity < 1.0
    assert not diff.identical


def test_answer_diff_of_chinese_answers_works_per_character_and_same_answers_are_identical():
    diff = answer_diff("Nimbus N1 的价格是 1,490 USD [1]。", "Nimbus N1 的价格是 2,390 USD [2]。")
    assert "".join(p.text for p in diff.pieces if p.op == "delete") == "1,490"
    assert "".join(p.text for p in diff.pieces if p.op == "insert") == "2,390"
    same = answer_diff("Same text [1].", "Same text [3].")
    assert same.identical and same.similarity == 1.0 and [p.op for p in same.pieces] == ["equal"]


def test_source_diff_lists_each_chunk_with_its_number_and_citation_on_each_side():
    a_sources = [SOURCES[0], SOURCES[1]]
    b_sources = [_chunk("c9", "Aurora X2 charges in 2 hours.", 0.6), SOURCES[0]]
    cited_a = CitationResult(used_sources=[UsedSource(index=1, chunk_id="c1", document="aurora.md")])
    cited_b = CitationResult(used_sources=[UsedSource(index=1, chunk_id="c9", document="aurora.md"),
                                           UsedSource(index=2, chunk_id="c1", document="aurora.md")])
    rows = source_diff(a_sources, b_sources, cited_a, cited_b)
    by_id = {r.chunk_id: r for r in rows}
    assert [r.chunk_id for r in rows] == ["c1", "c2", "c9"]  # A's order, then what only B has
    assert (by_id["c1"].a_index, by_id["c1"].b_index, by_id["c1"].side) == (1, 2, "both")
    assert by_id["c1"].cited_a and by_id["c1"].cited_b
    assert (by_id["c2"].side, by_id["c2"].cited_a, by_id["c2"].b_index) == ("only A", False, None)
    assert (by_id["c9"].side, by_id["c9"].cited_b, by_id["c9"].a_index) == ("only B", True, None)
    assert by_id["c2"].document == "nimbus.md" and by_id["c9"].preview.startswith("Aurora X2 charges")


def test_compare_runs_carries_both_diffs_and_exports_them():
    a = _run("ra", "RULE_PLANNER", "Aurora X2 supports a battery life of 18 hours [1].")
    b = _run("rb", "AGENTIC", "Aurora X2 supports a battery life of 20 hours [1].",
             sources=[SOURCES[0], _chunk("c9", "Other", 0.3)])
    cmp = compare_runs(a, b)
    assert [p.text for p in cmp.answer_diff.pieces if p.op == "delete"] == ["18"]
    assert {r.chunk_id: r.side for r in cmp.source_diff} == {"c1": "both", "c2": "only A", "c9": "only B"}
    exported = json.loads(cmp.to_json())
    assert exported["answer_diff"]["pieces"] and exported["source_diff"][0]["chunk_id"] == "c1"
