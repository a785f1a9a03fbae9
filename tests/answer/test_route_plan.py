"""PathDecision routing table and the RetrievalPlanner rule table."""

from __future__ import annotations

import pytest

from docmind_core.values import Complexity, Intent, Mode, RequestedMode, Specificity, Understanding
from docmind_core.answer.plan import plan_retrieval
from docmind_core.answer.route import decide_path
from docmind_core.settings import Settings

DEFAULT = Settings()
NO_AGENTIC = Settings().with_overrides({"agentic.enabled": False})


def u(**fields) -> Understanding:
    return Understanding(rewritten_query=fields.pop("rewritten_query", "q"), **fields)


SIMPLE = u()
MEDIUM = u(complexity=Complexity.MEDIUM)
AMBIGUOUS = u(is_ambiguous=True)
COMPARISON = u(intent=Intent.COMPARISON, complexity=Complexity.MEDIUM)


@pytest.mark.parametrize("question, understanding, selected, requested, settings, mode, reason, forced", [
    ("DM-3000 续航多久", SIMPLE, [], "auto", DEFAULT, Mode.RULE_PLANNER, "rule_planner", False),
    ("DM-3000 续航多久", MEDIUM, [], "auto", DEFAULT, Mode.AGENTIC, "agentic", False),
    ("DM-3000 续航多久", AMBIGUOUS, [], "auto", DEFAULT, Mode.AGENTIC, "agentic", False),
    ("DM-3000 续航多久", MEDIUM, [], "auto", NO_AGENTIC, Mode.RULE_PLANNER, "agentic_disabled", False),
    ("DM-3000 续航多久", AMBIGUOUS, None, "auto", NO_AGENTIC, Mode.RULE_PLANNER, "agentic_disabled", False),
    # selected documents
    ("总结这篇文档", SIMPLE, [7], "auto", DEFAULT, Mode.SELECTED_DOC, "selected_doc_summary", False),
    ("Summarize these documents", MEDIUM, [1, 2, 3], "auto", DEFAULT, Mode.SELECTED_DOC, "selected_doc_summary",
     False),
    ("这份报告的主要内容", AMBIGUOUS, [4], "auto", NO_AGENTIC, Mode.SELECTED_DOC, "selected_doc_summary", False),
    ("DM-3000 续航多久", SIMPLE, [7], "auto", DEFAULT, Mode.SELECTED_DOC, "selected_doc_question", False),
    ("对比 A 和 B", COMPARISON, [7], "auto", DEFAULT, Mode.AGENTIC, "agentic", False),
    ("对比这两份文档", COMPARISON, [7, 8], "auto", DEFAULT, Mode.SELECTED_DOC, "selected_doc_summary", False),
    ("总结这篇文档", SIMPLE, [1, 2, 3, 4], "auto", DEFAULT, Mode.RULE_PLANNER, "rule_planner", False),
    # forced modes win
    ("总结这篇文档", SIMPLE, [7], "rule", DEFAULT, Mode.RULE_PLANNER, "forced_rule", True),
    ("DM-3000 续航多久", SIMPLE, [], "agentic", DEFAULT, Mode.AGENTIC, "forced_agentic", True),
    ("DM-3000 续航多久", MEDIUM, [], RequestedMode.RULE_PLANNER, DEFAULT, Mode.RULE_PLANNER, "forced_rule", True),
    ("DM-3000 续航多久", SIMPLE, [], "agentic", NO_AGENTIC, Mode.AGENTIC, "forced_agentic", True),
])
def test_routing_table(question, understanding, selected, requested, settings, mode, reason, forced):
    decision = decide_path(question, understanding, selected, requested, settings)
    assert (decision.mode, decision.reason, decision.forced) == (mode, reason, forced)


def test_selected_doc_limit_follows_the_setting():
    wider = Settings().with_overrides({"rag.selected_doc_max": 5})
    assert decide_path("总结", SIMPLE, [1, 2, 3, 4], "auto", wider).mode is Mode.SELECTED_DOC


def test_unknown_requested_mode_is_refused():
    with pytest.raises(ValueError):
        decide_path("q", SIMPLE, [], "fastest", DEFAULT)


@pytest.mark.parametrize("question, understanding, tools, conservative", [
    ("DM-3000 续航多久", SIMPLE, ["doc_search"], False),
    ("DM-3000 续航多久", u(specificity=Specificity.PRECISE), ["doc_search", "keyword_search"], False),
    ("它呢", AMBIGUOUS, ["doc_search", "keyword_search"], False),
    ("它呢", Understanding.fallback("它呢"), ["doc_search", "keyword_search"], True),
    ("DM-3000 最新固件", u(time_aware=True), ["doc_search", "web_search"], False),
    ("What is the latest firmware?", u(time_aware=True), ["doc_search", "web_search"], False),
    ("Release notes 2025", u(time_aware=True), ["doc_search", "web_search"], False),
    ("本月有哪些更新", u(time_aware=True), ["doc_search", "web_search"], False),
    # the rewrite keeps a time word the original lacked
    ("DM-3000 固件", u(time_aware=True, rewritten_query="DM-3000 current firmware"),
     ["doc_search", "web_search"], False),
    # every time-aware question considers the web (issue 41): the flag alone (a model read a time the words
    # hide), or a time word alone (a model missed "最新"), relative dates in both languages
    ("DM-3000 固件版本", u(time_aware=True), ["doc_search", "web_search"], False),
    ("DM-3000 最新固件", SIMPLE, ["doc_search", "web_search"], False),
    ("上个季度的利润是多少", SIMPLE, ["doc_search", "web_search"], False),
    ("这周有什么公告", SIMPLE, ["doc_search", "web_search"], False),
    ("公司2024年的营收", SIMPLE, ["doc_search", "web_search"], False),
    ("What changed last quarter?", SIMPLE, ["doc_search", "web_search"], False),
    ("What happened yesterday?", SIMPLE, ["doc_search", "web_search"], False),
    ("DM-3000 固件版本", SIMPLE, ["doc_search"], False),
    # a model number is not a year
    ("DM-2024 说明书", SIMPLE, ["doc_search"], False),
    ("我上次说的偏好", u(memory_aware=True), ["doc_search", "recall_memory"], False),
    ("everything", u(is_ambiguous=True, specificity=Specificity.PRECISE, time_aware=True, memory_aware=True,
                     rewritten_query="latest everything"),
     ["doc_search", "keyword_search", "web_search", "recall_memory"], False),
])
def test_planner_table(question, understanding, tools, conservative):
    plan = plan_retrieval(question, understanding)
    assert plan.tools == tools
    assert plan.conservative is conservative
    assert set(plan.reasons) == set(tools)


def test_planner_reasons_are_machine_readable():
    plan = plan_retrieval("最新版本", u(time_aware=True, is_ambiguous=True, specificity=Specificity.PRECISE))
    assert plan.reasons["keyword_search"] == "ambiguous+precise"
    assert plan.reasons["web_search"] == "time_aware+keyword:最新"
    assert plan_retrieval("固件版本", u(time_aware=True)).reasons["web_search"] == "time_aware"
    assert plan_retrieval("上个月的更新", SIMPLE).reasons["web_search"] == "keyword:上个月"
