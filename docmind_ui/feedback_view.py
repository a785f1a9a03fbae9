"""Feedback where an answer is read (Chat) or replayed (Traces): right / partly / wrong / should have
abstained, optionally the right source (a source of the run or a document of its KBs), and the statement of
what "Supported by the sources" has earned in the run's KBs, counted from such labels.

Both pages call :func:`answer_feedback` under the answer's view; every read and write goes through the
Workbench, so a member labels only runs they may read and sees badges only of KBs they may read.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from docmind_core.errors import DocMindError
from docmind_core.reports.timeline import RunDigest
from docmind_core.text.visible import escape_markdown, visible_rows, visible_text

CHOICES = {"correct": "Right", "partly": "Partly", "wrong": "Wrong",
           "should_abstain": "Should have said the sources do not hold it"}
_NO_SOURCE = ""
_DOCS_CACHE = "dm_fb_documents"  # KB id -> its document names, read once per session


def _document_names(bench: Any, kb_ids: list[int]) -> list[str]:
    cache = st.session_state.setdefault(_DOCS_CACHE, {})
    names: list[str] = []
    for kb_id in kb_ids:
        if kb_id not in cache:
            try:
                cache[kb_id] = [d.name for d in bench.list_documents(kb_id)]
            except DocMindError:  # a KB this user may no longer read: its documents are not offered
                cache[kb_id] = []
        names += cache[kb_id]
    return list(dict.fromkeys(names))


def _label_text(label: Any) -> str:
    source = ", ".join([*label.gold_doc_ids, *(c[:12] for c in label.gold_chunk_ids)])
    return f"You labelled this answer: {CHOICES[label.verdict].lower()}" + (
        f" · right source: {escape_markdown(source)}" if source else "")


def answer_feedback(bench: Any, digest: RunDigest) -> None:
    """The feedback controls of one finished run that asked a knowledge base, and its KBs' badge statement."""
    run_id = digest.run_id
    kb_ids = list(digest.started.kb_ids) if digest.started is not None else []
    if not run_id or digest.done is None or not kb_ids:
        return
    with st.container(key=f"dm-feedback-{run_id}"):
        saved_now = False
        verdict_key = f"dm_fb_verdict_{run_id}"
        # open once a verdict is picked: the pick reruns the page, and a run just answered is then drawn from
        # the conversation's history, as a new (collapsed) expander that would hide the Save button
        with st.expander("Was this answer right? Your label trains and measures this KB",
                         expanded=st.session_state.get(verdict_key) is not None):
            verdict = st.radio("This answer is", list(CHOICES), index=None, horizontal=True, key=verdict_key,
                               format_func=CHOICES.__getitem__)
            sources = {f"chunk:{c.chunk_id}": f"[{i}] {c.document}" for i, c in enumerate(digest.sources, start=1)}
            documents = {f"doc:{name}": f"document {name}" for name in _document_names(bench, kb_ids)}
            options = {_NO_SOURCE: "— not given —", **sources, **documents}
            source = st.selectbox("The right source is… (optional: a source above, or any document of the KB)",
                                  list(options), key=f"dm_fb_source_{run_id}",
                                  format_func=lambda o: visible_text(options[o]))
            if st.button("Save label", key=f"dm_fb_save_{run_id}", icon=":material/label:", disabled=verdict is None):
                chunks = [source.removeprefix("chunk:")] if source.startswith("chunk:") else []
                docs = [source.removeprefix("doc:")] if source.startswith("doc:") else []
                try:
                    bench.label_run(run_id, verdict, chunks, gold_doc_ids=docs)
                except DocMindError as exc:
                    st.error(escape_markdown(exc))
                else:
                    saved_now = True
            label = bench.run_labels([run_id]).get(run_id)
            if label is not None:
                st.markdown(_label_text(label) + (" (saved)" if saved_now else ""))
                if st.button("Remove my label", key=f"dm_fb_remove_{run_id}", icon=":material/label_off:"):
                    bench.remove_label(run_id)
                    st.rerun()
        try:
            badge = bench.kb_badge(kb_ids)
        except DocMindError:  # a KB of the run this user may no longer read: no statement about it
            return
        st.caption(escape_markdown(badge.statement), help=f"{badge.method}; counts every label given to runs of "
                   "these knowledge bases: right = labelled right, partly / wrong / should have abstained are not")


def labels_review(bench: Any) -> None:
    """The labels given to this user's answers (all readable runs for an admin), per KB group: the table, the
    group's statement, and the exports (JSONL, a Langfuse dataset).  A label is corrected where its answer is
    read: in Chat, or on the Traces page (its run id is in the table)."""
    import pandas as pd  # here: only drawn when the page gets this far

    kbs = {kb.id: kb.name for kb in bench.list_kbs()}
    rows = bench.list_labels()
    with st.expander(f"Labels given to answers ({len(rows)})", expanded=False):
        picked = st.multiselect("Knowledge bases (a group: runs that asked only these)", list(kbs),
                                key="dm_fb_review_kbs", format_func=lambda k: visible_text(kbs[k]))
        if picked:
            rows = bench.list_labels(picked)
            st.caption(escape_markdown(bench.kb_badge(picked).statement))
        if not rows:
            st.caption("No labels yet: label answers in Chat, or replayed runs on the Traces page.")
            return
        st.dataframe(pd.DataFrame(visible_rows([{
            "labelled": r.label.labelled_at[:16].replace("T", " "), "label": CHOICES[r.label.verdict].lower(),
            "answer's verdict": r.label.answer_verdict, "KBs": " + ".join(r.kb_names), "question": r.question,
            "right source": ", ".join([*r.label.gold_doc_ids, *r.label.gold_chunk_ids]),
            "run id": r.label.run_id} for r in rows])), hide_index=True, key="dm_fb_review_table")
        left, right = st.columns(2)
        left.download_button("Export as JSONL", bench.export_labels(picked or None), file_name="docmind-labels.jsonl",
                             mime="application/jsonl", icon=":material/download:", key="dm_fb_review_jsonl")
        if right.button("Send to Langfuse as a dataset", key="dm_fb_review_langfuse", disabled=not picked,
                        help="Pick the knowledge bases first; needs LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY"):
            try:
                name, sent = bench.export_labels_to_langfuse(picked)
            except DocMindError as exc:
                st.error(escape_markdown(exc))
            else:
                st.success(f"Sent {sent} label(s) to the Langfuse dataset {escape_markdown(name)}")
