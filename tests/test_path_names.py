"""Issue 39 item 1: one name per answer path.  A mode named by a caller is read by one function that lists the
valid spellings; the events name the path a run retrieved by (and fell back to) with the path enum's own
spelling, and the older spellings are read only from stored traces."""

from __future__ import annotations

import pytest

from pydantic import ValidationError

from docmind_core.errors import ConfigError
from docmind_core.events import Fallback, Retrieved, event_from_dict, event_to_dict
from docmind_core.values import Mode, RequestedMode


@pytest.mark.parametrize("text, mode", [("auto", RequestedMode.AUTO), ("rule", RequestedMode.RULE_PLANNER),
                                        ("RULE_PLANNER", RequestedMode.RULE_PLANNER), (" Agentic ", RequestedMode.AGENTIC),
                                        (RequestedMode.AGENTIC, RequestedMode.AGENTIC)])
def test_every_accepted_spelling_reads_its_mode(text, mode):
    assert RequestedMode.from_str(text) is mode


def test_a_mode_that_is_none_is_refused_with_the_valid_ones():
    with pytest.raises(ConfigError, match=r"mode 'one_shot' is not one of auto, rule or agentic"):
        RequestedMode.from_str("one_shot")


def test_the_engine_refuses_an_unknown_mode_before_any_run(tmp_path):
    from docmind_core.engine import Engine

    engine = Engine.open(tmp_path / "home", env={}, warm=False)
    with pytest.raises(ConfigError, match="is not one of"):
        list(engine.ask("What is the Nimbus N2?", [], mode="fastest"))
    assert engine.traces.list() == []  # refused before the run: no trace


@pytest.mark.parametrize("stored, path", [("one_shot", Mode.RULE_PLANNER), ("agentic_loop", Mode.AGENTIC),
                                          ("selected_doc", Mode.SELECTED_DOC), ("RULE_PLANNER", Mode.RULE_PLANNER)])
def test_a_stored_retrieval_reads_with_the_path_name_whatever_it_was_written_with(stored, path):
    event = event_from_dict({"kind": "retrieval", "mode": stored, "t_ms": 1.0})
    assert isinstance(event, Retrieved) and event.mode is path


def test_a_stored_fallback_to_the_one_shot_path_names_the_rule_planner():
    event = event_from_dict({"kind": "fallback", "stage": "agentic", "reason": "searchDocs failed", "to": "one_shot"})
    assert isinstance(event, Fallback) and event.to == Mode.RULE_PLANNER.value
    other = event_from_dict({"kind": "fallback", "stage": "judge", "reason": "timeout", "to": "offline checks"})
    assert other.to == "offline checks"  # only the path's old name is read anew


def test_a_new_event_takes_and_writes_only_the_path_name():
    assert event_to_dict(Retrieved(mode=Mode.AGENTIC))["mode"] == "AGENTIC"
    assert event_to_dict(Retrieved(mode="RULE_PLANNER"))["mode"] == "RULE_PLANNER"
    with pytest.raises(ValidationError):
        Retrieved(mode="one_shot")  # the old spelling is for stored traces only
