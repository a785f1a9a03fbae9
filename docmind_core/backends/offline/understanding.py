"""Rule-based query understanding for the offline engine.

Classification and rewriting without a model: the question's surface (codes,
quoted names, time words, memory words, question words) decides intent,
complexity and the other signals; rewriting drops filler words and politeness
and replaces an obvious pronoun ("它", "该产品", "it", "this one") by the main
entity of the previous user turn.
"""

from __future__ import annotations

import re
from typing import Sequence

from docmind_core.values import Turn
from docmind_core.values import Complexity, Intent, Scope, Specificity, Understanding
from docmind_core.text.colloquial import plain_question
from docmind_core.text.query_signals import compares_entities, fast_scope
from docmind_core.text.tokens import (
    MULTI_FOCUS_PATTERN,
    TIME_KEYWORD_PATTERN,
    detect_language,
    is_cjk,
    keyword_tokens,
    salient_terms,
)

# -- rewriting ---------------------------------------------------------------

_ZH_LEADING_FILLER = re.compile(
    r"^(?:请问一下|请问|请你|请|麻烦(?:你|您)?|劳驾|帮我(?:查一下|查查|看看|看一下)?|我想(?:知道|问一下|问问|了解(?:一下)?)|"
    r"你知道|(?:能|可以)(?:不能|否)?(?:告诉我|说说|讲讲|介绍一下)|告诉我|想问一下|问一下)+")
_ZH_TRAILING_FILLER = re.compile(r"(?:吗|呢|啊|呀|吧|哦|嘛|啦|(?<![什怎那这多])么)?[\s?？!！。.~～]*$")
_ZH_INNER_FILLER = re.compile(r"一下|一点儿|一点")
_EN_LEADING_FILLER = re.compile(
    r"^(?:(?:hi|hello|hey)[,!\s]+)?(?:please\s+)?(?:(?:can|could|would)\s+you\s+(?:please\s+)?"
    r"(?:tell|show|explain to|let)\s+me\s+|i\s+(?:want|would like|'d like|wanna)\s+to\s+know\s+|"
    r"do\s+you\s+know\s+|tell\s+me\s+|i\s+wonder\s+)?", re.IGNORECASE)
_EN_TRAILING_FILLER = re.compile(r"(?:,?\s*please)?[\s?!.]*$", re.IGNORECASE)

_ZH_PRONOUN = re.compile(
    r"该产品|该型号|该设备|该系统|这款产品|这个产品|此产品|这款|这台|它们的|它的|它们|它|"
    r"(?:这个|那个)(?=[?？吗呢]|怎么|是|有|能|可以|支持|多少|的|$)")
_EN_PRONOUN = re.compile(
    r"\b(?:its|it|(?:this|that|the) (?:one|product|model|device|tool|system|thing))\b|\b(?:this|that)(?=\s*[?.!]*$)",
    re.IGNORECASE)
_PRONOUN_ONLY = re.compile(r"^\s*(?:它|这个|那个|这|那|it|this|that|this one|that one)[\s?？!！。.]*$", re.IGNORECASE)


def strip_filler(question: str) -> str:
    """The question without politeness and filler particles, for retrieval."""
    text = plain_question(question.strip())  # "大概", "来着", "um", "again": nothing to search for
    if detect_language(text) == "zh":
        text = _ZH_LEADING_FILLER.sub("", text)
        text = _ZH_INNER_FILLER.sub("", text)
        text = _ZH_TRAILING_FILLER.sub("", text)
    else:
        text = _EN_LEADING_FILLER.sub("", text)
        text = _EN_TRAILING_FILLER.sub("", text)
        text = re.sub(r"\bplease\b\s*", "", text, flags=re.IGNORECASE)
    text = re.sub(r"\s+", " ", text).strip(" ,，")
    return text or question.strip()


_NAME_SPAN = re.compile(
    r"\b[A-Z][A-Za-z0-9]*(?:[-_./][A-Za-z0-9]+)*(?:\s+[A-Z0-9][A-Za-z0-9]*(?:[-_./][A-Za-z0-9]+)*)*"
    r"|\b[A-Za-z]+[-_]?\d+[A-Za-z0-9]*(?:[-_./][A-Za-z0-9]+)*")
_NOT_NAMES = {"i", "what", "how", "who", "when", "where", "why", "which", "is", "are", "does", "do", "did", "can",
              "could", "tell", "please", "the", "a", "an", "and", "or", "about"}


def _name_candidates(text: str) -> list[str]:
    names = []
    for m in _NAME_SPAN.finditer(text):
        words = m.group(0).split()
        while words and words[0].lower() in _NOT_NAMES:  # "What", "Is" open sentences, they are not names
            words.pop(0)
        if words:
            names.append(" ".join(words))
    return names


def _cjk_phrases(text: str) -> list[tuple[str, float, int]]:
    """Runs of adjacent salient Chinese terms ("向量" + "数据库" → "向量数据库") with weight and position."""
    terms = salient_terms(text)
    spans = []
    for term, weight in terms.items():
        if not is_cjk(term[0]) or len(term) < 2:
            continue
        pos = text.find(term)
        if pos >= 0:
            spans.append((pos, pos + len(term), weight))
    spans.sort()
    phrases: list[tuple[str, float, int]] = []
    for start, end, weight in spans:
        if phrases and start == phrases[-1][2] + len(phrases[-1][0]):
            phrase, total, first = phrases[-1]
            phrases[-1] = (text[first:end], total + weight, first)
        else:
            phrases.append((text[start:end], weight, start))
    return phrases


def main_entity(text: str) -> str | None:
    """The most salient name in a turn: a capitalised name or code, else the heaviest Chinese phrase."""
    names = _name_candidates(text)
    if names:
        with_digits = [n for n in names if any(c.isdigit() for c in n)]
        return (with_digits or names)[0] if with_digits else max(names, key=len)
    phrases = _cjk_phrases(text)
    if phrases:
        return max(phrases, key=lambda p: (p[1], -p[2]))[0]
    words = [w for w in re.findall(r"[A-Za-z][A-Za-z0-9-]{4,}", text) if keyword_tokens(w, stem=False)]
    return max(words, key=len) if words else None


def _last_user_turn(history: Sequence[Turn]) -> str | None:
    for turn in reversed(history):
        if turn.role == "user" and turn.content.strip():
            return turn.content
    return None


def resolve_pronoun(question: str, history: Sequence[Turn]) -> tuple[str, bool]:
    """(question with one obvious pronoun replaced, whether a pronoun stayed unresolved)."""
    zh = _ZH_PRONOUN.search(question)
    en = None if zh else _EN_PRONOUN.search(question)
    if not zh and not en:
        return question, False
    match = zh or en
    if main_entity(question[:match.start()]):
        # "When did Aurora Cloud complete its audit?": the pronoun points back inside the question
        return question, False
    previous = _last_user_turn(history)
    entity = main_entity(previous) if previous else None
    if not entity:
        return question, True
    if zh:
        word = zh.group(0)
        replacement = entity + "的" if word.endswith("的") else entity
        return question[:zh.start()] + replacement + question[zh.end():], False
    word = en.group(0).lower()
    replacement = f"{entity}'s" if word == "its" else entity
    return question[:en.start()] + replacement + question[en.end():], False


# -- classification ------------------------------------------------------------

_PRECISE = re.compile(
    r"[A-Za-z]+[-_]?\d+[A-Za-z0-9]*|\bv?\d+\.\d+(?:\.\d+)*\b|[「『“\"《][^」』”\"》]{1,40}[」』”\"》]|'[^']{2,40}'|"
    r"\b[A-Z]{2,}[A-Z0-9]*\b|\b0x[0-9a-fA-F]+\b|错误码|error code", re.UNICODE)
_PROCEDURAL = re.compile(r"如何|怎么|怎样|步骤|流程|方法|教程|配置|安装|设置|部署|\bhow (?:to|do|can|should)\b|"
                         r"\bsteps?\b|\binstall|\bconfigure|\bset up\b|\bsetup\b", re.IGNORECASE)
_OPINION = re.compile(r"你(?:认为|觉得)|怎么看|推荐|建议|值得|好不好|哪个好|更好|\bshould i\b|\bwould you\b|"
                      r"\brecommend|\bopinion\b|\bbetter\b|\bworth\b", re.IGNORECASE)
_MEMORY_AWARE = re.compile(r"上次|上回|之前(?:说|提|讲|问)|我(?:说过|提过|告诉过你)|我的(?:偏好|习惯|设置|喜好)|记得我|还记得|"
                           r"\bremember\b|\bmy (?:preference|preferences|favou?rite|usual|setting)s?\b|\blast time\b|"
                           r"\bi (?:told|mentioned|said)\b|\bas i said\b", re.IGNORECASE)
# A chain (multi-hop) question: what it asks about is named only through another fact, which a first search must
# find before the second can ("the woman who portrayed X", "the city in which Y is located", "the director of X
# is based in ...", "a former Soviet statesman").  A relative clause after a noun phrase, a question whose
# subject is "the <role> of X", or a person, group or place described instead of named.
_CHAIN = re.compile(r"的[^，。？?]{1,12}的[^，。？?]{1,12}(?:是|有)|\b(?:of|by|in) the \w+(?: \w+)? (?:that|which|who|whose)\b|"
                    r"\bwho (?:directed|wrote|founded|created|composed)\b.+\b(?:the|a)\b.+\b(?:that|which|who)\b|"
                    r"\b(?:the|a|an|this|that|which|what)\s+(?:[\w'’\"“”-]+\s+){0,5}?"
                    r"(?:who|whom|whose|which|that|where)\s+(?!is\b|are\b|was\b|were\b)\w|"
                    r"^(?:the|a|an)\s+(?:\w+\s+){0,2}?(?:director|author|writer|founder|creator|producer|composer|"
                    r"owner|wife|husband|son|daughter|father|mother|brother|sister|leader|captain|coach|designer|"
                    r"developer|publisher|manufacturer|headquarters|capital|birthplace|arena|stadium|home)s?\s+of\b|"
                    # "did a former Soviet statesman initiate": someone described, not named, inside the question
                    r"(?<!^)\b(?:a|an)\s+(?:[A-Za-z-]+\s+){1,3}?(?:statesman|stateswoman|politician|actor|actress|"
                    r"singer|musician|songwriter|writer|author|novelist|poet|director|producer|player|footballer|"
                    r"athlete|artist|painter|composer|industrialist|businessman|businesswoman|entrepreneur|journalist|"
                    r"scientist|engineer|architect|comedian|rapper|band|group|company|corporation|organi[sz]ation|"
                    r"university|city|town|county|country|film|novel|album|magazine|newspaper|team)\b",
                    re.IGNORECASE)
_OUT_OF_SCOPE = re.compile(r"写一首|写首|作诗|讲个笑话|讲一个笑话|说个笑话|唱首歌|\bwrite (?:me )?a (?:poem|song|story|joke)\b|"
                           r"\btell me a joke\b|\bsing\b.+\bsong\b|\bplay a game\b", re.IGNORECASE)
_MEMORY_HINT = re.compile(r"(我(?:喜欢|偏好|习惯|更喜欢|通常|一般)[^，。？?!！]{2,40})|"
                          r"\b(I (?:prefer|like|usually|always|work (?:at|on|with)|am a)\b[^,.?!]{2,60})",
                          re.IGNORECASE)
_SECOND_QUESTION = re.compile(
    r"[,，;；]\s*(?:and\s+)?(?:what|when|where|which|who|why|how)\b|\S\s+and\s+(?:what|when|where|which|who|how)\s+\w|"
    r"[,，;；]\s*(?:并且|而且|以及|还有|另外|同时)?(?:怎么|如何|为什么|哪|多少|什么时候|是否)", re.IGNORECASE)
_ANSWER_LIKE_SPLIT = re.compile(r"[和与及跟、]|以及|\band\b|\bor\b", re.IGNORECASE)


def _intent(question: str, scope: Scope) -> Intent:
    if scope is Scope.CHITCHAT:
        return Intent.CHITCHAT
    # "对比/compare/vs", or two or three named entities set against each other ("A 和 B 哪个更…", "A or B, which
    # is older?", "Are A and B the same …"): each side needs its own search
    if MULTI_FOCUS_PATTERN.search(question) or compares_entities(question):
        return Intent.COMPARISON
    if _PROCEDURAL.search(question):
        return Intent.PROCEDURAL
    if _OPINION.search(question):
        return Intent.OPINION
    return Intent.FACTOID


def _complexity(question: str, intent: Intent) -> Complexity:
    foci = len(_ANSWER_LIKE_SPLIT.findall(question))
    if _CHAIN.search(question) or (intent is Intent.COMPARISON and foci >= 2):
        return Complexity.COMPLEX
    if intent is Intent.COMPARISON or len(re.findall(r"[?？]", question)) >= 2 or _SECOND_QUESTION.search(question):
        return Complexity.MEDIUM  # several things asked at once
    long_question = len(keyword_tokens(question, stem=False)) > 14
    return Complexity.MEDIUM if long_question else Complexity.SIMPLE


def _too_short(rewritten: str) -> bool:
    terms = [t for t in keyword_tokens(rewritten, stem=False)]
    if detect_language(rewritten) == "zh":
        return sum(len(t) for t in terms) < 2
    return len(terms) < 1 or (len(terms) == 1 and len(terms[0]) < 3)


def understand_offline(question: str, history: Sequence[Turn]) -> Understanding:
    """The offline engine's classification and rewrite of one question."""
    fast = fast_scope(question, history)
    scope = fast.scope if fast else (Scope.OUT_OF_SCOPE if _OUT_OF_SCOPE.search(question) else Scope.KNOWLEDGE_QUERY)
    # the patterns for out-of-scope requests (poems, jokes) are unmistakable, so they are trusted
    scope_confidence = fast.confidence if fast else (0.8 if scope is Scope.OUT_OF_SCOPE else 0.7)

    cleaned = strip_filler(question)
    rewritten, unresolved = resolve_pronoun(cleaned, history)
    intent = _intent(question, scope)
    hints = [m.group(0).strip() for m in _MEMORY_HINT.finditer(question)][:3]
    return Understanding(
        rewritten_query=rewritten,
        intent=intent,
        complexity=_complexity(question, intent),
        specificity=Specificity.PRECISE if _PRECISE.search(question) else Specificity.BROAD,
        time_aware=bool(TIME_KEYWORD_PATTERN.search(question)),
        memory_aware=bool(_MEMORY_AWARE.search(question)),
        is_ambiguous=unresolved or bool(_PRONOUN_ONLY.match(question)) or _too_short(rewritten),
        scope=scope,
        scope_confidence=scope_confidence,
        memory_write_hints=hints if scope is Scope.KNOWLEDGE_QUERY else [],
    )
