"""Issue 21: a small model's answer that fails the claim or answer-type checks gives way to DocMind's offline
reading of the same evidence (``citation.rescue_failed_answer``, on in the ``local_small`` profile).

The model answers below are the exact answers Qwen2.5-Coder 1.5B wrote on the demo questions (recorded runs,
bench/RESULTS.md), played by the fake OpenAI server with the source numbers the prompt gave them."""

from __future__ import annotations

import pytest

from docmind_core.events import Fallback
from docmind_core.reports.run_summary import summary_of, timeline_lines
from docmind_core.reports.timeline import RunDigest
from docmind_core.settings import Settings
from tests.answer.test_claim_confidence import Q13, ask, source_number
from tests.fakes.openai_server import FakeOpenAIServer

pytestmark = pytest.mark.slow  # the demo KB is ingested

Q04 = "What did Nimbus firmware 3.2.1 fix, and when was it released?"
Q15 = "How much does Aurora cost in Japan?"
Q12 = "What does a flashing red light on a Nimbus appliance mean?"
N2_POWER = "What is the maximum power draw of the Nimbus N2?"


@pytest.fixture(scope="module")
def fake_llm():
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def rescuing_home(demo_home):
    from docmind_core.engine import Engine

    engine = Engine.open(demo_home, env={})
    engine.config.set("citation.rescue_failed_answer", True)
    yield demo_home
    engine.config.set("citation.rescue_failed_answer", False)


def q13_answer(prompt: str) -> str:
    n = source_number(prompt, "release_notes.md", "3.2.0")
    return (f"The firmware version that first let the N2 join an Aurora tenant is [{n}][{n}], which states "
            "\"New: the N2 can join an Aurora tenant as a local indexing node.\" The known issue is that the "
            "fan controller problem occurred after standby (fixed in 3.2.1).")


def q04_answer(prompt: str) -> str:
    n = source_number(prompt, "release_notes.md", "3.2.1")
    return ("- Fixed: the fan controller could stop the fan after waking from standby, which raised the chassis "
            "temperature and triggered error NIM-201.\n- Fixed: the web console reported wrong disk usage on 2 TB "
            f"drives.\n- Released: [{n}]")


def rescues(events: list) -> list[Fallback]:
    return [e for e in events if isinstance(e, Fallback) and e.stage == "answer check"]


@pytest.mark.parametrize("question, answer, asked_value, model_words", [
    (Q13, q13_answer, "3.2.0", "which states \"New: the N2"),  # "the version is [1][1]": never states it
    (Q04, q04_answer, "2026-02-10", "- Released: ["),           # "Released: [1]": never states the date
])
def test_an_answer_that_never_states_the_asked_value_gives_way_to_the_offline_reading(
        rescuing_home, fake_llm, question, answer, asked_value, model_words):
    events: list = []
    done = ask(rescuing_home, fake_llm, question, answer, sink=events, rewritten=question)
    [rescue] = rescues(events)
    assert model_words in rescue.replaced and "does not state" in rescue.reason
    assert asked_value in done.answer and model_words not in done.answer
    # the rescue's notice stands beside the shown answer, not in it (issue 34)
    assert [n.code for n in done.notices] == ["stand_in"] and not done.answer.startswith("Note:")
    assert done.notices[0].text.startswith("Note: the language model's answer (kept in the run's timeline) is set "
                                           "aside")
    assert done.verdict.level == "partly_supported" and any("stands in" in r for r in done.verdict.reasons)
    # the notice introduces, it is not a claim: every claim of the shown answer is found in its source
    assert done.citations.unsupported_claims == 0 and done.citations.contradicted_claims == 0
    assert done.confidence.answers_question is True
    # a stand-in for a failed answer is never HIGH, whatever the evidence grade, and the reason says why
    assert done.confidence.band == "MEDIUM" and "stands in for the model's answer" in done.confidence.reason
    digest = RunDigest.from_events(events)
    assert digest.answer == done.answer
    summary = summary_of(digest).model_dump(mode="json")  # what `ask --json` prints
    assert asked_value in summary["answer"]
    assert any("Fallback in answer check" in line for line in timeline_lines(events))


def test_a_made_up_answer_on_weak_evidence_gives_way_to_an_honest_no_answer(rescuing_home, fake_llm):
    made_up = ("The sources [6] and [7] provide information about the pricing and product comparison for Aurora in "
               "Japan. The prices listed are in RMB, which is the currency used in China mainland. The prices for "
               "the N1 and N2 appliances are not provided in the sources, so we cannot determine the cost of Aurora "
               "in Japan based on the information given.")
    events: list = []
    done = ask(rescuing_home, fake_llm, Q15, lambda prompt: made_up, sink=events, rewritten=Q15)
    assert done.grade.tier.value != "HIGH"
    [rescue] = rescues(events)
    assert rescue.replaced == made_up and "finds no answer" in rescue.reason
    assert "do not contain an answer" in done.answer and "RMB" not in done.answer
    assert not done.citations.cited_sentences


def test_a_right_answer_stands(rescuing_home, fake_llm):
    events: list = []
    done = ask(rescuing_home, fake_llm, N2_POWER, lambda prompt: "The maximum power draw of the Nimbus N2 is 45 W at "
               "full load [{n}].".format(n=source_number(prompt, "nimbus_n2_datasheet.pdf", "45 W")), sink=events)
    assert not rescues(events) and done.answer.startswith("The maximum power draw of the Nimbus N2 is 45 W")


def test_a_model_answer_the_offline_reading_cannot_better_stands(rescuing_home, fake_llm):
    """q12: the model's English claim reads a Chinese manual the claim checks cannot match across languages;
    the evidence is not graded HIGH and the offline reading does not decline, so the model's answer stays
    (with the band its checks give it)."""
    said = "The flashing red light on a Nimbus appliance indicates that there is a hardware fault."
    events: list = []
    done = ask(rescuing_home, fake_llm, Q12, lambda prompt: said, sink=events, rewritten=Q12)
    if done.grade.tier.value == "HIGH":
        pytest.skip("the demo retrieval graded this HIGH; the case needs weak evidence")
    assert not rescues(events) and done.answer == said


def test_off_by_default_and_on_in_the_small_model_profile(demo_home, fake_llm):
    assert Settings().citation.rescue_failed_answer is False
    assert Settings.model_validate({}).citation.rescue_failed_answer is False
    from docmind_core.settings import PROFILES

    assert PROFILES["local_small"]["citation.rescue_failed_answer"] is True
    events: list = []
    done = ask(demo_home, fake_llm, Q13, q13_answer, sink=events, rewritten=Q13)  # a home with the default
    assert not rescues(events) and done.confidence.band == "MEDIUM"

