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
"""

from __future__ import annotations

import logging
import re
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
from docmind_core.text import split_sentences

log = logging.getLogger(__name__)

MARKER_RE = re.compile(r"[\[［【]\s*(\d{1,3}(?:\s*[,，、]\s*\d{1,3})*)\s*[\]］】]")
_NUMBER_RE = re.compile(r"\d{1,3}")
_LEADING_MARKERS_RE = re.compile(r"(?:\s*" + MARKER_RE.pattern + r")+")  # used with .match(pos)
_GREETING_RE = re.compile(
    r"^(?:你好|您好|嗨|谢谢|不客气|希望(?:以上|这些)?(?:内容|回答)?(?:对你|对您)?有(?:所)?帮助|如有(?:其他|更多)?问题|"
    r"hi|hello|hey|thanks|thank you|you'?re welcome|i hope (?:this|that) helps|hope (?:this|that) helps|"
    r"let me know if)", re.IGNORECASE)
UNGROUNDED_COVERAGE = 0.05


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
        for number in _NUMBER_RE.findall(m.group(1)):
            index = int(number)
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
    for t_start, t_end, m_start, m_end in _sentence_units(answer):
        text = answer[t_start:t_end]
        if not _is_substantive(text, min_len):
            continue
        substantive += 1
        lo, hi = min(t_start, m_start), max(t_end, m_end)
        if any(lo <= s and e <= hi for s, e in valid_positions):
            cited += 1

    coverage = round(cited / substantive, 4) if substantive else None
    return CitationResult(used_sources=list(used.values()), occurrences=occurrences, coverage=coverage,
                          invalid_refs=invalid, substantive_sentences=substantive, cited_sentences=cited)


def confidence_from(citations: CitationResult | None, top_score: float, tier: Tier | str | None,
                    settings: CitationSettings) -> Confidence:
    """confidence = clamp(coverage) x top rerank score (or the top score alone), with a band.

    Unknown coverage falls back to the top score.  ``ungrounded`` marks an answer
    that cites (almost) nothing while the grader found the evidence weak.
    """
    top = min(1.0, max(0.0, float(top_score or 0.0)))
    coverage = citations.coverage if citations is not None else None
    if settings.confidence_uses_coverage and coverage is not None:
        score = min(1.0, max(0.0, coverage)) * top
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
