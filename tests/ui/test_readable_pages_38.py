"""Issue 38 item 4 on the pages (AppTest on app.py and on the shared renderers): the side-by-side verdict and
labels, a stop reported as the user's, thresholds shown with their digits, the Traces start time, example
questions on an empty Chat, the KB selection kept in the URL, the conversation picker's first entry, and no
loading note left once a reopened conversation is drawn."""

from __future__ import annotations

import json
from html import unescape

import pytest
from streamlit.testing.v1 import AppTest

from docmind_core.accounts.users import LOCAL_USER
from docmind_core.workbench import Workbench
from tests.markdown_probe import text_of
from tests.ui.app_support import APP, TIMEOUT, started_app

KB_NAME = "examples-kb"
EXAMPLE = "How long does the Aurora X2 battery last?"


def _pair_page() -> None:
    from docmind_ui.run_view import render_pair
    from tests.reports.test_pair_verdict import _run

    a = _run("ra", "AGENTIC", requested="RULE_PLANNER", level="partly_supported", total_ms=900, prompt_tokens=0)
    b = _run("rb", "AGENTIC", requested="AGENTIC", level="supported", score=0.9, supported=3, total_ms=4000,
             timings={"agentic": 3000.0},
             answer="Nothing in common with the other text; the warranty covers two years [1].")
    render_pair(a["events"], b["events"], a["config"], b["config"], key="pair")


def _stopped_page() -> None:
    """A run the user stopped while a search worker was still waiting for its deadline."""
    from docmind_core.events import Done, ErrorRaised, RunStarted
    from tests.reports.test_compare import sample_run

    stopped = sample_run("rs", "RULE_PLANNER")
    done = stopped[-1]
    assert isinstance(done, Done) and isinstance(stopped[0], RunStarted)
    stopped.insert(-1, ErrorRaised(stage="retrieval.doc_search", message="timeout: no answer within 8000 ms",
                                   t_ms=39.0))
    stopped[-1] = done.model_copy(update={"cancelled": True, "verdict": None})
    from docmind_core.reports.timeline import RunDigest
    from docmind_ui.run_view import render_run

    render_run(RunDigest.from_events(stopped), key="stopped")


@pytest.fixture(scope="module")
def pair_page() -> AppTest:
    at = AppTest.from_function(_pair_page, default_timeout=TIMEOUT).run()
    assert not at.exception, at.exception
    return at


def test_side_by_side_names_both_paths_and_says_which_did_better(pair_page):
    html = unescape("\n".join(m.value for m in pair_page.markdown))
    assert "A · rule planner (ran agentic)" in html and "B · agentic" in html
    assert "A: AGENTIC" not in html
    assert 'class="dm-pair-verdict" data-winner="B"' in html
    assert "B (agentic) did better: verdict Supported by the sources 0.90 against Partly supported 0.60" in html
    assert "dm-diff-columns" in html  # the two answers share little: side by side, not interleaved


def test_side_by_side_tables_have_no_none_or_uncounted_zero(pair_page):
    summary = next(df.value for df in pair_page.dataframe if "metric" in df.value.columns)
    cells = [str(c) for c in [*summary["A"], *summary["B"]]]
    assert "None" not in cells and "" not in cells
    assert dict(zip(summary["metric"], summary["A"]))["prompt tokens"] == "not recorded"  # never counted
    latency = next(df.value for df in pair_page.dataframe if "stage" in df.value.columns)
    assert "None" not in [str(c) for c in [*latency["A (ms)"], *latency["B (ms)"]]]


def test_a_stop_the_user_asked_for_is_reported_as_theirs():
    at = AppTest.from_function(_stopped_page, default_timeout=TIMEOUT).run()
    assert not at.exception, at.exception
    warnings = [w.value for w in at.warning]
    assert not any("timeout" in w for w in warnings), warnings
    assert any("Stopped by you" in i.value for i in at.info)


@pytest.fixture(scope="module")
def kb_with_dataset(app_engine, tmp_path_factory):
    """A knowledge base with a labelled dataset made for it (as the demo has), and a live threshold of 0.995."""
    assert app_engine.wait_ready(90)
    bench = Workbench(app_engine, LOCAL_USER)
    kb = bench.create_kb(KB_NAME)
    path = tmp_path_factory.mktemp("dataset") / "items.jsonl"
    path.write_text(json.dumps({"id": "q1", "question": EXAMPLE, "kb": KB_NAME, "answerable": True}) + "\n",
                    encoding="utf-8")
    bench.import_dataset("examples", path, kb=KB_NAME)
    bench.set_config({"grader.high_threshold": 0.995})
    return kb.id


def _sidebar_kbs(at: AppTest):
    return next(m for m in at.sidebar.multiselect if m.label == "Knowledge bases")


def test_the_empty_chat_offers_example_questions_and_one_click_asks(kb_with_dataset):
    at = started_app()
    assert _sidebar_kbs(at).value == [kb_with_dataset]
    examples = [b for b in at.button if b.key and b.key.startswith("dm_example_")]
    assert [text_of(b.label).strip() for b in examples] == [EXAMPLE]  # a label is Markdown: escaped
    examples[0].click().run()
    assert not at.exception, at.exception
    assert EXAMPLE in [t.value for t in at.text]  # asked: the question stands in the conversation
    assert not [b for b in at.button if b.key and b.key.startswith("dm_example_")]


def test_the_kb_selection_is_kept_in_the_url_for_a_reload(kb_with_dataset):
    at = started_app()
    assert at.query_params["kb"] == str(kb_with_dataset)
    _sidebar_kbs(at).set_value([]).run()
    assert not at.exception, at.exception
    assert at.query_params["kb"] == "none"
    reloaded = AppTest.from_file(APP, default_timeout=TIMEOUT)
    reloaded.query_params["kb"] = "none"
    reloaded.run()
    assert not reloaded.exception, reloaded.exception
    assert _sidebar_kbs(reloaded).value == []


def test_the_conversation_picker_starts_on_a_new_conversation(kb_with_dataset):
    at = started_app()
    picker = next(s for s in at.sidebar.selectbox if s.label == "Conversation")
    assert picker.index == 0  # an entry chosen, not the "Choose an option" placeholder
    assert picker.format_func(picker.value) == "— new conversation —"


def _traces_page() -> AppTest:
    at = started_app()
    at.switch_page("pages/traces.py").run()
    assert not at.exception, at.exception
    return at


def test_the_what_if_field_shows_a_live_threshold_with_its_digits(kb_with_dataset):
    at = _traces_page()
    high = next(n for n in at.number_input if n.label == "high_threshold")
    assert high.value == pytest.approx(0.995)
    assert high.proto.format == "%.3f"  # 0.995, not 0.99


def test_the_traces_list_has_room_for_the_start_time(kb_with_dataset):
    at = _traces_page()
    runs = next(df for df in at.dataframe if '"started"' in df.proto.columns)
    started = json.loads(runs.proto.columns)["started"]
    assert started.get("width") != "small" and "UTC" in started.get("label", "")


def test_no_loading_note_is_left_once_a_reopened_conversation_is_drawn(app_engine):
    assert app_engine.wait_ready(90)
    bench = Workbench(app_engine, LOCAL_USER)
    conv_id = bench.start_conversation("reopened")
    for question in ("hello there", "thanks a lot"):
        assert list(bench.ask(question, [], conversation_id=conv_id))[-1].kind == "done"
    at = started_app()
    at.session_state["dm_conv"] = conv_id
    at.run()
    assert not at.exception, at.exception
    assert "thanks a lot" in [t.value for t in at.text]
    assert not [c.value for c in at.caption if "Loading the sources" in c.value]
