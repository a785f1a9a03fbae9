"""The one fold over events: every kind of the union has a handler, and every consumer handles every kind."""

from __future__ import annotations

import inspect
from typing import Literal

import pytest

from docmind_core.backends.observation_plan import ObservationPlanner, plan_observations
from docmind_core.events import EVENT_CLASSES, EVENT_KINDS, Event, EventFold, fold
from docmind_core.reports.run_summary import summarise
from docmind_core.reports.timeline import RunDigest, TimelineBuilder, _Digester, timeline
from docmind_core.events import _Event
from docmind_core.store.traces import TraceMeta, TraceRecord
from tests.fakes.sample_events import sample_events

CONSUMERS = (TimelineBuilder, _Digester, ObservationPlanner)  # the CLI summary reads _Digester's RunDigest


def _kind_echo_fold() -> EventFold[str]:
    """A fold whose handler for each kind of the union answers that kind."""
    handlers = {f"on_{kind}": (lambda self, event, kind=kind: kind) for kind in EVENT_KINDS}
    return type("KindEcho", (EventFold,), handlers)()


def test_the_kinds_are_derived_from_the_union():
    assert len(EVENT_KINDS) == len(set(EVENT_KINDS)) == len(EVENT_CLASSES)
    assert EVENT_KINDS[0] == "run" and EVENT_KINDS[-1] == "done"
    assert "index_incomplete" in EVENT_KINDS


def test_the_fold_has_one_handler_per_kind_of_the_union():
    abstract = {name for name, member in inspect.getmembers(EventFold)
                if getattr(member, "__isabstractmethod__", False)}
    assert abstract == {f"on_{kind}" for kind in EVENT_KINDS}


def test_every_event_reaches_its_own_handler():
    events = sample_events(tokens=2)
    assert {type(e) for e in events} == set(EVENT_CLASSES)  # the sample covers the whole union
    echo = _kind_echo_fold()
    for event in events:
        assert fold(event, echo) == event.kind
        assert echo(event) == event.kind


def test_a_fold_without_a_handler_for_some_kind_cannot_be_built():
    handlers = {f"on_{kind}": (lambda self, event: None) for kind in EVENT_KINDS if kind != "index_incomplete"}
    partial = type("Partial", (EventFold,), handlers)
    with pytest.raises(TypeError, match="on_index_incomplete"):
        partial()


def test_an_object_outside_the_union_is_refused():
    class Unlisted(_Event):  # an event class someone forgot to add to the union and to the fold
        kind: Literal["unlisted"] = "unlisted"

    echo = _kind_echo_fold()
    with pytest.raises(AssertionError):
        fold(Unlisted(), echo)  # type: ignore[arg-type]
    with pytest.raises(AssertionError):
        fold({"kind": "run"}, echo)  # type: ignore[arg-type]


@pytest.mark.parametrize("consumer", CONSUMERS, ids=lambda c: c.__name__)
def test_every_consumer_is_a_complete_fold(consumer):
    assert issubclass(consumer, EventFold)
    assert not inspect.isabstract(consumer)


def test_every_consumer_handles_every_kind():
    events: list[Event] = sample_events(tokens=3)
    rows = timeline(events)
    assert {r.kind for r in rows} == set(EVENT_KINDS)  # one row per kind; the three tokens collapse into one
    assert [r.seq for r in rows] == list(range(len(rows)))
    assert len(rows) == len(EVENT_KINDS)

    digest = RunDigest.from_events(events)
    assert digest.started is events[0] and digest.done is events[-1]
    assert digest.index_gaps and digest.errors and digest.fallbacks and digest.web is not None
    assert digest.streamed_text == "DM-3000 的保修期为两年"

    summary = summarise(events)
    assert summary.run_id == "run-1" and summary.index_gaps and summary.errors and summary.fallbacks
    assert summary.rounds == 1 and summary.tier == "AMBIGUOUS"

    meta = TraceMeta(run_id="run-1", question="q", requested_mode="auto", kb_ids=[1, 2])
    plan = plan_observations(TraceRecord(meta=meta, events=events))
    names = [child.name for child in plan.children]
    for name in ("scope", "understanding", "routing", "agentic_round_1", "retrieval", "rerank", "grader",
                 "web_compensation", "fallback", "error", "index_incomplete", "ingest_pending", "generation"):
        assert name in names
    generation = next(c for c in plan.children if c.name == "generation")
    assert generation.completion_start_ms == events[-4].t_ms  # the first of the three tokens
