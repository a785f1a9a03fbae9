"""RetrievalPlanner: which one-shot workers run, from four understanding signals (no model call).

* doc_search always;
* keyword_search when the question is ambiguous (vector recall drifts) or
  PRECISE (codes, versions, quoted names need literal matching);
* web_search for every time-aware question: the understanding says so, or a
  time word ("latest", "上个月", "2025年"; ``TIME_KEYWORD_PATTERN``) appears in
  the original or the rewritten question (both are read because a rewrite
  sometimes drops "latest", and a model sometimes misses a relative date).
  Whether a web backend is configured is not the plan's business: the
  pipeline says so when it is not;
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

    word = time_keyword(question) or time_keyword(understanding.rewritten_query)
    if understanding.time_aware or word:
        tools.append("web_search")
        reasons["web_search"] = "+".join(x for x in ("time_aware" if understanding.time_aware else "",
                                                      f"keyword:{word}" if word else "") if x)

    if understanding.memory_aware:
        tools.append("recall_memory")
        reasons["recall_memory"] = "memory_aware"

    return RetrievalPlan(tools=tools, conservative=understanding.is_fallback, reasons=reasons)
