"""Issue 37 items 1-2 on screen: an answer in Chat is labelled where it is read (with the right source), the
label is kept with its run, and the statement of what the KB's "Supported" answers have earned changes
(AppTest, offline backends, real engine).  The Traces page's use of the same controls is tested with the
Experiments page (tests/ui/test_experiments_page.py)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from docmind_core.accounts.users import LOCAL_USER
from docmind_core.workbench import Workbench
from tests.markdown_probe import text_of
from tests.ui.app_support import kb_with_texts, started_app

pytestmark = pytest.mark.slow  # whole app runs (AppTest) on a real engine
QUESTION = "How long does the Aurora X2 battery last?"
DOCS = {
    "aurora.md": "# Aurora X2\n\nThe Aurora X2 battery lasts 18 hours on a single charge. It charges over USB-C "
                 "in 90 minutes.\n",
    "vega.md": "# Vega relay\n\nThe Vega relay runs at 48 volts and switches 16 amps.\n",
}


@pytest.fixture(scope="module")
def manuals(app_engine):
    return app_engine, kb_with_texts(app_engine, "manuals", DOCS)


def _statements(at: AppTest) -> list[str]:
    return [text_of(c.value).strip() for c in at.caption if "answers in this KB" in text_of(c.value)]


def test_labelling_an_answer_in_chat_changes_the_kb_statement(manuals):
    engine, kb = manuals
    bench = Workbench(engine, LOCAL_USER)
    at = started_app()
    at.sidebar.multiselect(key="dm_kb_ids").set_value([kb.id]).run()
    at.chat_input[0].set_value(QUESTION).run()
    assert not at.exception, at.exception
    run_id = next(t.run_id for t in bench.list_traces(limit=10) if t.question == QUESTION)
    before = _statements(at)
    assert before and "no such answer labelled yet" in before[-1]
    at.run()  # any click: the answer is now drawn from the conversation's history, with the same controls
    assert not at.exception, at.exception
    at.radio(key=f"dm_fb_verdict_{run_id}").set_value("wrong").run()  # Save is enabled once a verdict is picked
    at.selectbox(key=f"dm_fb_source_{run_id}").set_value("doc:vega.md")
    at.button(key=f"dm_fb_save_{run_id}").click().run()
    assert not at.exception, at.exception
    label = bench.run_label(run_id)
    assert label is not None and label.verdict == "wrong" and label.gold_doc_ids == ["vega.md"]
    assert label.kb_ids == [kb.id]
    assert any("You labelled this answer: wrong · right source: vega.md" in text_of(m.value) for m in at.markdown), \
        [text_of(m.value) for m in at.markdown if "labelled" in m.value]
    after = _statements(at)
    assert after and after[-1] != before[-1]
    assert after[-1] == bench.kb_badge([kb.id]).statement  # the page states the figure the core counts
    if label.answer_verdict == "supported":
        assert "0 of 1 labelled so far were right" in after[-1]
    else:
        assert "1 other labelled answer had another verdict" in after[-1]
    dataset = bench.get_dataset("labels of manuals by local")
    item = next(i for i in bench.dataset_items(dataset.id) if i.source_run_id == run_id)
    assert item.gold_doc_ids == ["vega.md"] and item.answers == [] and item.kb == "manuals"


def test_the_experiments_page_reviews_and_exports_the_labels(manuals):
    engine, kb = manuals
    bench = Workbench(engine, LOCAL_USER)
    done = list(bench.ask(QUESTION, [kb.id], mode="rule"))[-1]
    bench.label_run(done.run_id, "partly", gold_doc_ids=["aurora.md"])
    at = started_app()
    at.switch_page("pages/experiments.py").run()
    assert not at.exception, at.exception
    at.multiselect(key="dm_fb_review_kbs").set_value([kb.id]).run()
    assert not at.exception, at.exception
    table = next(df.value for df in at.dataframe if "right source" in df.value.columns)
    row = table[table["run id"] == done.run_id].iloc[0]
    assert (row["label"], row["right source"], row["KBs"]) == ("partly", "aurora.md", "manuals")
    assert _statements(at) == [bench.kb_badge([kb.id]).statement]
    langfuse = at.button(key="dm_fb_review_langfuse")
    assert not langfuse.disabled
    langfuse.click().run()  # no Langfuse keys in the test environment: refused, saying what to set
    assert any("LANGFUSE_PUBLIC_KEY" in text_of(e.value) for e in at.error), [e.value for e in at.error]
