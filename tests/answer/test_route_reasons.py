"""The route reason in plain words: a sentence naming the signals that decided the path, next to the
machine-readable reason, carried by the Routed event and shown by `docmind ask` (text and --json)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from docmind_core.backends.offline.understanding import understand_offline
from docmind_core.cli import cli
from docmind_core.engine import Engine
from docmind_core.events import Done, Routed
from docmind_core.values import Complexity, Intent, Mode, Understanding
from docmind_core.answer.route import decide_path
from docmind_core.settings import Settings

DEFAULT = Settings()
NO_AGENTIC = Settings().with_overrides({"agentic.enabled": False})


def route(question, selected=(), requested="auto", settings=DEFAULT, understanding=None):
    understanding = understanding or understand_offline(question, [])
    return decide_path(question, understanding, list(selected), requested, settings)


@pytest.mark.parametrize("question, selected, requested, settings, mode, reason, sentence", [
    # a comparison names how many entities it compares
    ("Compare the maximum power draw of the Nimbus N1 and the Nimbus N2.", (), "auto", DEFAULT,
     Mode.AGENTIC, "agentic", "comparison of 2 entities (Nimbus N1, Nimbus N2) -> AGENTIC"),
    ("Nimbus N1 和 N2 的价格分别是多少？", (), "auto", DEFAULT, Mode.AGENTIC, "agentic",
     "comparison of 2 entities (Nimbus N1, N2) -> AGENTIC"),
    # one exact code on a simple question: the planner adds a keyword search for it
    ("Nimbus 报 NIM-201 错误应该怎么办？", (), "auto", DEFAULT, Mode.RULE_PLANNER, "rule_planner",
     "one precise code (NIM-201) in a simple, unambiguous question -> RULE_PLANNER with keyword search"),
    ("What uptime does Aurora Cloud guarantee?", (), "auto", DEFAULT, Mode.RULE_PLANNER, "rule_planner",
     "a simple, unambiguous question -> RULE_PLANNER with document search"),
    # two questions in one
    ("海岚数据总部在哪里？有多少员工？", (), "auto", DEFAULT, Mode.AGENTIC, "agentic",
     "2 questions in one -> AGENTIC"),
    # selected documents
    ("Summarize these documents", (1, 2, 3), "auto", DEFAULT, Mode.SELECTED_DOC, "selected_doc_summary",
     "3 selected documents and a summary request -> SELECTED_DOC"),
    ("What uptime does Aurora Cloud guarantee?", (4,), "auto", DEFAULT, Mode.SELECTED_DOC,
     "selected_doc_question", "1 selected document and a question about it -> SELECTED_DOC"),
    ("Compare the maximum power draw of the Nimbus N1 and the Nimbus N2.", (4, 5), "auto", DEFAULT, Mode.AGENTIC,
     "agentic", "comparison of 2 entities (Nimbus N1, Nimbus N2), which reaches beyond the 2 selected documents "
                "-> AGENTIC"),
    ("Summarize these documents", (1, 2, 3, 4), "auto", DEFAULT, Mode.RULE_PLANNER, "rule_planner",
     "4 selected documents, more than rag.selected_doc_max (3), so a search; a simple, unambiguous question "
     "-> RULE_PLANNER with document search"),
    # forced and disabled
    ("What uptime does Aurora Cloud guarantee?", (), "agentic", DEFAULT, Mode.AGENTIC, "forced_agentic",
     "mode chosen by the user -> AGENTIC"),
    ("Nimbus 报 NIM-201 错误应该怎么办？", (), "rule", DEFAULT, Mode.RULE_PLANNER, "forced_rule",
     "mode chosen by the user -> RULE_PLANNER with keyword search"),
    ("Nimbus N1 和 N2 的价格分别是多少？", (), "auto", NO_AGENTIC, Mode.RULE_PLANNER, "agentic_disabled",
     "comparison of 2 entities (Nimbus N1, N2), but agentic.enabled is off -> RULE_PLANNER with keyword search"),
])
def test_route_reason_is_a_sentence_naming_its_signals(question, selected, requested, settings, mode, reason,
                                                       sentence):
    decision = route(question, selected, requested, settings)
    assert (decision.mode, decision.reason) == (mode, reason)  # the machine-readable reason stays
    assert decision.explanation == sentence


def test_ambiguous_and_multi_step_questions_say_so():
    ambiguous = Understanding(rewritten_query="it", is_ambiguous=True)
    assert route("And it?", understanding=ambiguous).explanation == \
        "an ambiguous question (an unresolved reference or too few words) -> AGENTIC"
    chain = Understanding(rewritten_query="q", complexity=Complexity.COMPLEX)
    assert route("Who directed the film that won the prize in 1990?", understanding=chain).explanation == \
        "a multi-step question (complexity COMPLEX) -> AGENTIC"
    vague_comparison = Understanding(rewritten_query="q", intent=Intent.COMPARISON, complexity=Complexity.MEDIUM)
    assert route("对比一下", understanding=vague_comparison).explanation == "a comparison -> AGENTIC"


def test_every_demo_question_gets_a_sentence_that_ends_in_its_mode():
    from tests.backends.offline.test_tool_policy_queries import demo_questions

    for question in demo_questions():
        decision = route(question)
        assert decision.explanation.endswith(f"-> {decision.mode.value}") or \
            f"-> {decision.mode.value} with " in decision.explanation, (question, decision)
        assert decision.explanation != decision.reason


# --------------------------------------------------------------------------
# The Routed event and `docmind ask`
# --------------------------------------------------------------------------

NOTES = ("The Nimbus N2 draws at most 45 W. The Nimbus N1 draws at most 28 W. "
         "Error NIM-201 means the fan controller failed; upgrade to firmware 3.2.1.")


@pytest.fixture(scope="module")
def notes_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("route-home")
    engine = Engine.open(home, env={}, warm=False)
    kb = engine.create_kb("notes")
    path = home / "nimbus.txt"
    path.write_text(NOTES, encoding="utf-8")
    assert all(o.status == "added" for o in engine.ingest(kb.id, [path]))
    return home


def test_the_routed_event_and_done_carry_the_sentence(notes_home):
    engine = Engine.open(notes_home, env={}, warm=False)
    kb = engine.store.find_kb("notes")
    events = list(engine.ask("Nimbus 报 NIM-201 错误应该怎么办？", [kb.id]))
    routed = next(e for e in events if isinstance(e, Routed))
    assert routed.decision.reason == "rule_planner"
    assert routed.decision.explanation.endswith("-> RULE_PLANNER with keyword search")
    assert isinstance(events[-1], Done) and events[-1].route_reason == "rule_planner"


def test_docmind_ask_prints_the_sentence_and_json_has_it(notes_home):
    question = "Compare the maximum power draw of the Nimbus N1 and the Nimbus N2."
    text = CliRunner().invoke(cli, ["--home", str(notes_home), "ask", question, "--kb", "notes", "--no-timeline"])
    assert text.exit_code == 0, text.output
    assert "route: comparison of 2 entities (Nimbus N1, Nimbus N2) -> AGENTIC" in text.output
    out = CliRunner().invoke(cli, ["--home", str(notes_home), "ask", question, "--kb", "notes", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["route_reason"] == "agentic"
    assert data["route_explanation"] == "comparison of 2 entities (Nimbus N1, Nimbus N2) -> AGENTIC"


@pytest.mark.parametrize("spelling, mode", [("RULE_PLANNER", "RULE_PLANNER"), ("rule_planner", "RULE_PLANNER"),
                                            ("AGENTIC", "AGENTIC"), ("rule", "RULE_PLANNER")])
def test_docmind_ask_takes_the_path_names_the_pages_show(notes_home, spelling, mode):
    """One mode vocabulary: the path names shown everywhere are accepted wherever a mode is asked for."""
    out = CliRunner().invoke(cli, ["--home", str(notes_home), "ask", "What does the Nimbus N2 draw?", "--kb", "notes",
                                   "--mode", spelling, "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["mode"] == mode
