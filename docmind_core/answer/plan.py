"""RetrievalPlanner: which one-shot workers run, from four understanding signals (no model call).

* doc_search always;
* keyword_search when the question is ambiguous (vector recall drifts) or
  PRECISE (codes, versions, quoted names need literal matching);
* web_search when the question is time-aware AND a time word appears in the
  original or the rewritten question — both are checked because a rewrite
  sometimes drops "latest";
* recall_memory when the question refers to the user's own earlier statements.

A plan made from the fallback understanding is marked ``conservative``.
"""

from __future__ import annotations

from docmind_core.values import RetrievalPlan, Specificity, ToolName, Understanding
from docmind_core.text.tokens import TIME_KEYWORD_PATTERN



def time_keyword(text: str) -> str | None:
    m = TIME_KEYWORD_PATTERN.search(text)
    return m.group(0) if m else None


def plan_retrieval(question: str, understanding: Understanding) -> RetrievalPlan:
    tools: list[ToolName] = ["doc_search"]
    reasons: dict[str, str] = {"doc_search": "always"}

    why_keyword = [name for name, on in (("ambiguous", understanding.is_ambiguous),
                                         ("precise", understanding.specificity is Specificity.PRECISE)) if on]
    if why_keyword:
        tools.append("keyword_search")
        reasons["keyword_search"] = "+".join(why_keyword)

    if understanding.time_aware:
        word = time_keyword(question) or time_keyword(understanding.rewritten_query)
        if word:
            tools.append("web_search")
            reasons["web_search"] = f"time_aware+keyword:{word}"

    if understanding.memory_aware:
        tools.append("recall_memory")
        reasons["recall_memory"] = "memory_aware"

    return RetrievalPlan(tools=tools, conservative=understanding.is_fallback, reasons=reasons)
