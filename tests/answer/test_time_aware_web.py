"""A time-aware question always considers the web; without a web backend the run says so (issue 41)."""

from __future__ import annotations

import pytest

from docmind_core.answer.agentic import AgenticPath
from docmind_core.answer.grade import CragGrader
from docmind_core.answer.pipeline import AnswerPipeline, AskRequest
from docmind_core.answer.rule_planner import RulePlannerPath
from docmind_core.answer.tools import Toolbox
from docmind_core.backends.offline.chat import OfflineLanguageModel
from docmind_core.backends.protocols import WebSearchResult
from docmind_core.backends.web_search import UnavailableWebSearch
from docmind_core.events import Done, Fallback, Retrieved, Routed
from docmind_core.prompts import PromptLibrary
from docmind_core.values import BackendStatus
from tests.agentic_world import CORPUS, FixtureRetriever, OverlapReranker, make_refiner, settings


class LiveWeb:
    name = "live-stub"

    def __init__(self):
        self.queries: list[str] = []

    def search(self, query: str, max_results: int) -> WebSearchResult:
        self.queries.append(query)
        return WebSearchResult(available=True, chunks=[])

    def status(self) -> BackendStatus:
        return BackendStatus(role="web_search", name=self.name, live=True)


def pipeline(web) -> AnswerPipeline:
    prompts = PromptLibrary()
    llm = OfflineLanguageModel(prompts)
    refiner, grader = make_refiner(), CragGrader()
    toolbox = Toolbox(FixtureRetriever(CORPUS), web=web)
    rule_planner = RulePlannerPath(toolbox, refiner, grader)
    agentic = AgenticPath(llm, toolbox, refiner, grader, prompts, rule_planner)
    return AnswerPipeline(llm=llm, fallback_llm=llm, prompts=prompts, store=None, reranker=OverlapReranker(),
                          rule_planner=rule_planner, agentic=agentic, grader=grader, memory=None)


def ask(web, question: str) -> list:
    events = list(pipeline(web).ask(AskRequest(question=question, kb_ids=[1]), settings(), []))
    assert isinstance(events[-1], Done)
    return events


def web_fallbacks(events) -> list[Fallback]:
    return [e for e in events if isinstance(e, Fallback) and e.stage == "web"]


@pytest.mark.parametrize("question, word", [
    ("What changed for the DM-3000 pump last quarter?", "last quarter"),
    ("DM-3000 上个月有什么变化？", "上个月"),
    ("这周 DM-4000 的价格是多少？", "这周"),
    # a comparison takes the agentic path; its first round would search the web
    ("DM-3000 和 DM-4000 今年哪个卖得更多？", "今年"),
])
def test_without_a_web_backend_a_time_aware_question_says_the_web_was_not_searched(question, word):
    events = ask(UnavailableWebSearch(), question)
    said = web_fallbacks(events)
    assert len(said) == 1 and f'"{word}"' in said[0].reason and "set TAVILY_API_KEY" in said[0].reason
    assert said[0].to == "the knowledge bases only"
    routed = next(e for e in events if isinstance(e, Routed))
    assert routed.plan is None or "web_search" in routed.plan.tools


def test_with_a_web_backend_the_time_aware_question_searches_it_and_nothing_is_said():
    web = LiveWeb()
    events = ask(web, "DM-3000 上个月有什么变化？")
    assert not web_fallbacks(events)
    assert web.queries  # the one-shot web worker ran
    retrieved = next(e for e in events if isinstance(e, Retrieved))
    assert any(w.name == "web_search" and w.status == "ok" for w in retrieved.workers)


def test_a_question_without_a_time_is_not_told_about_the_web():
    assert not web_fallbacks(ask(UnavailableWebSearch(), "How often is the DM-3000 filter cleaned?"))
