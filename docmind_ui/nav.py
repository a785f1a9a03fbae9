"""The workbench's pages and the list of them in the sidebar, with Streamlit's public navigation API only.

Streamlit's own page list is never shown: ``.streamlit/config.toml`` sets ``client.showSidebarNavigation =
false`` (which also hides the list of the ``pages/`` folder Streamlit shows on a fresh server before
``st.navigation`` first runs) and :func:`navigate` passes ``position="hidden"``.  The frame draws the list
itself with ``st.page_link`` (:func:`draw_page_links`), for a signed-in user only, so the sign-in screen lists
no page.

A page opened before app.py ever ran in a session (a deep link on a fresh server: Streamlit then runs that
page alone, without the frame) hands over to app.py with :func:`route_through_frame`; app.py's
:func:`navigate` then switches to the page asked for, so the URL names it again, before the sign-in form.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import streamlit as st

APP_SCRIPT = "app.py"  # the frame: the entry point `streamlit run` is given
_PENDING_PAGE_KEY = "dm_pending_page"  # a page asked for before the frame ran, that app.py switches to


@dataclass(frozen=True)
class WorkbenchPage:
    script: str  # relative to the repository root, like "pages/chat.py"
    title: str
    icon: str
    default: bool = False


PAGES: tuple[WorkbenchPage, ...] = (
    WorkbenchPage("pages/chat.py", "Chat", ":material/chat:", default=True),
    WorkbenchPage("pages/knowledge_bases.py", "Knowledge bases", ":material/library_books:"),
    WorkbenchPage("pages/config.py", "Config", ":material/tune:"),
    WorkbenchPage("pages/traces.py", "Traces", ":material/timeline:"),
    WorkbenchPage("pages/experiments.py", "Experiments", ":material/science:"),
)


def streamlit_pages() -> list[st.Page]:
    return [st.Page(p.script, title=p.title, icon=p.icon, default=p.default) for p in PAGES]


def _current_query_params() -> dict[str, list[str]]:
    return {key: st.query_params.get_all(key) for key in st.query_params}


def navigate():
    """app.py's one ``st.navigation`` call (the list is hidden; :func:`draw_page_links` draws it).

    Returns the page to run.  When a page was asked for before the frame ever ran in this session, switches
    to it first (this run stops there).
    """
    pages = streamlit_pages()
    page = st.navigation(pages, position="hidden")
    pending = st.session_state.pop(_PENDING_PAGE_KEY, None)
    if pending is not None:
        st.switch_page(next(p for p, spec in zip(pages, PAGES) if spec.script == pending),
                       query_params=_current_query_params())
    return page


def route_through_frame(page_file: str) -> None:
    """Hand a page that Streamlit ran alone over to app.py, remembering it; app.py switches back to it."""
    script = f"pages/{Path(page_file).name}"
    if any(spec.script == script for spec in PAGES):
        st.session_state[_PENDING_PAGE_KEY] = script
    st.switch_page(APP_SCRIPT, query_params=_current_query_params())


def draw_page_links() -> None:
    """Every page, in the sidebar, in order (the current one is highlighted by Streamlit)."""
    with st.sidebar:
        for page in streamlit_pages():
            st.page_link(page)
