"""Traces: find runs, replay one, compare two, re-grade with other thresholds, export and import."""

from __future__ import annotations

from datetime import date, timedelta

import pandas as pd
import streamlit as st

from docmind_core.reports.compare import compare_runs
from docmind_core.reports.regrade import regrade
from docmind_core.errors import DocMindError
from docmind_core.values import NO_RETRIEVAL_MODE, Mode, StopReason, Tier
from docmind_core.reports.pair_labels import pair_labels
from docmind_core.text.reasons import describe_reason
from docmind_core.text.visible import escape_markdown, visible_rows, visible_text
from docmind_core.settings import GRAY_ZONE_MODES, GraderPatch, SettingsSnapshot
from docmind_core.reports.timeline import RunDigest
from docmind_ui.charts import threshold_digits
from docmind_ui.feedback_view import answer_feedback
from docmind_ui.run_view import render_comparison, render_run
from docmind_ui.session import ensure_frame, workbench

ensure_frame()
bench = workbench()
st.title("Traces")

# -- filters -----------------------------------------------------------------
kb_names = {kb.id: kb.name for kb in bench.list_kbs()}
with st.container(border=True):
    c1, c2, c3, c4, c5 = st.columns([1.2, 1, 1, 1, 1])
    since = c1.date_input("Since", value=date.today() - timedelta(days=30), key="dm_tr_since")
    modes = c2.multiselect("Mode", [*(m.value for m in Mode), NO_RETRIEVAL_MODE], key="dm_tr_mode")
    tiers = c3.multiselect("Evidence grade", [t.value for t in Tier], key="dm_tr_tier",
                           help="The CRAG grade of what retrieval found (HIGH / AMBIGUOUS / LOW); the answer's "
                                "verdict is shown when a run is replayed")
    stop = c4.selectbox("Stop reason", [None, *(r.value for r in StopReason)], key="dm_tr_stop",
                        format_func=lambda r: "any" if r is None else describe_reason(r))
    kb_filter = c5.selectbox("Knowledge base", [None, *kb_names], key="dm_tr_kb",
                             format_func=lambda k: "any" if k is None else visible_text(kb_names.get(k, str(k))))

summaries = bench.list_traces(kb_id=kb_filter, since=since.isoformat() if since else None, mode=modes, tier=tiers,
                              stop_reason=stop or None, limit=500)
if not summaries:
    st.info("No run matches. Ask something in Chat, or import a trace below.")

table = pd.DataFrame(visible_rows([{
    "started": s.started_at[:19].replace("T", " "), "question": s.question, "mode": s.mode,
    "requested": s.requested_mode, "evidence grade": s.tier, "stop reason": describe_reason(s.stop_reason),
    "KBs": ", ".join(kb_names.get(k, str(k)) for k in s.kb_ids), "ms": round(s.duration_ms),
    "pair": s.pair_id or "", "label": s.label, "run id": s.run_id} for s in summaries]))
# the label comes right after the time: imported copies of a run differ only there, so it must stay on screen
selection = st.dataframe(
    table, hide_index=True, on_select="rerun", selection_mode="multi-row", key="dm_tr_table", width="stretch",
    column_order=["started", "label", "mode", "evidence grade", "question", "requested", "stop reason", "KBs", "ms", "pair",
                  "run id"],
    # wide enough for the date and the time: a small column cut the time off
    column_config={"started": st.column_config.TextColumn("started (UTC)", width="medium"),
                   "label": st.column_config.TextColumn(width="small"),
                   "question": st.column_config.TextColumn(width="large"),
                   "ms": st.column_config.NumberColumn(width="small"),
                   "run id": st.column_config.TextColumn(width="small")})
picked_rows = list(selection.selection.rows) if summaries else []
picked = [summaries[i].run_id for i in picked_rows if i < len(summaries)]

pair_ids = list(dict.fromkeys(s.pair_id for s in summaries if s.pair_id))  # the newest first
if pair_ids:
    experiment_names = {e.id: e.name for e in bench.list_experiments()}
    labels = pair_labels(summaries, experiment_names)
    pair = st.selectbox("…or pick a side-by-side pair", [None, *pair_ids], key="dm_tr_pair",
                        format_func=lambda p: "—" if p is None else labels.get(p, p))
    if pair:  # the listed runs of the pair in the order they started (the list is newest first)
        picked = [s.run_id for s in reversed(summaries) if s.pair_id == pair][:2]
st.caption("Select one run to replay it, two to compare them. Selected: "
           + escape_markdown(", ".join(p[:8] for p in picked) or "none"))


def readable_traces(run_ids: list[str]) -> list:
    """The runs in one batched read; each one this user may not read (any more) is named in an error."""
    if not run_ids:
        return []
    batch = bench.get_traces(run_ids)
    for refusal in batch.refused:
        st.error(escape_markdown(refusal))
    return batch.records


records = readable_traces(picked)

# -- replay / compare -----------------------------------------------------------
if len(records) == 1:
    record = records[0]
    st.subheader("Replay")
    st.markdown(f"**Question:** {escape_markdown(record.meta.question)}",
                help=f"run {escape_markdown(record.meta.run_id)}")
    replayed = RunDigest.from_events(record.events)
    render_run(replayed, record.config)
    for note in SettingsSnapshot.read(record.config).notes():
        st.caption(escape_markdown(note))
    answer_feedback(bench, replayed)
elif len(records) >= 2:
    a, b = records[0], records[1]
    st.subheader("Comparison")
    cmp = compare_runs(a, b)
    left, right = st.columns(2)
    with left:
        st.markdown(f"**A · {escape_markdown(cmp.label_a)}** — {escape_markdown(a.meta.question)}")
        render_run(RunDigest.from_events(a.events), a.config)
    with right:
        st.markdown(f"**B · {escape_markdown(cmp.label_b)}** — {escape_markdown(b.meta.question)}")
        render_run(RunDigest.from_events(b.events), b.config)
    render_comparison(cmp, key=f"{a.meta.run_id}-{b.meta.run_id}", config=a.config)
    st.download_button("Comparison metrics as JSON", cmp.to_json(), file_name="docmind-comparison-metrics.json",
                       mime="application/json", icon=":material/analytics:")

# -- what-if regrade ---------------------------------------------------------------
st.subheader("What-if regrade")
st.caption("Recompute the evidence grade (CRAG tier) of the selected runs (or every listed run) from their recorded rerank scores "
           "with other grader settings. No model is called.")
g = bench.settings().grader  # what-if starts from the live values this user's runs use
with st.form("dm_regrade"):
    c1, c2, c3, c4, c5 = st.columns(5)
    # as many decimals as the live values have: a live 0.995 shown as 0.99 would be regraded as 0.99
    digits = f"%.{threshold_digits(g.high_threshold, g.low_threshold, g.coverage_high, g.coverage_low)}f"
    high = c1.number_input("high_threshold", 0.0, 1.0, float(g.high_threshold), 0.01, key="dm_rg_high",
                           format=digits)
    low = c2.number_input("low_threshold", 0.0, 1.0, float(g.low_threshold), 0.01, key="dm_rg_low", format=digits)
    cov_high = c3.number_input("coverage_high", 0.0, 1.0, float(g.coverage_high), 0.05, key="dm_rg_ch",
                               format=digits)
    cov_low = c4.number_input("coverage_low", 0.0, 1.0, float(g.coverage_low), 0.05, key="dm_rg_cl",
                              format=digits)
    gray = c5.selectbox("gray_zone_mode", GRAY_ZONE_MODES, index=GRAY_ZONE_MODES.index(g.gray_zone_mode),
                        key="dm_rg_mode")
    regrade_clicked = st.form_submit_button("Regrade", icon=":material/calculate:")
if regrade_clicked:
    targets = records or readable_traces([s.run_id for s in summaries[:200]])
    try:
        rows = regrade(targets, GraderPatch(high_threshold=high, low_threshold=low, coverage_high=cov_high,
                                            coverage_low=cov_low, gray_zone_mode=gray), live=g)
    except DocMindError as exc:
        st.error(escape_markdown(exc))
    else:
        changed = sum(1 for r in rows if r.changed)
        st.markdown(f"**{changed} of {len(rows)} run(s) change evidence grade.**")
        frame = pd.DataFrame(visible_rows([{"changed": "⚠ yes" if r.changed else "", "question": r.question,
                                            "mode": r.mode, "recorded grade": r.old_tier,
                                            "new grade": r.new_tier or "—", "top score": r.top_score,
                                            "lexical coverage": r.lex_coverage, "reason": describe_reason(r.reason),
                                            "run id": r.run_id} for r in rows]))
        st.dataframe(frame, hide_index=True, key="dm_rg_table")

# -- export / import -----------------------------------------------------------------
st.subheader("Export and import")
left, right = st.columns(2)
with left:
    if picked:
        kind = "trace" if len(picked) == 1 else "comparison"
        try:
            exported = bench.export_traces(picked[:2])
        except DocMindError as exc:  # a picked run deleted (or no longer readable) since the list was drawn
            st.error(escape_markdown(exc))
        else:
            st.download_button(f"Export selected {kind} as JSON", exported, file_name=f"docmind-{kind}.json",
                               mime="application/json", icon=":material/download:")
    else:
        st.caption("Select runs above to export them.")
with right:
    upload = st.file_uploader("Import a trace or comparison JSON", type=["json"], key="dm_tr_import")
    if upload is not None and st.button("Import", icon=":material/upload_file:"):
        try:
            run_ids = bench.import_traces(upload.getvalue().decode("utf-8"))
        except (DocMindError, UnicodeDecodeError) as exc:
            st.error(f"Could not import {escape_markdown(upload.name)}: {escape_markdown(exc)}")
        else:
            st.success(f"Imported {len(run_ids)} run(s), labelled 'imported': "
                       + escape_markdown(", ".join(r[:8] for r in run_ids)))
