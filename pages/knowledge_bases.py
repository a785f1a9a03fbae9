"""Knowledge bases: create and delete, upload documents, preview chunks, test retrieval."""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path

import pandas as pd
import streamlit as st

from docmind_core.errors import DocMindError
from docmind_core.models import IngestProgress
from docmind_core.safe_text import escape_markdown
from docmind_ui.session import ensure_frame, selected_doc_ids, selected_kb_ids, workbench

ensure_frame()
bench = workbench()
VISIBILITIES = ["private", "department", "public"]
VISIBILITY_LABELS = {"private": "private (owner only)", "department": "department", "public": "public (everyone)"}

st.title("Knowledge bases")

# -- create ------------------------------------------------------------------
with st.expander("Create a knowledge base", expanded=not bench.list_kbs()):
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
                st.success(f"Created knowledge base '{escape_markdown(kb.name)}'.")
            except (DocMindError, ValueError) as exc:
                st.error(escape_markdown(exc))

kbs = bench.list_kbs()
if not kbs:
    st.info("No knowledge base yet: create one above.")
    st.stop()

kb_names = {kb.id: kb.name for kb in kbs}
kb_id = st.selectbox("Knowledge base", list(kb_names), format_func=kb_names.get, key="dm_manage_kb")
kb = next(k for k in kbs if k.id == kb_id)
st.caption(f"{escape_markdown(kb.description or 'No description.')} · {kb.document_count} documents · "
           f"{kb.chunk_count} chunks · embedder {escape_markdown(kb.embedder_id)}")

# -- upload ------------------------------------------------------------------
st.subheader("Add documents")
uploads = st.file_uploader("Files (PDF, Word, Markdown, HTML, text …)", accept_multiple_files=True,
                           key="dm_uploads")
if st.button("Ingest", type="primary", disabled=not uploads, icon=":material/upload:"):
    overall = st.progress(0.0, text="Overall")
    bars = {i: st.progress(0.0, text=f"{escape_markdown(u.name)}: waiting") for i, u in enumerate(uploads)}
    script_thread = threading.current_thread()

    def on_progress(p: IngestProgress) -> None:
        if threading.current_thread() is not script_thread:
            return  # Streamlit elements may only be updated from the script thread
        bar = bars.get(p.file_index)
        if bar is not None:
            bar.progress(min(1.0, max(0.0, p.fraction if p.stage not in ("done", "failed", "skipped") else 1.0)),
                         text=escape_markdown(f"{p.name}: {p.stage}" + (f" — {p.message}" if p.message else "")))
        done = p.file_index + (1.0 if p.stage in ("done", "failed", "skipped") else p.fraction)
        overall.progress(min(1.0, done / max(1, p.file_count)), text=f"Overall: file {p.file_index + 1} of "
                                                                    f"{p.file_count}")

    with tempfile.TemporaryDirectory(prefix="docmind-upload-") as tmp:
        paths, names = [], []
        for i, upload in enumerate(uploads):
            # files are stored under an index folder: two uploads may share a name, and a name is never a path
            folder = Path(tmp) / str(i)
            folder.mkdir()
            path = folder / (Path(upload.name).name or f"upload-{i}")
            path.write_bytes(upload.getvalue())
            paths.append(path)
            names.append(Path(upload.name).name)
        try:
            outcomes = bench.ingest(kb_id, paths, progress=on_progress, names=names)
        except DocMindError as exc:
            outcomes = []
            st.error(escape_markdown(exc))
    overall.progress(1.0, text="Overall: finished")
    for i, outcome in enumerate(outcomes):
        if i in bars:
            bars[i].progress(1.0, text=escape_markdown(f"{outcome.name}: {outcome.status}"))
    if outcomes:
        st.dataframe(pd.DataFrame([{"file": o.name, "status": o.status, "chunks": o.chunks,
                                    "seconds": round(o.seconds, 2), "error": o.error} for o in outcomes]),
                     hide_index=True, key="dm_outcomes")
        good = [o for o in outcomes if o.status != "failed"]
        if good:
            st.success(f"{len(good)} file(s) indexed: "
                       + ", ".join(f"{escape_markdown(o.name)} ({o.status}, {o.chunks} chunks)" for o in good))
        for o in outcomes:
            if o.status == "failed":
                st.error(escape_markdown(f"{o.name}: {o.error or 'could not be ingested'}"))

# -- documents -----------------------------------------------------------------
st.subheader("Documents")
documents = bench.list_documents(kb_id)
if not documents:
    st.caption("No documents yet.")
else:
    st.dataframe(pd.DataFrame([{"id": d.id, "name": d.name, "status": d.status, "chunks": d.chunk_count,
                                "size (bytes)": d.size, "type": d.mime, "added": d.created_at[:19],
                                "error": d.error} for d in documents]), hide_index=True, key="dm_docs")
    doc_names = {d.id: d.name for d in documents}
    doc_id = st.selectbox("Preview a document's chunks", list(doc_names), format_func=doc_names.get,
                          key="dm_preview_doc")
    child_tab, parent_tab = st.tabs(["Child chunks (retrieval units)", "Parent blocks (context units)"])
    for tab, parents in ((child_tab, False), (parent_tab, True)):
        with tab:
            chunks = bench.document_chunks(doc_id, parents=parents)
            st.dataframe(pd.DataFrame([{"#": c.index, "tokens": c.token_count, "start": c.start, "end": c.end,
                                        "text": c.text} for c in chunks]), hide_index=True,
                         key=f"dm_chunks_{int(parents)}")
    if st.button("Delete this document", icon=":material/delete:"):
        try:
            bench.delete_document(doc_id)
            st.success(f"Deleted {escape_markdown(doc_names[doc_id])}.")
            st.rerun()
        except DocMindError as exc:
            st.error(escape_markdown(exc))

# -- hit testing ---------------------------------------------------------------
st.subheader("Hit testing")
scope_ids = selected_kb_ids() or [kb_id]
st.caption("Runs retrieval only (no answer) against the knowledge bases selected in the sidebar, and shows every "
           "candidate with its scores per stage and the stage that cut it.")
with st.form("dm_hit_test"):
    query = st.text_input("Query")
    submitted = st.form_submit_button("Search", icon=":material/search:")
if submitted and query.strip():
    try:
        result = bench.search(query.strip(), scope_ids, doc_ids=selected_doc_ids() or None)
    except DocMindError as exc:
        st.error(escape_markdown(exc))
    else:
        for gap in result.index_gaps:  # a KB with missing vectors: its vector side sees only part of it
            st.warning(escape_markdown(gap.message()))
        st.caption(f"{len(result.candidates)} candidates, {len(result.chunks)} kept, {result.used_tokens} tokens · "
                   + ", ".join(f"{k} {v:.0f} ms" for k, v in result.timings_ms.items()))
        ranked = sorted(result.candidates, key=lambda c: (c.scores.rerank is None, -(c.scores.rerank or 0)))
        st.dataframe(pd.DataFrame([{
            "document": c.document, "kept": c.kept, "cut by": c.cut_by or "", "vector": c.scores.vector,
            "vector rank": c.scores.vector_rank, "keyword": c.scores.keyword, "keyword rank": c.scores.keyword_rank,
            "fused": c.scores.fused, "rerank": c.scores.rerank, "mmr": c.scores.mmr,
            "found by": ", ".join(c.found_by), "text": c.text} for c in ranked]), hide_index=True, key="dm_hits")

# -- sharing -----------------------------------------------------------------------
with st.expander(f"Sharing: {VISIBILITY_LABELS[kb.visibility]}"):
    chosen = st.radio("Who may read this knowledge base", VISIBILITIES, index=VISIBILITIES.index(kb.visibility),
                      format_func=VISIBILITY_LABELS.get, key="dm_visibility")
    if st.button("Save sharing", disabled=chosen == kb.visibility):
        try:
            bench.set_visibility(kb_id, chosen)
            st.rerun()
        except DocMindError as exc:  # only the owner or an admin may change it
            st.error(escape_markdown(exc))

# -- delete the KB -----------------------------------------------------------------
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
