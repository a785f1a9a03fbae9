"""Issue 19 item 7, on screen: hit testing a KB in the middle of a large ingest job showed "0 candidates" and
nothing else. The Knowledge bases page now warns that the KB is still being ingested, with how many documents
are pending and how many were searched; a chat answer over it says the same (AppTest, real engine)."""

from __future__ import annotations

import pytest

pytest.importorskip("docmind_core.engine")

from tests.markdown_probe import text_of  # noqa: E402
from tests.pending_jobs import pending_job  # noqa: E402
from tests.paths import write_texts  # noqa: E402
from tests.ui.app_support import started_app  # noqa: E402

pytestmark = pytest.mark.slow  # whole app runs (AppTest) on a real engine


@pytest.fixture(scope="module")
def pending_home(app_engine):
    engine = app_engine
    kb = engine.create_kb("incoming", "A KB being filled")
    outcomes = engine.ingest(kb.id, write_texts(engine.home.parent / "docs", {
        "vega.md": "# Vega relay\n\nThe Vega relay runs at 48 volts and switches 16 amps.\n"}))
    assert [o.status for o in outcomes] == ["added"]
    with pending_job(engine.db, kb.id, 300):
        yield engine, kb


def _pending_warnings(at) -> list[str]:
    return [text_of(w.value) for w in at.warning if "still being ingested" in text_of(w.value)]


def test_hit_testing_a_kb_being_ingested_says_documents_are_pending(pending_home):
    engine, kb = pending_home
    at = started_app()
    at.switch_page("pages/knowledge_bases.py").run()
    assert not at.exception, at.exception
    at.selectbox(key="dm_manage_kb").set_value(kb.id).run()
    next(t for t in at.text_input if t.label == "Query").set_value("Orion probe launch date")
    next(b for b in at.button if b.label == "Search").click().run()
    assert not at.exception, at.exception
    warnings = _pending_warnings(at)
    assert warnings, [text_of(w.value) for w in at.warning]
    assert "'incoming' is still being ingested: 300 document(s) pending" in warnings[0]
    assert "1 indexed document(s) were searched" in warnings[0]


def test_a_chat_answer_over_a_kb_being_ingested_warns_on_screen(pending_home):
    engine, kb = pending_home
    at = started_app()
    at.sidebar.multiselect(key="dm_kb_ids").set_value([kb.id]).run()
    at.chat_input[0].set_value("When does the Orion probe launch?").run()
    assert not at.exception, at.exception
    shown = "\n".join(m.value for m in at.markdown)
    assert "nothing relevant" not in shown
    warnings = _pending_warnings(at)
    assert warnings and "300 document(s) pending" in warnings[0], [text_of(w.value) for w in at.warning]


def test_the_traces_page_replays_the_pending_warning(pending_home):
    engine, kb = pending_home
    events = list(engine.ask("When does the Orion probe launch?", [kb.id], pair_id="pending-pair"))
    assert events[-1].pending_documents == 300
    at = started_app()
    at.switch_page("pages/traces.py").run()
    assert not at.exception, at.exception
    at.selectbox(key="dm_tr_pair").set_value("pending-pair").run()  # a pair of one run: its replay
    assert not at.exception, at.exception
    warnings = _pending_warnings(at)
    assert warnings and "300 document(s) pending" in warnings[0], [text_of(w.value) for w in at.warning]
