"""DocMind workbench: the frame every page shares.

Run with ``streamlit run app.py``.  This file sets the page config, builds the
engine once per server (``st.cache_resource``), applies the sign-in gate, draws
the shared sidebar (``docmind_ui.session.draw_frame``) and hands over to the
page the user picked.
"""

from __future__ import annotations

import streamlit as st

from docmind_ui.session import draw_frame

draw_frame()

st.navigation([
    st.Page("pages/chat.py", title="Chat", icon=":material/chat:", default=True),
    st.Page("pages/knowledge_bases.py", title="Knowledge bases", icon=":material/library_books:"),
    st.Page("pages/config.py", title="Config", icon=":material/tune:"),
    st.Page("pages/traces.py", title="Traces", icon=":material/timeline:"),
]).run()
