"""DocMind workbench: the frame every page shares.

Run with ``streamlit run app.py``.  This file picks the page (``docmind_ui.nav.navigate``: Streamlit's
navigation, hidden), sets the page config, resolves the acting user, draws the shared sidebar with the list of
pages (``docmind_ui.session.draw_frame``) and hands over to the page the user picked.  Before sign-in (when it
is on) no page is listed and only the sign-in form renders, from the accounts alone: the engine (once per
server, ``st.cache_resource``) loads behind it.  The URL keeps the page asked for, so a deep link lands there
once the visitor has signed in.
"""

from __future__ import annotations

import sys

import streamlit as st

# A fresh server's first run imports the stores (sqlite-utils imports pandas) before it can draw anything:
# say so at once rather than leave the page blank for that second or two.
_opening = st.empty()
if "docmind_ui.session" not in sys.modules:
    _opening.caption("Opening DocMind…")

from docmind_core.errors import SignInRequired
from docmind_core.process import prepare_process
from docmind_ui.nav import navigate
from docmind_ui.session import draw_frame, frame_run, warm_server

_opening.empty()
prepare_process()  # this process's one-off set-up, before the frame opens the engine (a no-op after the first run)
with frame_run():
    page = navigate()
    draw_frame()  # the sign-in form, or a loading notice while the engine starts, stop the run here
    try:
        page.run()
    except SignInRequired:  # the session ended while the page ran: the next run shows the sign-in screen
        st.rerun()
warm_server()  # once per server, after the first page is drawn
