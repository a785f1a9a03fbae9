"""Reopening a conversation on the Chat page (issue 23 item 7: 3.7 s with nothing new on screen).

- The stored traces of a reopened conversation are read in one batch, each run is folded into its digest once
  per session (not again at every rerun of the page), and the Markdown export is made once per conversation
  size (a deferred, callable download kept the browser's network busy: see pages/chat.py).
- The questions and answers come from the conversation itself, before and apart from the traces: an answer
  whose trace is gone still shows its text, with a note that its sources and scores are missing.
Counts, not timings: how fast a reopen is drawn is measured in bench/page_speed.py.
"""

from __future__ import annotations

import pytest

from docmind_core.accounts.users import LOCAL_USER
from docmind_core.reports.timeline import RunDigest
from docmind_core.store.traces import TraceStore
from docmind_core.workbench import Workbench
from tests.ui.app_support import started_app

pytestmark = pytest.mark.slow  # whole app runs (AppTest) on a real engine

CONV_KEY = "dm_conv"  # pages/chat.py: the open conversation
QUESTIONS = ["hello there", "what can you do", "thanks a lot"]


@pytest.fixture(scope="module")
def conversation(app_engine):
    """A conversation of three answered questions (no knowledge base: answered without retrieval)."""
    assert app_engine.wait_ready(90)
    bench = Workbench(app_engine, LOCAL_USER)
    conv_id = bench.start_conversation("three questions")
    for question in QUESTIONS:
        events = list(bench.ask(question, [], conversation_id=conv_id))
        assert events[-1].kind == "done", events[-1]
    return conv_id, bench


@pytest.fixture
def counted(monkeypatch):
    """How often the page reads a trace (one by one or in a batch), folds a run and builds the export."""
    counts = {"get": 0, "batches": 0, "folds": 0, "exports": 0}

    def counting(name, real):
        def wrapper(*args, **kwargs):
            counts[name] += 1
            return real(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(TraceStore, "get", counting("get", TraceStore.get))
    monkeypatch.setattr(TraceStore, "iter_many", counting("batches", TraceStore.iter_many))
    monkeypatch.setattr(TraceStore, "done_by_run", counting("exports", TraceStore.done_by_run))
    monkeypatch.setattr(RunDigest, "from_events", classmethod(counting("folds", RunDigest.from_events.__func__)))
    return counts


def _texts(at) -> list[str]:
    return [t.value for t in at.text]


def test_reopening_reads_the_traces_once_and_folds_each_run_once(conversation, counted):
    conv_id, _bench = conversation
    at = started_app()
    counted.update(get=0, batches=0, folds=0, exports=0)
    at.session_state[CONV_KEY] = conv_id
    at.run()
    assert not at.exception, at.exception
    assert [q for q in QUESTIONS if q in _texts(at)] == QUESTIONS
    assert len(at.get("download_button")) == 1  # the export is offered, made once for this conversation ...
    at.run()  # a rerun of the page (any click): nothing is read, folded or exported again
    assert not at.exception, at.exception
    assert counted == {"get": 0, "batches": 1, "folds": len(QUESTIONS), "exports": 1}


def test_an_answer_whose_trace_is_gone_still_shows_its_text(conversation, app_engine):
    conv_id, bench = conversation
    messages = bench.conversation_messages(conv_id)
    answer = next(m for m in messages if m.role == "assistant" and m.content.strip())
    app_engine.traces.delete(answer.run_id)
    at = started_app()
    at.session_state[CONV_KEY] = conv_id
    at.run()
    assert not at.exception, at.exception
    assert answer.content in _texts(at)
    assert any("trace of this answer is missing" in w.value for w in at.warning)
    assert [q for q in QUESTIONS if q in _texts(at)] == QUESTIONS
