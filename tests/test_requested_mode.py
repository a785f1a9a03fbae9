"""Issue 39 item 1 (a first step): a mode named by a caller is read by one function that lists the valid
spellings when the text names none."""

from __future__ import annotations

import pytest

from docmind_core.errors import ConfigError
from docmind_core.values import RequestedMode


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
