"""The workbench pages driven by streamlit.testing.v1.AppTest on a temp home with the demo KB (offline backends)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("docmind_core.engine")
from streamlit.testing.v1 import AppTest  # noqa: E402

from tests.markdown_probe import text_of  # noqa: E402  (alerts hold escaped Markdown: compare what they show)
from tests.paths import ROOT, write_texts
from tests.ui.app_support import TIMEOUT, started_app

pytestmark = pytest.mark.slow  # whole app runs (AppTest) or the demo KB ingested: not in make test-fast

NOT_DOCUMENTS = {"QUESTIONS.md", "README.md"}  # the demo folder's question list is not part of the corpus
# Used only when the repository's demo corpus (data/demo) is not there.
FALLBACK_DOCS = {
    "aurora.md": "# Aurora X2\n\nThe Aurora X2 battery lasts 18 hours on a single charge. It charges over USB-C "
                 "in 90 minutes. The Aurora X2 weighs 1.2 kg.\n",
    "nimbus.md": "# 灵云 Nimbus\n\n灵云Nimbus相机采用1200万像素传感器，支持光学防抖。电池续航约为10小时。\n",
}


def has_demo_corpus() -> bool:
    return (ROOT / "data" / "demo" / "nimbus_n2_datasheet.pdf").exists()


def english_question() -> str:
    return "What is the maximum power draw of the Nimbus N2?" if has_demo_corpus() else \
        "How long does the Aurora X2 battery last?"


def demo_files(tmp: Path) -> list[Path]:
    demo = ROOT / "data" / "demo"
    files = sorted(p for p in demo.glob("*") if p.is_file() and not p.name.startswith(".")
                   and p.name not in NOT_DOCUMENTS) if demo.is_dir() else []
    if files:
        return files
    return sorted(write_texts(tmp, FALLBACK_DOCS))


@pytest.fixture(scope="module")
def demo_home(app_engine):
    """One home for the module, the engine the app will use (same cache entry), and the demo KB ingested."""
    engine = app_engine
    kb = engine.create_kb("demo", "Demo corpus: the fictional Aurora and Nimbus products")
    outcomes = engine.ingest(kb.id, demo_files(engine.home.parent / "docs"))
    assert all(o.status != "failed" for o in outcomes), outcomes
    yield engine



def _markdown(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_chat_question_shows_badge_timeline_chart_and_citations(demo_home):
    at = started_app()
    assert at.sidebar.multiselect[0].value, "the demo KB is selected by default"
    at.chat_input[0].set_value(english_question()).run()
    assert not at.exception, at.exception
    html = _markdown(at)
    assert 'class="dm-verdict dm-verdict-' in html  # the answer's one verdict, with what it means
    assert "Supported by the sources" in html or "Partly supported" in html
    assert 'data-grade="' in html and 'class="dm-tier' not in html  # the evidence grade, in neutral type
    assert 'class="dm-timeline"' in html and 'data-kind="routing"' in html  # timeline with the route
    assert 'class="dm-cite"' in html and 'class="dm-source' in html  # citation chips and source cards
    assert len(at.get("plotly_chart")) >= 1  # the rerank score distribution
    # the answer was persisted: the conversation is selected and replays from its trace after a rerun
    assert at.session_state["dm_conv"] and at.sidebar.selectbox(key="dm_conv_pick").value == at.session_state["dm_conv"]
    at.run()
    assert 'class="dm-cite"' in _markdown(at)


def _preloads(at: AppTest) -> int:
    return sum(1 for c in at.get("plotly_chart") if "dm_chart_preload" in c.proto.id)


def test_plotly_js_is_not_preloaded_with_a_page_draw(demo_home):
    """The browser parses plotly.js for ~1 s when the first chart appears: drawn on a return to Chat it stalled the
    next page switch, in a question's run the answer's text (bench/page_speed.py).  A timed fragment draws it once
    the page has been shown for a while (tests/test_browser.py)."""
    at = started_app()
    assert _preloads(at) == 0
    at.switch_page("pages/config.py").run()
    at.switch_page("pages/chat.py").run()
    assert not at.exception, at.exception
    assert _preloads(at) == 0, "a visit to Chat must not make the browser load plotly.js"
    at.chat_input[0].set_value(english_question()).run()
    assert not at.exception, at.exception
    assert _preloads(at) == 0 and len(at.get("plotly_chart")) == 1  # the answer's own chart


def test_side_by_side_runs_both_paths_and_compares(demo_home):
    at = started_app()
    at.segmented_control(key="dm_chat_mode").set_value("Side by side").run()
    at.chat_input[0].set_value("Compare the Aurora X2 and the Nimbus battery life").run()
    assert not at.exception, at.exception
    html = _markdown(at)
    assert html.count('class="dm-verdict dm-verdict-') >= 2
    assert any("Comparison" in m.value for m in at.markdown)
    pairs = {s.pair_id for s in demo_home.traces.list() if s.pair_id}
    assert pairs and {s.requested_mode for s in demo_home.traces.list(pair_id=pairs.pop())} == {"rule", "agentic"}


def test_config_refuses_low_at_or_above_high(demo_home):
    at = started_app()
    at.switch_page("pages/config.py").run()
    assert not at.exception, at.exception
    at.number_input(key="cfg::grader.low_threshold").set_value(0.95)  # above the default high_threshold (0.9)
    next(b for b in at.button if b.label == "Apply grader").click().run()
    errors = " ".join(text_of(e.value) for e in at.error)
    assert "low_threshold" in errors and "below" in errors
    assert demo_home.settings.grader.low_threshold == 0.25  # nothing was stored
    # a valid change is stored, shows in the history, and can be reset
    at.number_input(key="cfg::grader.low_threshold").set_value(0.3)
    next(b for b in at.button if b.label == "Apply grader").click().run()
    assert demo_home.settings.grader.low_threshold == 0.3
    assert any("grader.low_threshold" in str(df.value) for df in at.dataframe)
    demo_home.config.reset_all(by="test")


def test_config_builds_only_the_groups_that_are_open_and_every_key_has_a_group(demo_home):
    """~100 widgets made the first switch to Config slow: a collapsed group's form is built when it is opened."""
    from docmind_core.settings import key_specs

    at = started_app()
    at.switch_page("pages/config.py").run()
    assert not at.exception, at.exception
    drawn = {w.key for kind in ("number_input", "checkbox", "selectbox", "text_input") for w in at.get(kind)
             if (w.key or "").startswith("cfg::")}
    assert {k.split(".")[0].removeprefix("cfg::") for k in drawn} == {"grader", "agentic"}, sorted(drawn)
    groups = {s.group for s in key_specs()}  # each has its expander; run.* and experiments.* were missing
    config_groups = [e for e in at.expander if any(f"cfg-group-{g}" in str(e.proto) for g in groups)]
    assert len(config_groups) == len(groups), [e.label for e in at.expander]
    # opening a group (as a click on it does) builds its form; it stays open over later runs
    at.session_state["cfg-group-auth"] = True
    at.run()
    assert not at.exception, at.exception
    assert at.checkbox(key="cfg::auth.enabled").value is False
    at.run()
    assert any(w.key == "cfg::auth.enabled" for w in at.checkbox)
    at.session_state["cfg-group-auth"] = False
    at.run()
    assert not any(w.key == "cfg::auth.enabled" for w in at.checkbox)


def test_kb_upload_reports_good_and_bad_files(demo_home):
    at = started_app()
    at.switch_page("pages/knowledge_bases.py").run()
    assert not at.exception, at.exception
    evil = b"# Notes\n\nSafe text <script>alert('x')</script> and <img src=x onerror=alert(1)> stays text.\n"
    at.file_uploader(key="dm_uploads").set_value([("notes.md", evil, "text/markdown"),
                                                  ("broken.pdf", b"this is not a pdf", "application/pdf")])
    at.run()
    next(b for b in at.button if b.label == "Ingest").click().run()
    assert not at.exception, at.exception
    # the upload is a background job of the core: the page returns at once, the job finishes on its own
    job = demo_home.jobs.jobs.list(limit=1)[0]
    assert [f.name for f in job.files] == ["notes.md", "broken.pdf"]
    assert demo_home.jobs.wait(job.id, TIMEOUT).finished
    at.run()
    assert not at.exception, at.exception
    assert any("notes.md" in text_of(s.value) for s in at.success)
    errors = [text_of(e.value) for e in at.error]
    assert any(e.startswith("broken.pdf:") and e.count("broken.pdf") == 1 for e in errors), errors  # named once
    demo = next(k for k in demo_home.store.list_kbs() if k.name == "demo")
    caption = " ".join(c.value for c in at.caption)
    assert f"{demo.document_count} documents · {demo.chunk_count} chunks" in caption  # counts after the job
    # the chunk preview starts on a file that was ingested, never on the failed one
    assert at.selectbox(key=f"dm_preview_doc_{demo.id}").value in {
        d.id for d in demo_home.store.list_documents(demo.id) if d.status == "complete"}
    assert any("broken.pdf" in text_of(e.value) for e in at.error)
    outcome = next(df.value for df in at.dataframe if "status" in df.value.columns and "file" in df.value.columns)
    assert set(outcome["status"]) >= {"failed"} and len(outcome) == 2
    # documents list with chunk counts, and hit testing: every candidate with per-stage scores and its cut stage
    docs = next(df.value for df in at.dataframe if "chunks" in df.value.columns and "name" in df.value.columns)
    assert int(docs.loc[docs["name"] == "notes.md", "chunks"].iloc[0]) >= 1
    next(t for t in at.text_input if t.label == "Query").set_value("Nimbus N2 power draw")
    next(b for b in at.button if b.label == "Search").click().run()
    assert not at.exception, at.exception
    hits = next(df.value for df in at.dataframe if "cut by" in df.value.columns)
    assert {"vector", "keyword", "fused", "rerank", "kept"} <= set(hits.columns) and len(hits) >= 2
    assert hits["kept"].any()


def test_traces_page_replays_and_regrades(demo_home):
    if not demo_home.traces.list():
        demo_home_ask = list(demo_home.ask(english_question(),
                                           [demo_home.store.list_kbs()[0].id]))
        assert demo_home_ask[-1].kind == "done"
    at = started_app()
    at.switch_page("pages/traces.py").run()
    assert not at.exception, at.exception
    next(b for b in at.button if b.label == "Regrade").click().run()
    assert not at.exception, at.exception
    assert any("change evidence grade" in m.value for m in at.markdown)
    # a trace exported as JSON comes back through the import box, labelled "imported"
    exported = demo_home.traces.export_json([demo_home.traces.list(label=None)[0].run_id])
    at.file_uploader(key="dm_tr_import").set_value(("trace.json", exported.encode(), "application/json")).run()
    next(b for b in at.button if b.label == "Import").click().run()
    assert not at.exception, at.exception
    assert any("Imported 1 run" in s.value for s in at.success)
    assert demo_home.traces.list(label="imported")
    pairs = sorted({s.pair_id for s in demo_home.traces.list() if s.pair_id})
    if pairs:  # a side-by-side pair opens as a step-aligned comparison, exportable as JSON
        at.selectbox(key="dm_tr_pair").set_value(pairs[0]).run()
        assert not at.exception, at.exception
        assert any(m.value.startswith("**Comparison**") for m in at.markdown)
        assert _markdown(at).count('class="dm-verdict dm-verdict-') >= 2
        assert any(label in _markdown(at) for label in ("Supported by the sources", "Partly supported",
                                                         "Not supported by the sources", "No answer in the sources"))


def test_run_pump_stop_sets_the_cancel_event_and_the_run_still_finishes():
    import threading

    from docmind_core.events import Done, RunStarted, Token
    from docmind_ui.live import RunPump

    def fake_ask(cancel: threading.Event):  # shaped like Engine.ask: tokens until cancelled, then done
        yield RunStarted(run_id="r", question="q", kb_ids=[], requested_mode="auto", backends=[])
        for _ in range(500):
            if cancel.is_set():
                break
            yield Token(text="x")
            cancel.wait(0.01)
        yield Done(run_id="r", answer="x", mode="NONE", cancelled=cancel.is_set())

    pump = RunPump(fake_ask, "test")
    seen = []
    for event in pump.stream(poll_s=0.05):
        seen.append(event.kind)
        if len(seen) == 3:
            pump.stop()
    assert pump.wait(5) and seen[-1] == "done" and pump.events[-1].cancelled
    assert len(seen) < 100


def test_a_new_kb_joins_the_sidebar_and_hit_testing_searches_the_page_kb(demo_home):
    at = started_app()
    at.switch_page("pages/knowledge_bases.py").run()
    next(t for t in at.text_input if t.label == "Name").set_value("fresh-kb")
    next(b for b in at.button if b.label == "Create").click().run()
    assert not at.exception, at.exception
    fresh = next(k for k in demo_home.store.list_kbs() if k.name == "fresh-kb")
    assert fresh.id in at.session_state["dm_kb_ids"]  # added to the sidebar's selection
    assert at.selectbox(key="dm_manage_kb").value == fresh.id  # and picked on the page
    # the sidebar holds only the empty new KB; the page picks the demo KB: hit testing searches the page's
    demo = next(k for k in demo_home.store.list_kbs() if k.name == "demo")
    at.sidebar.multiselect(key="dm_kb_ids").set_value([fresh.id]).run()
    at.selectbox(key="dm_manage_kb").set_value(demo.id).run()
    next(t for t in at.text_input if t.label == "Query").set_value("Nimbus N2 power draw")
    next(b for b in at.button if b.label == "Search").click().run()
    assert not at.exception, at.exception
    hits = next(df.value for df in at.dataframe if "cut by" in df.value.columns)
    demo_docs = {d.name for d in demo_home.store.list_documents(demo.id)}
    assert len(hits) >= 2 and set(hits["document"]) <= demo_docs
    assert len(at.get("plotly_chart")) >= 1  # the score chart, as in chat
    assert 'id="src-hits-1"' in _markdown(at)  # the cards the bars jump to
    # the datasheet is a PDF: its page is offered as an image (an explanation without the pages extra)
    assert "nimbus_n2_datasheet.pdf" in set(hits["document"])
    assert "p. 1" in set(hits.loc[hits["document"] == "nimbus_n2_datasheet.pdf", "where"])
    picker = at.selectbox(key="dm_page-hits")
    datasheet = next(n for n in picker.options if "nimbus_n2_datasheet.pdf, p. 1" in str(n))
    picker.set_value(int(datasheet.split("]")[0].strip("["))).run()
    assert not at.exception, at.exception
    images, notes = at.get("image"), [m.value for m in at.info]
    assert images or any("pypdfium2" in note for note in notes), notes
    demo_home.delete_kb(fresh.id)
