"""Experiments: labelled datasets, one dataset x N variants, metrics with intervals, threshold sweeps."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import pandas as pd
import streamlit as st

from docmind_core.errors import DocMindError
from docmind_core.experiments.metrics import METRICS, TIERS
from docmind_core.experiments.records import MODE_NAMES, parse_variant
from docmind_core.experiments.sweep import OBJECTIVE_HELP, OBJECTIVES
from docmind_core.text.reasons import describe_reason
from docmind_core.text.visible import escape_markdown
from docmind_core.settings import GRAY_ZONE_MODES
from docmind_ui.experiment_charts import sweep_curves, sweep_heatmap
from docmind_ui.feedback_view import labels_review
from docmind_ui.run_view import render_comparison
from docmind_ui.session import ensure_frame, live_workbench, workbench

RESULTS_KEY = "dm_ex_results"  # the picked experiment's results, handed back to the facade at the next rerun
STARTED_KEY = "dm_ex_started"  # the experiment this session last started
REDRAWN_KEY = "dm_ex_redrawn"
REDRAW_EVERY_S = 10.0
APPLIED_KEY = "dm_ex_applied"  # what Apply set, said after the rerun that redraws the sweep with it
PICK_NEXT_KEY = "dm_ex_pick_next"  # an experiment made below the picker, picked at the next rerun
IMPORTED_KEY = "dm_ex_imported"  # what Import made, said after the rerun that lists it above the form
VARIANT_SYNTAX = "NAME:MODE[:key=value,...]"
VARIANT_EXAMPLE = "strict:RULE_PLANNER:grader.high_threshold=0.95,agentic.max_iterations=2"


def _rate_change(before: float | None, after: float | None, runs: int) -> str:
    """"3 of 6 runs (50.0%) → 4 of 6 runs (66.7%) (+16.7 points)": the counts say what a re-run will show."""
    if before is None or after is None:
        return f"{_share(before, runs)} → {_share(after, runs)}"
    return f"{_share(before, runs)} → {_share(after, runs)} ({(after - before) * 100:+.1f} points)"


def _share(value: float | None, runs: int) -> str:
    return "n/a" if value is None else f"{round(value * runs)} of {runs} runs ({value:.1%})"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _stop_reason(code: str) -> str:
    """A variant's stop reason in words; "-" is a run without an agentic loop."""
    return "no agentic loop" if code == "-" else describe_reason(code)


def _contains(value: float | None) -> str:
    return "n/a" if value is None else ("yes" if value else "no")


ensure_frame()
bench = workbench()
st.title("Experiments")

# -- datasets ---------------------------------------------------------------------------
datasets = bench.list_datasets()
imported = st.session_state.pop(IMPORTED_KEY, None)
with st.expander(f"Datasets ({len(datasets)})", expanded=not datasets or imported is not None):
    if datasets:
        st.dataframe(pd.DataFrame([{"name": d.name, "questions": d.item_count, "KB": d.kb_name, "source": d.source,
                                    "visibility": d.visibility} for d in datasets]), hide_index=True)
    kb_names = [kb.name for kb in bench.list_kbs()]
    with st.form("dm_ex_import"):
        upload = st.file_uploader("Labelled questions (JSONL: question, kb, gold_doc_ids, answers, answerable)",
                                  type=["jsonl"], key="dm_ex_upload")
        c1, c2 = st.columns(2)
        name = c1.text_input("Dataset name", key="dm_ex_ds_name")
        default_kb = c2.selectbox("Default knowledge base", ["", *kb_names], key="dm_ex_ds_kb")
        pressed = st.form_submit_button("Import", icon=":material/upload_file:")
        if pressed and upload is None:
            st.warning("Choose a JSONL file to import first.")
        if pressed and upload is not None:
            with tempfile.TemporaryDirectory() as tmp:
                # the copy keeps the uploaded file's name: an error names the file the user chose
                path = Path(tmp) / (Path(upload.name).name or "upload.jsonl")
                path.write_bytes(upload.getvalue())
                try:
                    made = bench.import_dataset(name or Path(upload.name).stem, path, kb=default_kb)
                except DocMindError as exc:
                    st.error(escape_markdown(exc))
                else:
                    # a rerun: the list and the count above the form are drawn again with the new dataset
                    st.session_state[IMPORTED_KEY] = (f"Imported {made.item_count} questions as "
                                                      f"{escape_markdown(made.name)}")
                    st.rerun()
        if imported:
            st.success(imported)
labels_review(bench)

# -- a new experiment ----------------------------------------------------------------------
if datasets:
    with st.expander("New experiment"):
        with st.form("dm_ex_new"):
            ds = st.selectbox("Dataset", datasets, format_func=lambda d: f"{d.name} ({d.item_count})",
                              key="dm_ex_new_ds")
            name = st.text_input("Experiment name (empty: the dataset and variant names)", key="dm_ex_name")
            # code spans: Markdown would read ":MODE[...]" as a directive and swallow the override syntax
            variants_text = st.text_area(f"Variants, one per line: `{VARIANT_SYNTAX}`",
                                         "rule:RULE_PLANNER\nagentic:AGENTIC", key="dm_ex_variants")
            st.caption(f"MODE is AUTO, RULE_PLANNER or AGENTIC (any case; `rule` and `agentic` too); the "
                       f"overrides are grader.\\*, agentic.\\*, retrieval.\\* or rag.\\* keys for this "
                       f"variant's runs only. Example: `{VARIANT_EXAMPLE}`")
            c1, c2 = st.columns(2)
            leave_gold_out = c1.checkbox("Also ask with the gold documents left out", value=True, key="dm_ex_lgo")
            limit = c2.number_input("Questions (0 = all)", 0, 100_000, 0, key="dm_ex_limit")
            if st.form_submit_button("Create and run", icon=":material/play_arrow:"):
                try:
                    variants = [parse_variant(line) for line in variants_text.splitlines() if line.strip()]
                    made = bench.create_experiment(name, ds.id, variants, leave_gold_out=leave_gold_out,
                                                   limit=int(limit) or None)
                    bench.start_experiment(made.id)
                except DocMindError as exc:
                    st.error(escape_markdown(exc))
                else:
                    st.session_state["dm_ex_pick"] = made.id
                    st.session_state[STARTED_KEY] = made.id  # poll it even before its runner says "running"

experiments = bench.list_experiments()
if not experiments:
    st.info("No experiment yet. Import a dataset (or `docmind dataset import`), then create an experiment.")
    st.stop()

ids = [e.id for e in experiments]
if (pick_next := st.session_state.pop(PICK_NEXT_KEY, None)) in ids:
    st.session_state["dm_ex_pick"] = pick_next
if st.session_state.get("dm_ex_pick") not in ids:
    st.session_state["dm_ex_pick"] = ids[0]
names = {e.id: f"#{e.id} {e.name}" for e in experiments}
picked = st.selectbox("Experiment", ids, format_func=lambda i: names[i], key="dm_ex_pick")
if experiments[ids.index(picked)].description:
    st.caption(escape_markdown(experiments[ids.index(picked)].description))
if st.session_state.get(STARTED_KEY) == picked:
    # said here, not after the form: a run that finishes at once reruns the page and would drop the message
    st.success(f"Experiment #{picked} was started from this page")
# Every run's trace is loaded and scored once: the results are kept across reruns and handed back, so a
# rerun with nothing new loads nothing and one with new runs loads only those.  They carry the experiment
# and its progress as this run read them: the page reads the experiment once per run.
results = bench.experiment_results(picked, reuse=st.session_state.get(RESULTS_KEY))
st.session_state[RESULTS_KEY] = results
experiment = results.experiment
shown = results.progress
polling = shown.state in ("running", "cancelling") or (
    shown.state == "pending" and st.session_state.get(STARTED_KEY) == picked)
# the panel's first call, in this script run, shows the progress just read; its timed reruns read it anew
handed = [shown]


@st.fragment(run_every=2.0 if polling else None)
def progress_panel() -> None:
    live_workbench()  # its timed runs skip the frame's sign-in check: an ended session goes to sign-in
    progress = handed.pop() if handed else bench.experiment_progress(picked)
    finished = progress.done + progress.failed
    if progress.state != shown.state or finished != shown.done + shown.failed:
        # new runs finished: redraw the metrics below now and then while it runs, at once when it stops
        quiet = progress.state in ("running", "cancelling") and \
            time.monotonic() - st.session_state.get(REDRAWN_KEY, 0.0) < REDRAW_EVERY_S
        if not quiet:
            st.session_state[REDRAWN_KEY] = time.monotonic()
            st.rerun()
    # an ETA only while a runner works: a cancelled, cancelling or paused experiment ends at no set time
    eta = f" · ETA {progress.eta_s:.0f} s" if progress.eta_s is not None and progress.state == "running" \
        and progress.pending + progress.running else ""
    st.progress(progress.fraction, text=f"{progress.state}: {progress.done + progress.failed} of {progress.total} "
                                        f"runs ({progress.failed} failed){eta}")
    c1, c2 = st.columns(2)
    # only the control that applies: Cancel while it runs, nothing while it stops, Resume once it stopped
    if progress.state == "running":
        if c1.button("Cancel", icon=":material/stop:", key="dm_ex_cancel"):
            bench.cancel_experiment(picked)
            st.rerun()
    elif progress.state == "cancelling":
        c1.caption("Stopping: the runs in flight are being cancelled.")
    elif progress.pending or progress.failed:
        if c1.button("Resume", icon=":material/play_arrow:", key="dm_ex_resume"):
            try:
                bench.start_experiment(picked)
            except DocMindError as exc:
                st.error(escape_markdown(exc))
            else:
                st.session_state[STARTED_KEY] = picked
                st.rerun()


progress_panel()
if shown.state in ("done", "cancelled"):
    with st.expander("Run again"):
        with st.form(f"dm_ex_again_{picked}"):
            again_name = st.text_input("Name of the new experiment", f"{experiment.name} (again)",
                                       key=f"dm_ex_again_name_{picked}")
            st.caption("The same dataset, questions and variants (with their overrides), run with your current "
                       "settings: after applying a sweep's thresholds, its evidence grades are the ones the sweep predicted.")
            if st.form_submit_button("Run again with your current settings", icon=":material/replay:"):
                try:
                    made = bench.create_experiment(
                        again_name, experiment.dataset_id,
                        [v.model_copy(update={"id": None}) for v in experiment.variants],
                        leave_gold_out=experiment.leave_gold_out, limit=experiment.item_limit)
                    bench.start_experiment(made.id)
                except DocMindError as exc:
                    st.error(escape_markdown(exc))
                else:
                    st.session_state[PICK_NEXT_KEY] = made.id  # the picker above is drawn: pick it on the rerun
                    st.session_state[STARTED_KEY] = made.id
                    st.rerun()
st.download_button("Export as JSON", results.export_json(), file_name=f"docmind-experiment-{picked}.json",
                   mime="application/json", icon=":material/download:")

# -- metrics ---------------------------------------------------------------------------------
report = results.report
st.subheader("Metrics (95% bootstrap intervals)")
st.dataframe(pd.DataFrame([{"metric": label, "measured on": on,
                            **{v.name: v.metrics[m].text() for v in report.variants}}
                           for m, (label, on) in METRICS.items()]), hide_index=True, key="dm_ex_metrics")
# routes and stop reasons (words) first: the numbers after them scroll sideways on a narrow screen
st.dataframe(pd.DataFrame([{"variant": v.name, "mode": MODE_NAMES.get(v.mode, v.mode), "runs": v.runs,
                            "failed": v.failed,
                            "routes": ", ".join(f"{k} {n}" for k, n in v.routes.items()),
                            "stop reasons": ", ".join(f"{_stop_reason(k)} ({n})"
                                                      for k, n in v.stop_reasons.items()),
                            "with errors": v.runs_with_errors,
                            "cited but unsupported": f"{v.cited_unsupported} of {v.citations_checked}",
                            "tool calls / run": v.tool_calls_mean, "rounds / run": v.rounds_mean,
                            "latency p50 ms": v.latency_p50_ms, "latency p95 ms": v.latency_p95_ms,
                            "tokens in / run": v.prompt_tokens_mean, "tokens out / run": v.completion_tokens_mean}
                           for v in report.variants]), hide_index=True, key="dm_ex_ops")
if report.differences:
    st.markdown("**Paired differences** (B − A on the same questions)")
    st.dataframe(pd.DataFrame([{"metric": METRICS[d.metric][0], "A": d.a, "B": d.b,
                                "B − A": d.difference.text(), "interval excludes 0": "yes" if d.significant else ""}
                               for d in report.differences]), hide_index=True, key="dm_ex_diffs")
st.markdown("**Evidence grade confusion** (runs by answerability and evidence grade, the CRAG tier of what "
            "retrieval found)")
for v in report.variants:
    st.caption(escape_markdown(v.name))
    st.dataframe(pd.DataFrame([{"answerability": row, **cells} for row, cells in v.confusion.items()],
                              columns=["answerability", *TIERS]), hide_index=True, key=f"dm_ex_conf_{v.name}")

# -- drill-down ------------------------------------------------------------------------------
variant_names = [v.name for v in experiment.variants]
if report.questions:  # one variant too: its tier and containment per question; comparing needs two
    st.subheader("Per question")
    table = pd.DataFrame([{"item": q.item_id, "gold left out": q.gold_left_out, "question": q.question,
                           **{f"evidence grade · {n}": q.tiers.get(n, "") for n in variant_names},
                           **{f"contains · {n}": _contains(q.contains.get(n)) for n in variant_names}}
                          for q in report.questions])
    if len(variant_names) >= 2:
        st.caption("Pick a question (the box at the start of its row) to compare two variants' runs of it.")
        chosen = st.dataframe(table, hide_index=True, on_select="rerun", selection_mode="single-row",
                              key="dm_ex_q")
        rows = list(chosen.selection.rows) if chosen is not None else []
    else:
        st.dataframe(table, hide_index=True, key="dm_ex_q_one")
        rows = []
    if rows:
        q = report.questions[rows[0]]
        c1, c2 = st.columns(2)
        a = c1.selectbox("A", variant_names, index=0, key="dm_ex_a")
        b = c2.selectbox("B", variant_names, index=len(variant_names) - 1, key="dm_ex_b")
        gold = "yes: asked without its gold documents" if q.gold_left_out else "no"
        st.markdown(f"**Question** (item #{q.item_id}): {escape_markdown(q.question)}  \n"
                    f"**Gold left out:** {gold}")
        try:
            cmp = bench.compare_experiment_runs(picked, q.item_id, a, b, q.gold_left_out)
        except DocMindError as exc:
            st.error(escape_markdown(exc))
        else:
            render_comparison(cmp, key=f"ex-{picked}-{q.item_id}-{int(q.gold_left_out)}", label_a=a, label_b=b)

# -- threshold sweep -----------------------------------------------------------------------------
st.subheader("Threshold sweep")
st.caption("The stored runs re-graded over a grid of high x low thresholds and gray-zone modes; no model is called. "
           "Only points that keep unanswerable questions not HIGH at or above the safety floor are recommended.")
c1, c2, c3, c4 = st.columns(4)
objective = c1.selectbox("Objective", list(OBJECTIVES), key="dm_ex_objective")
floor = c2.number_input("Safety floor: not HIGH on unanswerable ≥", 0.0, 1.0,
                        float(bench.settings().experiments.sweep_floor), 0.05, format="%.2f", key="dm_ex_floor")
only = c3.selectbox("Runs of", [None, *variant_names], format_func=lambda n: "every variant" if n is None else n,
                    key="dm_ex_sweep_variant")
st.markdown("\n".join(f"- **{name}**{' (chosen)' if name == objective else ''}: {text}"
                       for name, text in OBJECTIVE_HELP.items()))
applied = st.session_state.pop(APPLIED_KEY, None)
if applied:
    st.success(applied)
sweep = results.sweep(bench.settings().grader, only)
live_mode = sweep.live.gray_zone_mode
mode = c4.selectbox("Gray-zone mode", GRAY_ZONE_MODES, index=GRAY_ZONE_MODES.index(live_mode), key="dm_ex_mode")
if not sweep.runs:
    st.info("No graded run yet.")
else:
    advice = sweep.recommendation(objective, floor)
    best = advice.point
    st.plotly_chart(sweep_heatmap(sweep, mode, objective, floor), key="dm_ex_heatmap")
    st.plotly_chart(sweep_curves(sweep, mode, floor), key="dm_ex_curves")
    rows = [("live", advice.live), ("recommended", best)]
    if best is None:
        rows.append(("safest (below the floor, not recommended)", advice.safest))
    # rates as the predicted change below says them (66.7%), never as raw floats (0.6666666666666666)
    st.dataframe(pd.DataFrame([{"": label, "high": p.high, "low": p.low, "mode": p.mode,
                                "precision": _pct(p.precision), "recall": _pct(p.recall),
                                "not HIGH on unanswerable": _pct(p.unanswerable_not_high)}
                               for label, p in rows if p is not None]),
                 hide_index=True, key="dm_ex_best")
    if best is None:
        st.warning(advice.reason)
    else:
        st.caption(advice.reason)
        runs_of = dict(zip(advice.change(), (sweep.positives, sweep.unanswerable)))
        st.markdown("**Predicted change if applied** (live → recommended)  \n" + "  \n".join(
            f"{rate}: {_rate_change(before, after, runs_of[rate])}"
            for rate, (before, after) in advice.change().items()))
        scope = "globally" if bench.user.is_admin else "as your personal values"
        at_live = advice.live is not None and (best.high, best.low, best.mode) == (
            advice.live.high, advice.live.low, advice.live.mode)
        if at_live:
            st.caption("The live thresholds are already the recommended ones.")
        if st.button(f"Apply recommended thresholds {scope}", icon=":material/check:", key="dm_ex_apply"):
            bench.apply_thresholds(best)
            st.session_state[APPLIED_KEY] = (f"Applied grader.high_threshold = {best.high}, "
                                             f"grader.low_threshold = {best.low}, grader.gray_zone_mode = {best.mode}")
            st.rerun()  # the sweep's live row and marks are drawn again with the applied thresholds
