"""Citation parsing and the answer's confidence — pure text processing, no model call.

The answer cites sources with ``[n]``; accepted forms are ``[1]``, ``[1][3]``,
``[1,3]``, ``[1, 3]``, ``[1，3]`` and the full-width ``［1］`` / ``【1】``.
Each number is one :class:`CitationOccurrence`; its span is that of the whole
bracket group it sits in (so ``[1,3]`` gives two occurrences with one span,
which is what a renderer replaces).  Numbers outside 1..n are counted in
``invalid_refs`` and marked invalid.

Coverage is the share of substantive sentences carrying at least one valid
citation.  Sentences are split on Chinese and English sentence ends; a marker
standing right after a sentence end ("…12 小时。[1]") belongs to the sentence
before it.  Greetings, lead-in lines ending in a colon and sentences shorter
than ``citation.coverage_min_sentence_len`` characters (markers excluded) are
not substantive.

Inferred citations.  Small models often answer correctly from the sources and
write no marker at all.  When the model cited fewer than half of its
substantive sentences (``INFER_WHEN_CITED_BELOW``), each uncited substantive
sentence is attributed to the sources that support it, by the one support check
here (:func:`sentence_support`): together, at most three sources must contain
60% of the sentence's salient terms (numbers, codes and names weigh more), at
least two of them, and every number the sentence states.  Such citations are
marked ``inferred`` (an empty occurrence where the marker would stand) and count
for coverage and confidence; a sentence no source supports stays uncited.  A
sentence that says the sources lack something is never attributed.  An answer
that cites at least half of its sentences is taken as the model wrote it.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Sequence

from docmind_core.models import (
    CitationOccurrence,
    CitationResult,
    Confidence,
    RetrievedChunk,
    Tier,
    UsedSource,
)
from docmind_core.settings import CitationSettings
from docmind_core.text import (
    CITATION_MARKER_RE as MARKER_RE,
    is_cjk,
    keyword_tokens,
    marker_numbers,
    salient_terms,
    split_sentences,
)

log = logging.getLogger(__name__)

_LEADING_MARKERS_RE = re.compile(r"(?:\s*" + MARKER_RE.pattern + r")+")  # used with .match(pos)
_GREETING_RE = re.compile(
    r"^(?:你好|您好|嗨|谢谢|不客气|希望(?:以上|这些)?(?:内容|回答)?(?:对你|对您)?有(?:所)?帮助|如有(?:其他|更多)?问题|"
    r"hi|hello|hey|thanks|thank you|you'?re welcome|i hope (?:this|that) helps|hope (?:this|that) helps|"
    r"let me know if)", re.IGNORECASE)
UNGROUNDED_COVERAGE = 0.05

INFER_WHEN_CITED_BELOW = 0.5  # infer citations when fewer than this share of substantive sentences cite
SUPPORT_MIN_SHARE = 0.6  # weighted share of a sentence's salient terms its supporting sources must contain
SUPPORT_MIN_TERMS = 2  # and at least this many terms: one shared word is no support
MAX_SUPPORTING_SOURCES = 3
_FACT_WEIGHT = 1.6  # salient_terms weight of numbers, codes and names: a source adding one of them is kept
_ADDED_SOURCE_MIN_GAIN = 0.2  # otherwise a further source must add this share of the sentence's weight
_TRAILING_PUNCTUATION = frozenset("。！？；…!?;.．:：”’」』\"'")
# "the sources do not mention ...": a claim about the sources, not one they support.  The sources must be the
# subject ("the/provided ... sources", "in the documents") and the verb one of saying, so a fact that merely
# holds such words ("Identity documents do not expire [1]", "the page gives no details") stays a cited fact.
_SOURCES = r"(?:sources?|documents?|context|passages?|knowledge bases?|materials?|texts?|excerpts?|search results?)"
_THE = r"\b(?:the|these|those|provided|given|retrieved|selected|available|above|cited|supplied)\s+(?:\w+\s+){0,2}?"
_SAYS = (r"(?:mention|contain|say|state|specifie|specify|include|cover|provide|address|discuss|describe|list|give|"
         r"offer|indicate|explain|answer|report|show|name|detail)\w*")
_NAMES = r"(?:\s*[(（][^)）]{0,200}[)）])?"  # "the retrieved sources (a.md, b.md) do not ..."
ABSENCE_RE = re.compile(
    _THE + _SOURCES + r"\b" + _NAMES + r"[^.!?。！？]{0,100}?\b(?:do|does|did)\s*(?:not|n't)\s+" + _SAYS + r"\b"
    r"|" + _THE + _SOURCES + r"\b" + _NAMES + r"[^.!?。！？]{0,60}?\b(?:contains?|gives?|provides?|has|have|offers?|"
    r"holds?)\s+(?:nothing|no\s+(?:information|mention|details?|data|answer|reference|indication)\b)"
    r"|\bnot\s+(?:found|mentioned|specified|stated|given|provided|listed|available|covered|described|addressed)\s+"
    r"(?:anywhere\s+)?in\s+(?:the|these|any\s+of\s+the)\s+(?:\w+\s+){0,2}?" + _SOURCES + r"\b"
    r"|\bno\s+(?:information|mention|details?|data)\b[^.!?。！？]{0,80}?\b(?:in|from)\s+(?:the|these)\s+"
    r"(?:\w+\s+){0,2}?" + _SOURCES + r"\b"
    r"|\b(?:cannot|can't|could\s+not|couldn't)\s+(?:be\s+)?(?:determined|answered|found|find|determine|answer)\b"
    r"[^.!?。！？]{0,60}?\b(?:from|in)\s+(?:the|these)\s+(?:\w+\s+){0,2}?" + _SOURCES + r"\b"
    r"|(?:资料|文档|来源|知识库|上下文|材料|原文)[^。！？]{0,40}?(?:没有|未|并未|不|无)"
    r"(?:提及|提到|包含|说明|涉及|找到|给出|列出|记载|相关|能回答)",
    re.IGNORECASE)


def _clean(sentence: str) -> str:
    return re.sub(r"\s+", "", MARKER_RE.sub("", sentence))


def _is_substantive(sentence: str, min_len: int) -> bool:
    bare = MARKER_RE.sub("", sentence).strip()
    if len(_clean(bare)) < min_len:
        return False
    if bare.rstrip().endswith((":", "：")):  # "According to the sources:" introduces, it does not claim
        return False
    stripped = bare.lstrip("-*#>•·0123456789.、) \t")
    return not _GREETING_RE.match(stripped)


def _sentence_units(answer: str) -> list[tuple[int, int, int, int]]:
    """(text_start, text_end, marker_start, marker_end) per sentence: markers that open a
    sentence are moved to the one before it."""
    spans = split_sentences(answer)
    units: list[list[int]] = []
    for start, end in spans:
        lead = _LEADING_MARKERS_RE.match(answer, start, end)
        if lead and units:
            units[-1][3] = lead.end()  # the previous sentence's citations extend to here
            start = lead.end()
        if answer[start:end].strip():
            units.append([start, end, start, end])
        elif units:
            units[-1][1] = max(units[-1][1], end)
    return [tuple(u) for u in units]  # type: ignore[misc]


@dataclass(frozen=True)
class CitedSentence:
    """One source number a marker of the answer cites, with the sentence that marker cites for."""

    index: int  # the source number written (not checked against the sources)
    marker_start: int
    marker_end: int  # the span of the whole bracket group, as in CitationOccurrence
    start: int
    end: int  # answer[start:end] == text; empty when the marker stands in no sentence
    text: str


def cited_sentences(answer: str) -> list[CitedSentence]:
    """Each number of each ``[n]`` marker in ``answer``, with its sentence: the one coverage counts it for
    (a marker right after a sentence end belongs to the sentence it ends).  Inferred citations are not
    in the text and so not here."""
    units = _sentence_units(answer)
    out: list[CitedSentence] = []
    for m in MARKER_RE.finditer(answer):
        unit = next(((t_start, t_end) for t_start, t_end, m_start, m_end in units
                     if _holds(t_start, t_end, m_start, m_end, m.start(), m.end())), (m.start(), m.start()))
        out.extend(CitedSentence(index, m.start(), m.end(), unit[0], unit[1], answer[unit[0]:unit[1]])
                   for index in marker_numbers(m))
    return out


def _holds(t_start: int, t_end: int, m_start: int, m_end: int, start: int, end: int) -> bool:
    """The sentence unit (text span, marker span) holds the marker answer[start:end]."""
    return min(t_start, m_start) <= start and end <= max(t_end, m_end)


def parse_citations(answer: str, sources: Sequence[RetrievedChunk], min_sentence_len: int = 8) -> CitationResult:
    """Structured citations of an answer whose sources are numbered [1..len(sources)]."""
    try:
        return _parse(answer, sources, min_sentence_len)
    except Exception as exc:  # parsing must never sink a finished answer; coverage is then unknown
        log.warning("citation parsing failed: %s", exc)
        return CitationResult(coverage=None)


def _parse(answer: str, sources: Sequence[RetrievedChunk], min_len: int) -> CitationResult:
    n_sources = len(sources)
    occurrences: list[CitationOccurrence] = []
    used: dict[int, UsedSource] = {}
    invalid = 0
    for m in MARKER_RE.finditer(answer):
        for index in marker_numbers(m):
            valid = 1 <= index <= n_sources
            occurrences.append(CitationOccurrence(index=index, char_start=m.start(), char_end=m.end(), valid=valid))
            if not valid:
                invalid += 1
            elif index not in used:
                chunk = sources[index - 1]
                used[index] = UsedSource(index=index, chunk_id=chunk.chunk_id, document=chunk.document,
                                         origin=chunk.origin)

    valid_positions = [(o.char_start, o.char_end) for o in occurrences if o.valid]
    substantive = cited = 0
    uncited: list[tuple[int, int]] = []
    for t_start, t_end, m_start, m_end in _sentence_units(answer):
        text = answer[t_start:t_end]
        if not _is_substantive(text, min_len):
            continue
        substantive += 1
        # "the sources do not mention X [1]" claims no evidence: its marker grounds nothing
        if not ABSENCE_RE.search(text) and any(_holds(t_start, t_end, m_start, m_end, s, e)
                                               for s, e in valid_positions):
            cited += 1
        else:
            uncited.append((t_start, t_end))

    inferred = 0
    if sources and uncited and cited < INFER_WHEN_CITED_BELOW * substantive:
        source_terms = [_SourceTerms.of(chunk.text) for chunk in sources]
        for t_start, t_end in uncited:
            support = _support(answer[t_start:t_end], source_terms)
            if not support.sources:
                continue
            inferred += 1
            at = _marker_position(answer, t_start, t_end)
            for index in support.sources:
                occurrences.append(CitationOccurrence(index=index, char_start=at, char_end=at, valid=True,
                                                      inferred=True))
                if index not in used:
                    chunk = sources[index - 1]
                    used[index] = UsedSource(index=index, chunk_id=chunk.chunk_id, document=chunk.document,
                                             origin=chunk.origin, inferred=True)
        occurrences.sort(key=lambda o: o.char_start)  # stable: the model's markers keep their order
        cited += inferred

    coverage = round(cited / substantive, 4) if substantive else None
    return CitationResult(used_sources=list(used.values()), occurrences=occurrences, coverage=coverage,
                          invalid_refs=invalid, substantive_sentences=substantive, cited_sentences=cited,
                          inferred_sentences=inferred)


# --------------------------------------------------------------------------
# The support check: which sources back one answer sentence
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class Support:
    """The sources that together support one answer sentence (1-based, strongest first; empty: none)."""

    sources: tuple[int, ...] = ()
    share: float = 0.0  # weighted share of the sentence's salient terms the chosen sources contain
    checkable: bool = True  # False: too few terms, or the sentence says the sources lack something


@dataclass(frozen=True)
class _SourceTerms:
    lower: str
    plain: frozenset[str]
    stemmed: frozenset[str]

    @classmethod
    def of(cls, text: str) -> "_SourceTerms":
        return cls(text.lower(), frozenset(keyword_tokens(text, stem=False)),
                   frozenset(keyword_tokens(text, stem=True)))

    def contains(self, term: str) -> bool:
        if is_cjk(term[0]):
            return term in self.lower  # jieba may cut the answer and the source differently
        if any(ch.isdigit() for ch in term):  # "28" must not match inside "280" or "n28"; "28W" is fine
            return re.search(rf"(?<![0-9a-z]){re.escape(term)}(?![0-9])", self.lower) is not None
        if term in self.plain:
            return True
        stem = keyword_tokens(term, stem=True)
        return bool(stem) and stem[0] in self.stemmed


def sentence_support(sentence: str, sources: Sequence[RetrievedChunk]) -> Support:
    """Which of ``sources`` (numbered from 1) support ``sentence``; see the module notes for the rule."""
    return _support(sentence, [_SourceTerms.of(chunk.text) for chunk in sources])


def _support(sentence: str, sources: Sequence[_SourceTerms]) -> Support:
    bare = MARKER_RE.sub("", sentence)
    weights = salient_terms(bare)
    total = sum(weights.values())
    if len(weights) < SUPPORT_MIN_TERMS or total <= 0 or ABSENCE_RE.search(bare):
        return Support(checkable=False)
    covers = [frozenset(term for term in weights if source.contains(term)) for source in sources]
    chosen: list[int] = []
    covered: set[str] = set()
    while len(chosen) < MAX_SUPPORTING_SOURCES:
        best, best_gain = -1, 0.0
        for i, cover in enumerate(covers):
            new = cover - covered
            gain = sum(weights[t] for t in new)
            worth = not chosen or gain >= _ADDED_SOURCE_MIN_GAIN * total or any(
                weights[t] >= _FACT_WEIGHT for t in new)  # a further source must bring a fact of its own
            if i not in chosen and gain > best_gain and worth:
                best, best_gain = i, gain
        if best < 0:
            break
        chosen.append(best)
        covered |= covers[best]
    share = round(sum(weights[t] for t in covered) / total, 4)
    numbers = {t for t in weights if any(ch.isdigit() for ch in t)}
    if share < SUPPORT_MIN_SHARE or len(covered) < SUPPORT_MIN_TERMS or not numbers <= covered:
        return Support(share=share)
    return Support(sources=tuple(i + 1 for i in chosen), share=share)


def _marker_position(answer: str, start: int, end: int) -> int:
    """Where a marker for the sentence answer[start:end] goes: before its closing punctuation."""
    pos = end
    while pos > start and answer[pos - 1].isspace():
        pos -= 1
    while pos > start and answer[pos - 1] in _TRAILING_PUNCTUATION:
        pos -= 1
    while pos > start and answer[pos - 1].isspace():
        pos -= 1
    return pos


def confidence_from(citations: CitationResult | None, top_score: float, tier: Tier | str | None,
                    settings: CitationSettings) -> Confidence:
    """confidence = clamp(coverage) x top rerank score (or the top score alone), with a band.

    An answer without a substantive sentence ("Sorry.") counts as grounded only when it cites a valid source
    (coverage 1, else 0); unknown citations (parsing failed) count as 0, so an answer that claims no
    evidence never gets a high band.  ``ungrounded`` marks an answer that cites (almost) nothing while the
    grader found the evidence weak.
    """
    top = min(1.0, max(0.0, float(top_score or 0.0)))
    coverage = citations.coverage if citations is not None else None
    claimed = coverage
    if claimed is None:
        claimed = 1.0 if citations is not None and any(o.valid for o in citations.occurrences) else 0.0
    if settings.confidence_uses_coverage:
        score = min(1.0, max(0.0, claimed)) * top
    else:
        score = top
    if score >= settings.band_high:
        band = "HIGH"
    elif score < settings.band_low:
        band = "LOW"
    else:
        band = "MEDIUM"
    tier_value = tier.value if isinstance(tier, Tier) else tier
    ungrounded = coverage is not None and coverage < UNGROUNDED_COVERAGE and tier_value == Tier.LOW.value
    return Confidence(score=round(score, 4), band=band, ungrounded=ungrounded)
