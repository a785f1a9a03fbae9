"""Citation parsing and the answer's confidence — pure text processing, no model call.

The answer cites sources with ``[n]``; accepted forms are ``[1]``, ``[1][3]``,
``[1,3]``, ``[1, 3]``, ``[1，3]`` and the full-width ``［1］`` / ``【1】``.
Each number is one :class:`CitationOccurrence`; its span is that of the whole
bracket group it sits in (so ``[1,3]`` gives two occurrences with one span,
which is what a renderer replaces).  Numbers outside 1..n are counted in
``invalid_refs`` and marked invalid.

Each claim of the answer (sentence, list item, table row; see :mod:`docmind_core.answer.claims`) is checked
against the sources its markers cite or, uncited, against every source.  Coverage is the share of
substantive claims that are supported; a marker on an unsupported claim counts for nothing.  A marker
standing right after a sentence end ("…12 小时。[1]") belongs to the sentence before it.  Greetings,
lead-in lines ending in a colon and sentences shorter than ``citation.coverage_min_sentence_len``
characters (markers excluded) that state no value are not claims.

Inferred citations.  Small models often answer correctly from the sources and write no marker at all.
An uncited claim a source supports gets an inferred citation to that source (an empty occurrence where
the marker would stand), which counts for coverage and confidence; an unsupported claim gets none, and a
claim that says the sources lack something is never attributed.

:func:`sentence_support` is the older bag-of-words check (60% of a sentence's salient terms over at most
three sources), kept for the experiments' citation metrics.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Sequence

from docmind_core.answer.answer_type import check_answer_type
from docmind_core.answer.claims import ABSENCE_RE, check_claims, claim_counts, holds, sentence_units
from docmind_core.answer.target_match import TargetCheck, check_target
from docmind_core.values import (
    Band,
    ClaimCheck,
    CitationOccurrence,
    CitationResult,
    Confidence,
    RetrievedChunk,
    Tier,
    UsedSource,
)
from docmind_core.settings import CitationSettings
from docmind_core.text.tokens import (
    CITATION_MARKER_RE as MARKER_RE,
    is_cjk,
    keyword_tokens,
    marker_numbers,
    salient_terms,
)

log = logging.getLogger(__name__)

UNGROUNDED_COVERAGE = 0.05

SUPPORT_MIN_SHARE = 0.6  # weighted share of a sentence's salient terms its supporting sources must contain
SUPPORT_MIN_TERMS = 2  # and at least this many terms: one shared word is no support
MAX_SUPPORTING_SOURCES = 3
_FACT_WEIGHT = 1.6  # salient_terms weight of numbers, codes and names: a source adding one of them is kept
_ADDED_SOURCE_MIN_GAIN = 0.2  # otherwise a further source must add this share of the sentence's weight
_TRAILING_PUNCTUATION = frozenset("。！？；…!?;.．:：”’」』\"'")


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
    units = sentence_units(answer)
    out: list[CitedSentence] = []
    for m in MARKER_RE.finditer(answer):
        unit = next(((t_start, t_end) for t_start, t_end, m_start, m_end in units
                     if holds(t_start, t_end, m_start, m_end, m.start(), m.end())), (m.start(), m.start()))
        out.extend(CitedSentence(index, m.start(), m.end(), unit[0], unit[1], answer[unit[0]:unit[1]])
                   for index in marker_numbers(m))
    return out


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
    invalid = 0
    for m in MARKER_RE.finditer(answer):
        for index in marker_numbers(m):
            valid = 1 <= index <= n_sources
            occurrences.append(CitationOccurrence(index=index, char_start=m.start(), char_end=m.end(), valid=valid))
            if not valid:
                invalid += 1
    result = CitationResult(occurrences=occurrences, invalid_refs=invalid)
    return with_claims(result, answer, check_claims(answer, sources, min_len), sources)


def with_claims(citations: CitationResult, answer: str, claims: Sequence[ClaimCheck],
                sources: Sequence[RetrievedChunk]) -> CitationResult:
    """``citations`` with its claims set to ``claims`` (the offline checks, or a judge's verdicts on
    them): the inferred citations, used sources, counts and coverage follow from the claims.  Coverage is
    the share of substantive claims that are supported; an inferred citation stands only on a supported
    claim the model cited nothing for."""
    occurrences = [o for o in citations.occurrences if not o.inferred]
    used: dict[int, UsedSource] = {}
    for o in occurrences:
        if o.valid and o.index not in used and 1 <= o.index <= len(sources):
            chunk = sources[o.index - 1]
            used[o.index] = UsedSource(index=o.index, chunk_id=chunk.chunk_id, document=chunk.document,
                                       location=chunk.location, origin=chunk.origin)
    inferred = 0
    for claim in claims:
        if claim.status != "supported" or claim.cited or claim.source_index is None:
            continue
        if not 1 <= claim.source_index <= len(sources):
            continue
        inferred += 1
        at = marker_position(answer, claim.char_start, claim.char_end)
        occurrences.append(CitationOccurrence(index=claim.source_index, char_start=at, char_end=at, valid=True,
                                              inferred=True))
        if claim.source_index not in used:
            chunk = sources[claim.source_index - 1]
            used[claim.source_index] = UsedSource(index=claim.source_index, chunk_id=chunk.chunk_id,
                                                  document=chunk.document, location=chunk.location,
                                                  origin=chunk.origin, inferred=True)
    occurrences.sort(key=lambda o: o.char_start)  # stable: the model's markers keep their order
    counts = claim_counts(claims)
    substantive = len(claims)
    cited = sum(1 for c in claims if c.cited) + inferred
    coverage = round(counts["supported"] / substantive, 4) if substantive else None
    return citations.model_copy(update=dict(
        used_sources=sorted(used.values(), key=lambda u: u.index), occurrences=occurrences, coverage=coverage,
        substantive_sentences=substantive, cited_sentences=cited, inferred_sentences=inferred,
        claims=list(claims), supported_claims=counts["supported"], unsupported_claims=counts["unsupported"],
        contradicted_claims=counts["contradicted"]))


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


def marker_position(answer: str, start: int, end: int) -> int:
    """Where a marker for the sentence answer[start:end] goes: before its closing punctuation."""
    pos = end
    while pos > start and answer[pos - 1].isspace():
        pos -= 1
    while pos > start and answer[pos - 1] in _TRAILING_PUNCTUATION:
        pos -= 1
    while pos > start and answer[pos - 1].isspace():
        pos -= 1
    return pos


_BAND_ORDER: dict[str, int] = {"LOW": 0, "MEDIUM": 1, "HIGH": 2}
_BAND_CAP: dict[str, Band] = {Tier.AMBIGUOUS.value: "MEDIUM", Tier.LOW.value: "LOW"}


def confidence_from(citations: CitationResult | None, top_score: float, tier: Tier | str | None,
                    settings: CitationSettings, question: str = "", stand_in: bool = False,
                    sources: Sequence[RetrievedChunk] = ()) -> Confidence:
    """confidence = supported coverage x top rerank score (or the top score alone), with a band and a reason.

    Supported coverage is the share of the answer's substantive claims a source states (see claims.py), so
    an answer whose claims state nothing checkable, or only values its sources do not hold, scores 0
    whatever the evidence grade.  An answer without any claim ("Sorry.") or with unknown citations (parsing
    failed) scores 0 too.  A contradicted claim caps the band at LOW, and so does evidence graded LOW; evidence
    graded AMBIGUOUS caps it at MEDIUM, as does any unsupported claim: HIGH says every claim was found.
    ``ungrounded`` marks an answer with a substantive claim unsupported or contradicted, whatever the tier (and,
    as before, one that cites almost nothing while the grader found the evidence weak).

    With the ``question``, the answer must also state what it asks for (answer_type.py): a question asking for
    a version, date, price, count, quantity, name or address that no supported claim states is not answered,
    and the band is at most MEDIUM (HIGH says the question is answered too).  This changes neither the score
    nor ``ungrounded``: the claims hold, they miss the point.

    ``stand_in``: the answer shown is the offline reading put in place of a model answer that failed its checks
    (answer_check.py).  Its claims can all hold while it misses an open question (the cause of an error code
    for "what should I do?"), which no value check sees, so the band is at most MEDIUM: HIGH is for an answer
    written to the question that passed its checks.

    With the question and the ``sources``, each answered value is read where its source states it
    (target_match.py): stated of another entity or under another qualifier than the question's, it answers
    something else.  No answered value on target: band LOW (and the score below it); some, or a comparison
    with a side missing: at most MEDIUM.  ``target_note`` says what the sources state instead.
    """
    top = min(1.0, max(0.0, float(top_score or 0.0)))
    tier_value = tier.value if isinstance(tier, Tier) else (tier or "")
    coverage = citations.coverage if citations is not None else None
    claims = citations.claims if citations is not None else []
    supported = sum(1 for c in claims if c.status == "supported")
    contradicted = sum(1 for c in claims if c.status == "contradicted")
    unsupported = sum(1 for c in claims if c.status == "unsupported")
    share = min(1.0, max(0.0, coverage or 0.0))
    score = share * top if settings.confidence_uses_coverage else top
    if contradicted:
        score = min(score, settings.band_low * 0.5)
    band: Band
    if score >= settings.band_high:
        band = "HIGH"
    elif score < settings.band_low:
        band = "LOW"
    else:
        band = "MEDIUM"
    # the band never claims more than the evidence grade: the grader unsure (AMBIGUOUS) caps it at MEDIUM,
    # evidence graded LOW at LOW, however well the answer's claims match their sources
    capped = _BAND_CAP.get(tier_value)
    if capped is not None and _BAND_ORDER[band] > _BAND_ORDER[capped]:
        band = capped
    if unsupported and band == "HIGH":  # HIGH says every claim was found in its source
        band = "MEDIUM"
    answered = check_answer_type(question, claims) if question.strip() else None
    if answered is not None and answered.missing and band == "HIGH":
        band = "MEDIUM"
    if stand_in and band == "HIGH":
        band = "MEDIUM"
    target = check_target(question, claims, sources) if question.strip() and sources else TargetCheck()
    if target.matched is False:
        if target.partial:
            band = "MEDIUM" if band == "HIGH" else band
        else:
            band, score = "LOW", min(score, settings.band_low * 0.5)
    ungrounded = bool(unsupported or contradicted) or (
        coverage is not None and coverage < UNGROUNDED_COVERAGE and tier_value == Tier.LOW.value)
    grade = f"evidence tier {tier_value or 'unknown'}, top score {top:.2f}"
    if citations is None or coverage is None and citations.claims == []:
        said = "no claim to check" if citations is not None else "citations could not be read"
    else:
        said = f"{supported} of {len(claims)} claims supported"
        if contradicted:
            said += f", {contradicted} contradicted by the cited source"
        if unsupported:
            said += f", {unsupported} unsupported"
        if claims and not supported and all("nothing checkable" in c.reason for c in claims
                                            if c.status == "unsupported"):
            said += " (nothing checkable stated)"
    if answered is not None and answered.missing:
        said += f"; {answered.reason}"
    if stand_in:
        said += "; an offline excerpt stands in for the model's answer, which failed its checks"
    if target.matched is False:
        said += f"; {target.reason}"
    return Confidence(score=round(score, 4), band=band, ungrounded=ungrounded, reason=f"{said}; {grade}",
                      asks_for=list(answered.asked) if answered else [],
                      answers_question=answered.answers if answered else None,
                      unanswered=list(answered.missing) if answered else [],
                      target_matched=target.matched, target_misses=list(target.misses), target_note=target.note)
