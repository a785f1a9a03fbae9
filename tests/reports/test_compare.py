"""Core view logic: timeline rows, citation chips, source cards, run comparison, what-if regrade."""

from __future__ import annotations

import json

import pytest

from docmind_ui.citation_html import citation_html, source_card_html
from docmind_core.reports.compare import compare_runs, config_differences
from docmind_core.reports.regrade import graded_input, regrade
from docmind_core.reports.timeline import RunDigest, timeline
from docmind_core.errors import ConfigError
from docmind_core.events import (
    AgenticStep,
    AnswerStarted,
    Done,
    Fallback,
    Graded,
    Reranked,
    Retrieved,
    Routed,
    RunStarted,
    ScopeDecided,
    Token,
    Understood,
    event_to_dict,
)
from docmind_core.values import (
    CitationOccurrence,
    CitationResult,
    Complexity,
    Confidence,
    GradeResult,
    Mode,
    ModelCall,
    PathDecision,
    RetrievalPlan,
    RetrievedChunk,
    Scope,
    StageScores,
    Tier,
    ToolCallRecord,
    Understanding,
    UsedSource,
    WorkerReport,
)
from docmind_core.experiments.sweep import sweep, sweep_input
from docmind_core.settings import GraderSettings, Settings


def _chunk(cid: str, text: str, rerank: float, kept: bool = True, origin: str = "kb", doc: str = "aurora.md"):
    return RetrievedChunk(chunk_id=cid, kb_id=1, doc_id=1, document=doc, text=text, origin=origin,
                          scores=StageScores(vector=0.5, keyword=3.2, fused=0.4, rerank=rerank), kept=kept,
                          cut_by=None if kept else "rerank")


SOURCES = [
    _chunk("c1", "Aurora X2 supports a battery life of 18 hours. It charges over USB-C.", 0.82),
    _chunk("c2", "Nimbus uses a 12 MP camera with optical stabilisation.", 0.55, doc="nimbus.md"),
]


def sample_run(run_id: str = "r1", mode: str = "RULE_PLANNER", sources=SOURCES, tier: Tier = Tier.HIGH,
               answer: str = "Aurora X2 supports a battery life of 18 hours [1]. See also [9].",
               timings=None, prompt_tokens: int = 0) -> list:
    """A synthetic but well-formed event stream, shaped like what Engine.ask yields."""
    cut = _chunk("c3", "Unrelated warranty text.", 0.12, kept=False)
    web = _chunk("w1", "A web page about Aurora.", 0.40, kept=False, origin="web", doc="Aurora review")
    is_agentic = mode == "AGENTIC"
    calls = [ToolCallRecord(name="search_docs", args={"query": "Aurora battery"}, result_count=5, new_chunks=5,
                            latency_ms=12.0),
             ToolCallRecord(name="keyword_search", args={"query": "X2"}, result_count=3, new_chunks=1,
                            duplicate_chunks=2, latency_ms=4.0)]
    grade = GradeResult(tier=tier, top_score=sources[0].scores.rerank if sources else 0.0, lex_coverage=0.75,
                        kb_entity_weak=False, web_compensation_needed=False, reason="top score >= high threshold",
                        gray_zone_mode="coverage_first")
    events = [
        RunStarted(run_id=run_id, question="How long does the Aurora X2 battery last?", kb_ids=[1],
                   requested_mode="auto", backends=[], t_ms=0.0),
        ScopeDecided(scope=Scope.KNOWLEDGE_QUERY, confidence=0.9, via="model", t_ms=1.0),
        Understood(understanding=Understanding(rewritten_query="Aurora X2 battery life",
                                               complexity=Complexity.COMPLEX if is_agentic else Complexity.SIMPLE),
                   via="offline", duration_ms=2.0, t_ms=3.0),
        Routed(decision=PathDecision(mode=Mode(mode), reason=mode.lower()),
               plan=None if is_agentic else RetrievalPlan(tools=["doc_search", "keyword_search"],
                                                          reasons={"doc_search": "always"}), t_ms=4.0),
    ]
    if is_agentic:
        events.append(AgenticStep(iteration=1, max_iterations=4, tool_calls=calls, new_chunks=6, duplicate_chunks=2,
                                  duration_ms=20.0, t_ms=25.0))
        events.append(Retrieved(mode="AGENTIC", tool_calls=calls, candidate_count=4, kb_chunks=3, web_chunks=1,
                                stop_reason="model_done", rounds=1, duration_ms=22.0, t_ms=26.0))
    else:
        events.append(Retrieved(mode="RULE_PLANNER", workers=[WorkerReport(name="doc_search", status="ok", hits=5,
                                                                       latency_ms=11.0),
                                                          WorkerReport(name="keyword_search", status="timeout",
                                                                       message="slow")],
                                candidate_count=4, kb_chunks=3, duration_ms=15.0, t_ms=20.0))
    events += [
        Fallback(stage="keyword_search", reason="worker timed out", to="doc_search only", t_ms=20.5),
        Reranked(candidates=[*sources, cut, web], reranker="offline", duration_ms=5.0, t_ms=30.0),
        Graded(grade=grade, t_ms=31.0),
        AnswerStarted(prompt="knowledge_qa", sources=list(sources), t_ms=32.0),
        Token(text=answer[:20], t_ms=33.0),
        Token(text=answer[20:], t_ms=35.0),
        Done(run_id=run_id, answer=answer, mode=mode, route_reason=mode.lower(), sources=list(sources),
             citations=CitationResult(used_sources=[UsedSource(index=1, chunk_id="c1", document="aurora.md")],
                                      occurrences=[CitationOccurrence(index=1, char_start=10, char_end=13,
                                                                      valid=True)],
                                      coverage=0.5, invalid_refs=1, substantive_sentences=2, cited_sentences=1),
             confidence=Confidence(score=0.41, band="MEDIUM"), grade=grade,
             stop_reason="model_done" if is_agentic else "",
             timings_ms=timings or {"understanding": 2.0, "retrieval": 15.0, "total": 40.0},
             model_calls=[ModelCall(purpose="answer", model="offline", prompt_tokens=prompt_tokens,
                                    completion_tokens=10)],
             t_ms=40.0),
    ]
    return events


def test_timeline_has_one_row_per_step_and_collapses_tokens():
    rows = timeline(sample_run())
    kinds = [r.kind for r in rows]
    assert kinds == ["run", "scope", "understanding", "routing", "retrieval", "fallback", "rerank", "grader",
                     "start", "token", "done"]
    routing = rows[3]
    assert routing.title == "Route → RULE_PLANNER" and "doc_search" in routing.fields["planned tools"]
    retrieval = rows[4]
    assert retrieval.status == "warn"  # a worker timed out
    assert {i["worker"] for i in retrieval.items} == {"doc_search", "keyword_search"}
    assert rows[5].status == "warn" and rows[7].title == "Evidence grade HIGH"
    assert rows[9].fields["pieces"] == "2" and rows[9].duration_ms == 2.0


def test_timeline_of_stored_dicts_matches_live_events():
    live = sample_run(mode="AGENTIC")
    stored = [json.loads(json.dumps(event_to_dict(e))) for e in live]
    assert timeline(stored) == timeline(live)
    agentic = [r for r in timeline(stored) if r.kind == "agentic_step"][0]
    assert agentic.items[0]["tool"] == "search_docs" and agentic.items[0]["args"] == '{"query": "Aurora battery"}'
    retrieval = [r for r in timeline(stored) if r.kind == "retrieval"][0]
    assert retrieval.items == [] and retrieval.fields["tool calls"] == "2 (see rounds)"  # not listed twice


def test_digest_reads_the_facts_of_a_run():
    d = RunDigest.from_events(sample_run(mode="AGENTIC"))
    assert d.run_id == "r1" and d.tier == "HIGH" and d.mode == "AGENTIC" and d.stop_reason == "model_done"
    assert d.query == "Aurora X2 battery life" and len(d.candidates) == 4 and len(d.sources) == 2
    assert [c.name for c in d.tool_calls] == ["search_docs", "keyword_search"]
    rule_planner = RunDigest.from_events(sample_run())
    assert [c.name for c in rule_planner.tool_calls] == ["doc_search", "keyword_search"]  # workers seen as calls


def test_citation_chips_link_valid_refs_and_mark_invalid_ones():
    out = citation_html("Fact one [1]. Both [1,2] and [1][2]. Bad [9].", None, SOURCES, run_id="r1")
    assert out.count('class="dm-cite"') == 5
    assert '<a class="dm-cite" href="#src-r1-2" data-n="2">[2]</a>' in out
    assert 'dm-cite-invalid" data-n="9"' in out and 'href="#src-r1-9"' not in out


def test_citation_html_escapes_model_output():
    out = citation_html('<script>alert(1)</script><img src=x onerror="x()"> ok [1]', None, SOURCES, "r1")
    assert "<script" not in out and "<img" not in out
    assert "&lt;script&gt;" in out and "onerror=&quot;x()&quot;" in out
    assert 'href="#src-r1-1"' in out


def test_anchor_ids_are_safe_even_for_odd_run_ids():
    out = citation_html("x [1]", None, SOURCES, run_id='a"b<c>')
    assert 'href="#src-abc-1"' in out


def test_source_card_highlights_the_cited_span_and_escapes_text():
    card = source_card_html(1, SOURCES[0], "r1", answer="Aurora X2 supports a battery life of 18 hours [1].")
    assert 'id="src-r1-1"' in card and "dm-cited" in card
    assert '<mark class="dm-span">Aurora X2 supports a battery life of 18 hours</mark>' in card
    assert "rerank</b> 0.820" in card and "vector</b> 0.500" in card
    evil = _chunk("e", 'Hello <script>alert("x")</script> <img src=x onerror=alert(1)>', 0.5,
                  doc="<b>evil</b>.md")
    card = source_card_html(2, evil, "r1", answer="Hello there [2].")
    assert "<script" not in card and "<img" not in card and "<b>evil" not in card
    assert "&lt;script&gt;" in card and "&lt;b&gt;evil&lt;/b&gt;.md" in card


def test_source_card_highlights_by_term_overlap_when_not_quoted():
    chunk = _chunk("z", "电池续航为18小时。相机为1200万像素。", 0.7, doc="极光.md")
    card = source_card_html(1, chunk, "r2", answer="极光X2的电池续航是18小时[1]。")
    assert '<mark class="dm-span">电池续航为18小时。</mark>' in card


def test_web_source_card_shows_only_http_links():
    web = _chunk("w", "text", 0.3, origin="web", doc="Page").model_copy(update={"url": "javascript:alert(1)"})
    card = source_card_html(1, web, "r")
    assert "javascript:" not in card and "dm-origin-web" in card


def test_compare_runs_aligns_steps_and_measures_differences():
    a = {"meta": {"run_id": "ra"}, "config": Settings().flat(),
         "events": sample_run("ra", "RULE_PLANNER", timings={"retrieval": 15.0, "total": 40.0})}
    b_sources = [SOURCES[0], _chunk("c9", "Other", 0.3)]
    b_config = Settings().with_overrides({"grader.high_threshold": 0.7}).model_dump()  # nested form
    b = {"meta": {"run_id": "rb"}, "config": b_config,
         "events": sample_run("rb", "AGENTIC", sources=b_sources, tier=Tier.AMBIGUOUS,
                              timings={"agentic": 22.0, "total": 55.0}, prompt_tokens=100)}
    cmp = compare_runs(a, b)
    assert cmp.a.mode == "RULE_PLANNER" and cmp.b.mode == "AGENTIC"
    assert cmp.a.tier == "HIGH" and cmp.b.tier == "AMBIGUOUS"
    assert cmp.chunk_overlap.jaccard == pytest.approx(1 / 3)
    assert cmp.chunk_overlap.shared == ["c1"] and cmp.chunk_overlap.only_b == ["c9"]
    # the agentic round has no counterpart in the rule run: a gap on side A
    agentic = [s for s in cmp.steps if s.kind == "agentic_step"]
    assert len(agentic) == 1 and agentic[0].a is None and agentic[0].b is not None
    assert all(s.a is not None and s.b is not None for s in cmp.steps if s.kind in ("run", "rerank", "done"))
    assert {lat.stage: (lat.a_ms, lat.b_ms) for lat in cmp.latency} == {
        "retrieval": (15.0, None), "total": (40.0, 55.0), "agentic": (None, 22.0)}
    assert [(d.key, d.a, d.b) for d in cmp.config_differences] == [("grader.high_threshold", 0.9, 0.7)]
    assert cmp.scores_a.top == pytest.approx(0.82) and cmp.scores_a.web == 1 and cmp.scores_a.kept == 2
    assert cmp.b.tokens["prompt"] == 100 and len(cmp.b.tool_calls) == 2
    exported = json.loads(cmp.to_json())
    assert exported["type"] == "docmind.comparison" and exported["chunk_overlap"]["shared"] == ["c1"]
    metrics = {r["metric"] for r in cmp.summary_rows()}
    assert metrics >= {"verdict", "evidence grade", "chunk overlap (Jaccard)"} and not metrics & {"band", "tier"}


def test_config_differences_accepts_json_text():
    assert config_differences('{"grader": {"low_threshold": 0.2}}', {"grader.low_threshold": 0.25})[0].key == \
        "grader.low_threshold"


def test_regrade_refuses_low_above_high():
    pytest.importorskip("docmind_core.answer.grade")
    with pytest.raises(ConfigError, match="low_threshold"):
        regrade([{"events": sample_run()}], {"low_threshold": 0.9, "high_threshold": 0.5}, live=GraderSettings())


def test_regrade_changes_tier_with_thresholds_without_model_calls():
    pytest.importorskip("docmind_core.answer.grade")
    record = {"meta": {"run_id": "r1"}, "config": Settings().flat(), "events": sample_run()}
    same = regrade([record], {}, live=GraderSettings())
    assert same[0].old_tier == same[0].new_tier == "HIGH" and not same[0].changed
    assert same[0].top_score == pytest.approx(0.82)
    stricter = regrade([record], {"grader.high_threshold": 0.95, "grader.low_threshold": 0.9}, live=GraderSettings())
    assert stricter[0].new_tier in ("LOW", "AMBIGUOUS") and stricter[0].changed  # rare-entity hit may lift LOW
    no_retrieval = {"events": [e for e in sample_run() if e.kind not in ("rerank", "grader")]}
    assert regrade([no_retrieval], {}, live=GraderSettings())[0].new_tier == ""


def test_long_chunk_card_shows_a_window_around_the_cited_span_and_the_whole_text_on_demand():
    filler = "Unrelated filler sentence about other things. " * 40
    text = filler + "The Nimbus N2 draws at most 45 W at full load. " + filler
    card = source_card_html(1, _chunk("long", text, 0.9), "r", answer="The Nimbus N2 draws at most 45 W at full load [1].")
    excerpt = card.split('<details')[0]
    assert '<mark class="dm-span">The Nimbus N2 draws at most 45 W at full load</mark>' in excerpt
    assert excerpt.count("Unrelated filler") < 20 and "… " in excerpt
    assert "<details class=\"dm-full\"><summary>Whole chunk" in card


# -- the grader settings a stored run is regraded with: one rule for the what-if regrade and the sweep ----------

BLEND_STRICT = GraderSettings(gray_zone_mode="blend", blend_high=0.95)  # sample_run blends to 0.94: AMBIGUOUS


def _recorded(drop: tuple[str, ...] = (), **extra) -> dict:
    """A flat config snapshot as a run records it, less the ``drop`` keys, plus ``extra`` dotted keys."""
    flat = {k: v for k, v in Settings().flat().items() if k not in drop}
    return {**flat, **{k.replace("__", "."): v for k, v in extra.items()}}


def test_regrade_ignores_a_recorded_key_that_is_no_longer_a_grader_setting():
    old = {"meta": {"run_id": "old"}, "events": sample_run("old"),
           "config": _recorded(grader__since_removed_key=0.5)}
    (row,) = regrade([old], {"gray_zone_mode": "blend"}, live=GraderSettings())
    assert (row.old_tier, row.new_tier) == ("HIGH", "HIGH") and row.reason.startswith("gray_zone_blend")


def test_regrade_takes_a_key_the_run_did_not_record_from_the_live_settings_not_the_defaults():
    record = {"meta": {"run_id": "r1"}, "events": sample_run(), "config": _recorded(drop=("grader.blend_high",))}
    (row,) = regrade([record], {"gray_zone_mode": "blend"}, live=BLEND_STRICT)
    assert row.new_tier == "AMBIGUOUS" and row.changed  # the default blend_high (0.75) would keep it HIGH
    # a key the run did record keeps its recorded value over the live one
    recorded = {**record, "config": _recorded()}
    assert regrade([recorded], {"gray_zone_mode": "blend"}, live=BLEND_STRICT)[0].new_tier == "HIGH"


def test_regrade_reports_a_run_whose_recording_does_not_validate_and_regrades_the_others():
    bad = {"meta": {"run_id": "bad"}, "events": sample_run("bad"),
           "config": _recorded(grader__blend_low=0.8, grader__blend_high=0.5)}
    good = {"meta": {"run_id": "good"}, "events": sample_run("good"), "config": _recorded()}
    rows = regrade([bad, good], {"high_threshold": 0.95, "low_threshold": 0.9}, live=GraderSettings())
    assert [r.run_id for r in rows] == ["bad", "good"]
    assert rows[0].new_tier == "" and not rows[0].changed and rows[0].old_tier == "HIGH"
    assert "recorded grader settings" in rows[0].reason and "blend_low" in rows[0].reason
    assert rows[1].new_tier in ("LOW", "AMBIGUOUS") and rows[1].changed


def test_regrade_refuses_the_users_own_invalid_overrides_up_front_against_the_live_settings():
    record = {"meta": {"run_id": "r1"}, "events": sample_run(), "config": _recorded()}
    with pytest.raises(ConfigError, match="coverage_low"):  # valid over the defaults (0.8), not over the live 0.4
        regrade([record], {"coverage_low": 0.5}, live=GraderSettings(coverage_high=0.4, coverage_low=0.1))
    with pytest.raises(ConfigError, match="grader.no_such_key"):
        regrade([record], {"no_such_key": 1}, live=GraderSettings())


def test_the_sweep_and_the_regrade_grade_a_stored_run_with_the_same_settings():
    records = [
        {"meta": {"run_id": "old"}, "events": sample_run("old"), "config": _recorded(grader__since_removed_key=1)},
        {"meta": {"run_id": "unrecorded"}, "events": sample_run("unrecorded"),
         "config": _recorded(drop=("grader.blend_high",))},
        {"meta": {"run_id": "recorded"}, "events": sample_run("recorded"), "config": _recorded()},
        {"meta": {"run_id": "bad"}, "events": sample_run("bad"),
         "config": _recorded(grader__blend_low=0.8, grader__blend_high=0.5)},
    ]
    for high, low in ((0.95, 0.5), (0.7, 0.3)):
        swept = {"high_threshold": high, "low_threshold": low, "gray_zone_mode": "blend"}
        rows = regrade(records, swept, live=BLEND_STRICT)
        for record, row in zip(records, rows):
            alone = sweep([sweep_input(record, "v", positive=True, unanswerable=False)], BLEND_STRICT,
                          highs=[high], lows=[low], modes=["blend"])
            if row.new_tier == "":
                assert alone.skipped == 1 and alone.runs == 0, record["meta"]["run_id"]
            else:
                assert alone.point(high, low, "blend").high_count == (row.new_tier == "HIGH"), (high, row)
        assert [r.new_tier == "" for r in rows] == [False, False, False, True]


def _selected_doc_run(run_id: str = "sel") -> list:
    """A SELECTED_DOC run: the user picked the documents; they are read, scored and HIGH by that choice."""
    events = [e for e in sample_run(run_id) if e.kind not in ("retrieval", "fallback")]
    at = next(i for i, e in enumerate(events) if e.kind == "rerank")
    events.insert(at, Retrieved(mode="SELECTED_DOC", candidate_count=2, kb_chunks=2, t_ms=20.0))
    return events


def test_a_selected_document_run_is_not_regraded_by_thresholds():
    """Its tier is the user's choice of documents, not the grader's: a what-if threshold must not turn it into a
    grader tier (stricter values made it AMBIGUOUS or LOW before), and the sweep leaves it out the same way."""
    record = {"meta": {"run_id": "sel"}, "config": Settings().flat(), "events": _selected_doc_run()}
    (row,) = regrade([record], {"grader.high_threshold": 0.95, "grader.low_threshold": 0.9}, live=GraderSettings())
    assert (row.old_tier, row.new_tier, row.changed) == ("HIGH", "", False)
    assert "selected" in row.reason
    assert graded_input(record)[1] is None


def test_a_question_asked_of_selected_documents_is_regraded():
    """A question asked of the selected documents is graded by thresholds, so a what-if regrades it."""
    from docmind_core.answer.selected_doc import QUESTION_GRADED
    from docmind_core.events import Done, Graded

    def graded(event):
        if isinstance(event, (Graded, Done)) and event.grade is not None:
            grade = event.grade.model_copy(update={"reason": f"{QUESTION_GRADED}: rerank_high"})
            return event.model_copy(update={"grade": grade})
        return event

    record = {"meta": {"run_id": "selq"}, "config": Settings().flat(),
              "events": [graded(e) for e in _selected_doc_run("selq")]}
    (row,) = regrade([record], {"grader.high_threshold": 0.999, "grader.low_threshold": 0.998},
                     live=GraderSettings())
    assert row.old_tier == "HIGH" and row.new_tier in ("AMBIGUOUS", "LOW"), row
    assert graded_input(record)[1] is not None
