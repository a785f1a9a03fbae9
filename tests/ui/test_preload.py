"""The Chat page has the browser load the other pages' element code while the user reads (docmind_ui/preload.py).

The browser side (the code is fetched once the page sits idle) is checked in tests/browser/test_browser.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

from streamlit.testing.v1 import AppTest

from docmind_ui.preload import PRELOADED_KINDS

ROOT = Path(__file__).resolve().parents[2]

# Streamlit calls that draw an element kind whose frontend code is fetched the first time a page shows one.
KINDS_WITH_OWN_CODE = {
    "plotly_chart", "dataframe", "data_editor", "table", "date_input", "time_input", "text_input", "text_area",
    "number_input", "checkbox", "toggle", "radio", "slider", "select_slider", "pills", "feedback", "tabs",
    "progress", "file_uploader", "camera_input", "audio_input", "download_button", "link_button", "form",
    "chat_message", "html", "json", "metric", "code", "image", "audio", "video", "map", "altair_chart",
    "vega_lite_chart", "pydeck_chart", "graphviz_chart", "line_chart", "bar_chart", "area_chart", "scatter_chart",
    "color_picker", "popover", "status", "segmented_control", "multiselect", "selectbox", "chat_input",
    "expander", "page_link", "toast",
}
# What the frame and a first visit to Chat draw themselves, so the browser has their code already; and a toast,
# a notice over the page rather than part of one.
DRAWN_BY_THE_FIRST_PAGE = {"segmented_control", "multiselect", "selectbox", "chat_input", "expander", "page_link"}
NOT_A_PAGE_ELEMENT = {"toast"}


def _kinds_drawn_by(path: Path) -> set[str]:
    return {node.func.attr for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in KINDS_WITH_OWN_CODE}


def test_every_element_kind_the_pages_draw_is_preloaded_or_on_the_first_page():
    sources = [*sorted((ROOT / "pages").glob("*.py")), *sorted((ROOT / "docmind_ui").glob("*.py")), ROOT / "app.py"]
    drawn = set().union(*(_kinds_drawn_by(p) for p in sources if p.name != "preload.py"))
    missing = drawn - set(PRELOADED_KINDS) - DRAWN_BY_THE_FIRST_PAGE - NOT_A_PAGE_ELEMENT
    assert not missing, f"add these to docmind_ui/preload.py, or the first switch to their page waits for their code: {missing}"
    assert "dataframe" in drawn and "number_input" in drawn  # the scan sees the pages' calls


def test_the_preload_draws_one_disabled_example_of_each_kind_and_nothing_else_visible():
    at = AppTest.from_string("from docmind_ui.preload import draw_preload\ndraw_preload()\n").run()
    assert not at.exception, at.exception
    for kind in PRELOADED_KINDS:
        assert len(at.get(kind)) == 1, kind
    for kind in ("text_input", "text_area", "number_input", "checkbox", "radio", "date_input"):
        assert at.get(kind)[0].disabled, f"a hidden {kind} must not take input"
    # everything sits in the one container the page's CSS hides
    from docmind_ui.html_views import PAGE_CSS
    from docmind_ui.preload import CONTAINER_KEY

    assert f".st-key-{CONTAINER_KEY} {{ display: none; }}" in PAGE_CSS
    main = at.main
    assert len(main.children) == 1, "the preload draws one container and nothing beside it"
