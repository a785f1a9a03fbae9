"""Knowledge bases: create and delete, upload documents (as background jobs), preview chunks, test retrieval."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from docmind_ui.citation_html import anchor_id, source_card_html
from docmind_core.errors import DocMindError
from docmind_core.ingest.jobs import JobInput
from docmind_core.text.visible import escape_markdown, visible_rows, visible_text
from docmind_ui.charts import jump_to_anchor, score_chart
from docmind_ui.jobs_view import draw_jobs
from docmind_ui.session import ensure_frame, select_new_kb, workbench
from docmind_ui.kb_page import kb_of_active_job, score_3, upload_limit
from docmind_ui.page_view import page_picker

ensure_frame()
bench = workbench()
VISIBILITIES = ["private", "department", "public"]
VISIBILITY_LABELS = {"private": "private (owner only)", "department": "department", "public": "public (everyone)"}

st.title("Knowledge bases")

kbs = bench.list_kbs()  # a KB created below reruns the page, so this list is never stale where it is used

# -- create ------------------------------------------------------------------
with st.expander("Create a knowledge base", expanded=not kbs):
    with st.form("dm_create_kb", clear_on_submit=True):
        name = st.text_input("Name", max_chars=80)
        description = st.text_area("Description", help="Shown to the model as a brief of what the KB contains.")
        visibility = st.radio("Who may read it", VISIBILITIES, format_func=VISIBILITY_LABELS.get, horizontal=True)
        if st.form_submit_button("Create", icon=":material/add:"):
            if not name.strip():
                st.error("Give the knowledge base a name.")
                st.stop()
            try:
                kb = bench.create_kb(name.strip(), description.strip(), visibility=visibility)
            except (DocMindError, ValueError) as exc:
                st.error(escape_markdown(exc))
            else:
                # pick it here and add it to the sidebar's selection (drawn already: set on the rerun)
                st.session_state["dm_manage_kb"] = kb.id
                select_new_kb(kb.id)
                st.session_state["dm_kb_notice"] = f"Created knowledge base '{kb.name}'."
                st.rerun()
if notice := st.session_state.pop("dm_kb_notice", None):
    st.success(escape_markdown(notice))

if not kbs:
    st.info("No knowledge base yet: create one above.")
    st.stop()

kb_names = {kb.id: visible_text(kb.name) for kb in kbs}
if st.session_state.get("dm_manage_kb") not in kb_names:
    # Coming back to the page (its choice is forgotten once the page is left): open on the KB whose ingest job
    # is running, not on the first one, so the job stays in sight.
    try:
        returning = kb_of_active_job(bench.list_jobs(limit=20), list(kb_names), bench.user.id)
    except DocMindError:
        returning = None
    if returning is not None:
        st.session_state["dm_manage_kb"] = returning
kb_id = st.selectbox("Knowledge base", list(kb_names), format_func=kb_names.get, key="dm_manage_kb")
kb = next(k for k in kbs if k.id == kb_id)
st.caption(f"{escape_markdown(kb.description or 'No description.')} · {kb.document_count} documents · "
           f"{kb.chunk_count} chunks · embedder {escape_markdown(kb.embedder_id)}")

# -- upload: a background job of the core; it survives navigation and server restarts ----------
may_manage = bench.may_manage_kb(kb_id)  # the access facade decides; the controls below follow it
if not may_manage:
    st.caption("You may read and search this knowledge base; only its owner or an admin may add or delete "
               "documents, change its sharing or delete it.")
live_settings = bench.settings()
upload_mb, upload_help = upload_limit(live_settings.ingest.max_file_mb)
st.subheader("Add documents")
uploads = st.file_uploader("Files (PDF, Word, Markdown, HTML, text …)", accept_multiple_files=True,
                           key="dm_uploads", max_upload_size=upload_mb, help=upload_help) if may_manage else None
if may_manage and st.button("Ingest", type="primary", disabled=not uploads, icon=":material/upload:"):
    try:
        job = bench.enqueue_ingest(kb_id, [JobInput(Path(u.name).name, data=u.getvalue()) for u in uploads])
    except DocMindError as exc:
        st.error(escape_markdown(exc))
    else:
        st.toast(f"Ingest job #{job.id} queued: {len(job.files)} file(s). You can leave this page.")
draw_jobs(kb_id)

# -- documents -----------------------------------------------------------------
st.subheader("Documents")
documents = bench.list_documents(kb_id)
if not documents:
    st.caption("No documents yet.")
else:
    st.dataframe(pd.DataFrame(visible_rows([{"id": d.id, "name": d.name, "status": d.status,
                                             "chunks": d.chunk_count, "size (bytes)": d.size, "type": d.mime,
                                             "added": d.created_at[:19], "error": d.error} for d in documents])),
                 hide_index=True, key="dm_docs")
    # only documents that were ingested have chunks to preview; the newest first
    doc_names = {d.id: visible_text(d.name) for d in sorted(documents, key=lambda d: d.created_at, reverse=True)
                 if d.status in ("complete", "embedding")} or {d.id: visible_text(d.name) for d in documents}
    doc_id = st.selectbox("Preview a document's chunks", list(doc_names), format_func=doc_names.get,
                          key=f"dm_preview_doc_{kb_id}")
    child_tab, parent_tab = st.tabs(["Child chunks (retrieval units)", "Parent blocks (context units)"])
    for tab, parents in ((child_tab, False), (parent_tab, True)):
        with tab:
            chunks = bench.document_chunks(doc_id, parents=parents)
            st.dataframe(pd.DataFrame(visible_rows([{"#": c.index, "where": c.place.label, "tokens": c.token_count,
                                                     "start": c.start, "end": c.end, "text": c.text}
                                                    for c in chunks])), hide_index=True,
                         key=f"dm_chunks_{int(parents)}")
    if may_manage and st.button("Delete this document", icon=":material/delete:"):
        try:
            bench.delete_document(doc_id)
            st.success(f"Deleted {escape_markdown(doc_names[doc_id])}.")
            st.rerun()
        except DocMindError as exc:
            st.error(escape_markdown(exc))

# -- hit testing ---------------------------------------------------------------
st.subheader("Hit testing")
st.caption("Runs retrieval only (no answer) against the knowledge bases chosen here (this page's knowledge base "
           "unless you add others), and shows every candidate with its scores per stage and the stage that cut it.")
with st.form("dm_hit_test"):
    hit_kbs = st.multiselect("Search in", list(kb_names), default=[kb_id], format_func=kb_names.get,
                             key=f"dm_hit_kbs_{kb_id}")
    query = st.text_input("Query")
    submitted = st.form_submit_button("Search", icon=":material/search:")
if submitted and query.strip():
    try:
        st.session_state["dm_hit_result"] = (kb_id, bench.search(query.strip(), hit_kbs or [kb_id]))
    except DocMindError as exc:
        st.session_state.pop("dm_hit_result", None)
        st.error(escape_markdown(exc))
hit_kb, result = st.session_state.get("dm_hit_result", (None, None))
if result is not None and hit_kb == kb_id:
    for gap in result.index_gaps:  # a KB with missing vectors: its vector side sees only part of it
        st.warning(escape_markdown(gap.message()))
    for pending in result.pending:  # a KB still being ingested: "0 candidates" is not "nothing relevant"
        st.warning(escape_markdown(pending.message()))
    searched = ", ".join(kb_names.get(k, f"#{k}") for k in (hit_kbs or [kb_id]))
    st.caption(escape_markdown(f"Searched {searched} · {len(result.candidates)} candidates, {len(result.chunks)} "
                               f"kept, {result.used_tokens} tokens · ")
               + ", ".join(f"{k} {v:.0f} ms" for k, v in result.timings_ms.items()))
    ranked = sorted(result.candidates, key=lambda c: (c.scores.rerank is None, -(c.scores.rerank or 0)))
    grader = bench.settings().grader
    anchors = {c.chunk_id: anchor_id("hits", n) for n, c in enumerate(ranked, start=1)}
    chart = st.plotly_chart(score_chart(ranked, grader.high_threshold, grader.low_threshold, anchors=anchors),
                            key="dm_hit_chart", on_select="rerun", selection_mode="points",
                            config={"displayModeBar": False, "responsive": True})
    jump_to_anchor(chart)
    st.dataframe(pd.DataFrame(visible_rows([{
        "document": c.document, "where": c.location, "kept": c.kept, "cut by": c.cut_by or "",
        "vector": score_3(c.scores.vector),
        "vector rank": c.scores.vector_rank, "keyword": score_3(c.scores.keyword),
        "keyword rank": c.scores.keyword_rank, "fused": score_3(c.scores.fused),
        "rerank": score_3(c.scores.rerank), "mmr": score_3(c.scores.mmr),
        "found by": ", ".join(c.found_by), "text": c.text} for c in ranked])), hide_index=True, key="dm_hits",
        width="stretch", column_config={name: st.column_config.NumberColumn(format="%.3f")
                                        for name in ("vector", "keyword", "fused", "rerank", "mmr")})
    with st.expander(f"Candidate cards ({len(ranked)})", expanded=True):
        # hit testing writes no answer, so nothing is cited: the table's "kept" column says what was kept
        cards = "".join(source_card_html(n, c, "hits", cited=False) for n, c in enumerate(ranked, start=1))
        st.markdown(f'<div class="dm-sources">{cards}</div>', unsafe_allow_html=True)
        page_picker(ranked, "", "hits", label="Show a candidate's page",
                    page_image=lambda source, page, passage: bench.page_image(source.doc_id, page, passage))

# -- sharing -----------------------------------------------------------------------
with st.expander(f"Sharing: {VISIBILITY_LABELS[kb.visibility]}"):
    chosen = st.radio("Who may read this knowledge base", VISIBILITIES, index=VISIBILITIES.index(kb.visibility),
                      format_func=VISIBILITY_LABELS.get, key="dm_visibility", disabled=not may_manage)
    if may_manage and st.button("Save sharing", disabled=chosen == kb.visibility):
        try:
            bench.set_visibility(kb_id, chosen)
            st.rerun()
        except DocMindError as exc:  # only the owner or an admin may change it
            st.error(escape_markdown(exc))

# -- delete the KB: only for those who may -------------------------------------------
if may_manage:
    with st.expander("Delete this knowledge base"):
        sure = st.checkbox(f"Yes, delete '{escape_markdown(kb.name)}' with all its documents and indexes",
                           key="dm_delete_sure")
        if st.button("Delete knowledge base", type="primary", disabled=not sure, icon=":material/delete_forever:"):
            try:
                bench.delete_kb(kb_id)
                st.session_state.pop("dm_manage_kb", None)
                st.rerun()
            except DocMindError as exc:
                st.error(escape_markdown(exc))
