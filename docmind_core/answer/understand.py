"""Query understanding: one model call (or the offline rules), then deterministic post-processing.

The model classifies and rewrites the question (intent, complexity,
specificity, time/memory awareness, ambiguity, scope).  Whatever goes wrong
there — an endpoint error, invalid JSON, missing fields — the run goes on with
:meth:`Understanding.fallback` (ambiguous, so the planner adds keyword search).
Afterwards :func:`upgrade_complexity` raises SIMPLE to MEDIUM on surface
signals of several foci, because models often call "compare A and B" simple,
and a one-shot search then finds only one side.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Literal, Sequence

from docmind_core.backends.protocols import LanguageModel, UnderstandingRequest, UsageMeter
from docmind_core.models import Turn
from docmind_core.models import Complexity, Understanding
from docmind_core.prompts import PromptLibrary
from docmind_core.answer.generate import UNDERSTANDING_TURN_TOKENS, format_turns
from docmind_core.text import MULTI_FOCUS_PATTERN

log = logging.getLogger(__name__)

UnderstandingVia = Literal["model", "offline", "fallback"]

_QUESTION_MARK = re.compile(r"[?？]")

def has_multi_focus_signal(question: str) -> bool:
    return bool(MULTI_FOCUS_PATTERN.search(question)) or len(_QUESTION_MARK.findall(question)) >= 2


def upgrade_complexity(question: str, understanding: Understanding) -> Understanding:
    """SIMPLE → MEDIUM when the original question shows several foci; otherwise unchanged."""
    if understanding.complexity is Complexity.SIMPLE and has_multi_focus_signal(question):
        return understanding.model_copy(update={"complexity": Complexity.MEDIUM, "upgraded_complexity": True})
    return understanding


def format_history(history: Sequence[Turn]) -> str:
    return format_turns(history, "Assistant", "(no earlier turns)", "\n", UNDERSTANDING_TURN_TOKENS)


class QueryUnderstanding:
    """Runs the understanding step against whichever language model the engine built."""

    def __init__(self, llm: LanguageModel, prompts: PromptLibrary):
        self.llm = llm
        self.prompts = prompts

    def build_request(self, question: str, history: Sequence[Turn], kb_brief: str) -> UnderstandingRequest:
        messages = self.prompts.render_messages(
            "query_understanding", question=question, history=format_history(history),
            kb_brief=kb_brief.strip() or "(none selected)")
        return UnderstandingRequest(question=question, history=list(history), kb_brief=kb_brief, messages=messages)

    def run(self, question: str, history: Sequence[Turn], kb_brief: str,
            meter: UsageMeter) -> tuple[Understanding, UnderstandingVia]:
        started = time.perf_counter()
        try:
            request = self.build_request(question, history, kb_brief)
            understanding = self.llm.understand(request, meter)
            via: UnderstandingVia = "offline" if getattr(self.llm, "name", "") == "offline" else "model"
        except Exception as exc:  # any failure degrades to the conservative classification
            log.info("understanding fell back after %.0f ms: %s", (time.perf_counter() - started) * 1000, exc)
            understanding, via = Understanding.fallback(question), "fallback"
        if not understanding.rewritten_query.strip():
            understanding = understanding.model_copy(update={"rewritten_query": question})
        return upgrade_complexity(question, understanding), via
