"""DocMind workbench: the frame every page shares.

Run with ``streamlit run app.py``.  This file sets the page config, builds the
engine once per server (``st.cache_resource``), draws the shared sidebar and
hands over to the page the user picked.
"""

from __future__ import annotations

import streamlit as st

from docmind_core.errors import DocMindError
from docmind_ui.session import draw_sidebar, get_engine, inject_css
from pages._auth import require_user, sign_out_button

st.set_page_config(page_title="DocMind", page_icon=":material/menu_book:", layout="wide")
inject_css()

try:
    engine = get_engine()
except DocMindError as exc:
    st.error(f"DocMind could not start: {exc}")
    st.stop()

user = require_user(engine)  # stops here with a sign-in form when auth.enabled and nobody is signed in
sign_out_button(user)
draw_sidebar(engine)

st.navigation([
    st.Page("pages/chat.py", title="Chat", icon=":material/chat:", default=True),
    st.Page("pages/knowledge_bases.py", title="Knowledge bases", icon=":material/library_books:"),
    st.Page("pages/config.py", title="Config", icon=":material/tune:"),
    st.Page("pages/traces.py", title="Traces", icon=":material/timeline:"),
]).run()
