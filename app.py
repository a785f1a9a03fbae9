"""DocMind workbench: the frame every page shares.

Run with ``streamlit run app.py``.  This file picks the page (``docmind_ui.nav.navigate``: Streamlit's
navigation, hidden), sets the page config, builds the engine once per server (``st.cache_resource``),
resolves the acting user, draws the shared sidebar with the list of pages (``docmind_ui.session.draw_frame``)
and hands over to the page the user picked.  Before sign-in (when it is on) no page is listed and only the
sign-in form renders; the URL keeps the page asked for, so a deep link lands there once the visitor has
signed in.
"""

from __future__ import annotations

import streamlit as st

from docmind_core.errors import SignInRequired
from docmind_core.process import prepare_process
from docmind_ui.nav import navigate
from docmind_ui.session import draw_frame, draw_sign_in_screen, frame_run, warm_server

prepare_process()  # this process's one-off set-up, before the frame opens the engine (a no-op after the first run)
with frame_run():
    page = navigate()
    if not draw_frame().user.is_signed_in:
        draw_sign_in_screen()
    try:
        page.run()
    except SignInRequired:  # the session ended while the page ran: the next run shows the sign-in screen
        st.rerun()
warm_server()  # once per server, after the first page is drawn
