"""PathDecision: which retrieval path a knowledge question takes, with a machine-readable reason.

Order of the rules:

1. A mode forced by the user (``rule`` / ``agentic``) wins — it exists to
   compare the two paths on the same question (reason ``forced_rule`` /
   ``forced_agentic``).
2. SELECTED_DOC when 1..``rag.selected_doc_max`` documents are selected and the
   question is about them.  We take "about them" broadly: a summary or
   document wording (总结, 这篇, summarise, this document ...) always is
   (reason ``selected_doc_summary``); any other question is too (reason
   ``selected_doc_question``) unless it is a comparison, which usually reaches
   beyond the selected files and is better served by search.
3. RULE_PLANNER when the question is SIMPLE and not ambiguous (``rule_planner``).
4. AGENTIC otherwise (``agentic``), or RULE_PLANNER with ``agentic_disabled``
   when ``agentic.enabled`` is off.

Every decision also carries ``explanation``: the same rule in plain words, naming
the signals that decided it ("comparison of 2 entities (Nimbus N1, N2) -> AGENTIC";
"one precise code (NIM-201) in a simple, unambiguous question -> RULE_PLANNER
with keyword search"), for the chat page, ``docmind ask`` and traces.
"""

from __future__ import annotations

import re
from typing import Sequence

from docmind_core.text.query_signals import comparison_entities, exact_terms
from docmind_core.values import (
    Complexity, Intent, Mode, PathDecision, RequestedMode, RetrievalPlan, Specificity, Understanding,
)
from docmind_core.answer.plan import plan_retrieval
from docmind_core.settings import Settings

DOCUMENT_INTENT_PATTERN = re.compile(
    r"总结|概括|归纳|摘要|概述|大意|要点|主要内容|讲了什么|讲的什么|说了什么|这篇|这份|该文|本文|全文|文档|文件|"
    r"\bsummar(?:y|ise|ize|ising|izing)\b|\boverview\b|\bgist\b|\bkey points\b|\bmain points\b|"
    r"\b(?:this|these|the selected) (?:document|file|paper|report|pdf)s?\b|\bwhat is (?:it|this) about\b",
    re.IGNORECASE,
)


def has_document_intent(question: str) -> bool:
    return bool(DOCUMENT_INTENT_PATTERN.search(question))


def decide_path(question: str, understanding: Understanding, selected_doc_ids: Sequence[int] | None,
                requested_mode: RequestedMode | str, settings: Settings) -> PathDecision:
    return route_with_plan(question, understanding, selected_doc_ids, requested_mode, settings)[0]


def route_with_plan(question: str, understanding: Understanding, selected_doc_ids: Sequence[int] | None,
                    requested_mode: RequestedMode | str,
                    settings: Settings) -> tuple[PathDecision, RetrievalPlan | None]:
    """The path, explained in words, and for RULE_PLANNER its tool plan (made once: the explanation names it)."""
    decision = _decide(question, understanding, selected_doc_ids, requested_mode, settings)
    plan = plan_retrieval(question, understanding) if decision.mode is Mode.RULE_PLANNER else None
    explanation = explain_route(question, understanding, decision, len(set(selected_doc_ids or ())),
                                settings.rag.selected_doc_max, plan)
    return decision.model_copy(update={"explanation": explanation}), plan


def _decide(question: str, understanding: Understanding, selected_doc_ids: Sequence[int] | None,
            requested_mode: RequestedMode | str, settings: Settings) -> PathDecision:
    requested = RequestedMode(requested_mode)
    if requested is RequestedMode.RULE_PLANNER:
        return PathDecision(mode=Mode.RULE_PLANNER, reason="forced_rule", forced=True)
    if requested is RequestedMode.AGENTIC:
        return PathDecision(mode=Mode.AGENTIC, reason="forced_agentic", forced=True)

    selected = len(set(selected_doc_ids or ()))
    if 1 <= selected <= settings.rag.selected_doc_max:
        if has_document_intent(question):
            return PathDecision(mode=Mode.SELECTED_DOC, reason="selected_doc_summary")
        if understanding.intent is not Intent.COMPARISON:
            return PathDecision(mode=Mode.SELECTED_DOC, reason="selected_doc_question")

    if understanding.complexity is Complexity.SIMPLE and not understanding.is_ambiguous:
        return PathDecision(mode=Mode.RULE_PLANNER, reason="rule_planner")
    if not settings.agentic.enabled:
        return PathDecision(mode=Mode.RULE_PLANNER, reason="agentic_disabled")
    return PathDecision(mode=Mode.AGENTIC, reason="agentic")


# --------------------------------------------------------------------------
# The decision in plain words
# --------------------------------------------------------------------------

_TOOL_WORDS = {"keyword_search": "keyword search", "web_search": "web search", "recall_memory": "memory recall"}


def _count(n: int, noun: str) -> str:
    return f"{'one' if n == 1 else n} {noun}{'' if n == 1 else 's'}"


def _documents(n: int) -> str:
    return f"{n} selected document{'' if n == 1 else 's'}"


def _comparison(question: str) -> str:
    names = comparison_entities(question)
    if len(names) < 2:
        return "a comparison"
    return f"comparison of {len(names)} entities ({', '.join(names)})"


def _search_signals(question: str, understanding: Understanding) -> str:
    """Why a searched question is not simple (AGENTIC), or that it is (RULE_PLANNER)."""
    if understanding.intent is Intent.COMPARISON:
        return _comparison(question)
    if understanding.is_ambiguous:
        return "an ambiguous question (an unresolved reference or too few words)"
    if understanding.complexity is Complexity.COMPLEX:
        return "a multi-step question (complexity COMPLEX)"
    if understanding.complexity is Complexity.MEDIUM:
        asked = len(re.findall(r"[?？]", question))
        if asked >= 2:
            return f"{asked} questions in one"
        return "a question with several parts (complexity MEDIUM" + (
            ", raised by its wording)" if understanding.upgraded_complexity else ")")
    if understanding.specificity is Specificity.PRECISE:
        codes = exact_terms(question)
        what = f"{_count(len(codes), 'precise code')} ({', '.join(codes)})" if codes else "exact terms"
        return f"{what} in a simple, unambiguous question"
    return "a simple, unambiguous question"


def _with_plan(plan: RetrievalPlan | None) -> str:
    extra = [_TOOL_WORDS[t] for t in (plan.tools if plan else []) if t in _TOOL_WORDS]
    return " with " + (" and ".join(extra) if extra else "document search")


def explain_route(question: str, understanding: Understanding, decision: PathDecision, selected: int,
                  selected_max: int, plan: RetrievalPlan | None = None) -> str:
    """One sentence naming the signals behind ``decision``: "<signals> -> MODE[ with <planned tools>]"."""
    target = decision.mode.value + (_with_plan(plan) if decision.mode is Mode.RULE_PLANNER else "")
    if decision.forced:
        return f"mode chosen by the user -> {target}"
    if decision.reason == "selected_doc_summary":
        return f"{_documents(selected)} and a summary request -> {target}"
    if decision.reason == "selected_doc_question":
        about = "it" if selected == 1 else "them"
        return f"{_documents(selected)} and a question about {about} -> {target}"
    signals = _search_signals(question, understanding)
    if selected > selected_max:
        signals = (f"{_documents(selected)}, more than rag.selected_doc_max ({selected_max}), so a search; "
                   + signals)
    elif selected and understanding.intent is Intent.COMPARISON:
        signals += f", which reaches beyond the {_documents(selected)}"
    if decision.reason == "agentic_disabled":
        signals += ", but agentic.enabled is off"
    return f"{signals} -> {target}"
