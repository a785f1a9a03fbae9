"""Issue 34 item 4: DocMind's own words are never graded.

Its notes on a run (chunks still embedding, retrieval incomplete, the model replaced) are ``Notice`` events and
``Done.notices``, outside the answer text: the claim checks never read them, so they neither add an unsupported
claim nor mark the answer ungrounded nor lower its confidence.  A reply that retrieved nothing (a greeting) has
no claims, so no chip.  Driven through the pipeline over the fixture corpus with the offline engine."""

from __future__ import annotations

import threading

from docmind_core.answer.citations import confidence_from, parse_citations
from docmind_core.backends.offline.chat import OfflineLanguageModel
from docmind_core import events as ev
from docmind_core.events import Done
from docmind_core.reports.run_summary import summarise
from docmind_core.values import PendingIngest, RequestedMode
from docmind_core.answer.pipeline import AskRequest
from tests.agentic_world import CORPUS, FixtureRetriever, settings
from tests.test_deadlines import PROMPTS, make_pipeline

QUESTION = "What flow rate does the DM-3000 pump have?"
EMBEDDING = PendingIngest(kb_id=1, kb_name="pumps", pending_documents=0, searched_documents=3, embedding_chunks=7)


def _ask(question: str, retriever: FixtureRetriever, cfg=None, pending=()) -> tuple[list, Done]:
    pipeline = make_pipeline(OfflineLanguageModel(PROMPTS), retriever)
    request = AskRequest(question=question, kb_ids=[1], requested_mode=RequestedMode.RULE_PLANNER, user_id=7,
                         pending=list(pending))
    events = list(pipeline.ask(request, cfg or settings(), [], threading.Event()))
    assert isinstance(events[-1], Done), [e.kind for e in events]
    return events, events[-1]


def _claim_texts(done: Done) -> str:
    return " | ".join(c.text for c in done.citations.claims)


def test_the_still_embedding_note_leaves_the_confidence_unchanged():
    _, plain = _ask(QUESTION, FixtureRetriever(CORPUS))
    events, embedding = _ask(QUESTION, FixtureRetriever(CORPUS), pending=[EMBEDDING])
    assert plain.sources == embedding.sources
    assert embedding.confidence == plain.confidence and not embedding.confidence.ungrounded
    notices = [e for e in events if isinstance(e, ev.Notice)]
    assert [n.code for n in notices] == ["ingest_pending"] and "still embedding" in notices[0].text
    assert [n.code for n in embedding.notices] == ["ingest_pending"]
    assert "still embedding" not in embedding.answer and "still embedding" not in _claim_texts(embedding)
    assert plain.answer == embedding.answer and embedding.verdict == plain.verdict


def test_the_incomplete_retrieval_note_leaves_the_confidence_unchanged():
    retriever = FixtureRetriever(CORPUS)
    retriever.delay_s = {"candidates": 3.0}  # the vector side stalls (a vector server down); keywords answer
    cfg = settings(**{"retrieval.worker_timeout_ms": 200})
    events, done = _ask(QUESTION, retriever, cfg)
    assert done.sources and "40 litres" in done.answer
    assert "incomplete" not in _claim_texts(done).lower() and not done.confidence.ungrounded
    assert "incomplete" not in done.answer.lower()
    [notice] = [e for e in events if isinstance(e, ev.Notice)]
    assert notice.code == "retrieval_incomplete" and "retrieval was incomplete" in notice.text.lower()
    # the confidence is that of the answer alone, over the same evidence
    alone = confidence_from(parse_citations(done.answer, done.sources, cfg.citation.coverage_min_sentence_len),
                            done.grade.top_score, done.grade.tier, cfg.citation, question=QUESTION,
                            sources=done.sources)
    assert done.confidence == alone
    summary = summarise(events).model_dump(mode="json")  # what `ask --json` prints
    assert summary["notices"] == [{"code": "retrieval_incomplete", "text": notice.text}]


def test_a_greeting_has_no_claims_and_no_verdict_number():
    events, done = _ask("hello, who are you?", FixtureRetriever(CORPUS))
    assert done.mode == "NONE" and done.answer.strip()
    assert done.citations.claims == [] and done.citations.unsupported_claims == 0
    assert done.model_dump().get("verdict") is not None and done.verdict is not None and done.verdict.level == "not_checked" and done.verdict.score is None
    summary = summarise(events).model_dump(mode="json")
    assert summary["claims"] == [] and summary["claim_counts"]["unsupported"] == 0
    assert summary["verdict"]["label"] == "Not checked: no sources searched"
