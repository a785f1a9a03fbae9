"""Issue 23 item 2: a question typed while an answer streams waits its turn; it never cancels the first.
A stopped run has its own state on the page, in the Traces list and its filter: never a tier.

The answer in flight is a RunPump over a slow, Engine.ask-shaped generator, stored where the Chat page keeps
the run it is answering; the second question goes through the chat input (AppTest, offline backends)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

pytest.importorskip("docmind_core.engine")

from docmind_core.events import Done, RunStarted, Token  # noqa: E402
from docmind_core.values import Tier  # noqa: E402
from tests.paths import write_texts  # noqa: E402
from tests.ui.app_support import started_app  # noqa: E402

pytestmark = pytest.mark.slow  # whole app runs (AppTest) on a real engine

ACTIVE_KEY = "dm_active_run"
DOCS = {"aurora.md": "# Aurora X2\n\nThe Aurora X2 battery lasts 18 hours on a single charge.\n"}


@pytest.fixture(scope="module")
def notes_home(app_engine):
    kb = app_engine.create_kb("notes", "Product notes")
    outcomes = app_engine.ingest(kb.id, write_texts(app_engine.home.parent / "docs", DOCS))
    assert all(o.status == "added" for o in outcomes), outcomes
    return app_engine, kb


def slow_run(answer: str, tokens: int = 40, pause_s: float = 0.03):
    """Shaped like Engine.ask: tokens until cancelled, then a done event saying whether it was."""
    def ask(cancel: threading.Event):
        yield RunStarted(run_id=f"run-{answer}", question="first?", kb_ids=[], requested_mode="auto", backends=[])
        for _ in range(tokens):
            if cancel.is_set():
                break
            yield Token(text=answer[:1])
            cancel.wait(pause_s)
        yield Done(run_id=f"run-{answer}", answer=answer, mode="NONE", cancelled=cancel.is_set())
    return ask


def in_flight(answer: str):
    from docmind_ui.live import RunPump

    pump = RunPump(slow_run(answer), "auto")
    return pump, SimpleNamespace(question="first question?", mode="auto", pumps=[pump], pair_id=None)


def _markdown(at) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_a_question_typed_while_an_answer_streams_waits_and_both_are_answered(notes_home):
    engine, kb = notes_home
    at = started_app()
    at.sidebar.multiselect(key="dm_kb_ids").set_value([kb.id]).run()
    pump, active = in_flight("FIRSTANSWER")
    at.session_state[ACTIVE_KEY] = active
    at.chat_input[0].set_value("How long does the Aurora X2 battery last?").run()
    assert not at.exception, at.exception
    assert pump.wait(10) and pump.events[-1].kind == "done"
    assert pump.events[-1].cancelled is False  # the first run was not stopped by the second question
    page = _markdown(at)
    assert "FIRSTANSWER" in page  # the first answer is shown to its end
    assert "18 hours" in page  # and then the second question is answered
    assert ACTIVE_KEY not in at.session_state or at.session_state[ACTIVE_KEY] is None
    assert not at.session_state["dm_question_queue"]


def test_ask_now_stops_the_answer_in_flight_and_answers_the_waiting_question(notes_home):
    engine, kb = notes_home
    at = started_app()
    at.sidebar.multiselect(key="dm_kb_ids").set_value([kb.id]).run()
    pump, active = in_flight("SLOWANSWER")
    at.session_state[ACTIVE_KEY] = active
    at.session_state["dm_question_queue"] = [("How long does the Aurora X2 battery last?", "auto")]
    # the user's choice, made while the first streams: stop it and ask the waiting question now
    pump.stop()
    at.run()
    assert not at.exception, at.exception
    assert pump.events[-1].kind == "done" and pump.events[-1].cancelled is True
    assert "18 hours" in _markdown(at)
    assert not at.session_state["dm_question_queue"]


def test_a_stopped_run_has_no_tier_in_the_traces_list_or_its_filter(notes_home):
    engine, kb = notes_home
    cancel = threading.Event()
    events = []
    for event in engine.ask("How long does the Aurora X2 battery last?", [kb.id], mode="agentic", cancel=cancel):
        events.append(event)
        if event.kind == "routing":
            cancel.set()  # stopped by the user before the evidence was graded
    done = events[-1]
    assert done.kind == "done" and done.cancelled
    assert done.confidence is None  # a stopped answer is partial: no confidence
    row = next(s for s in engine.traces.list() if s.run_id == done.run_id)
    assert (row.tier, row.stop_reason) == ("", "cancelled")
    assert done.run_id not in {s.run_id for s in engine.traces.list(tier=[Tier.LOW.value])}


def test_a_stopped_run_shows_that_it_was_stopped_not_a_tier():
    from html import unescape

    from docmind_core.answer.verdict import verdict_for
    from docmind_core.events import Done
    from docmind_core.values import GradeResult
    from docmind_ui.html_views import evidence_grade_html, verdict_html

    graded = GradeResult(tier=Tier.LOW, top_score=0.1, lex_coverage=0.0, kb_entity_weak=True,
                         web_compensation_needed=False, reason="rerank_low")
    stopped = Done(run_id="r", answer="The pump", mode="RULE_PLANNER", grade=graded, cancelled=True)
    html = verdict_html(verdict_for(stopped)) + evidence_grade_html(graded, cancelled=True)
    assert 'data-verdict="stopped"' in html and "Stopped: no verdict" in unescape(html)
    assert "LOW" not in html and "dm-verdict-score" not in html  # no grade, no number
