"""The CLI's run summary (``docmind ask --json``) says what the pages' digest says, for real runs.

Each stream below comes from a real run (a whole offline ask over a small KB, or the one-shot and agentic
retrieval paths over the fixture corpus when a worker must fail or the loop must fall back); the summary of
each is compared, field by field, with what :class:`RunDigest` holds for the same events.
"""

from __future__ import annotations

import threading

import pytest

from docmind_core.answer.agentic import AgenticPath
from docmind_core.answer.grade import CragGrader
from docmind_core.answer.rule_planner import RulePlannerPath
from docmind_core.engine import Engine
from docmind_core.events import Event, RunStarted
from docmind_core.values import RetrievalPlan, Understanding
from docmind_core.prompts import PromptLibrary
from docmind_core.text.reasons import describe_reason
from docmind_core.reports.run_summary import RunSummary, summarise
from docmind_core.reports.timeline import RunDigest
from docmind_core.answer.tools import ToolContext, Toolbox
from docmind_core.accounts.users import LOCAL_USER
from docmind_core.workbench import Workbench
from tests.agentic_world import CORPUS, FixtureRetriever, ScriptedModel, drain, make_refiner, settings
from tests.fakes.sample_events import sample_events
from tests.paths import write_texts

DOCS = {
    "budget.txt": "The zephyr budget is 40k dollars and the zephyr launch is in March.",
    "team.txt": "The zephyr project team meets weekly; the zephyr budget review is pending.",
    "canteen.txt": "Cafeteria opening hours are 8 to 17 on weekdays.",
}

# What scripts parsing `docmind ask --json` rely on: these keys, no more, no fewer.
SUMMARY_KEYS = {
    "run_id", "question", "answer", "mode", "route_reason", "route_explanation", "scope", "understanding",
    "planned_tools", "tool_calls", "rounds", "tier", "top_score", "lex_coverage", "grade_reason",
    "web_compensated", "sources", "citations", "coverage", "invalid_refs", "confidence", "band", "ungrounded",
    "stop_reason", "timings_ms", "backend", "backends", "errors", "fallbacks", "judge", "index_gaps",
    "pending_documents", "pending", "usage", "confidence_reason", "asks_for", "answers_question", "claims",
    "claim_counts", "verdict", "notices", "kb_badge",
    "route_reason_words", "grade_reason_words", "stop_reason_words",
}
VERDICT_KEYS = {"level", "label", "meaning", "score", "score_meaning", "reasons", "evidence_grade",
                "supported_claims", "checked_claims", "derived"}
CLAIM_KEYS = {"text", "char_start", "char_end", "cited", "status", "source_index", "inferred", "evidence", "reason",
              "via"}
SOURCE_KEYS = {"index", "chunk_id", "document", "location", "text", "origin", "url", "scores"}
TOOL_CALL_KEYS = {"name", "args", "status", "result_count", "repaired_from"}


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    base = tmp_path_factory.mktemp("run-summary")
    engine = Engine.open(base / "home", env={}, warm=False)
    kb = engine.create_kb("zephyr")
    assert all(o.status == "added" for o in engine.ingest(kb.id, write_texts(base / "docs", DOCS)))
    return Workbench(engine, LOCAL_USER, "cli"), kb.id


def _ask(bench, question: str, **kwargs) -> list[Event]:
    workbench, kb_id = bench
    return list(workbench.ask(question, [kb_id], **kwargs))


def _run_of(question: str, retrieval_events: list[Event]) -> list[Event]:
    """A retrieval path's events as they appear in a run: after the run's start."""
    return [RunStarted(run_id="r1", question=question, kb_ids=[1], requested_mode="auto", backends=[]),
            *retrieval_events]


def _one_shot_with_failing_workers() -> list[Event]:
    """The one-shot path with one worker down and one too slow for its timeout."""
    retriever = FixtureRetriever(CORPUS)
    retriever.fail = {"keyword_candidates"}
    retriever.delay_s = {"candidates": 4.0}
    rule_planner = RulePlannerPath(Toolbox(retriever), make_refiner(), CragGrader())
    # wide apart: the failing worker raises well within the timeout and the slow one sleeps well past it, even
    # on a starved machine
    cfg = settings(**{"retrieval.worker_timeout_ms": 1500})
    ctx = ToolContext.for_run([1], 7, cfg)
    question = "DM-3000 filter maintenance hours"
    events, _ = drain(rule_planner.run(question, Understanding(rewritten_query=question),
                                   RetrievalPlan(tools=["doc_search", "keyword_search"]), ctx))
    return _run_of(question, events)


def _agentic_falling_back() -> list[Event]:
    """One agentic round of tool calls, then the model fails and the run falls back to one-shot workers."""
    retriever = FixtureRetriever(CORPUS)
    toolbox = Toolbox(retriever)
    refiner, grader = make_refiner(), CragGrader()
    agent = AgenticPath(ScriptedModel(rounds=[[("searchDocs", {"query": "DM-3000 filter"})]], raise_on_round=2),
                          toolbox, refiner, grader, PromptLibrary(), RulePlannerPath(toolbox, refiner, grader))
    question = "DM-3000 filter maintenance"
    events, outcome = drain(agent.run(question, Understanding(rewritten_query=question), "pumps: manuals",
                                      ToolContext.for_run([1], 7, settings())))
    assert outcome.fell_back
    return _run_of(question, events)


def _expected_from_digest(digest: RunDigest) -> dict:
    """Every summary field as the pages' digest holds it for the same events."""
    done, routed, grade = digest.done, digest.routed, digest.grade
    confidence = done.confidence if done is not None else None
    return {
        "run_id": digest.run_id, "question": digest.question, "answer": digest.answer, "mode": digest.mode,
        "route_reason": digest.route_reason,
        "route_reason_words": describe_reason(digest.route_reason),
        "route_explanation": routed.decision.explanation if routed is not None
        else (digest.scope.reason if digest.scope is not None else ""),
        "scope": digest.scope_name,
        "understanding": (digest.understood.understanding.model_dump(mode="json")
                          if digest.understood is not None else {}),
        "planned_tools": list(routed.plan.tools) if routed is not None and routed.plan is not None else [],
        "tool_calls": [{"name": c.name, "args": c.args, "status": c.status, "result_count": c.result_count,
                        "repaired_from": c.repaired_from} for c in digest.tool_calls],
        "rounds": digest.rounds,
        "tier": digest.tier,
        "top_score": grade.top_score if grade is not None else None,
        "lex_coverage": grade.lex_coverage if grade is not None else None,
        "grade_reason": grade.reason if grade is not None else "",
        "grade_reason_words": describe_reason(grade.reason) if grade is not None else "",
        "web_compensated": digest.web_compensated,
        "sources": [{"index": i, "chunk_id": c.chunk_id, "document": c.document, "location": c.location,
                     "text": c.text, "origin": c.origin, "url": c.url, "scores": c.scores.model_dump()}
                    for i, c in enumerate(digest.sources, start=1)],
        "citations": [u.model_dump() for u in done.citations.used_sources] if done is not None else [],
        "coverage": done.citations.coverage if done is not None else None,
        "invalid_refs": done.citations.invalid_refs if done is not None else 0,
        "confidence": confidence.score if confidence is not None else None,
        "band": confidence.band if confidence is not None else "",
        "ungrounded": confidence.ungrounded if confidence is not None else False,
        "confidence_reason": confidence.reason if confidence is not None else "",
        "asks_for": list(confidence.asks_for) if confidence is not None else [],
        "answers_question": confidence.answers_question if confidence is not None else None,
        "claims": [c.model_dump(mode="json") for c in done.citations.claims] if done is not None else [],
        "claim_counts": ({"supported": done.citations.supported_claims,
                          "unsupported": done.citations.unsupported_claims,
                          "contradicted": done.citations.contradicted_claims} if done is not None else {}),
        "stop_reason": digest.stop_reason,
        "stop_reason_words": describe_reason(digest.stop_reason),
        "timings_ms": digest.timings_ms,
        "backend": done.backend if done is not None else "",
        "backends": [b.model_dump() for b in digest.started.backends] if digest.started is not None else [],
        "errors": [{"stage": e.stage, "message": e.message} for e in digest.errors],
        "fallbacks": [{"stage": f.stage, "reason": f.reason, "to": f.to} for f in digest.fallbacks],
        "judge": [j.model_dump(mode="json", exclude={"kind", "t_ms"}) for j in digest.judgements],
        "index_gaps": [{"kb_id": g.kb_id, "missing_vectors": g.missing_vectors, "total": g.total}
                       for g in digest.index_gaps],
        "pending_documents": sum(p.pending_documents for p in digest.pending) if done is None
        else done.pending_documents,
        "pending": [{"kb_id": p.kb_id, "kb_name": p.kb_name, "pending_documents": p.pending_documents,
                     "searched_documents": p.searched_documents, "embedding_chunks": p.embedding_chunks}
                    for p in digest.pending],
        "usage": ({"prompt_tokens": digest.tokens["prompt"], "completion_tokens": digest.tokens["completion"],
                   "model_calls": digest.tokens["calls"]} if done is not None else {}),
        "verdict": digest.verdict.model_dump() if done is not None else None,
        "notices": [n.model_dump() for n in digest.notices],
        "kb_badge": None,  # filled by `docmind ask`, which knows the asked KBs; a digest does not
    }


def _assert_summary_is_the_digest(events: list[Event]) -> RunSummary:
    summary = summarise(events)
    expected = _expected_from_digest(RunDigest.from_events(events))
    assert set(expected) == SUMMARY_KEYS  # the comparison covers every field
    got = summary.model_dump()
    for key in sorted(SUMMARY_KEYS):
        assert got[key] == expected[key], key
    return summary


@pytest.mark.parametrize("question, kwargs", [
    ("What is the zephyr budget?", {"mode": "rule"}),
    ("What is the zephyr budget?", {"mode": "agentic"}),
    ("When does the zephyr project launch and who reviews its budget?", {"mode": "auto"}),
    ("hello", {}),
], ids=["rule", "agentic", "auto", "chitchat"])
def test_a_whole_run_summarises_to_what_the_digest_holds(bench, question, kwargs):
    summary = _assert_summary_is_the_digest(_ask(bench, question, **kwargs))
    assert summary.run_id and summary.answer and summary.usage


def test_a_selected_document_run_summarises_to_what_the_digest_holds(bench):
    workbench, kb_id = bench
    doc_id = next(d.id for d in workbench.list_documents(kb_id) if d.name == "budget.txt")
    summary = _assert_summary_is_the_digest(_ask(bench, "What is the budget?", selected_doc_ids=[doc_id]))
    assert summary.mode == "SELECTED_DOC" and summary.sources


@pytest.mark.slow  # a worker sleeps past a real 1.5 s timeout: make test only
def test_one_shot_workers_are_summarised_as_the_calls_the_digest_lists():
    events = _one_shot_with_failing_workers()
    summary = _assert_summary_is_the_digest(events)
    # each worker called its tool with the run's query; a worker that timed out says so
    assert summary.tool_calls == [
        {"name": "doc_search", "args": {"query": "DM-3000 filter maintenance hours"}, "status": "timeout",
         "result_count": 0, "repaired_from": ""},
        {"name": "keyword_search", "args": {"query": "DM-3000 filter maintenance hours"}, "status": "error",
         "result_count": 0, "repaired_from": ""},
    ]


def test_an_agentic_run_that_fell_back_lists_the_loop_calls_and_the_fallback_workers():
    events = _agentic_falling_back()
    summary = _assert_summary_is_the_digest(events)
    assert [c["name"] for c in summary.tool_calls] == ["searchDocs", "doc_search", "keyword_search"]
    assert summary.rounds == 1 and summary.fallbacks


def test_the_sample_of_every_kind_summarises_to_what_the_digest_holds():
    _assert_summary_is_the_digest(sample_events(tokens=3))


def test_a_run_cut_before_done_summarises_to_what_the_digest_holds(bench):
    events = _ask(bench, "What is the zephyr budget?", mode="rule")
    _assert_summary_is_the_digest(events[:-1])


def test_the_json_keys_of_the_summary_are_pinned(bench):
    summary = summarise(_ask(bench, "What is the zephyr budget?", mode="rule"))
    dumped = summary.model_dump(mode="json")
    assert set(dumped) == SUMMARY_KEYS
    assert summary.sources and all(set(s) == SOURCE_KEYS for s in dumped["sources"])
    assert summary.tool_calls and all(set(c) == TOOL_CALL_KEYS for c in dumped["tool_calls"])
    assert set(dumped["usage"]) == {"prompt_tokens", "completion_tokens", "model_calls"}
    assert all(set(e) == {"stage", "message"} for e in dumped["errors"])
    assert all(set(c) == CLAIM_KEYS for c in dumped["claims"])
    assert set(dumped["claim_counts"]) == {"supported", "unsupported", "contradicted"}
    assert set(dumped["verdict"]) == VERDICT_KEYS and dumped["verdict"]["label"]
    types = {name: field.annotation for name, field in RunSummary.model_fields.items()}
    assert types["rounds"] is int and types["web_compensated"] is bool and types["confidence"] == float | None


def test_a_run_cancelled_in_the_agentic_loop_reports_no_grade(bench):
    cancel = threading.Event()
    cancel.set()  # the loop sees it before its first round: nothing is graded
    events = _ask(bench, "What is the zephyr budget?", mode="agentic", cancel=cancel)
    summary = _assert_summary_is_the_digest(events)
    assert summary.stop_reason == "cancelled" and summary.tier == ""  # a stopped run has no tier
    assert summary.grade_reason == "" and summary.confidence is None


def test_the_markdown_export_shows_each_answer_s_verdict(bench):
    """Issue 34: the export carries the same one verdict as the chat page and `ask --json`."""
    workbench, kb_id = bench
    conversation = workbench.start_conversation(title="verdicts")
    events = list(workbench.ask("What is the zephyr budget?", [kb_id], conversation_id=conversation, mode="rule"))
    greeting = list(workbench.ask("hello", [kb_id], conversation_id=conversation))
    exported = workbench.export_conversation(conversation)
    label = summarise(events).verdict["label"]
    assert f"> **Verdict: {label}**" in exported
    assert "> **Verdict: Not checked: no sources searched**" in exported.replace("\\", "")
    assert summarise(greeting).claims == []
