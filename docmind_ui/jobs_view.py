"""Ingest jobs on the Knowledge bases page.

A job runs in the core's worker thread, not in this script: the panel only
reads its rows.  While a job is active the panel redraws itself every second
(a fragment), and when one finishes it reruns the whole page so the document
list and the KB's counts show the result.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from docmind_core.errors import DocMindError
from docmind_core.text.visible import escape_markdown, visible_rows
from docmind_core.ingest.job_types import RETRYABLE_FILE_STATES, IngestJob
from docmind_ui.session import live_workbench, workbench

_SHOWN_FILES = 5  # running files drawn one bar each; a large job's others are counted
_ACTIVE_KEY = "dm_active_jobs"  # job ids this session saw active: a finished one triggers a page rerun
_STATE_ICONS = {"queued": "⏳", "running": "🔄", "done": "✅", "failed": "❌", "cancelled": "⏹️",
                "interrupted": "⚠️"}


def eta_text(seconds: float | None) -> str:
    if seconds is None:
        return "ETA after the first encoder batch"
    seconds = int(round(seconds))
    return f"ETA {seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"ETA {seconds} s"


def overall_text(job: IngestJob) -> str:
    """The job's line: how far, at what measured pace, and the ETA from that pace."""
    if job.embedding:
        pace = job.pace_text()
        return (f"Overall {job.progress:.0%} · searchable by keyword · {job.embed_done:,} of {job.embed_total:,} "
                f"chunks embedded{f' at {pace}' if pace else ''} · {eta_text(job.eta_s())}")
    return f"Overall {job.progress:.0%} · parsing and keyword indexing · {eta_text(job.eta_s())}"


def file_text(f) -> str:
    if f.stage == "embedding":
        return f"{f.name}: searchable by keyword, embedding {f.progress:.0%}"
    eta = f.eta_s()
    return f"{f.name}: {f.stage or 'starting'} {f.progress:.0%}" + (f" · {eta_text(eta)}" if eta is not None else "")


def draw_jobs(kb_id: int, limit: int = 5) -> None:
    """The KB's recent ingest jobs; refreshes itself while one is queued or running."""
    try:
        active = any(not j.finished for j in workbench().list_jobs(kb_id, limit=limit))
    except DocMindError:
        return  # not this user's to manage: no panel

    @st.fragment(run_every=1.0 if active else None)
    def panel() -> None:
        bench = live_workbench()  # its timed runs skip the frame's sign-in check
        jobs = bench.list_jobs(kb_id, limit=limit)
        seen: set[int] = st.session_state.setdefault(_ACTIVE_KEY, set())
        finished_now = [j.id for j in jobs if j.finished and j.id in seen]
        seen.difference_update(finished_now)
        seen.update(j.id for j in jobs if not j.finished)
        if finished_now or (not active and any(not j.finished for j in jobs)):
            st.rerun()  # the whole page: new documents and counts, or start refreshing
        if jobs:
            st.markdown("**Ingest jobs**")
        for job in jobs:
            _draw_job(bench, job)

    panel()


def _draw_job(bench, job: IngestJob) -> None:
    icon = _STATE_ICONS.get(job.state, "")
    head = f"{icon} Job #{job.id} · {job.state} · {job.summary()}"
    if job.note:
        head += f" · {job.note}"
    with st.container(border=True, key=f"dm-job-{job.id}"):
        st.markdown(escape_markdown(head))
        if not job.finished:
            st.progress(job.progress, text=overall_text(job))
            running = [f for f in job.files if f.state == "running"]  # all of them while vectors are written
            for f in running[:_SHOWN_FILES]:
                st.progress(f.progress, text=escape_markdown(file_text(f)))
            if len(running) > _SHOWN_FILES:
                st.caption(f"… and {len(running) - _SHOWN_FILES} more file(s) in progress")
            if st.button("Cancel", key=f"dm_job_cancel_{job.id}", icon=":material/stop:"):
                _act(bench.cancel_job, job.id)
            return
        done = [f for f in job.files if f.state == "done"]
        if done:
            st.success(escape_markdown(f"{len(done)} file(s) indexed: " + ", ".join(
                f"{f.name} ({f.outcome or 'done'}, {f.chunks} chunks)" for f in done)))
        for f in job.files:
            if f.state == "failed":
                st.error(escape_markdown(f.message or f"{f.name}: could not be ingested"))
        st.dataframe(pd.DataFrame(visible_rows([{"file": f.name, "status": f.outcome or f.state, "chunks": f.chunks,
                                                 "error": f.message} for f in job.files])),
                     hide_index=True, key=f"dm_job_files_{job.id}", width="stretch")
        if any(f.state in RETRYABLE_FILE_STATES for f in job.files):
            if st.button("Retry failed files", key=f"dm_job_retry_{job.id}", icon=":material/refresh:"):
                _act(bench.retry_job, job.id)


def _act(action, job_id: int) -> None:
    try:
        action(job_id)
    except DocMindError as exc:
        st.error(escape_markdown(exc))
        return
    st.rerun()
