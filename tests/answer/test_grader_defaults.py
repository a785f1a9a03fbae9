"""Grader defaults on the demo KB, offline (issue 14): the tiers a new user sees must mean what they say.

Reproduces the three reports of the issue through Engine.ask: an unanswerable demo question graded HIGH,
a greeting graded HIGH with no salient term in the evidence, and a keyword-only distractor reranked above
the right chunk of a one-document KB searched together with the demo KB.
"""

from __future__ import annotations

import pytest

from docmind_core.events import Graded, Reranked
from docmind_core.values import Tier
from tests.demo_world import open_demo_engine

ORION = "The Orion launch budget is 4.2 million dollars."


pytestmark = pytest.mark.slow  # the demo KB is ingested


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    engine, _ = open_demo_engine(tmp_path_factory.mktemp("grader-defaults-home"))
    projects = engine.create_kb("projects")
    plan = tmp_path_factory.mktemp("projects") / "plan.txt"
    plan.write_text(ORION, encoding="utf-8")
    assert all(o.status == "added" for o in engine.ingest(projects.id, [plan]))
    return engine


def kb_ids(engine, *names: str) -> list[int]:
    return [engine.store.find_kb(n).id for n in names]


def first_grading(engine, question: str, kbs: list[int], mode: str = "auto") -> tuple[Reranked, Graded]:
    reranked = graded = None
    for event in engine.ask(question, kbs, mode=mode):
        if isinstance(event, Reranked) and graded is None:
            reranked = event
        elif isinstance(event, Graded) and graded is None:
            graded = event
    assert reranked is not None and graded is not None
    return reranked, graded


def test_unanswerable_demo_question_is_not_high(engine):
    # q16 of data/demo/QUESTIONS.md: the demo documents never mention a mobile app
    _reranked, graded = first_grading(engine, "Is there an Aurora mobile app for iOS or Android?",
                                      kb_ids(engine, "demo"))
    assert graded.grade.tier is not Tier.HIGH, graded.grade


@pytest.mark.parametrize("mode", ["auto", "rule", "agentic"])
def test_greeting_with_no_salient_term_in_the_evidence_is_not_high(engine, mode):
    # a greeting is answered without retrieval now (tests/answer/test_scope.py); a vague document question
    # with no salient term still reaches the grader
    _reranked, graded = first_grading(engine, "so what is this all about then?", kb_ids(engine, "demo"), mode)
    assert graded.grade.lex_coverage == 0.0
    assert graded.grade.tier is not Tier.HIGH, graded.grade


@pytest.mark.parametrize("question", ["How much money does Orion get?", "What does the Orion launch cost?"])
def test_the_orion_chunk_outranks_keyword_only_distractors_of_another_kb(engine, question):
    # the Orion KB holds one document: its BM25 scores are ~0 (every term is in every document), which
    # must not rank a demo chunk with a near-zero cosine above it
    reranked, _graded = first_grading(engine, question, kb_ids(engine, "demo", "projects"), mode="rule")
    kept = [c for c in reranked.candidates if c.kept]
    assert kept[0].document == "plan.txt", [(c.document, c.scores) for c in kept[:3]]


def test_a_question_the_evidence_answers_is_still_high(engine):
    reranked, graded = first_grading(engine, "What is the Orion launch budget?", kb_ids(engine, "demo", "projects"),
                                     mode="rule")
    assert [c for c in reranked.candidates if c.kept][0].document == "plan.txt"
    assert graded.grade.tier is Tier.HIGH, graded.grade
