"""The frontend code the other pages need, loaded in the browser while the user reads the Chat page.

Streamlit's frontend fetches and parses each element kind's code (plotly.js, the table grid with Arrow, the
number, date and text inputs, ...) the first time a page shows one, and draws nothing of that page until all of
it has arrived: a first switch to Traces or Knowledge bases showed its title 0.45-0.6 s after the page's run
had ended, against 0.1-0.15 s for a page whose element kinds were loaded (bench/RESULTS.md, "Page speed").  So
the Chat page draws one disabled example of each such kind in a hidden container (see ``PAGE_CSS``) once it has
been shown for a while; never with the page's own draw, where the parse delayed the first page and the next click.
"""

from __future__ import annotations

import base64
import datetime

import streamlit as st

from docmind_ui.charts import preload_figure

CONTAINER_KEY = "dm-chart-preload"  # hidden by PAGE_CSS (.st-key-dm-chart-preload)
WIDGET_PREFIX = "dm_preload_"

# The element kinds the other pages draw that a first visit to Chat does not, as AppTest names them: a page that
# starts using a new kind adds it here and to _draw_kinds (tests/ui/test_preload.py checks both against the code).
PRELOADED_KINDS = ("plotly_chart", "dataframe", "date_input", "text_input", "text_area", "number_input", "checkbox",
                   "radio", "tabs", "progress", "file_uploader", "download_button", "form", "chat_message", "html", "image")


# The smallest PNG (1 x 1, transparent): enough for the browser to fetch the image element's code.
_ONE_PIXEL_PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=")


def draw_preload() -> None:
    """One hidden, disabled example of each kind in PRELOADED_KINDS."""
    with st.container(key=CONTAINER_KEY):
        st.plotly_chart(preload_figure(), key="dm_chart_preload", config={"staticPlot": True})
        _draw_kinds()


def _draw_kinds() -> None:
    collapsed = {"label_visibility": "collapsed", "disabled": True}
    # a date column: the grid loads its date editors with the grid itself
    st.dataframe({"n": [1], "when": [datetime.date(2026, 1, 1)]}, key=f"{WIDGET_PREFIX}table")
    st.text_input("preload", key=f"{WIDGET_PREFIX}text", **collapsed)
    st.text_area("preload", key=f"{WIDGET_PREFIX}area", **collapsed)
    st.number_input("preload", key=f"{WIDGET_PREFIX}number", **collapsed)
    st.date_input("preload", value=datetime.date(2026, 1, 1), key=f"{WIDGET_PREFIX}date", **collapsed)
    st.checkbox("preload", key=f"{WIDGET_PREFIX}check", disabled=True)
    st.radio("preload", ["a"], key=f"{WIDGET_PREFIX}radio", **collapsed)
    st.file_uploader("preload", key=f"{WIDGET_PREFIX}upload", **collapsed)
    st.download_button("preload", b"", key=f"{WIDGET_PREFIX}download", disabled=True)
    (tab,) = st.tabs(["preload"])
    with tab:
        st.progress(0.0)
    with st.form(f"{WIDGET_PREFIX}form"):
        st.form_submit_button("preload", disabled=True)
    with st.chat_message("assistant"):
        st.html("<span></span>")
    st.image(_ONE_PIXEL_PNG)  # a cited PDF page is shown as an image (Chat's source cards, hit testing)
