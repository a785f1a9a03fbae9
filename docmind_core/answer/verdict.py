"""One verdict per answer: what a reader is told about how far the sources back it.

The run measures an answer on three scales: the evidence grade (the CRAG tier of what retrieval found), the
claim checks (each claim against its source) and the confidence band (supported coverage x top score, capped
by both and by the answer-type and entity checks).  Shown side by side they contradicted each other (a yellow
AMBIGUOUS beside "0.95 MEDIUM"), so the pages, the export and ``ask --json`` show one verdict instead:

  band HIGH   -> "Supported by the sources"      every claim found in its source, evidence graded HIGH, the
                                                 asked value stated
  band MEDIUM -> "Partly supported"              something holds, something is missing or uncertain
  band LOW    -> "Not supported by the sources"  a claim contradicted, nothing found, or evidence graded LOW
  (no number) -> "No answer in the sources"      the answer states nothing a source could back (it says the
                                                 sources lack it, or DocMind's own notice is all there is)
              -> "Not checked: no sources searched"   a greeting or a question about DocMind: no retrieval
              -> "Stopped: no verdict"           the run was stopped before it finished

The verdict follows the band, so every cap on the band (evidence grade, unsupported claims, the asked value,
an entity or qualifier not where the value is, a stand-in excerpt) reaches it without being known here.  Its
number is the confidence score held inside the label's range (never at or above the next label's threshold):
a "Partly supported" answer never shows a number that reads as supported, and the reasons say what held it.
The evidence grade stays beside it, in words; when it is not HIGH the reasons say how it limits the verdict.
"""

from __future__ import annotations

from docmind_core.answer.answer_type import KIND_WORDS
from docmind_core.events import Done, Verdict, VerdictLevel
from docmind_core.text.reasons import describe_reason
from docmind_core.settings import CitationSettings
from docmind_core.values import Scope, Tier

LABELS: dict[VerdictLevel, str] = {
    "supported": "Supported by the sources",
    "partly_supported": "Partly supported",
    "not_supported": "Not supported by the sources",
    "no_answer": "No answer in the sources",
    "not_checked": "Not checked: no sources searched",
    "stopped": "Stopped: no verdict",
}

MEANINGS: dict[VerdictLevel, str] = {
    "supported": "Every claim of the answer was found in the source it cites, the sources match the question "
                 "(evidence grade HIGH), and the answer states what was asked.",
    "partly_supported": "Some of the answer is backed by the sources, not all of it: read the reasons and the "
                        "amber claims before relying on it.",
    "not_supported": "The sources do not back this answer: a claim contradicts its source, none is found there, or "
                     "the evidence does not match the question.",
    "no_answer": "The answer states nothing the sources could back: it says they do not hold the answer, or "
                 "DocMind could not search them (see the notice).",
    "not_checked": "This reply searched no knowledge base (a greeting, or a question about DocMind or this "
                   "conversation), so there is nothing to check it against.",
    "stopped": "The run was stopped before it finished: a partial answer gets no verdict.",
}

_LEVEL_OF_BAND: dict[str, VerdictLevel] = {"HIGH": "supported", "MEDIUM": "partly_supported", "LOW": "not_supported"}
_SCORE_STEP = 0.01  # a held score stays this far below the next label's threshold


def score_meaning(citation: CitationSettings) -> str:
    """What the verdict's number is, with the thresholds between the labels."""
    return (f"support score, 0 to 1: the share of the answer's claims found in their sources x how closely the "
            f"best source matches the question; {citation.band_high:.2f} or more is needed for "
            f"'{LABELS['supported']}', below {citation.band_low:.2f} is '{LABELS['not_supported']}'")


def verdict_for(done: Done, citation: CitationSettings | None = None, derived: bool = False) -> Verdict:
    """The verdict on ``done``'s answer; ``citation`` holds the band thresholds the run used (defaults when the
    run's settings are not known, as for a stored trace read back)."""
    citation = citation or CitationSettings()
    grade = done.grade
    evidence_grade = grade.tier.value if grade is not None and not done.cancelled else ""
    claims = done.citations.claims
    checked = [c for c in claims if c.status != "not_checkable"]
    supported = sum(1 for c in checked if c.status == "supported")
    base = {"evidence_grade": evidence_grade, "supported_claims": supported, "checked_claims": len(checked),
            "derived": derived}

    def bare(level: VerdictLevel, *reasons: str) -> Verdict:
        return Verdict(level=level, label=LABELS[level], meaning=MEANINGS[level], reasons=[r for r in reasons if r],
                       **base)

    if done.cancelled:
        return bare("stopped", "stopped by the user")
    conf = done.confidence
    if conf is None:
        if grade is None and done.scope != Scope.KNOWLEDGE_QUERY:
            return bare("not_checked", f"the question was read as {done.scope.value.replace('_', ' ').lower()}: "
                                       "no retrieval")
        return bare("not_checked", "the run ended before its evidence was graded")
    if not checked:  # nothing a source could back: an abstention, or DocMind's own notice
        why = "no source was found for this question" if not done.sources else \
            "the answer states no fact to check: it says the sources do not hold one"
        return bare("no_answer", why, _grade_reason(grade))

    level = _LEVEL_OF_BAND[conf.band]
    if level != "not_supported" and not supported:  # nothing found can back nothing (a score of the top alone)
        level = "not_supported"
    reasons = _reasons(done, level, supported, len(checked))
    score = conf.score
    ceiling = {"partly_supported": citation.band_high, "not_supported": citation.band_low}.get(level)
    if ceiling is not None and score >= ceiling:
        held = round(max(0.0, ceiling - _SCORE_STEP), 2)
        reasons.append(f"the score ({score:.2f} from coverage x top score) is held at {held:.2f}, below the "
                       f"{ceiling:.2f} of '{_next_label(level)}', by the checks above")
        score = held
    return Verdict(level=level, label=LABELS[level], meaning=MEANINGS[level], score=round(score, 4),
                   score_meaning=score_meaning(citation), reasons=reasons, **base)


def verdict_of(done: Done, citation: CitationSettings | None = None) -> Verdict:
    """The verdict the run recorded, or, for a trace stored before verdicts, the one derived from it now."""
    return done.verdict if done.verdict is not None else verdict_for(done, citation, derived=True)


def _next_label(level: VerdictLevel) -> str:
    return LABELS["supported" if level == "partly_supported" else "partly_supported"]


def _reasons(done: Done, level: VerdictLevel, supported: int, checked: int) -> list[str]:
    """Why the answer got ``level``: each check that held it down, the evidence grade when it is not HIGH."""
    conf, cites = done.confidence, done.citations
    assert conf is not None
    reasons: list[str] = []
    if level == "supported":
        reasons.append(f"all {checked} claims found in their sources" if checked != 1 else
                       "its one claim found in its source")
    if cites.contradicted_claims:
        n = cites.contradicted_claims
        reasons.append(f"{n} claim{'s' if n != 1 else ''} contradicted by the source cited")
    unsupported = cites.unsupported_claims
    if unsupported:
        reasons.append(f"{unsupported} of {checked} claims not found in the sources")
    if conf.answers_question is False and conf.unanswered:
        kinds = " or ".join(dict.fromkeys(KIND_WORDS.get(k, k) for k in conf.unanswered))
        reasons.append(f"no supported claim states the {kinds} the question asks for")
    if any(n.code == "stand_in" for n in done.notices):
        reasons.append("an offline excerpt stands in for the model's answer, which failed its checks")
    grade_reason = _grade_reason(done.grade)
    if grade_reason:
        reasons.append(grade_reason)
    elif level == "supported" and done.grade is not None:
        reasons.append("evidence grade HIGH: the sources match the question")
    explained = len(reasons) - (1 if level == "supported" else 0)
    if level != "supported" and not explained:
        # none of the checks above explains the band: the score itself, or a cap this module does not name
        # (an entity or qualifier not where the value is); the confidence reason says which
        reasons.append(conf.reason or f"support score {conf.score:.2f}")
    return reasons


def _grade_reason(grade) -> str:
    """The evidence grade in words when it limits the verdict; "" when it is HIGH or unknown."""
    if grade is None or grade.tier is Tier.HIGH:
        return ""
    what = "only partly matches" if grade.tier is Tier.AMBIGUOUS else "does not match"
    why = describe_reason(grade.reason)
    return (f"evidence grade {grade.tier.value}: what retrieval found {what} the question"
            + (f" ({why})" if why else ""))
