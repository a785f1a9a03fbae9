"""Issue 19 item 8 on the pages (AppTest on app.py): a document named ``invoice\\u202etxt.md`` rendered as
"invoicedm.txt", and zero-width characters in KB names and chunks reached the page.  Every plain-text sink
(option labels, table cells) and every Markdown one shows them as ``<U+XXXX>`` markers instead."""

from __future__ import annotations

import pytest

from docmind_core.accounts.users import LOCAL_USER
from docmind_core.workbench import Workbench
from tests.ui.app_support import started_app

pytestmark = pytest.mark.slow  # whole app runs (AppTest) on an ingested KB

DOC = "invoice\u202etxt.md"
KB = "fin\u200bance"
HIDDEN = ("\u202e", "\u200b", "\u2060")


@pytest.fixture(scope="module")
def engine(app_engine):
    bench = Workbench(app_engine, LOCAL_USER)
    kb = bench.create_kb(KB)
    doc = app_engine.home.parent / DOC
    doc.write_text("# REDFOX\n\nThe RED\u2060FOX budget is 42 units, approved by the board in March.\n",
                   encoding="utf-8")
    assert bench.ingest(kb.id, [doc])[0].status == "added"
    return app_engine


def everything_shown(at) -> str:
    """Every text the page hands to the browser: Markdown, option labels, table cells."""
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption] + [t.value for t in at.title]
    for kind in ("multiselect", "selectbox"):
        for box in at.get(kind):
            parts += [str(o) for o in box.options]
    for frame in at.dataframe:
        parts += [str(v) for v in frame.value.astype(str).to_numpy().ravel()]
    return "\n".join(parts)


def test_sidebar_and_kb_page_show_markers_not_the_characters(engine):
    at = started_app()
    at.switch_page("pages/knowledge_bases.py").run()
    assert not at.exception, at.exception
    sidebar_docs = next(b for b in at.sidebar.multiselect if b.label.startswith("Documents"))
    sidebar_kbs = next(b for b in at.sidebar.multiselect if b.label == "Knowledge bases")
    assert any("fin<U+200B>ance" in str(o) for o in sidebar_kbs.options), sidebar_kbs.options
    assert any("invoice<U+202E>txt.md" in str(o) for o in sidebar_docs.options), sidebar_docs.options
    shown = everything_shown(at)
    assert not [c for c in HIDDEN if c in shown], [line for line in shown.splitlines() if any(c in line for c in HIDDEN)]
    assert "invoice<U+202E>txt.md" in shown  # the documents table and the preview picker
    assert "RED<U+2060>FOX" in shown  # the chunk preview
