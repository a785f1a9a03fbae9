"""The offline engine: a deterministic language model used when no endpoint is configured.

It is meant to be useful, not a stub:

* understanding: the rules of :mod:`offline_understanding` (classification,
  filler removal, pronoun resolution against the last user turn);
* answers: extractive — the sentences of the sources that share the most
  salient terms with the question (ties broken by source rank and position in
  the chunk) are quoted, each followed by its source number [n]; when no
  sentence is relevant it says plainly that the sources do not answer;
* non-retrieval scopes (chitchat, capability, meta-dialogue, memory, out of
  scope, fallback) get fixed, sensible replies in the question's language;
* the agentic loop: delegated to ``agentic_policy.OfflineToolPolicy``.

It makes no model calls, so it records nothing in the usage meter.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

from docmind_core.backends.offline_understanding import resolve_pronoun, understand_offline
from docmind_core.backends.protocols import (
    AgentTranscript,
    AgentTurn,
    AnswerPrompt,
    Turn,
    ToolSpec,
    UnderstandingRequest,
    UsageMeter,
)
from docmind_core.citations import MARKER_RE
from docmind_core.errors import BackendUnavailable
from docmind_core.models import BackendStatus, RetrievedChunk, Understanding
from docmind_core.prompts import PromptLibrary
from docmind_core.text import detect_language, is_cjk, keyword_tokens, salient_terms, sentences

MAX_QUOTED_SENTENCES = 3
MAX_PER_SOURCE = 2
MAX_SENTENCE_CHARS = 240
MIN_RELEVANCE = 0.3  # share of the question's salient weight a sentence must contain
MIN_RELEVANCE_WITH_ENTITY = 0.2  # ... or this much when it contains a code, number or name
_PIECE_RE = re.compile(r"[\u3400-\u9fff]{1,4}|[^\u3400-\u9fff\s]+\s*|\s+")


@dataclass(frozen=True)
class ScoredSentence:
    text: str
    source: int  # 1-based source number
    score: float


def _zh(language: str) -> bool:
    return language == "zh"


# -- extractive answers --------------------------------------------------------


_HOW_MUCH_EN = re.compile(r"\bhow (?:long|much|many|often|far|big|large|old|tall|heavy)\b", re.IGNORECASE)
_HOW_MUCH_ZH = re.compile(r"多(?:少|久|长|高|大|重|远|贵|宽|快)")
ENTITY_WEIGHT = 1.6  # salient_terms weight of codes, numbers and capitalised names
ENTITY_IN_CONTEXT = 0.8  # an entity named elsewhere in the chunk still frames the sentence ("Its warranty ...")


def question_terms(question: str) -> dict[str, float]:
    """Salient terms without "how long" / "多久"-style question words, which never appear in answers."""
    terms = salient_terms(_HOW_MUCH_EN.sub(" ", _HOW_MUCH_ZH.sub(" ", question)))
    for m in _HOW_MUCH_ZH.finditer(question):  # "多重" asks about weight: "重" matches "重量"
        if m.group(0)[1] not in "少久":
            terms.setdefault(m.group(0)[1], 0.6)
    return terms


def _credit(term: str, lower: str, plain: set[str], stemmed: set[str]) -> float:
    """1.0 when the term occurs; for a long Chinese word, the share of its character pairs that occur
    ("保修期" vs "保修"), because jieba cuts question and evidence differently."""
    if is_cjk(term[0]):
        if term in lower:
            return 1.0
        if len(term) >= 3:
            pairs = [term[i:i + 2] for i in range(len(term) - 1)]
            share = sum(p in lower for p in pairs) / len(pairs)
            return share if share >= 0.5 else 0.0
        return 0.0
    stem = keyword_tokens(term, stem=True)
    return 1.0 if term in plain or bool(stem and stem[0] in stemmed) else 0.0


class _TextIndex:
    def __init__(self, text: str):
        self.lower = text.lower()
        self.plain = set(keyword_tokens(text, stem=False))
        self.stemmed = set(keyword_tokens(text, stem=True))

    def credit(self, term: str) -> float:
        return _credit(term, self.lower, self.plain, self.stemmed)


@dataclass(frozen=True)
class _Relevance:
    share: float  # weighted share of the question's terms, entities of the chunk counted as context
    content_hit: bool  # the sentence holds a non-entity term of the question (the thing asked about)
    entity_hit: bool  # the sentence itself names a code, number or name of the question


def _relevance(terms: dict[str, float], sentence: str, chunk_index: _TextIndex) -> _Relevance:
    total = sum(terms.values())
    if total <= 0:
        return _Relevance(0.0, False, False)
    index = _TextIndex(sentence)
    hit, content_hit, entity_hit, meaningful = 0.0, False, False, False
    for term, weight in terms.items():
        is_entity = weight >= ENTITY_WEIGHT
        credit = index.credit(term)
        if credit > 0:
            hit += credit * weight
            content_hit = content_hit or not is_entity
            entity_hit = entity_hit or is_entity
            meaningful = meaningful or weight >= 0.6  # not just a single common character (0.5)
        elif is_entity and chunk_index.credit(term) > 0:
            hit += ENTITY_IN_CONTEXT * weight
    return _Relevance(hit / total if meaningful else 0.0, content_hit, entity_hit)


def _clip(sentence: str) -> str:
    text = re.sub(r"\s+", " ", MARKER_RE.sub("", sentence)).strip()
    if len(text) > MAX_SENTENCE_CHARS:
        text = text[:MAX_SENTENCE_CHARS].rstrip() + "…"
    return text


def rank_sentences(question: str, sources: Sequence[RetrievedChunk]) -> list[ScoredSentence]:
    """Relevant sentences of all sources, best first.

    When the question asks about something besides its names (the "warranty"
    of "Nova X2"), sentences that hold that something are preferred over
    sentences that merely repeat the names.
    """
    terms = question_terms(question)
    has_content_terms = any(w < ENTITY_WEIGHT for w in terms.values())
    candidates: list[tuple[ScoredSentence, bool]] = []
    n = len(sources)
    for number, chunk in enumerate(sources, start=1):
        chunk_index = _TextIndex(chunk.text)
        parts = sentences(chunk.text)
        for position, sentence in enumerate(parts):
            text = _clip(sentence)
            if len(text) < 6:
                continue
            rel = _relevance(terms, text, chunk_index)
            if rel.share < MIN_RELEVANCE and not (rel.entity_hit and rel.share >= MIN_RELEVANCE_WITH_ENTITY):
                continue
            # small tie-breakers: earlier sources (better reranked) and earlier sentences
            bonus = 0.05 * (1 - (number - 1) / max(n, 1)) + 0.05 * (1 - position / max(len(parts), 1))
            candidates.append((ScoredSentence(text, number, rel.share + bonus), rel.content_hit))
    if has_content_terms and any(content for _, content in candidates):
        candidates = [c for c in candidates if c[1]]
    ranked = [c[0] for c in candidates]
    ranked.sort(key=lambda s: s.score, reverse=True)
    return ranked


def select_sentences(ranked: Sequence[ScoredSentence]) -> list[ScoredSentence]:
    chosen: list[ScoredSentence] = []
    per_source: dict[int, int] = {}
    for candidate in ranked:
        if len(chosen) >= MAX_QUOTED_SENTENCES:
            break
        if per_source.get(candidate.source, 0) >= MAX_PER_SOURCE:
            continue
        key = re.sub(r"\W+", "", candidate.text.lower())
        if any(key in re.sub(r"\W+", "", c.text.lower()) or re.sub(r"\W+", "", c.text.lower()) in key
               for c in chosen):
            continue  # the same sentence from an overlapping chunk
        chosen.append(candidate)
        per_source[candidate.source] = per_source.get(candidate.source, 0) + 1
    return chosen


def cite(sentence: str, number: int) -> str:
    """The sentence with its marker placed before the final punctuation: "…12 小时[1]。"."""
    m = re.search(r"[。！？!?.；;…]+$", sentence)
    body, end = (sentence[:m.start()], m.group(0)) if m else (sentence, "")
    if not end:
        end = "。" if detect_language(sentence) == "zh" else "."
    space = "" if body and is_cjk(body[-1]) else " "
    return f"{body.rstrip()}{space}[{number}]{end}"


def extractive_answer(question: str, sources: Sequence[RetrievedChunk], language: str,
                      low_confidence: bool = False) -> str:
    chosen = select_sentences(rank_sentences(question, sources))
    if not chosen:
        names = "、".join(dict.fromkeys(s.document for s in sources)) if _zh(language) else \
            ", ".join(dict.fromkeys(s.document for s in sources))
        if _zh(language):
            return f"检索到的资料（{names}）中没有能回答这个问题的内容，因此我无法根据资料作答。"
        return f"The retrieved sources ({names}) do not contain an answer to this question, so I cannot answer it from them."
    if _zh(language):
        lead = "以下资料与问题只部分相关，仅供参考：" if low_confidence else "根据资料："
    else:
        lead = "The sources only partly match the question; here is what they say:" if low_confidence \
            else "According to the sources:"
    lines = [lead] + [cite(s.text, s.source) for s in chosen]
    return "\n".join(lines)


# -- replies without retrieval ----------------------------------------------------


def _first_sentence(text: str, limit: int = 80) -> str:
    parts = sentences(MARKER_RE.sub("", text))
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
    if _zh(language):
        return f"好的，我记住了：{memory}。" if memory else "好的，我记住了。"
    return f"Noted, I will remember: {memory}." if memory else "Noted, I will remember that."


# -- the engine -----------------------------------------------------------------


class OfflineEngine:
    """Implements ``protocols.LanguageModel`` with rules and extraction only."""

    name = "offline"

    def __init__(self, prompts: PromptLibrary | None = None):
        self.prompts = prompts  # kept for symmetry with OpenAIChatModel; replies do not need templates
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
        try:
            from docmind_core.agentic_policy import OfflineToolPolicy  # lazy: written alongside the loop
        except ImportError as exc:
            raise BackendUnavailable(f"the offline tool policy is not available: {exc}") from exc
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
        return extractive_answer(question, prompt.sources, prompt.language, low_confidence)

    def status(self) -> BackendStatus:
        return BackendStatus(role="llm", name="offline engine", live=False,
                             detail="rule-based understanding and extractive, cited answers",
                             how_to_enable="set OPENAI_API_KEY (+ OPENAI_BASE_URL) or llm.base_url")
