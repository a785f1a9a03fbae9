"""Streamlit renderers shared by the chat page (live runs) and the Traces page (replays).

Both pages call :func:`render_run` with a :class:`RunDigest` built from the
same event list, so a replay looks exactly like the answer did in the chat.
"""

from __future__ import annotations

from typing import Any, Callable

import streamlit as st

from docmind_core.errors import ConfigError
from docmind_core.reports.compare import RunComparison, compare_runs
from docmind_core.reports.pair_verdict import NOT_RECORDED
from docmind_ui.citation_html import anchor_id, citation_html, source_card_html
from docmind_ui.page_view import page_picker
from docmind_core.ingest.page_image import PageImage
from docmind_core.values import IndexGap, PendingIngest, RetrievedChunk
from docmind_core.text.visible import escape_markdown, visible_rows
from docmind_core.settings import Settings, SettingsSnapshot
from docmind_core.reports.timeline import RunDigest, problem_lines, timeline
from docmind_ui.charts import distribution_overlay, jump_to_anchor, score_chart
from docmind_ui.html_views import (
    answer_diff_html, claims_html, evidence_grade_html, glance_html, pair_verdict_html, rounds_html, route_html,
    timeline_html, verdict_html,
)

_CHART_CONFIG = {"displayModeBar": False, "responsive": True}
# widths for a tool-call table (docmind_core.reports.timeline.tool_call_item): the query arguments get the room
TOOL_CALL_COLUMNS = {
    "run": st.column_config.TextColumn(width="small"), "tool": st.column_config.TextColumn(width="small"),
    "args": st.column_config.TextColumn(width="large"), "results": st.column_config.NumberColumn(width="small"),
    "new": st.column_config.NumberColumn(width="small"), "duplicates": st.column_config.NumberColumn(width="small"),
    "latency_ms": st.column_config.NumberColumn("ms", width="small"),
    "status": st.column_config.TextColumn(width="small"), "message": st.column_config.TextColumn(width="medium"),
}


def thresholds(config: Any = None) -> tuple[float, float]:
    """(high, low) grader thresholds of a run's config snapshot (read by ``SettingsSnapshot``), the defaults for
    what it did not record, or for all when its grader values are not settings (an imported file's)."""
    default = Settings().grader
    try:
        grader = SettingsSnapshot.read(config).grader().over(default)
    except ConfigError:  # the chart's marks fall back to the defaults; the Traces page says what was refused
        grader = default
    return grader.high_threshold, grader.low_threshold


def render_run(digest: RunDigest, config: Any = None, key: str = "",
               page_image: Callable[[RetrievedChunk, int, str], PageImage] | None = None) -> None:
    """One answer: its verdict, DocMind's notices, the answer with citation chips, the evidence grade, glance line,
    timeline, score chart, source cards (and a cited PDF page as an image)."""
    run_key = key or digest.run_id or "run"
    web_compensated = bool(digest.done and digest.done.web_compensated) or bool(digest.web and digest.web.ran)
    with st.container(key=f"run-{run_key}"):
        st.markdown(verdict_html(digest.verdict) + claims_html(digest), unsafe_allow_html=True)
        for notice in digest.notices:  # DocMind's own words: beside the answer, never in it
            if notice.code == "ingest_pending" and digest.pending:
                continue  # said below per KB, with its counts, as a warning
            st.info(escape_markdown(notice.text), icon=":material/info:")
        citations = digest.done.citations if digest.done else None
        st.markdown(citation_html(digest.answer, citations, digest.sources, run_id=run_key), unsafe_allow_html=True)
        grade = evidence_grade_html(digest.grade, web_compensated, digest.cancelled)
        if grade:
            st.markdown(grade, unsafe_allow_html=True)
        for line in problem_lines(digest):  # a stop the user asked for is said once, not as the steps it cut
            (st.info if digest.cancelled else st.warning)(escape_markdown(line))
        for gap in digest.index_gaps:  # a KB searched with missing vectors: its vector side saw only part of it
            st.warning(escape_markdown(IndexGap(kb_id=gap.kb_id, missing_vectors=gap.missing_vectors,
                                                total=gap.total).message()))
        for pending in digest.pending:  # a KB still being ingested: its pending documents were not searched
            st.warning(escape_markdown(PendingIngest(kb_id=pending.kb_id, kb_name=pending.kb_name,
                                                     pending_documents=pending.pending_documents,
                                                     searched_documents=pending.searched_documents,
                                                     embedding_chunks=pending.embedding_chunks).message()))
        st.markdown(glance_html(digest), unsafe_allow_html=True)
        route = route_html(digest)
        if route:
            st.markdown(route, unsafe_allow_html=True)
        rounds = rounds_html(digest)
        if rounds:  # each agentic round's calls, readable without opening the timeline
            st.markdown(rounds, unsafe_allow_html=True)
        with st.expander("Timeline — scope, understanding, routing, tools, grading", expanded=False):
            st.markdown(timeline_html(timeline(digest.events)), unsafe_allow_html=True)
        if digest.candidates:
            high, low = thresholds(config)
            # a bar of a source jumps to its card below (the same helper as hit testing); cut candidates have none
            anchors = {s.chunk_id: anchor_id(run_key, n) for n, s in enumerate(digest.sources, start=1)}
            chart = st.plotly_chart(score_chart(digest.candidates, high, low, anchors=anchors),
                                    key=f"chart-{run_key}", config=_CHART_CONFIG, on_select="rerun",
                                    selection_mode="points")
            jump_to_anchor(chart, state_key=f"dm_jumped-{run_key}")
        if digest.sources:
            checks = digest.done.citations.claims if digest.done else []
            cards = "".join(source_card_html(i, s, run_key, digest.answer, checks=checks)
                            for i, s in enumerate(digest.sources, start=1))
            st.markdown(f"**Sources** ({len(digest.sources)})")
            st.markdown(f'<div class="dm-sources">{cards}</div>', unsafe_allow_html=True)
            if page_image is not None:
                page_picker(digest.sources, digest.answer, run_key, page_image)


def render_comparison(cmp: RunComparison, key: str, config: Any = None, label_a: str = "",
                      label_b: str = "") -> None:
    """The step-aligned comparison of two runs: which did better first.  ``label_a``/``label_b`` name the sides
    when the caller knows better names (an experiment's variants); else the comparison's own labels."""
    import pandas as pd  # here: the Chat page's first draw shows no comparison and should not wait for pandas

    label_a, label_b = label_a or cmp.label_a, label_b or cmp.label_b
    with st.container(key=f"cmp-{key}"):
        st.markdown(f"**Comparison** — A: {escape_markdown(label_a)} · B: {escape_markdown(label_b)}")
        if cmp.verdict is not None:
            st.markdown(pair_verdict_html(cmp.verdict), unsafe_allow_html=True)
        st.dataframe(pd.DataFrame(cmp.summary_rows()), hide_index=True, key=f"cmp-sum-{key}")
        overlap = cmp.chunk_overlap
        st.caption(f"Chunk overlap (Jaccard of source chunk ids): {overlap.jaccard:.2f} — shared "
                   f"{len(overlap.shared)}, only A {len(overlap.only_a)}, only B {len(overlap.only_b)}")
        tabs = st.tabs(["Answer diff", "Sources diff", "Timeline", "Tool calls", "Scores", "Latency",
                        "Config differences"])
        with tabs[0]:
            diff = cmp.answer_diff
            st.caption(DIFF_CAPTIONS[diff.layout].format(similarity=diff.similarity))
            st.markdown(answer_diff_html(diff, label_a, label_b), unsafe_allow_html=True)
        with tabs[1]:
            st.dataframe(pd.DataFrame(visible_rows([{
                "side": r.side, "document": r.document, "A [n]": r.a_index, "B [n]": r.b_index,
                "cited by A": r.cited_a, "cited by B": r.cited_b, "text": r.preview} for r in cmp.source_diff]),
                columns=["side", "document", "A [n]", "B [n]", "cited by A", "cited by B", "text"]),
                hide_index=True, key=f"cmp-src-{key}", width="stretch", column_config={
                    "side": st.column_config.TextColumn(width="small"),
                    "A [n]": st.column_config.NumberColumn(width="small"),
                    "B [n]": st.column_config.NumberColumn(width="small"),
                    "cited by A": st.column_config.CheckboxColumn(width="small"),
                    "cited by B": st.column_config.CheckboxColumn(width="small"),
                    "text": st.column_config.TextColumn(width="large")})
        with tabs[2]:
            st.dataframe(pd.DataFrame([{
                "step": s.kind,
                "A": s.a.title if s.a else "—", "A t (ms)": _ms(s.a.t_ms if s.a else None, "—"),
                "B": s.b.title if s.b else "—", "B t (ms)": _ms(s.b.t_ms if s.b else None, "—"),
            } for s in cmp.steps]), hide_index=True, key=f"cmp-steps-{key}")
        with tabs[3]:
            # one full-width table (a "run" column says whose call it is): two half-width ones cut columns off
            calls = [{"run": "A", **c} for c in cmp.a.tool_calls] + [{"run": "B", **c} for c in cmp.b.tool_calls]
            st.dataframe(pd.DataFrame(visible_rows(calls)), hide_index=True, key=f"cmp-tools-{key}", width="stretch",
                         column_config=TOOL_CALL_COLUMNS)
        with tabs[4]:
            high, low = thresholds(config)
            st.plotly_chart(distribution_overlay(cmp.scores_a, cmp.scores_b, f"A {label_a}", f"B {label_b}",
                                                 high, low), key=f"cmp-chart-{key}", config=_CHART_CONFIG)
        with tabs[5]:
            st.dataframe(pd.DataFrame([{"stage": s.stage, "A (ms)": _ms(s.a_ms), "B (ms)": _ms(s.b_ms)}
                                       for s in cmp.latency]),
                         hide_index=True, key=f"cmp-lat-{key}")
        with tabs[6]:
            if cmp.config_differences:
                st.dataframe(pd.DataFrame([{"key": d.key, "A": str(d.a), "B": str(d.b)}
                                           for d in cmp.config_differences]), hide_index=True,
                             key=f"cmp-cfg-{key}")
            else:
                st.caption("Both runs used the same configuration.")


def render_pair(events_a: list, events_b: list, config_a: Any, config_b: Any, key: str) -> RunComparison:
    """Two runs of one question in two columns, then their comparison."""
    digest_a, digest_b = RunDigest.from_events(events_a), RunDigest.from_events(events_b)
    cmp = compare_runs({"events": digest_a.events, "config": config_a},
                       {"events": digest_b.events, "config": config_b})
    left, right = st.columns(2, gap="medium")
    with left:
        st.markdown(f"**A · {escape_markdown(cmp.label_a)}**")
        render_run(digest_a, config_a)
    with right:
        st.markdown(f"**B · {escape_markdown(cmp.label_b)}**")
        render_run(digest_b, config_b)
    render_comparison(cmp, key, config_a)
    return cmp


DIFF_CAPTIONS = {
    "same": "Identical answers (citation numbers aside).",
    "sentences": "Similarity {similarity:.2f} · sentence by sentence, A left and B right · struck through: only in "
                 "A · green: only in B (citation numbers left out: each run numbers its own sources)",
    "columns": "Similarity {similarity:.2f}: the answers share little, so they are shown side by side rather than "
               "diffed (citation numbers left out)",
}


def _ms(value: float | None, missing: str = NOT_RECORDED) -> str:
    return missing if value is None else f"{value:,.0f}"
