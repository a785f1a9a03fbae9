"""Is the answer about what was asked?  Each answered value read where its source states it — pure text, no
model call.

The claim checks (claims.py) find a claim in its source; the answer-type check (answer_type.py) finds a
value of the asked kind.  Neither sees an answer that quotes the neighbouring fact word for word: the N1's
*maximum* draw for "the N1's idle draw", the N2's weight for "the N1's weight", the N1's row for "the N1
Lite", the 3.2.1 fixes for "what did 3.3.0 fix?".  This module reads, for each supported claim that answers
(one stating a value of the kind the question asks for; every supported claim when it asks for none), the
sentences and rows of its source that state it (``claims.supporting_units``), and asks ``text/targets.py``
whether one of them names the question's entity and carries its qualifier where the value stands.

- every answering claim on target: the answer is about what was asked (``matched`` True);
- some answering claims off target, or a comparison with a side no on-target claim covers: ``matched``
  False, and the band is at most MEDIUM (``partial``);
- no answering claim on target: ``matched`` False, and the band is LOW: the answer is about something else.

``note`` says in words, in the question's language, what the sources state instead ("The sources state the
Nimbus N1's maximum power draw (28 W), not its idle power draw.").  The same reading, over the top passages,
keeps the evidence grade from HIGH (``evidence_target_misses``), and the model judge cannot lift past it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from docmind_core.answer.claims import Unit, about_the_sources, source_names, source_units, supporting_units
from docmind_core.text.targets import (
    PRONOUN_START_RE, Match, Statement, match_statement, part_target, qualifiers_in, read_target, sides_missing, stated_instead,
)
from docmind_core.text.value_kinds import Value, bare_text, question_parts, states_value, values_in
from docmind_core.values import ClaimCheck, RetrievedChunk

@dataclass(frozen=True)
class TargetCheck:
    """The answering claims of an answer read against the question's target."""

    matched: bool | None = None  # None: the question names no target, or no claim answers it
    partial: bool = False  # False with matched False: no answering claim is on target
    misses: tuple[str, ...] = ()  # "entity Nimbus N1", "qualifier idle", "side N2", in words
    note: str = ""  # what the sources state instead, in the question's language
    on_target: int = 0
    off_target: int = 0

    @property
    def reason(self) -> str:
        if self.matched is not False:
            return ""
        what = "; ".join(self.misses[:3])
        if self.partial:
            return f"the answer covers only part of what was asked ({what})"
        return f"the answer is not about what was asked ({what})"


# --------------------------------------------------------------------------
# Statements of a source
# --------------------------------------------------------------------------


def _statement(unit: Unit, row_keys: tuple[str, ...], evidence: str, units: Sequence[Unit] = ()) -> Statement:
    """A unit as a statement; a Markdown heading ("Firmware 3.2.0 — 2025-11-04") with its section's sentences,
    which say what the heading's version or date is about."""
    body, context = unit.body, unit.context
    section = [u.body for u in units if u.section and u.section.lstrip("#").strip() == unit.body and not u.window]
    if section:
        body = " ".join([body, *section[:4]])
    if PRONOUN_START_RE.match(unit.body):  # "Its warranty period is two years": the one before names whose
        singles = [u for u in units if not u.window and not u.cells]
        at = next((i for i, u in enumerate(singles) if u is unit), 0)
        if at > 0:
            context = f"{singles[at - 1].body}\n{context}"
    return Statement(body, context, unit.cells, unit.headers, evidence, row_keys)


def _row_keys(units: Sequence[Unit]) -> tuple[str, ...]:
    return tuple(u.cells[0] for u in units if u.cells)


def _evidence(sources: Sequence[RetrievedChunk]) -> str:
    return "\n".join(f"{s.document}\n{s.text}" for s in sources)


def _asked_parts(question: str):
    return [p for p in question_parts(question) if p.kind is not None]


def _answer_values(claim_text: str, question: str, parts) -> list[Value | None]:
    """The values of a claim that answer the question (of an asked kind, not stated in the question)."""
    asked_values = {v.key for v in values_in(question)}
    values = [v for v in values_in(bare_text(claim_text)) if v.key not in asked_values]
    if parts:
        values = [v for v in values if any(states_value(p.kind, v.text, question, p.units) for p in parts)] or values
    return values or [None]


def _says_what_it_is(claim_text: str, match: Match) -> bool:
    """The claim's own words name the other qualifier or entity its statement holds."""
    if match.missing_entities:
        return bool(match.stated_entity) and match.stated_entity.lower() in claim_text.lower()
    return bool(match.missing_qualifiers) and bool(set(qualifiers_in(bare_text(claim_text))) & set(match.stated_qualifiers))


def _best(matches: Sequence[Match]) -> Match | None:
    if not matches:
        return None
    return min(matches, key=lambda m: (not m.ok, len(m.missing_entities) + len(m.missing_qualifiers)))


# --------------------------------------------------------------------------
# The answer against the target
# --------------------------------------------------------------------------


def check_target(question: str, claims: Sequence[ClaimCheck], sources: Sequence[RetrievedChunk]) -> TargetCheck:
    """The supported claims of an answer that answer ``question``, read against its target."""
    target = read_target(question) if question.strip() else None
    if target is None or target.empty or not sources:
        return TargetCheck()
    parts = _asked_parts(question)
    names = source_names(sources)
    evidence = _evidence(sources)
    results: list[tuple[ClaimCheck, Match, Value | None]] = []
    for claim in claims:
        if claim.status != "supported" or claim.source_index is None or not 1 <= claim.source_index <= len(sources):
            continue
        if about_the_sources(claim.text):
            continue
        if parts and not any(states_value(p.kind, claim.text, question, p.units) for p in parts):
            continue  # states none of the asked values: context, not an answer
        own = part_target(question, claim.text, target)
        if own.empty:
            continue  # answers a part of the question that names nothing ("what known issue did it have?")
        source = sources[claim.source_index - 1]
        units = supporting_units(claim.text, source, names)
        if not units:
            continue  # supported by a reading this module cannot place (the model judge): not judged here
        all_units = source_units(source.text, source.document)
        keys = _row_keys(all_units)
        matches = []
        values = _answer_values(claim.text, question, parts)
        for value in values:
            found = _best([match_statement(own, _statement(u, keys, evidence, all_units), value) for u in units])
            if found is not None:
                matches.append((found, value))
        if not matches:
            continue
        # a claim that states the asked value on target answers, whatever else it states beside it
        best = min(matches, key=lambda mv: (not mv[0].ok,))
        results.append((claim, best[0], best[1]))
    if not results:
        return TargetCheck()
    on = [r for r in results if r[1].ok]
    # beside an answer on target, a claim that says itself what it is about ("typical draw while idle is 18 W"
    # after the maximum asked for) misleads no one; one that does not ("Weight: 1.9 kg" from the N2's datasheet)
    # may be read as the answer
    off = [r for r in results if not r[1].ok and not (on and _says_what_it_is(r[0].text, r[1]))]
    covered = {s for _c, m, _v in on for s in m.sides}
    missing_sides = [s.text for s in target.sides if s.text not in covered]
    if not off and not missing_sides:
        return TargetCheck(matched=True, on_target=len(on))
    misses: list[str] = []
    for _c, m, _v in off:
        misses += [f"entity {e}" for e in m.missing_entities] + [f"qualifier {q}" for q in m.missing_qualifiers]
    misses += [f"side {s}" for s in missing_sides]
    if off:
        _claim, m, value = off[0]
        note = stated_instead(question, target, m, value.text.strip() if value is not None else "")
    else:
        note = sides_missing(question, target, missing_sides)
    return TargetCheck(matched=False, partial=bool(on), misses=tuple(dict.fromkeys(misses)), note=note,
                       on_target=len(on), off_target=len(off))


# --------------------------------------------------------------------------
# The evidence, before the answer
# --------------------------------------------------------------------------


def evidence_target_misses(question: str, passages: Sequence[RetrievedChunk]) -> tuple[str, ...]:
    """What of the question's target no statement of ``passages`` holds where it states a value of the asked
    kind (any statement, when the question asks for no value): its entity, its qualifier, a side of its
    comparison.  Empty when the target is met, or the question names none."""
    target = read_target(question) if question.strip() else None
    if target is None or target.empty or not passages:
        return ()
    parts = _asked_parts(question)
    evidence = _evidence(passages)
    best: Match | None = None
    sides: set[str] = set()
    for chunk in passages:
        units = source_units(chunk.text, chunk.document)  # windows too: "Nimbus N2 datasheet. Maximum …: 45 W"
        keys = _row_keys(units)
        for unit in units:
            text = unit.body + ("\n" + unit.section if unit.section else "")
            if parts and not any(states_value(p.kind, text, question, p.units) for p in parts):
                continue
            values = _answer_values(unit.body, question, parts) if parts else [None]
            for value in values:
                m = match_statement(target, _statement(unit, keys, evidence, units), value)
                if m.ok:
                    sides |= set(m.sides)
                    if not target.sides:
                        return ()
                best = _best([x for x in (best, m) if x is not None])
    missing_sides = [s.text for s in target.sides if s.text not in sides]
    if target.sides and best is not None and best.ok and not missing_sides:
        return ()
    if best is None:
        return ()  # no statement of the asked kind at all: grade.unstated_kinds says so
    misses = [f"entity {e}" for e in best.missing_entities] + [f"qualifier {q}" for q in best.missing_qualifiers]
    misses += [f"side {s}" for s in missing_sides]
    return tuple(dict.fromkeys(misses)) or ()
