"""Extractive answers for the offline engine: quote the sentences that answer, cite each one.

How a sentence is chosen:

* the question's salient terms are split into *entities* (codes, numbers,
  capitalised names) and *content terms* (what is asked about: "warranty",
  "续航"); question words such as "how long" / "多久" are dropped;
* a sentence scores the weighted share of terms it contains; an entity named
  elsewhere in the same chunk still counts partly (the chunk is about it:
  "Its warranty period is two years");
* when some sentence holds a content term, only such sentences are kept, so
  that a sentence which merely repeats the product name is not quoted;
* sentences that add nothing beyond the question's own words (a heading that
  repeats it), table header rows and weak candidates (below 60% of the best)
  are left out; for questions about amounts and dates, sentences with digits
  are preferred.

A Chinese question over English evidence shares few words with it, so when no
sentence holds a content term but the best source is in English, the best
source's sentences about the question's entities are quoted as they are.
Otherwise, with nothing relevant, the answer says plainly that the sources do
not answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from docmind_core.values import RetrievedChunk
from docmind_core.text.tokens import CITATION_MARKER_RE, detect_language, is_cjk, keyword_tokens, salient_terms, sentences

MAX_QUOTED_SENTENCES = 3
MAX_PER_SOURCE = 2
MAX_SENTENCE_CHARS = 240
MIN_RELEVANCE = 0.3  # share of the question's salient weight a sentence must contain
MIN_RELEVANCE_WITH_ENTITY = 0.2  # ... or this much when it names a code, number or name of the question
RELATIVE_CUT = 0.6  # candidates below this fraction of the best score are dropped
ENTITY_WEIGHT = 1.6  # salient_terms weight of codes, numbers and capitalised names
ENTITY_IN_CONTEXT = 0.8  # an entity named elsewhere in the chunk still frames the sentence
ENTITY_ONLY_MIN_SHARE = 0.5  # without any content term, a sentence must carry this much of the entities
HEADING_PENALTY = 0.1
SAME_LANGUAGE_BONUS = 0.1  # quote in the question's language when the evidence offers both
DIGIT_BONUS = 0.1
DATE_BONUS = 0.2  # a "when" question is answered by a sentence that holds a date

_HOW_MUCH_EN = re.compile(r"\bhow (?:long|much|many|often|far|big|large|old|tall|heavy)\b", re.IGNORECASE)
_HOW_MUCH_ZH = re.compile(r"(?:是|为)?多(?:少|久|长|高|大|重|远|贵|宽|快)")
_ZH_QUESTION_WORDS = re.compile(r"(?:是|为|在)?(?:什么|哪些|哪个|哪里|哪儿|怎么样|怎样|怎么|如何)")
# Words that frame a question ("what does X mean", "how to handle X") rather than name what is asked;
# answers rarely repeat them, so they must not decide which sentence is quoted.
_FRAME_WORDS = frozenset("""意思 含义 意味 意味着 表示 代表 处理 解决 办 应该 需要 可以 分别 各自 对比 比较 mean means
    meaning stand handle deal do does happen compare comparison versus vs""".split())
_WHEN_QUESTION = re.compile(r"\bwhen\b|\bwhat (?:year|date|day|month)\b|什么时候|何时|哪一?年|哪天|几月|日期",
                             re.IGNORECASE)
_DATE = re.compile(r"(?<!\d)(?:19|20)\d{2}(?!\d)|\d{1,2}月|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b",
                   re.IGNORECASE)
_QUANTITY_QUESTION = re.compile(
    r"多少|多久|多长|多大|多重|几[个年月天次号]|何时|什么时候|哪一?年|哪天|价格|费用|日期|版本|"
    r"\bwhen\b|\bhow (?:much|many|long|old|big|large|heavy|fast)\b|\bwhat (?:version|year|date|price)\b|"
    r"\bprice\b|\bcost\b|\bversion\b", re.IGNORECASE)


@dataclass(frozen=True)
class ScoredSentence:
    text: str
    source: int  # 1-based source number
    score: float


def question_terms(question: str) -> dict[str, float]:
    """Salient terms without "how long" / "多久"-style question words, which never appear in answers."""
    stripped = _ZH_QUESTION_WORDS.sub(" ", _HOW_MUCH_ZH.sub(" ", _HOW_MUCH_EN.sub(" ", question)))
    terms = {t: w for t, w in salient_terms(stripped).items() if t not in _FRAME_WORDS}
    codes = [t for t in terms if re.search(r"[-_./]", t)]
    for piece in [t for t in terms if t.isdigit() and len(t) <= 2]:
        if any(piece in re.split(r"[-_./]", code) for code in codes):
            del terms[piece]  # "3.2.1" is searched whole; its "2" would match any figure
    for m in _HOW_MUCH_ZH.finditer(question):  # "多重" asks about weight: "重" matches "重量"
        if m.group(0)[-1] not in "少久":
            terms.setdefault(m.group(0)[-1], 0.6)
    return terms


def has_number(text: str) -> bool:
    """A figure, date or version — not the digit of a name such as "N2"."""
    return bool(re.search(r"(?<![A-Za-z])\d", text))


class _TextIndex:
    """The forms of one text that terms are matched against."""

    def __init__(self, text: str):
        self.lower = text.lower()
        self.plain = set(keyword_tokens(text, stem=False))
        self.stemmed = set(keyword_tokens(text, stem=True))

    def credit(self, term: str) -> float:
        """1.0 when the term occurs; for a long Chinese word, the share of its character pairs that
        occur ("保修期" vs "保修"), because jieba cuts question and evidence differently."""
        if is_cjk(term[0]):
            if term in self.lower:
                return 1.0
            if len(term) >= 3:
                pairs = [term[i:i + 2] for i in range(len(term) - 1)]
                share = sum(p in self.lower for p in pairs) / len(pairs)
                return share if share >= 0.5 else 0.0
            return 0.0
        stem = keyword_tokens(term, stem=True)
        return 1.0 if term in self.plain or bool(stem and stem[0] in self.stemmed) else 0.0


@dataclass(frozen=True)
class _Relevance:
    share: float  # weighted share of the question's terms, entities of the chunk counted as context
    direct_share: float  # the same without the chunk context: what the sentence itself says
    content_hit: bool  # the sentence holds a non-entity term of the question (the thing asked about)
    entity_hit: bool  # the sentence itself names a code, number or name of the question


def _relevance(terms: dict[str, float], index: _TextIndex, chunk_index: _TextIndex) -> _Relevance:
    total = sum(terms.values())
    if total <= 0:
        return _Relevance(0.0, 0.0, False, False)
    hit, direct, content_hit, entity_hit, meaningful = 0.0, 0.0, False, False, False
    for term, weight in terms.items():
        is_entity = weight >= ENTITY_WEIGHT
        credit = index.credit(term)
        if credit > 0:
            hit += credit * weight
            direct += credit * weight
            content_hit = content_hit or not is_entity
            entity_hit = entity_hit or is_entity
            meaningful = meaningful or weight >= 0.6  # not just a single common character (0.5)
        elif is_entity and chunk_index.credit(term) > 0:
            hit += ENTITY_IN_CONTEXT * weight
    if not meaningful:
        return _Relevance(0.0, 0.0, content_hit, entity_hit)
    return _Relevance(hit / total, direct / total, content_hit, entity_hit)


def _clip(sentence: str) -> str:
    text = re.sub(r"\s+", " ", CITATION_MARKER_RE.sub("", sentence)).strip()
    if len(text) > MAX_SENTENCE_CHARS:
        text = text[:MAX_SENTENCE_CHARS].rstrip() + "…"
    return text


def _is_table_header(text: str) -> bool:
    return text.count("|") >= 2 and not any(c.isdigit() for c in text)


def _is_bare_title(text: str) -> bool:
    """A short line without sentence punctuation or figures ("Power and environment"): a title
    extracted from a PDF or a table, which names a topic but states nothing."""
    if text.startswith("#") or has_number(text) or re.search(r"[。！？!?.；;:：，,]", text):
        return False
    return len(text.split()) <= 5 if detect_language(text) == "en" else len(text) <= 12


@dataclass(frozen=True)
class _Candidate:
    sentence: ScoredSentence
    content_hit: bool
    entity_hit: bool
    direct_share: float


def _candidates(question: str, sources: Sequence[RetrievedChunk]) -> list[_Candidate]:
    terms = question_terms(question)
    question_tokens = set(keyword_tokens(question, stem=True))
    wants_number = bool(_QUANTITY_QUESTION.search(question))
    wants_date = bool(_WHEN_QUESTION.search(question))
    language = detect_language(question)
    found: list[_Candidate] = []
    n = len(sources)
    for number, chunk in enumerate(sources, start=1):
        chunk_index = _TextIndex(chunk.text)
        parts = sentences(chunk.text)
        for position, sentence in enumerate(parts):
            text = _clip(sentence)
            if len(text) < 6 or _is_table_header(text) or _is_bare_title(text):
                continue
            index = _TextIndex(text)
            if index.stemmed and index.stemmed <= question_tokens:
                continue  # says nothing the question did not (e.g. a heading repeating it)
            rel = _relevance(terms, index, chunk_index)
            if rel.share < MIN_RELEVANCE and not (rel.entity_hit and rel.share >= MIN_RELEVANCE_WITH_ENTITY):
                continue
            score = rel.share
            # small tie-breakers: earlier sources (better reranked) and earlier sentences
            score += 0.05 * (1 - (number - 1) / max(n, 1)) + 0.05 * (1 - position / max(len(parts), 1))
            if text.startswith("#"):
                score -= HEADING_PENALTY
            if wants_number and has_number(text):
                score += DIGIT_BONUS
            if wants_date and _DATE.search(text):
                score += DATE_BONUS
            if detect_language(text) == language:
                score += SAME_LANGUAGE_BONUS
            found.append(_Candidate(ScoredSentence(text, number, score), rel.content_hit, rel.entity_hit,
                                    rel.direct_share))
    return found


def rank_sentences(question: str, sources: Sequence[RetrievedChunk]) -> list[ScoredSentence]:
    """Sentences of the sources that answer the question, best first (possibly none)."""
    terms = question_terms(question)
    candidates = _candidates(question, sources)
    wants_number = bool(_QUANTITY_QUESTION.search(question))
    if any(w < ENTITY_WEIGHT for w in terms.values()):
        with_content = [c for c in candidates if c.content_hit]
        if with_content:
            candidates = with_content
        else:
            # the asked-for word may be in another language ("价格" / "Price") or only implied, as in
            # "AUR-4012 是什么意思": a sentence naming most of the question's entities still answers
            candidates = [c for c in candidates if c.entity_hit and c.direct_share >= ENTITY_ONLY_MIN_SHARE]
    if wants_number and any(has_number(c.sentence.text) for c in candidates):
        candidates = [c for c in candidates if has_number(c.sentence.text)]
    ranked = sorted((c.sentence for c in candidates), key=lambda s: s.score, reverse=True)
    if ranked:
        best = ranked[0].score
        ranked = [s for s in ranked if s.score >= RELATIVE_CUT * best]
    return ranked


def cover_each_focus(question: str, chosen: list[ScoredSentence],
                     sources: Sequence[RetrievedChunk]) -> list[ScoredSentence]:
    """For a question naming several models or codes ("N1 and N2"), add the best sentence about each
    one the chosen sentences leave out — preferring one with a figure — so a comparison has both sides."""
    foci = [t for t, w in question_terms(question).items()
            if w >= 2.0 and any(c.isdigit() for c in t) and not t.isdigit()]
    if len(foci) < 2:
        return chosen
    extra: list[ScoredSentence] = []
    candidates = sorted(_candidates(question, sources),
                        key=lambda c: (has_number(c.sentence.text), c.sentence.score), reverse=True)
    for focus in foci:
        if any(_TextIndex(s.text).credit(focus) > 0 for s in chosen + extra):
            continue
        for c in candidates:
            if c.sentence not in chosen and _TextIndex(c.sentence.text).credit(focus) > 0:
                extra.append(c.sentence)
                break
    return chosen + extra


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


def _with_section_text(chosen: Sequence[ScoredSentence], sources: Sequence[RetrievedChunk]) -> list[ScoredSentence]:
    """A quoted heading ("## AUR-4012：许可证已过期") says little alone: add the next sentences of its section."""
    lines: list[ScoredSentence] = []
    quoted = {s.text for s in chosen}
    for s in chosen:
        if not s.text.startswith("#"):
            lines.append(s)
            continue
        lines.append(ScoredSentence(s.text.lstrip("#").strip(), s.source, s.score))
        parts = [_clip(p) for p in sentences(sources[s.source - 1].text)]
        if s.text not in parts:
            continue
        following = [p for p in parts[parts.index(s.text) + 1:]
                     if len(p) >= 6 and not p.startswith("#") and not p.endswith((":", "："))
                     and p not in quoted]
        for p in following[:2]:
            quoted.add(p)
            lines.append(ScoredSentence(p, s.source, s.score))
    return lines[:MAX_QUOTED_SENTENCES + 2]


def cross_language_quotes(question: str, sources: Sequence[RetrievedChunk]) -> list[ScoredSentence]:
    """For a Chinese question whose best source is English: that source's sentences naming the
    question's entities (or its opening sentences), quoted as they are."""
    if not sources or detect_language(question) != "zh" or detect_language(sources[0].text) != "en":
        return []
    entities = [t for t, w in question_terms(question).items() if w >= ENTITY_WEIGHT]
    parts = [_clip(s) for s in sentences(sources[0].text)]
    parts = [p for p in parts if len(p) >= 6 and not _is_table_header(p) and not p.startswith("#")]
    naming = [p for p in parts if any(_TextIndex(p).credit(e) > 0 for e in entities)]
    return [ScoredSentence(p, 1, 0.0) for p in (naming or parts)[:2]]


def cite(sentence: str, number: int) -> str:
    """The sentence with its marker placed before the final punctuation: "…12 小时[1]。"."""
    m = re.search(r"[。！？!?.；;…:：]+$", sentence)
    body, end = (sentence[:m.start()], m.group(0)) if m else (sentence, "")
    if not end or end[-1] in ":：":
        end = "。" if detect_language(sentence) == "zh" else "."
    space = "" if body and is_cjk(body[-1]) else " "
    return f"{body.rstrip()}{space}[{number}]{end}"


def extractive_answer(question: str, sources: Sequence[RetrievedChunk], language: str,
                      low_confidence: bool = False) -> str:
    """The cited extractive answer in the question's language (``language`` is "zh" or "en")."""
    zh = language == "zh"
    chosen = select_sentences(rank_sentences(question, sources))
    if chosen:
        chosen = cover_each_focus(question, chosen, sources)
        if zh:
            lead = "以下资料与问题只部分相关，仅供参考：" if low_confidence else "根据资料："
        else:
            lead = "The sources only partly match the question; here is what they say:" if low_confidence \
                else "According to the sources:"
        return "\n".join([lead] + [cite(s.text, s.source) for s in _with_section_text(chosen, sources)])
    quotes = cross_language_quotes(question, sources)
    if quotes:
        lead = "资料中没有直接的中文表述，以下是最相关资料的英文原文，请参考：" if zh else "From the most relevant source:"
        return "\n".join([lead] + [cite(s.text, s.source) for s in quotes])
    names = ("、" if zh else ", ").join(dict.fromkeys(s.document for s in sources))
    if zh:
        return f"检索到的资料（{names}）中没有能回答这个问题的内容，因此我无法根据资料作答。"
    return (f"The retrieved sources ({names}) do not contain an answer to this question, "
            "so I cannot answer it from them.")
