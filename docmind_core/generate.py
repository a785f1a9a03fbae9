"""Answer prompt assembly: template choice and the messages sent to the language model.

History enters the prompt as plain prior turns (what the user asked, what
DocMind answered) and never with the evidence retrieved for those turns:
stored context from earlier runs would pollute the conversation and crowd out
the current evidence.  Only the current sources are numbered [1..n], in exactly
the order the UI lists them.
"""

from __future__ import annotations

from typing import Sequence

from docmind_core.backends.protocols import AnswerPrompt, Turn
from docmind_core.models import GradeResult, RetrievedChunk, Tier
from docmind_core.prompts import PromptLibrary, format_sources, language_name
from docmind_core.text import detect_language, truncate_to_tokens

ANSWER_TEMPLATES = ("knowledge_qa", "low_confidence", "fallback")
DIRECT_TEMPLATES = ("chitchat", "capability", "out_of_scope")
# How much of each earlier turn a prompt replays, in tokens; both cuts live here, next to format_turns.
# Understanding only resolves references ("it", "the second one") and sits on the path before retrieval,
# so its turns are cut short; the answer may be asked about the earlier answer itself (a follow-up, a
# meta-dialogue question), so it keeps twice as much.
UNDERSTANDING_TURN_TOKENS = 300
ANSWER_TURN_TOKENS = 600


def choose_template(grade: GradeResult | None, sources: Sequence[RetrievedChunk]) -> str:
    """HIGH → knowledge_qa; weak evidence (LOW / AMBIGUOUS) → low_confidence; no evidence → fallback."""
    if not sources:
        return "fallback"
    if grade is None or grade.tier is Tier.HIGH:
        return "knowledge_qa"
    return "low_confidence"


def format_memories(memories: Sequence[str]) -> str:
    return "\n".join(f"- {m.strip()}" for m in memories if m.strip()) or "(none)"


def format_turns(history: Sequence[Turn], assistant: str, empty: str, separator: str, max_tokens: int) -> str:
    """Earlier turns as "User: ..." / "<assistant>: ..." lines, each cut to ``max_tokens``."""
    if not history:
        return empty
    return separator.join(f"{'User' if t.role == 'user' else assistant}: "
                          f"{truncate_to_tokens(t.content.strip(), max_tokens)}" for t in history)


def format_conversation(history: Sequence[Turn]) -> str:
    return format_turns(history, "DocMind", "(the conversation is empty)", "\n\n", ANSWER_TURN_TOKENS)


def _history_messages(history: Sequence[Turn]) -> list[dict[str, str]]:
    return [{"role": "user" if t.role == "user" else "assistant",
             "content": truncate_to_tokens(t.content.strip(), ANSWER_TURN_TOKENS)}
            for t in history if t.content.strip()]


def build_answer_prompt(template: str, question: str, sources: Sequence[RetrievedChunk],
                        history: Sequence[Turn], memories: Sequence[str],
                        prompts: PromptLibrary) -> AnswerPrompt:
    """The system + user messages for one answer, with earlier turns in between.

    For ``meta_dialogue`` the conversation is the material itself, so it goes
    into the user message once instead of as separate turns.
    """
    language = detect_language(question)
    values: dict[str, str] = {"question": question.strip(), "language": language_name(language)}
    if template in ANSWER_TEMPLATES:
        values["memories"] = format_memories(memories)
        if template != "fallback":
            values["sources"] = format_sources(sources)
    elif template == "meta_dialogue":
        values["conversation"] = format_conversation(history)
    elif template == "memory_ack":
        values["memories"] = format_memories(memories)

    rendered = prompts.render_messages(template, **values)
    system = [m for m in rendered if m["role"] == "system"]
    user = [m for m in rendered if m["role"] != "system"]
    prior = [] if template == "meta_dialogue" else _history_messages(history)
    messages = system + prior + user
    return AnswerPrompt(template=template, messages=messages, question=question,
                        sources=list(sources) if template != "fallback" else [],
                        history=list(history), memories=list(memories), language=language)
