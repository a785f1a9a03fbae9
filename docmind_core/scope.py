"""The regex fast path of scope detection: zero model calls for unmistakable requests.

Principle: fire only when the whole message is clearly one of a few patterns
(a greeting, "what can you do", "remember that ...", "summarise our
conversation", "translate your last answer").  Anything less certain returns
``None`` and the understanding call decides, because sending a real knowledge
question down a non-retrieval path costs more than one extra model call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from docmind_core.backends.protocols import Turn
from docmind_core.models import Scope

_END = r"[\s!！。.~～?？,，…]*$"


@dataclass(frozen=True)
class ScopeDecision:
    scope: Scope
    confidence: float
    reason: str  # machine-readable, e.g. "regex:greeting"
    memory_text: str = ""  # for MEMORY_COMMAND: what to store


_GREETING = re.compile(
    r"^\s*(?:(?:你好|您好|嗨|哈喽|哈啰|早上好|早安|下午好|晚上好|晚安|在吗|在不在|谢谢|多谢|感谢|谢啦|谢谢你|"
    r"谢谢您|非常感谢|辛苦了|再见|拜拜|好的谢谢)(?:呀|啊|哈|了|啦|你|您)*"
    r"|(?:hi|hello|hey|hiya|good (?:morning|afternoon|evening)|thanks|thank you(?: (?:so|very) much)?|"
    r"thx|cheers|bye|goodbye|see you)(?: there| docmind| again)?)" + _END,
    re.IGNORECASE,
)

_CAPABILITY = re.compile(
    r"^\s*(?:(?:请问)?(?:你|您)(?:能|可以|会)(?:做|干|帮我做)?(?:些)?(?:什么|啥)(?:事情|事)?|"
    r"(?:你|您)(?:有|都有)(?:什么|哪些)(?:功能|能力|本事)|(?:你|您)是(?:谁|什么)|"
    r"what can you do(?: for me)?|what do you do|who are you|what are you|how can you help(?: me)?|"
    r"what are your (?:capabilities|features)|help)" + _END,
    re.IGNORECASE,
)

_MEMORY_ZH = re.compile(r"^\s*(?:请|麻烦)?(?:帮我)?(?:记住|记一下|记下|记好)[:：,，\s]*(?P<text>.+?)\s*$")
_MEMORY_EN = re.compile(r"^\s*(?:please\s+)?(?:remember|note|keep in mind)\s+(?:that\s+)?(?P<text>.+?)\s*$",
                        re.IGNORECASE)

_SUMMARY_ZH = re.compile(
    r"(?:总结|概括|归纳|回顾|梳理)(?:一下)?.{0,6}(?:我们|咱们|上面|以上|刚才|之前|前面|目前为止)?.{0,6}(?:的)?"
    r"(?:对话|聊天|讨论|谈话|聊的|说的|问答)")
_SUMMARY_EN = re.compile(
    r"\b(?:summari[sz]e|recap|sum up)\b.{0,20}\b(?:our|this|the|what we)\b.{0,15}"
    r"\b(?:conversation|chat|discussion|talk(?:ed)?|exchange)\b", re.IGNORECASE)
_TRANSLATE_ZH = re.compile(
    r"(?:把|将)?(?:你|您)(?:的)?(?:上面|上一条|上一个|刚才|之前|前面|最后)?(?:的)?(?:回答|回复|答案|话)"
    r".{0,8}(?:翻译|译成|译为)|翻译(?:一下)?(?:你|您)(?:的)?(?:上面|上一条|上一个|刚才|之前|前面)?(?:的)?(?:回答|回复|答案|话)")
_TRANSLATE_EN = re.compile(
    r"\btranslate\b.{0,12}\b(?:your|the|that)\s+(?:last|previous|above|earlier)?\s*(?:answer|reply|response|message)\b",
    re.IGNORECASE)
_RECALL_CHAT = re.compile(
    r"(?:我|我们)(?:刚才|之前|前面|上面)(?:问|说|聊)了(?:什么|些什么|啥)|"
    r"\bwhat (?:did|have) (?:i|we) (?:just )?(?:ask(?:ed)?|say|said|talk(?:ed)? about)\b", re.IGNORECASE)

# A memory command is a statement, not a question: "do you remember ..." must reach the model path.
_QUESTION_LIKE = re.compile(r"[?？]\s*$|^\s*(?:do|did|can|could|will|would)\s+you\b|吗\s*[?？]?\s*$", re.IGNORECASE)


def fast_scope(question: str, history: Sequence[Turn] | None = None) -> ScopeDecision | None:
    """A confident scope from surface patterns, or None to let the model decide."""
    text = question.strip()
    if not text:
        return None
    for pattern, reason in ((_SUMMARY_ZH, "summarise_conversation"), (_SUMMARY_EN, "summarise_conversation"),
                            (_TRANSLATE_ZH, "translate_last_answer"), (_TRANSLATE_EN, "translate_last_answer"),
                            (_RECALL_CHAT, "recall_conversation")):
        if pattern.search(text):
            return ScopeDecision(Scope.META_DIALOGUE, 0.95, f"regex:{reason}")
    if _GREETING.match(text):
        return ScopeDecision(Scope.CHITCHAT, 0.95, "regex:greeting")
    if _CAPABILITY.match(text):
        return ScopeDecision(Scope.CAPABILITY, 0.9, "regex:capability")
    if not _QUESTION_LIKE.search(text):
        memory = memory_text(text)
        if memory:
            return ScopeDecision(Scope.MEMORY_COMMAND, 0.9, "regex:memory_command", memory_text=memory)
    return None


def memory_text(question: str) -> str:
    """What a "remember that ..." / "记住 ..." command asks to store, or "" when it is not one."""
    for pattern in (_MEMORY_ZH, _MEMORY_EN):
        m = pattern.match(question.strip())
        if m and len(m.group("text")) >= 2:
            return m.group("text").rstrip("。.!！ ")
    return ""
