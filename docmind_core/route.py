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
"""

from __future__ import annotations

import re
from typing import Sequence

from docmind_core.models import Complexity, Intent, Mode, PathDecision, RequestedMode, Understanding
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
    requested = RequestedMode(requested_mode)
    if requested is RequestedMode.RULE:
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
