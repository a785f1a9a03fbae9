"""DocMind workbench: the frame every page shares.

Run with ``streamlit run app.py``.  This file sets the page config, builds the
engine once per server (``st.cache_resource``), resolves the acting user, draws
the shared sidebar (``docmind_ui.session.draw_frame``) and hands over to the
page the user picked.  Before sign-in (when it is on) the navigation is hidden
and only the sign-in form renders; the URL keeps the page asked for, so a deep
link lands there once the visitor has signed in.
"""

from __future__ import annotations

import streamlit as st

from docmind_ui.session import draw_frame, draw_sign_in_screen, warm_server

bench = draw_frame()
signed_in = bench.user.is_signed_in

page = st.navigation([
    st.Page("pages/chat.py", title="Chat", icon=":material/chat:", default=True),
    st.Page("pages/knowledge_bases.py", title="Knowledge bases", icon=":material/library_books:"),
    st.Page("pages/config.py", title="Config", icon=":material/tune:"),
    st.Page("pages/traces.py", title="Traces", icon=":material/timeline:"),
    st.Page("pages/experiments.py", title="Experiments", icon=":material/science:"),
], position="sidebar" if signed_in else "hidden")

if not signed_in:
    draw_sign_in_screen()
page.run()
warm_server()  # once per server, after the first page is drawn
