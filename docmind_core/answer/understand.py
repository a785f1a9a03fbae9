"""Query understanding: one model call (or the offline rules), then deterministic post-processing.

The model classifies and rewrites the question (intent, complexity,
specificity, time/memory awareness, ambiguity, scope).  Whatever goes wrong
there — an endpoint error, invalid JSON, missing fields — the run goes on with
:meth:`Understanding.fallback` (ambiguous, so the planner adds keyword search).
Afterwards :func:`upgrade_complexity` raises SIMPLE to MEDIUM on surface
signals of several foci, because models often call "compare A and B" simple,
and a one-shot search then finds only one side.  A rewrite that left the
question's script (a Chinese question rewritten in English) is discarded:
the documents in the question's language would be missed.  Under
``llm.understanding rules_when_confident`` the offline rules answer when they
are sure, and the model is not called.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from typing import Literal, Sequence

from docmind_core.answer.run_context import RunContext
from docmind_core.backends.protocols import LanguageModel, UnderstandingRequest
from docmind_core.deadline import bind_model
from docmind_core.values import Turn
from docmind_core.values import Complexity, Scope, Understanding
from docmind_core.backends.offline.understanding import strip_filler, understand_offline
from docmind_core.prompts import PromptLibrary
from docmind_core.answer.generate import UNDERSTANDING_TURN_TOKENS, format_turns
from docmind_core.text.tokens import MULTI_FOCUS_PATTERN, detect_language, is_cjk

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
            run: RunContext) -> tuple[Understanding, UnderstandingVia]:
        outcome = self.understand(question, history, kb_brief, run)
        return outcome.understanding, outcome.via

    def understand(self, question: str, history: Sequence[Turn], kb_brief: str,
                   run: RunContext) -> UnderstandingOutcome:
        """The understanding of ``question``, the model called under the run's deadline and meter; under
        ``llm.understanding rules_when_confident`` the offline rules answer when they are sure, and the model
        is not called."""
        started = time.perf_counter()
        note = ""
        if run.settings.llm.understanding == "rules_when_confident":
            ruled, why = confident_rules(question, history)
            if ruled is not None:
                return UnderstandingOutcome(upgrade_complexity(question, ruled), "offline",
                                            f"rules were confident ({why}): no model call")
            note = f"rules not confident ({why}): asked the model"
        try:
            request = self.build_request(question, history, kb_brief)
            understanding = bind_model(self.llm, run.guard).understand(request, run.meter)
            via: UnderstandingVia = "offline" if getattr(self.llm, "name", "") == "offline" else "model"
        except Exception as exc:  # any failure degrades to the conservative classification
            log.info("understanding fell back after %.0f ms: %s", (time.perf_counter() - started) * 1000, exc)
            understanding, via = Understanding.fallback(question), "fallback"
        if not understanding.rewritten_query.strip():
            understanding = understanding.model_copy(update={"rewritten_query": question})
        switched = language_switch(question, understanding.rewritten_query)
        if switched:  # a rewrite in another script misses documents in the question's language
            understanding = understanding.model_copy(update={"rewritten_query": question})
            note = "; ".join(x for x in (note, f"the rewrite {switched}: discarded, the question is searched") if x)
        return UnderstandingOutcome(upgrade_complexity(question, understanding), via, note)


@dataclass(frozen=True)
class UnderstandingOutcome:
    understanding: Understanding
    via: UnderstandingVia
    note: str = ""  # why the rules answered, or why the model's rewrite was discarded (Understood.note)


def language_switch(question: str, rewrite: str) -> str:
    """How the rewrite changed the question's script ("switched from Chinese to English"), or "".

    A question with Chinese in it keeps Chinese in its rewrite; a question without any keeps it out.
    Names and codes in Latin letters inside a Chinese question are fine either way.
    """
    if not rewrite.strip() or rewrite.strip() == question.strip():
        return ""
    asked_zh = detect_language(question) == "zh"
    rewrite_has_cjk = any(is_cjk(ch) for ch in rewrite)
    if asked_zh and not rewrite_has_cjk:
        return "switched from Chinese to English"
    if not any(is_cjk(ch) for ch in question) and detect_language(rewrite) == "zh":
        return "switched from English to Chinese"
    return ""


def confident_rules(question: str, history: Sequence[Turn]) -> tuple[Understanding | None, str]:
    """The offline rules' understanding when they are sure of it, else None; with the reason either way.

    Sure means: a knowledge question (the rules' scope patterns did not fire), not ambiguous, and no word
    that refers to an earlier turn (resolving one is what the model is better at)."""
    ruled = understand_offline(question, history)
    if ruled.scope is not Scope.KNOWLEDGE_QUERY:
        return None, f"scope {ruled.scope.value}"
    if ruled.is_ambiguous:
        return None, "ambiguous"
    if ruled.rewritten_query != strip_filler(question):
        return None, "refers to an earlier turn"
    return ruled, f"{ruled.intent.value}, {ruled.complexity.value.lower()}"
