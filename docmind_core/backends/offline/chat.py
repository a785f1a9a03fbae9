"""The offline engine: a deterministic language model used when no endpoint is configured.

It is meant to be useful, not a stub:

* understanding: the rules of :mod:`offline_understanding` (classification,
  filler removal, pronoun resolution against the last user turn);
* answers: extractive (:mod:`extractive`) — the sentences of the sources that
  answer the question are quoted, each followed by its source number [n]; when
  no sentence is relevant it says plainly that the sources do not answer;
* non-retrieval scopes (chitchat, capability, meta-dialogue, memory, out of
  scope, fallback) get fixed, sensible replies in the question's language;
* the agentic loop: delegated to ``agentic_policy.OfflineToolPolicy``.

It makes no model calls, so it records nothing in the usage meter.
"""

from __future__ import annotations

import re
import threading
from typing import Callable, Iterator, Sequence

from docmind_core.backends.offline.extractive import extractive_answer
from docmind_core.backends.offline.understanding import resolve_pronoun, understand_offline
from docmind_core.backends.protocols import (
    AgentTranscript, AgentTurn, AnswerPrompt, Embedder, ToolSpec, UnderstandingRequest, UsageMeter,
)
from docmind_core.values import Turn
from docmind_core.backends.offline.tool_policy import OfflineToolPolicy  # deterministic tool policy: protocols and text only
from docmind_core.values import BackendStatus, Understanding
from docmind_core.prompts import PromptLibrary
from docmind_core.text.tokens import CITATION_MARKER_RE, sentences

_PIECE_RE = re.compile(r"[\u3400-\u9fff]{1,4}|[^\u3400-\u9fff\s]+\s*|\s+")


def _zh(language: str) -> bool:
    return language == "zh"


# -- replies without retrieval ----------------------------------------------------


def _first_sentence(text: str, limit: int = 80) -> str:
    parts = sentences(CITATION_MARKER_RE.sub("", text))
    first = parts[0] if parts else text
    return first if len(first) <= limit else first[:limit].rstrip() + "…"


def meta_dialogue_reply(question: str, history: Sequence[Turn], language: str) -> str:
    zh = _zh(language)
    if not history:
        return "我们还没有开始对话，暂时没有可以总结的内容。" if zh else \
            "We have not talked yet, so there is nothing to summarise."
    if re.search(r"翻译|译成|translate", question, re.IGNORECASE):
        last = next((t.content for t in reversed(history) if t.role != "user"), "")
        if zh:
            return "离线引擎不能翻译文本。我上一条回答的原文如下：\n" + (last or "（没有找到上一条回答）")
        return "The offline engine cannot translate text. My previous answer was:\n" + (last or "(no earlier answer)")
    questions = [t for t in history if t.role == "user"]
    lines = [f"我们已经进行了 {len(questions)} 轮对话：" if zh else
             f"So far we have had {len(questions)} exchange(s):"]
    pending: str | None = None
    for turn in history:
        if turn.role == "user":
            if pending is not None:
                lines.append(pending)
            pending = (f"- 你问：「{_first_sentence(turn.content)}」" if zh
                       else f"- You asked: \"{_first_sentence(turn.content)}\"")
        elif pending is not None:
            pending += (f"；我答：{_first_sentence(turn.content)}" if zh
                        else f"; I answered: {_first_sentence(turn.content)}")
            lines.append(pending)
            pending = None
    if pending is not None:
        lines.append(pending)
    return "\n".join(lines)


def chitchat_reply(question: str, language: str) -> str:
    zh = _zh(language)
    if re.search(r"谢|thank|thx|cheers", question, re.IGNORECASE):
        return "不客气！还有什么想了解的，随时问我。" if zh else "You're welcome! Ask me anything about your documents."
    if re.search(r"再见|拜拜|晚安|\bbye\b|goodbye|see you", question, re.IGNORECASE):
        return "再见！需要查资料时随时回来。" if zh else "Goodbye! Come back whenever you need something from your documents."
    return ("你好！我是 DocMind，可以根据你的知识库回答问题，并为每个事实标注来源。" if zh else
            "Hello! I'm DocMind. Ask me about your documents and I'll answer with numbered sources.")


def capability_reply(language: str) -> str:
    if _zh(language):
        return ("我是 DocMind，可以：\n- 根据所选知识库回答问题，并为每个事实标注来源编号；\n"
                "- 阅读并总结你选中的文档；\n- 对比多个主题，或分几步检索多跳问题；\n"
                "- 在配置了联网搜索时查询最新信息；\n- 记住你让我记住的偏好；\n- 总结我们的对话。\n"
                "回答的质量取决于已导入的文档；每次运行的过程都可以在追踪页面查看。")
    return ("I'm DocMind. I can:\n- answer questions from the selected knowledge bases, citing a numbered source for "
            "each fact;\n- read and summarise documents you select;\n- compare topics and follow multi-step questions "
            "by searching several times;\n- search the web for recent events when web search is configured;\n"
            "- remember preferences you ask me to remember;\n- summarise our conversation.\n"
            "Answers are only as good as the documents loaded, and every run can be inspected in the trace view.")


def out_of_scope_reply(language: str) -> str:
    if _zh(language):
        return "抱歉，这超出了我的职责范围。我只回答与你的文档和知识库有关的问题，欢迎就这些内容提问。"
    return ("Sorry, that is outside what I do. I answer questions about your documents and knowledge bases; "
            "feel free to ask about those.")


def fallback_reply(language: str) -> str:
    if _zh(language):
        return ("所选知识库中没有找到与这个问题相关的资料，所以我无法根据资料回答。"
                "可以尝试导入相关文档、选择其他知识库，或用文档中的原词重新提问。")
    return ("The selected knowledge bases contain nothing relevant to this question, so I cannot answer it from "
            "them. You could add a document on the topic, select another knowledge base, or rephrase using the "
            "exact names the documents use.")


def memory_ack_reply(memories: Sequence[str], language: str) -> str:
    memory = "；".join(m.strip() for m in memories if m.strip()) if _zh(language) else \
        "; ".join(m.strip() for m in memories if m.strip())
    if _zh(language):  # no memory means nothing could be stored (e.g. nobody is signed in)
        return f"好的，我记住了：{memory}。" if memory else "这条内容没有保存到长期记忆：当前会话无法保存记忆（例如没有登录用户）。"
    return f"Noted, I will remember: {memory}." if memory else \
        "I could not save that to long-term memory in this session (for example, nobody is signed in)."


# -- the engine -----------------------------------------------------------------


class OfflineLanguageModel:
    """Implements ``protocols.LanguageModel`` with rules and extraction only."""

    name = "offline"

    def __init__(self, prompts: PromptLibrary | None = None, encoder: Embedder | None = None):
        self.prompts = prompts  # kept for symmetry with OpenAIChatModel; replies do not need templates
        # words do not match across Chinese and English: with an encoder, the reader can still find the
        # sentence in the other language that answers (None: lexical matching only)
        self.encoder = encoder
        self._composers: dict[str, Callable[[AnswerPrompt], str]] = {
            "knowledge_qa": lambda p: self._extract(p, low_confidence=False),
            "low_confidence": lambda p: self._extract(p, low_confidence=True),
            "fallback": lambda p: fallback_reply(p.language),
            "meta_dialogue": lambda p: meta_dialogue_reply(p.question, p.history, p.language),
            "chitchat": lambda p: chitchat_reply(p.question, p.language),
            "capability": lambda p: capability_reply(p.language),
            "out_of_scope": lambda p: out_of_scope_reply(p.language),
            "memory_ack": lambda p: memory_ack_reply(p.memories, p.language),
        }

    def understand(self, request: UnderstandingRequest, meter: UsageMeter) -> Understanding:
        return understand_offline(request.question, request.history)

    def agent_turn(self, transcript: AgentTranscript, tools: Sequence[ToolSpec], meter: UsageMeter,
                   timeout_s: float) -> AgentTurn:
        return OfflineToolPolicy().next_turn(transcript, tools)

    def compose_answer(self, prompt: AnswerPrompt) -> str:
        composer = self._composers.get(prompt.template)
        if composer is None:
            composer = self._composers["knowledge_qa" if prompt.sources else "fallback"]
        return composer(prompt)

    def stream_answer(self, prompt: AnswerPrompt, meter: UsageMeter,
                      cancel: threading.Event | None = None) -> Iterator[str]:
        for piece in _PIECE_RE.findall(self.compose_answer(prompt)):
            if cancel is not None and cancel.is_set():
                return
            yield piece

    def _extract(self, prompt: AnswerPrompt, low_confidence: bool) -> str:
        if not prompt.sources:
            return fallback_reply(prompt.language)
        question, _ = resolve_pronoun(prompt.question, prompt.history)  # "它的续航" → "DM-3000的续航"
        return extractive_answer(question, prompt.sources, prompt.language, low_confidence, encoder=self.encoder)

    def status(self) -> BackendStatus:
        return BackendStatus(role="llm", name="offline engine", live=False,
                             detail="rule-based understanding and extractive, cited answers"
                                    + (" (reads across languages with the embedder)" if self.encoder else ""),
                             how_to_enable="set OPENAI_API_KEY (+ OPENAI_BASE_URL) or llm.base_url")
