"""The CRAG grader: a pre-generation quality gate from two independent signals.

Signal one is the top rerank score (semantic relevance, 0..1).  Signal two is
lexical coverage: how much of the query's salient terms (codes, numbers, names
and long Chinese words weigh more) appear in the best of the top three chunks.
The two fail differently — a reranker can love a chunk that is "about the same
thing" but lacks the asked-for entity — so each corrects the other:

* score >= high → HIGH, unless coverage is under ``grader.high_min_coverage`` → AMBIGUOUS;
* score <= low  → LOW, unless a rare entity of the query is found → AMBIGUOUS;
* in between, ``grader.gray_zone_mode`` arbitrates:
  - ``coverage_first``: coverage >= coverage_high → HIGH, <= coverage_low → LOW, else AMBIGUOUS;
  - ``rerank_only``: always AMBIGUOUS;
  - ``blend``: 0.5 x (score normalised to 0..1 inside the gray zone) + 0.5 x coverage,
    >= ``grader.blend_high`` → HIGH, <= ``grader.blend_low`` → LOW, else AMBIGUOUS.
* in every mode, evidence holding (almost) none of the question's salient terms (coverage under
  ``grader.near_zero_coverage``, or a question without salient terms) is never HIGH: at most AMBIGUOUS;
  nor is evidence whose top chunks state no value of a kind the question asks for (``grader.require_asked_value``:
  a quantity in the asked units, a date, a price, a version ...; :func:`unstated_kinds`), nor evidence whose
  statements of such a value name another entity or qualifier than the question's (``grader.require_asked_target``:
  the N1's maximum draw for "the N1's idle draw"; ``answer/target_match.py``).

The tier never throws evidence away: LOW or AMBIGUOUS with chunks is answered
under the low-confidence prompt; only an empty context uses the fallback.

With a model judge (``grader.judge``, :func:`judged_grade`), the judge's verdict on the top evidence joins
the two signals: "no" caps the tier at AMBIGUOUS, "answers" lifts an AMBIGUOUS tier to HIGH when the top score
is above ``grader.low_threshold`` and coverage reaches ``grader.judge_lift_min_coverage``; "partly" changes
nothing, and LOW stays LOW.

When retrieval was incomplete (a worker timed out or failed), the reason says
``retrieval_incomplete`` and what did not answer: an empty or weak result is
then "not fully searched", never "no_evidence" / "nothing relevant".  When, in
addition, no chunk was found by vector search (a vector server down or hung),
HIGH is capped at AMBIGUOUS and the judge does not lift it back: keyword
evidence alone, with the meaning side missing, is not a sure answer.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from docmind_core.text.colloquial import asked_terms
from docmind_core.text.tokens import chunk_terms
from docmind_core.values import EvidenceVerdict, GradeResult, RetrievedChunk, Tier
from docmind_core.settings import GraderSettings, GrayZoneMode
from docmind_core.text.tokens import is_cjk, keyword_tokens, salient_terms
from docmind_core.answer.claims import code_names, source_units
from docmind_core.answer.target_match import evidence_target_misses
from docmind_core.text.value_kinds import question_parts, states_value

log = logging.getLogger(__name__)
_KEYWORD_ONLY_CAP = "high_but_keyword_only"  # the reason a grade of incomplete, keyword-only evidence was capped

# What coverage measures (not tuning knobs, so not settings): the best of the top three chunks, and the
# salient_terms weight from which a term counts as a rare entity (codes, numbers, capitalised names).
COVERAGE_TOP_CHUNKS = 3
RARE_ENTITY_WEIGHT = 1.6


@dataclass(frozen=True)
class CoverageReport:
    coverage: float  # 0..1; 0 when the query has no salient terms
    rare_entity_hit: bool
    has_terms: bool
    # the kinds of value the question asks for ("quantity", "date", ...) that no top chunk states
    unstated_kinds: tuple[str, ...] = ()
    # what of the question's entity, qualifier or compared sides no top statement holds (target_match.py)
    unmatched_target: tuple[str, ...] = ()


def chunk_score(chunk: RetrievedChunk) -> float:
    """The chunk's rerank score, or its fused score when no reranker scored it, clamped to 0..1."""
    value = chunk.scores.rerank if chunk.scores.rerank is not None else chunk.scores.fused
    return min(1.0, max(0.0, float(value or 0.0)))


def _top_chunks(chunks: Sequence[RetrievedChunk]) -> list[RetrievedChunk]:
    return sorted(chunks, key=chunk_score, reverse=True)[:COVERAGE_TOP_CHUNKS]


def found_terms(terms: Iterable[str], text: str, stored: str | None = None) -> frozenset[str]:
    """The ``terms`` a chunk's text holds, as coverage counts them; ``stored``: its ingest-time tokens."""
    present, _pairs, text_lower = chunk_terms(text, stored)  # cached: the reranker has just read these chunks

    def holds(term: str) -> bool:
        if is_cjk(term[0]):
            # jieba may cut the query and the chunk differently ("向量数据库" vs "向量 / 数据库")
            return term in text_lower
        if term in present:
            return True
        stem = keyword_tokens(term, stem=True)
        return bool(stem) and stem[0] in present

    return frozenset(term for term in terms if holds(term))


def weight_share(terms: dict[str, float], found: Iterable[str]) -> float:
    """The share of the terms' weight (``text.salient_terms``) that ``found`` holds; 0 when they weigh nothing."""
    total = sum(terms.values())
    return sum(terms[t] for t in found) / total if total > 0 else 0.0


def coverage_report(query: str, chunks: Sequence[RetrievedChunk]) -> CoverageReport:
    """Best weighted coverage of the query's salient terms among the top <= 3 chunks.

    Terms are weighted by ``text.salient_terms`` (which already favours long
    Chinese words over single characters, i.e. is length-aware); the best single
    chunk counts, not the union, because an answer needs its facts together.
    """
    terms = asked_terms(query)  # "大概", "来着", "again" ask for nothing a passage states
    total = sum(terms.values())
    if not terms or total <= 0:
        return CoverageReport(0.0, False, False)
    best = 0.0
    rare_hit = False
    top = _top_chunks(chunks)
    for chunk in top:
        found = found_terms(terms, chunk.text, chunk.terms)
        rare_hit = rare_hit or any(terms[term] >= RARE_ENTITY_WEIGHT for term in found)
        best = max(best, weight_share(terms, found))
    return CoverageReport(round(best, 4), rare_hit, True, unstated_kinds(query, top),
                          evidence_target_misses(query, top))


def unstated_kinds(question: str, passages: Sequence[RetrievedChunk]) -> tuple[str, ...]:
    """The kinds of value the question asks for (a quantity in the asked units, a date, a price, a version ...;
    ``text.value_kinds``) that ``passages`` do not state.

    A pricing row that names the Nimbus N2 and says "see the N2 datasheet" holds every word of "what is the N2's
    maximum power draw?" while the only watts in the table are the N1's.  So when the question names codes
    ("N2", "AUR-4012"), each of them needs a sentence, table row or short window of a passage (its title and
    heading included, ``claims.source_units``) holding that code and a value of the kind.  Otherwise any value
    of the kind in a passage counts: lenient like the answer-type check, since whether the value is the right
    one is the claim checks' and the judge's job."""
    parts = [p for p in question_parts(question) if p.kind is not None]
    if not parts:
        return ()
    units = [u for c in passages for u in source_units(c.text, c.document)]
    missing: list[str] = []
    for part in parts:
        if part.kind in missing:
            continue
        codes = code_names(part.text)
        # a sentence under "### Firmware 3.2.0" states its section's version: the release note's "New: the N2
        # can join an Aurora tenant" answers "which firmware version first let the N2 join?"
        stating = [u for u in units if states_value(part.kind, u.body, question, part.units)
                   or (u.section and states_value(part.kind, u.section, question, part.units))]
        stated = all(any(u.has_name(code) for u in stating) for code in codes) if codes else bool(stating)
        if not stated:
            missing.append(part.kind)
    return tuple(missing)


def lexical_coverage(query: str, chunks: Sequence[RetrievedChunk]) -> tuple[float, bool]:
    """(coverage, rare_entity_hit) — see :func:`coverage_report`."""
    report = coverage_report(query, chunks)
    return report.coverage, report.rare_entity_hit


Arbiter = Callable[[float, "CoverageReport", GraderSettings], tuple[Tier, str]]
"""A gray-zone rule: (top score, lexical coverage, grader settings) -> (tier, reason)."""


class CragGrader:
    """Grades the refined evidence of one query into HIGH / AMBIGUOUS / LOW."""

    def __init__(self, arbiters: dict[GrayZoneMode, Arbiter] | None = None) -> None:
        """``arbiters`` replaces the gray-zone rule of some modes (a research variant, or a test's broken one)."""
        self._arbiters: dict[GrayZoneMode, Arbiter] = {
            "coverage_first": self._coverage_first,
            "rerank_only": self._rerank_only,
            "blend": self._blend,
            **(arbiters or {}),
        }

    def grade(self, query: str, chunks: Sequence[RetrievedChunk], grader: GraderSettings,
              web_compensation_on_low: bool = True, incomplete: Sequence[str] = ()) -> GradeResult:
        """``grader`` is ``Settings.grader``; ``web_compensation_on_low``: a LOW tier asks for web compensation
        (a run passes ``retrieval.web_compensation_on_low``); ``incomplete`` lists what did not answer during
        retrieval (see the module docstring)."""
        result = self._grade(query, chunks, grader, web_compensation_on_low)
        if not incomplete:
            return result
        missing = "; ".join(incomplete)
        update: dict = {}
        if result.tier is Tier.HIGH and not any(_found_by_vector(c) for c in chunks):
            # the meaning side did not answer (a vector server down or hung): what the keywords found alone is
            # not a sure answer, however well it scores
            update["tier"] = Tier.AMBIGUOUS
            result = result.model_copy(update={"reason": f"{_KEYWORD_ONLY_CAP}:{result.reason}"})
        update["reason"] = f"retrieval_incomplete: {missing}" if not chunks else \
            f"retrieval_incomplete: {missing}; of what was found: {result.reason}"
        return result.model_copy(update=update)

    def _grade(self, query: str, chunks: Sequence[RetrievedChunk], grader: GraderSettings,
               on_low: bool) -> GradeResult:
        mode = grader.gray_zone_mode
        if not chunks:
            return GradeResult(tier=Tier.LOW, top_score=0.0, lex_coverage=0.0, kb_entity_weak=True,
                               web_compensation_needed=on_low, reason="no_evidence", gray_zone_mode=mode)

        top = max(chunk_score(c) for c in chunks)
        report = coverage_report(query, chunks)
        tier, reason = self._tier(top, report, grader)

        kb_entity_weak = report.has_terms and report.coverage < grader.entity_weak_below
        web_needed = (tier is Tier.LOW and on_low) or \
            (tier is Tier.AMBIGUOUS and kb_entity_weak and grader.web_fallback_on_ambiguous)
        return GradeResult(tier=tier, top_score=round(top, 4), lex_coverage=report.coverage,
                           kb_entity_weak=kb_entity_weak, web_compensation_needed=web_needed,
                           reason=reason, gray_zone_mode=mode,
                           unstated_kinds=list(report.unstated_kinds) if grader.require_asked_value else [],
                           unmatched_target=list(report.unmatched_target) if grader.require_asked_target else [])

    def tier_for(self, top: float, report: CoverageReport, grader: GraderSettings) -> tuple[Tier, str]:
        """The tier of a top score and a coverage report under ``grader`` (threshold sweeps compute the
        coverage once per run and ask this for every grid point)."""
        return self._tier(top, report, grader)

    def _tier(self, top: float, report: CoverageReport, grader: GraderSettings) -> tuple[Tier, str]:
        tier, reason = self._tier_by_signals(top, report, grader)
        if tier is Tier.HIGH and (not report.has_terms or report.coverage < grader.near_zero_coverage):
            # nothing the question asks for is in the evidence: whatever scored it, it is not a sure answer
            return Tier.AMBIGUOUS, "high_but_no_salient_term_in_evidence"
        if tier is Tier.HIGH and grader.require_asked_value and report.unstated_kinds:
            # the evidence is about the question, but states no value of the kind it asks for
            return Tier.AMBIGUOUS, "high_but_asked_value_not_in_evidence:" + ",".join(report.unstated_kinds)
        if tier is Tier.HIGH and grader.require_asked_target and report.unmatched_target:
            # a value of the asked kind is there, stated of another entity or under another qualifier
            return Tier.AMBIGUOUS, "high_but_asked_target_not_in_evidence:" + ",".join(report.unmatched_target)
        return tier, reason

    def _tier_by_signals(self, top: float, report: CoverageReport, grader: GraderSettings) -> tuple[Tier, str]:
        if top >= grader.high_threshold:
            if report.has_terms and report.coverage < grader.near_zero_coverage:
                return Tier.AMBIGUOUS, "high_rerank_but_no_coverage"
            if report.has_terms and report.coverage < grader.high_min_coverage:
                return Tier.AMBIGUOUS, "high_rerank_but_low_coverage"
            return Tier.HIGH, "rerank_high"
        if top <= grader.low_threshold:
            if report.rare_entity_hit:
                return Tier.AMBIGUOUS, "low_rerank_but_rare_entity_hit"
            return Tier.LOW, "rerank_low"
        try:
            arbiter = self._arbiters[grader.gray_zone_mode]
            return arbiter(top, report, grader)
        except Exception as exc:  # a broken arbiter must not block the answer
            log.warning("gray-zone arbitration failed: %s", exc)
            return Tier.AMBIGUOUS, f"gray_zone_error:{type(exc).__name__}"

    @staticmethod
    def _coverage_first(top: float, report: CoverageReport, grader: GraderSettings) -> tuple[Tier, str]:
        if not report.has_terms:
            return Tier.AMBIGUOUS, "gray_zone_no_terms"
        if report.coverage >= grader.coverage_high:
            return Tier.HIGH, "gray_zone_coverage_high"
        if report.coverage <= grader.coverage_low:
            return Tier.LOW, "gray_zone_coverage_low"
        return Tier.AMBIGUOUS, "gray_zone_coverage_mid"

    @staticmethod
    def _rerank_only(top: float, report: CoverageReport, grader: GraderSettings) -> tuple[Tier, str]:
        return Tier.AMBIGUOUS, "gray_zone_rerank_only"

    @staticmethod
    def _blend(top: float, report: CoverageReport, grader: GraderSettings) -> tuple[Tier, str]:
        span = grader.high_threshold - grader.low_threshold
        normalised = (top - grader.low_threshold) / span
        blended = 0.5 * normalised + 0.5 * report.coverage
        if blended >= grader.blend_high:
            return Tier.HIGH, f"gray_zone_blend_high:{blended:.2f}"
        if blended <= grader.blend_low:
            return Tier.LOW, f"gray_zone_blend_low:{blended:.2f}"
        return Tier.AMBIGUOUS, f"gray_zone_blend_mid:{blended:.2f}"


def _found_by_vector(chunk: RetrievedChunk) -> bool:
    """The chunk came from a vector search (a cosine filled in from a stored vector does not count)."""
    return chunk.scores.vector_rank is not None or "vector" in chunk.found_by


def judged_grade(grade: GradeResult, verdict: EvidenceVerdict, grader: GraderSettings) -> GradeResult:
    """``grade`` with the model judge's verdict on its evidence (see the module docstring).

    The judge reads the passages, which the lexical signals cannot: a pricing row that names the product and
    says "see the datasheet" matches every word of the question and answers nothing.  It does not lift what
    the signals found weak on their own (a top score at or below the low threshold, little coverage): a small
    model says "yes" to a passage on the same topic too often for that."""
    score = f" (P(yes) {verdict.p_yes:.2f})" if verdict.p_yes is not None else ""
    note = f"judge: {verdict.verdict}{score}"
    if verdict.quote_verified:
        note += f", its quote found in [{verdict.quote_source}]" if verdict.quote_source else ", its quote found"
    elif verdict.stated == "yes" and verdict.quote_note:
        note += f", {verdict.quote_note}"
    tier = grade.tier
    if verdict.verdict == "no" and tier is Tier.HIGH:
        tier, note = Tier.AMBIGUOUS, note + ", capped at AMBIGUOUS"
    elif verdict.verdict == "answers" and tier is Tier.AMBIGUOUS:
        if not grader.judge_lifts:
            note += ", not lifted: grader.judge_lifts is off"
        elif _KEYWORD_ONLY_CAP in grade.reason:  # the vector side was missing: see CragGrader.grade
            note += ", not lifted: only keyword search answered"
        elif grade.unstated_kinds:  # a small model says "yes" to a passage on the topic that lacks the value
            note += ", not lifted: no top passage states the value the question asks for"
        elif grade.unmatched_target:  # ... or to the neighbouring fact (another product, another qualifier)
            note += ", not lifted: no top passage states it of the asked entity and qualifier"
        elif grade.top_score > grader.low_threshold and grade.lex_coverage >= grader.judge_lift_min_coverage:
            tier, note = Tier.HIGH, note + ", lifted to HIGH"
        else:
            note += ", not lifted: the lexical signals are weak"
    return grade.model_copy(update={"tier": tier, "reason": f"{grade.reason}; {note}" if grade.reason else note})


def judge_can_move(grade: GradeResult, grader: GraderSettings) -> bool:
    """Whether some verdict of the evidence judge moves this tier (``judged_grade`` asked with "answers" and with
    "no").  A LOW tier, a gray zone the lexical signals find too weak to lift (or any gray zone with
    ``grader.judge_lifts`` off), or evidence stating no value of the kind asked for keeps its tier whatever the
    judge says, so the run does not ask (on a 1.5B model on two cores the call costs ~8 s)."""
    return any(judged_grade(grade, EvidenceVerdict(verdict=v), grader).tier != grade.tier for v in ("answers", "no"))
