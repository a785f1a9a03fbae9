"""Issue 23 item 6, the pure parts: reasons in words on the chat page's badge and timeline, the run summary
(`--json` keeps the code and adds words), whole-word excerpts, readable pair labels, the true upload limit."""

from __future__ import annotations

import re

from docmind_ui.citation_html import excerpt_html
from docmind_core.events import Done, Fallback, Graded, Retrieved, Routed, ScopeDecided
from docmind_core.text.excerpt import clip_words, word_window
from docmind_core.values import GradeResult, Mode, PathDecision, RetrievedChunk, Scope, Tier
from docmind_core.reports.pair_labels import pair_labels
from docmind_core.text.reasons import ROUTE_WORDS, STOP_WORDS, GRADE_WORDS, describe_reason
from docmind_core.reports.run_summary import summarise
from docmind_core.store.traces import TraceSummary
from docmind_core.reports.timeline import RunDigest, timeline
from docmind_ui.html_views import evidence_grade_html, glance_html, rounds_html, route_html, verdict_html
from docmind_ui.kb_page import score_3, upload_limit
from tests.fakes.sample_events import sample_events

BLEND = "gray_zone_blend_mid:0.2733333"
CODES = [c for c in (*GRADE_WORDS, *ROUTE_WORDS, *STOP_WORDS) if "_" in c] + ["gray_zone_blend", "regex:"]


def _raw_codes(text: str) -> list[str]:
    return [code for code in CODES if re.search(rf"(?<![\w.]){re.escape(code)}", text)]


def _coded_events() -> list:
    """The sample run with machine codes where the pipeline puts them."""
    grade = GradeResult(tier=Tier.AMBIGUOUS, top_score=0.43525922298431396, lex_coverage=0.5, kb_entity_weak=False,
                        web_compensation_needed=False, reason=BLEND, gray_zone_mode="blend")
    out = []
    for event in sample_events():
        if isinstance(event, Graded):
            event = event.model_copy(update={"grade": grade})
        elif isinstance(event, Routed):
            event = event.model_copy(update={"decision": PathDecision(mode=Mode.RULE_PLANNER,
                                                                      reason="agentic_disabled")})
        elif isinstance(event, Retrieved):
            event = event.model_copy(update={"stop_reason": "max_iterations"})
        elif isinstance(event, ScopeDecided):
            event = event.model_copy(update={"reason": "regex:memory_command", "scope": Scope.MEMORY_COMMAND})
        elif isinstance(event, Fallback):
            event = event.model_copy(update={"reason": "the loop stopped (total_timeout) before it found evidence"})
        elif isinstance(event, Done):
            event = event.model_copy(update={"grade": grade, "stop_reason": "max_iterations",
                                             "route_reason": "agentic_disabled"})
        out.append(event)
    return out


def test_the_timeline_shows_every_reason_in_words():
    rows = timeline(_coded_events())
    shown = "\n".join(f"{k}: {v}" for row in rows for k, v in row.fields.items())
    assert not _raw_codes(shown), _raw_codes(shown)
    assert "the blend of score and coverage, 0.27, is in the middle band" in shown
    assert STOP_WORDS["max_iterations"] in shown and ROUTE_WORDS["agentic_disabled"] in shown
    assert "the loop ran out of time" in shown


def test_the_chat_badge_glance_and_rounds_show_words():
    digest = RunDigest.from_events(_coded_events())
    html = (verdict_html(digest.verdict) + evidence_grade_html(digest.grade) + glance_html(digest)
            + rounds_html(digest) + route_html(digest))
    assert not _raw_codes(html), _raw_codes(html)
    assert "0.27, is in the middle band" in html


def test_json_keeps_the_codes_and_adds_their_words():
    summary = summarise(_coded_events())
    assert summary.grade_reason == BLEND and summary.grade_reason_words == describe_reason(BLEND)
    assert summary.stop_reason == "max_iterations" and summary.stop_reason_words == STOP_WORDS["max_iterations"]
    assert summary.route_reason == "agentic_disabled"
    assert summary.route_reason_words == ROUTE_WORDS["agentic_disabled"]


# -- excerpts -------------------------------------------------------------------------------------

def _whole_words(cut: str, text: str) -> bool:
    """Every word of the cut (ellipsis aside) is a whole word of the text."""
    words = set(re.findall(r"\w+", text))
    return all(w in words for w in re.findall(r"\w+", cut.replace("…", " ")))


def test_clip_words_cuts_between_words_with_an_ellipsis():
    text = "The Nimbus N2 relay switches within three milliseconds under a full load of forty amperes."
    for limit in range(8, len(text)):
        cut = clip_words(text, limit)
        assert len(cut) <= limit and cut.endswith("…") and _whole_words(cut, text), (limit, cut)
    assert clip_words(text, len(text)) == text
    assert clip_words("NIM-201 costs 3.5 dollars", 12) == "NIM-201…"  # a code is one word


def test_clip_words_cuts_cjk_at_any_character():
    text = "向量数据库是一种专门存储向量的数据库系统"
    assert clip_words(text, 10) == text[:9] + "…"


def test_a_long_source_excerpt_starts_and_ends_on_whole_words():
    words = [f"word{i:03d}x" for i in range(400)]
    text = " ".join(words)
    html = excerpt_html(text, [(1500, 1520)])
    shown = html.replace("<mark class=\"dm-span\">", "").replace("</mark>", "")
    assert shown.startswith("… ") and shown.endswith(" …")
    inner = shown[2:-2].split()
    assert inner and all(w in set(words) for w in inner), (inner[:2], inner[-2:])
    assert word_window(text, 3, 20)[0] == 8  # "word000x " moves to the next word


# -- pair picker ------------------------------------------------------------------------------------

def _summary(run_id: str, pair_id: str, question: str, started: str) -> TraceSummary:
    return TraceSummary(run_id=run_id, question=question, pair_id=pair_id, started_at=started)


def test_pairs_are_named_by_question_time_and_experiment_item():
    question = "What is the maximum operating temperature of the Nimbus N2 relay in a sealed enclosure?"
    labels = pair_labels([
        _summary("r2", "experiment-1-item-4-1", question, "2026-12-01T15:21:09"),
        _summary("r1", "experiment-1-item-4-1", question, "2026-12-01T15:20:01"),
        _summary("r3", "pair-0a1b2c3d4e5f", "Compare N1 and N2", "2026-12-01T14:00:00"),
    ], {1: "relay thresholds"})
    label = labels["experiment-1-item-4-1"]
    assert label.startswith("“What is the maximum operating temperature of the Nimbus N2…”")
    assert "2026-12-01 15:20" in label and "experiment #1 “relay thresholds”, item #4, gold left out" in label
    assert "experiment-1" not in label
    assert labels["pair-0a1b2c3d4e5f"] == "“Compare N1 and N2” · 2026-12-01 14:00"


# -- upload limit and table scores ----------------------------------------------------------------

def test_the_upload_limit_is_the_ingest_setting():
    assert upload_limit(64.0, server_cap_mb=200) == (64, "Up to 64 MB per file (ingest.max_file_mb).")
    mb, help_text = upload_limit(500.0, server_cap_mb=200)
    assert mb == 200 and "at most 200 MB" in help_text
    assert upload_limit(0.5, server_cap_mb=200)[0] == 1


def test_table_scores_have_three_decimals():
    assert score_3(0.43525922298431396) == 0.435 and score_3(None) is None


def test_the_comparison_table_gives_the_stop_reason_in_words():
    from docmind_core.reports.compare import compare_runs
    from docmind_core.store.traces import TraceMeta, TraceRecord

    runs = [TraceRecord(meta=TraceMeta(run_id=f"r{i}", question="q", started_at="2026-12-01T15:00:00"),
                        events=_coded_events()) for i in (1, 2)]
    row = next(r for r in compare_runs(*runs).summary_rows() if r["metric"] == "stop reason")
    assert row["A"] == row["B"] == STOP_WORDS["max_iterations"], row
