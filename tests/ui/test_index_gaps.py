"""Issue 12 item 3, on screen: a search over a KB with missing vectors says so on the page, not only in an event.

Hit testing on the Knowledge bases page and an answer on the Chat page both show a warning that names the
missing vectors and the repair command (AppTest, offline backends, real engine and Chroma store)."""

from __future__ import annotations

import pytest

pytest.importorskip("docmind_core.engine")
from streamlit.testing.v1 import AppTest  # noqa: E402

from tests.markdown_probe import text_of  # noqa: E402
from tests.paths import write_texts  # noqa: E402
from tests.ui.app_support import started_app  # noqa: E402

pytestmark = pytest.mark.slow  # whole app runs (AppTest) on a real engine
QUESTION = "How long does the Aurora X2 battery last?"
DOCS = {
    "aurora.md": "# Aurora X2\n\nThe Aurora X2 battery lasts 18 hours on a single charge. It charges over USB-C "
                 "in 90 minutes. The Aurora X2 weighs 1.2 kg.\n",
    "vega.md": "# Vega relay\n\nThe Vega relay runs at 48 volts and switches 16 amps. It is rated for 100,000 "
               "cycles and mounts on a DIN rail.\n",
    "orion.md": "# Orion hub\n\nThe Orion hub has eight ports and draws 12 W. Its firmware updates over the air "
                "every month.\n",
}


@pytest.fixture(scope="module")
def gap_home(app_engine):
    """The app's engine with one KB whose vector store lost two of its chunks' vectors."""
    engine = app_engine
    kb = engine.create_kb("manuals", "Product manuals")
    outcomes = engine.ingest(kb.id, write_texts(engine.home.parent / "docs", DOCS))
    assert all(o.status == "added" for o in outcomes), outcomes
    lost = [cid for cid, _doc, _ in engine.store.child_chunk_index(kb.id)][:2]
    engine.ingestor.vector_store.delete_chunks(kb.id, lost)  # before any search: the first one counts them
    yield engine, kb



def _gap_warnings(at: AppTest) -> list[str]:
    return [text_of(w.value) for w in at.warning if "have no vector" in text_of(w.value)]


def test_hit_testing_warns_about_missing_vectors(gap_home):
    engine, kb = gap_home
    total = engine.store.get_kb(kb.id).chunk_count
    at = started_app()
    at.switch_page("pages/knowledge_bases.py").run()
    assert not at.exception, at.exception
    at.selectbox(key="dm_manage_kb").set_value(kb.id).run()
    next(t for t in at.text_input if t.label == "Query").set_value("Aurora X2 battery")
    next(b for b in at.button if b.label == "Search").click().run()
    assert not at.exception, at.exception
    warnings = _gap_warnings(at)
    assert warnings and f"2 of {total} chunks have no vector" in warnings[0], [text_of(w.value) for w in at.warning]
    assert "kb check manuals --repair" in warnings[0]


def test_a_chat_answer_over_a_kb_with_missing_vectors_warns_on_screen(gap_home):
    engine, kb = gap_home
    total = engine.store.get_kb(kb.id).chunk_count
    at = started_app()
    at.sidebar.multiselect(key="dm_kb_ids").set_value([kb.id]).run()
    at.chat_input[0].set_value(QUESTION).run()
    assert not at.exception, at.exception
    assert "18 hours" in "\n".join(m.value for m in at.markdown)  # the answer is there
    warnings = _gap_warnings(at)  # and, outside the collapsed timeline, a warning a reader sees with it
    assert warnings and f"2 of {total} chunks have no vector" in warnings[0], [text_of(w.value) for w in at.warning]
    assert "docmind kb check" in warnings[0] and "--repair" in warnings[0]
