"""timeline.py: what the rows say about a small model's run (issue 21)."""

from __future__ import annotations

from docmind_core.reports.timeline import stage_times, timeline
from tests.fakes.sample_events import sample_events


def _row(kind: str):
    return next(r for r in timeline(sample_events()) if r.kind == kind)


def test_a_round_row_lists_the_offered_tools_why_others_were_not_and_the_calls_not_run():
    row = _row("agentic_step")
    assert row.fields["offered tools"] == "searchDocs, keywordSearch, webSearch"
    assert row.fields["not offered"] == "recall_memory (the user has no memories)"
    assert row.fields["calls asked"] == "5 (2 repeated, 1 past the cap: not run)"
    assert row.items[0]["repaired from"] == "tools_tags"
    assert row.items[0]["adjusted"] == "top_k 1 -> 5 (agentic.search_top_k_min)"
    assert "adjusted" not in row.items[1]


def test_the_understanding_row_says_why_a_rewrite_was_discarded():
    assert _row("understanding").fields["note"].startswith("the rewrite switched from Chinese to English")


def test_the_done_row_shows_the_time_of_each_stage_in_run_order():
    done = _row("done")
    assert done.fields["time per stage"] == stage_times(sample_events()[-1].timings_ms)
    assert stage_times({"total": 30500.0, "generation": 9800.0, "retrieval": 4100.0, "retrieval.agentic_loop": 3200.0,
                        "understanding": 12300.0, "scope": 0.4}) == (
        "scope 0 ms · understanding 12.3 s · retrieval 4.1 s (agentic_loop 3.2 s) · generation 9.8 s")


def test_the_rerank_row_says_when_the_question_crossed_languages_and_which_chunks_that_scored():
    from docmind_core.events import Reranked
    from docmind_core.values import RetrievedChunk, StageScores

    def chunk(text, across, kept):
        return RetrievedChunk(chunk_id=text[:8], document="d", text=text, kept=kept,
                              scores=StageScores(rerank=0.5, rerank_across=across))

    crossed = Reranked(candidates=[chunk("红灯闪烁表示硬件故障，请查看控制台中的错误代码。", True, True),
                                   chunk("绿灯常亮表示运行正常。", True, False),
                                   chunk("A Nimbus appliance works fully offline once activated.", False, True)],
                       reranker="offline-calibrated")
    fields = timeline([crossed])[0].fields
    assert fields["across languages"] == ("the question crosses into Chinese: most of its nearest chunks are "
                                          "Chinese, so 2 Chinese chunks (1 kept) were scored by meaning and names, "
                                          "not shared words")
    plain = crossed.model_copy(update={"candidates": [c.model_copy(update={"scores": StageScores(rerank=0.5)})
                                                      for c in crossed.candidates]})
    assert "across languages" not in timeline([plain])[0].fields
