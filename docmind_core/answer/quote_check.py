"""The evidence judge's quote, read against the passage it names.

A small model's P(yes) barely separates a passage that states the answer from one on the same topic (a 1.5B
model: medians 0.59 against 0.50 on the demo set).  What it does well is point: the evidence prompt asks for
the passage number and the words that state the answer, and on answerable evidence it usually copies them
("yes: [1] "192.168.50.1"").  Those words are checked here, offline, so that a "yes" counts only when its
ground is where the model says it is:

* **verbatim**: most of the quoted text (at least ``VERBATIM_SHARE`` of its characters, read in pieces split at
  punctuation, since a model joins a label to what it copies) occurs word for word in the passage it names;
* **in place**: a sentence, table row or short window of that passage (``claims.source_units``, its title
  and heading included) holds the quote and at least ``grader.judge_quote_min_coverage`` of the weight of
  the question's salient terms: a date copied from another section's heading does not answer "when did the
  audit end?";
* **of the asked kind**: when the question asks for a kind of value (a quantity, a date, a price ...;
  ``text.value_kinds``), that unit states one.

A paraphrase ("The passages state that ..."), a quote the passage does not hold, or a reason that only says
what is missing is not verified.  What a verified quote changes is decided in
:func:`docmind_core.answer.judge.settled_verdict`.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Sequence

from docmind_core.answer.claims import CODE_NAME_RE, Unit, code_names, source_units
from docmind_core.answer.grade import found_terms, weight_share
from docmind_core.text.tokens import salient_terms
from docmind_core.text.value_kinds import question_parts, states_value
from docmind_core.values import RetrievedChunk

VERBATIM_SHARE = 0.6  # of the quote's characters, in pieces found word for word in the passage
MIN_PIECE_CHARS = 2
_SOURCE_RE = re.compile(r"\[(\d{1,2})\]")
_QUOTE_OPEN = "\"“「『"
_QUOTE_RE = re.compile(r"[\"“「『]([^\"“”「」『』]+)[\"”」』]?")
# Where a model joins what it copies to a label or to a second copied piece.  Not "." or "," (versions,
# addresses and numbers hold them) nor "-" (codes).
_PIECE_SPLIT_RE = re.compile(r"\s*(?:[;；:：，。！？!?|…\n]|\.\.\.|\s[-–—]\s)\s*")


@dataclass(frozen=True)
class QuoteCheck:
    """The deciding words of an evidence-judge reply, and whether the passage it names holds them in place."""

    quote: str = ""  # "" when the reply quotes nothing
    source: int | None = None  # the passage number the reply names (1-based, as shown to the judge)
    verified: bool = False
    note: str = ""  # why, in words
    verbatim: bool = False  # the passage holds the quote word for word (in place or not)
    coverage: float = 0.0  # share of the question's salient-term weight in the unit holding the quote


def quoted_words(reason: str) -> tuple[str, int | None]:
    """(the quoted words, the passage number) of a judge's reason such as ``[2] "45 W at full load"``.

    Without quotation marks the words after the passage number count (a reply cut short loses its closing
    mark, and some models drop both)."""
    found = _SOURCE_RE.search(reason)
    source = int(found.group(1)) if found else None
    quoted = _QUOTE_RE.search(reason)
    if quoted:
        words = quoted.group(1)
    else:
        words = _SOURCE_RE.sub(" ", reason)
    return " ".join(words.split()).strip(" .…" + _QUOTE_OPEN), source


def check_quote(question: str, reason: str, shown: Sequence[RetrievedChunk], min_coverage: float) -> QuoteCheck:
    """Check the quote of an evidence-judge reason against the passages the judge was shown (in their order)."""
    quote, source = quoted_words(reason)
    if not quote or sum(ch.isalnum() for ch in quote) < MIN_PIECE_CHARS:
        return QuoteCheck(note="the reply quotes no words of a passage")
    if source is not None and not 1 <= source <= len(shown):
        return QuoteCheck(quote, source, note=f"the reply names passage [{source}], which it was not shown")
    candidates = [(source, shown[source - 1])] if source is not None else list(enumerate(shown, start=1))
    best: QuoteCheck | None = None
    for number, chunk in candidates:
        check = _check_in(question, quote, number, chunk, min_coverage)
        if check.verified:
            return check
        if best is None or _rank(check) > _rank(best):
            best = check
    assert best is not None  # there is always a shown passage: the judge is not asked without evidence
    return best


def _rank(check: QuoteCheck) -> tuple[bool, float]:
    return (check.verbatim, check.coverage)


def _check_in(question: str, quote: str, number: int, chunk: RetrievedChunk, min_coverage: float) -> QuoteCheck:
    passage = normalised(chunk.text)
    pieces = [p for p in (normalised(x) for x in _PIECE_SPLIT_RE.split(quote)) if _letters(p) >= MIN_PIECE_CHARS]
    if not pieces:
        return QuoteCheck(quote, number, note="the reply quotes no words of a passage")
    found = [p for p in pieces if p in passage]
    share = sum(len(p) for p in found) / sum(len(p) for p in pieces)
    if share < VERBATIM_SHARE:
        return QuoteCheck(quote, number, note=f"its quote is not word for word in passage [{number}]")
    anchor = max(found, key=len)
    units = [u for u in source_units(chunk.text, chunk.document) if anchor in normalised(f"{u.context}\n{u.body}")]
    if not units:
        return QuoteCheck(quote, number, verbatim=True,
                          note=f"its quote runs across sentences of passage [{number}]")
    codes = frozenset(code_names(question))
    beside = {_code_beside(anchor, u.body) for u in units} - {None}
    if codes and beside and not beside & codes:
        other = sorted(beside)[0].upper()
        return QuoteCheck(quote, number, verbatim=True,
                          note=f"its quote in passage [{number}] is said of {other}, not of "
                               f"{', '.join(sorted(c.upper() for c in codes))}")
    terms = salient_terms(question)
    kinds = [p for p in question_parts(question) if p.kind is not None]
    best_coverage, best_kind = 0.0, not kinds
    for unit in units:
        coverage = _coverage(terms, unit)
        kind_ok = not kinds or any(states_value(p.kind, f"{unit.context}\n{unit.body}", question, p.units)
                                   for p in kinds)
        if kind_ok and coverage >= min_coverage:
            return QuoteCheck(quote, number, verified=True, verbatim=True, coverage=round(coverage, 4),
                              note=f"its quote is in passage [{number}], in a sentence about the question")
        if (kind_ok, coverage) > (best_kind, best_coverage):
            best_coverage, best_kind = coverage, kind_ok
    if not best_kind:
        why = f"the sentence of passage [{number}] holding its quote states no value of the kind asked"
    else:
        why = (f"the sentence of passage [{number}] holding its quote has {best_coverage:.0%} of the question's "
               f"terms (needs {min_coverage:.0%})")
    return QuoteCheck(quote, number, verbatim=True, coverage=round(best_coverage, 4), note=why)


def _code_beside(anchor: str, body: str) -> str | None:
    """The code nearest to the quote in a unit's text ("The DM-4000 pump runs at 65 l/min and replaced the
    DM-3000": DM-4000), or None when the text names none (the code may stand in the heading)."""
    key, where = _keyed(body)
    found = key.find(anchor)
    if found < 0:
        return None
    at, end = where[found], where[found + len(anchor) - 1] + 1  # the quote's place in the unit's own text
    nearest: tuple[int, str] | None = None
    for m in CODE_NAME_RE.finditer(body):
        code = m.group(0).lower()
        if m.start() < end and m.end() > at:  # the quote holds the code itself
            return code
        distance = at - m.end() if m.end() <= at else m.start() - end
        if nearest is None or distance < nearest[0]:
            nearest = (distance, code)
    return nearest[1] if nearest else None


def _keyed(text: str) -> tuple[str, list[int]]:
    """``normalised(text)`` and, for each of its characters, where it stands in ``text``."""
    key: list[str] = []
    where: list[int] = []
    for i, ch in enumerate(text):
        for c in unicodedata.normalize("NFKC", ch).casefold():
            if c.isalnum():
                key.append(c)
                where.append(i)
    return "".join(key), where


def _coverage(terms: dict[str, float], unit: Unit) -> float:
    if sum(terms.values()) <= 0:
        return 1.0  # a question without salient terms: nothing to place the quote against
    text = f"{unit.context}\n{unit.body}" + ("\n" + " ".join(unit.headers) if unit.headers else "")
    return weight_share(terms, found_terms(terms, text))


def normalised(text: str) -> str:
    """Text as quotes are compared: its letters and digits only (NFKC, lower case), so that a copy that drops a
    comma, a space or markup ("2013年于乐" of "2013年，于乐"; "45W" of "| 45 W |") still reads as a copy."""
    return _keyed(text)[0]


def _letters(text: str) -> int:
    return sum(ch.isalnum() for ch in text)
