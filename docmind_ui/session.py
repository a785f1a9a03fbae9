"""The engine shared by every session, and what the shared sidebar stores in session state."""

from __future__ import annotations

import os
from pathlib import Path

import streamlit as st

from docmind_core.engine import Engine, default_home
from docmind_core.safe_text import escape_markdown
from docmind_core.errors import DocMindError
from docmind_ui.exposure_gate import guard_exposure
from docmind_ui.html_views import PAGE_CSS, backend_html

KB_KEY = "dm_kb_ids"  # selected knowledge base ids (sidebar multi-select)
DOC_KEY = "dm_doc_ids"  # optionally selected document ids within them
FRAME_KEY = "dm_frame_drawn"  # set once app.py's frame has run in this session


@st.cache_resource(show_spinner="Starting DocMind (loading the encoder, opening the stores)…")
def _engine_for(home: str) -> Engine:
    # One Engine per home for the whole server: it is thread-safe and holds the models.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return Engine.open(Path(home))


def draw_frame() -> Engine:
    """What every page shares: page config, CSS, the engine, the sign-in gate and the sidebar."""
    from pages._auth import require_user, sign_out_button  # the gate lives beside the pages

    st.set_page_config(page_title="DocMind", page_icon=":material/menu_book:", layout="wide")
    inject_css()
    st.session_state[FRAME_KEY] = True
    try:
        engine = get_engine()
    except DocMindError as exc:
        st.error(f"DocMind could not start: {escape_markdown(exc)}")
        st.stop()
    guard_exposure(engine.settings)  # no page on a public address with sign-in off, unless allowed
    user = require_user(engine)  # stops here with a sign-in form when auth.enabled and nobody is signed in
    sign_out_button(user)
    draw_sidebar(engine)
    return engine


def ensure_frame() -> None:
    """Make sure a page runs inside the frame, never as a bare legacy page.

    Streamlit treats a ``pages/`` folder as a legacy multipage app until the
    first ``st.navigation`` call of the process, so a fresh server's first visit
    straight to e.g. /traces would run that page alone (no sidebar, CSS or
    sign-in gate) and list every file of pages/ as a page.  On a session's first
    run we switch the legacy mode off and rerun through app.py; when the mode
    comes back later (AppTest resets it on every run) a rerun would drop the
    click being handled, so the frame is drawn here instead.
    """
    from streamlit.runtime.pages_manager import PagesManager

    if not PagesManager.uses_pages_directory:
        return
    if not st.session_state.get(FRAME_KEY):
        PagesManager.uses_pages_directory = False
        st.rerun()
    draw_frame()


def get_engine() -> Engine:
    return _engine_for(str(default_home().resolve()))


def user_id() -> int | None:
    """Single-user mode unless sign-in put a user id in the session."""
    return st.session_state.get("dm_user_id")


def selected_kb_ids() -> list[int]:
    return list(st.session_state.get(KB_KEY, []))


def selected_doc_ids() -> list[int]:
    return list(st.session_state.get(DOC_KEY, []))


def inject_css() -> None:
    st.markdown(PAGE_CSS, unsafe_allow_html=True)


def draw_sidebar(engine: Engine) -> None:
    """Knowledge base and document selection, then the live backends with a health dot each."""
    with st.sidebar:
        kbs = engine.readable_kbs(user_id())
        names = {kb.id: f"{kb.name} ({kb.document_count} docs)" for kb in kbs}
        if KB_KEY not in st.session_state:
            st.session_state[KB_KEY] = [kb.id for kb in kbs]
        else:  # drop KBs deleted since they were selected
            st.session_state[KB_KEY] = [k for k in st.session_state[KB_KEY] if k in names]
        st.multiselect("Knowledge bases", list(names), format_func=lambda k: names.get(k, str(k)), key=KB_KEY,
                       placeholder="Choose knowledge bases")
        docs = {}
        for kb_id in st.session_state[KB_KEY]:
            for doc in engine.store.list_documents(kb_id):
                if doc.status == "complete":
                    docs[doc.id] = doc.name
        if DOC_KEY in st.session_state:
            st.session_state[DOC_KEY] = [d for d in st.session_state[DOC_KEY] if d in docs]
        st.multiselect("Documents (optional)", list(docs), format_func=lambda d: docs.get(d, str(d)), key=DOC_KEY,
                       placeholder="All documents",
                       help="Select up to a few documents to ask about them directly (summaries, 'this document').")
        with st.expander("Backends", expanded=False):
            try:
                statuses = engine.backends()
            except Exception as exc:  # noqa: BLE001 - the sidebar must render even when a backend is broken
                st.error(f"Could not read backend status: {escape_markdown(exc)}")
                statuses = []
            st.markdown("".join(backend_html(s) for s in statuses), unsafe_allow_html=True)
