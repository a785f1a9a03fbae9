"""What a question is about, and whether a statement of a source is about that: its *target*.

A value answers a question only when the statement that states it (a sentence, a list item, a table row
with its header) names the entity the question asks about and carries the qualifier it asks for.  The
neighbouring fact fails one of the two: the N1's maximum draw for "the N1's idle draw", the N2's weight for
"the N1's weight", the 3.2.1 fixes for "what did 3.3.0 fix?", the N1's row for "the N1 Lite".  Pure text,
no model call; the lexicon is ``text/target_lexicon.py``.

The question's target:

- *entities*: versions ("3.3.0", "Aurora 4.3"), codes and model names ("N1", "AUR-4012"), the variant words
  that follow them ("N1 Lite", "N1 轻量版"), capitalised names ("Aurora Cloud", "Team", "Japan"), and in Chinese
  places, 《titles》, transliterated names by their last part and the names jieba tags;
- *qualifiers*: the lexicon's groups ("idle", "maximum", "default", "allowed range" ...) and a currency, only
  when the question asks for a measured value ("the largest airport in New England" asks who, not how much);
- *sides*: the entities a comparison compares ("Compare the Team and Business plans", "N1 和 N2 … 区别",
  "X or Y?"); a comparison is held to its sides only, its other names say what is compared.

A question of several parts ("Which version first let the N2 join …, and what known issue did it have?") is
read part by part (:func:`part_target`): a statement answering a part that points back ("it") and names nothing
is held to nothing.

A statement matches it when:

- each *strict* entity (a version, a code, a variant word, a comparison side) stands in the statement or
  its context (the section heading, the chunk's title, the document name), and not only as part of a
  variant ("N1" inside "N1 Lite"); in a table row, an entity that is the key cell of some row must be the
  key cell of this one ("Team" is not the Business row);
- each other name stands in the statement, its context, or anywhere in the evidence (a multi-hop answer
  states its value about the bridge, not about the name the question starts from), misspelt by one letter at
  most; a name in another script is not held against a statement (only pinyin spellings of Chinese names are
  read across); a sentence opening with a pronoun ("Its warranty …") is read with the one before it;
- a place, in a question asking for a measured value, stands in the clause its value is stated in;
- each qualifier stands where the value is: in a sentence, the stretch of it between the values before and
  after, or its heading; in a table row, the header of the value's column, the row's key cell or the
  table's heading.  A qualifier asked and not matched fails, even when the statement carries no other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

from docmind_core.text.target_lexicon import (
    COMPARISON_CUES_EN, COMPARISON_CUES_ZH, CURRENCIES, EN_PLACES, QUALIFIERS, QUESTION_ONLY_WEAK,
    VARIANT_WORDS, ZH_PLACES, ZH_VARIANT_WORDS,
)
from docmind_core.text.tokens import CITATION_MARKER_RE, detect_language, is_cjk, keyword_tokens, part_of_speech
from docmind_core.text.value_kinds import Value, measure_units, question_parts, values_in

_CJK = r"\u3400-\u4dbf\u4e00-\u9fff"
# a name-like token: a capitalised word, a code with a digit ("N1", "AUR-4012"), an all-caps word
_TOKEN = r"(?:[A-Z\u00C0-\u00DE\u0160\u017D\u0106\u010C\u0141\u015A\u0179\u017B][^\W_\u3000-\u9fff]*(?:[-_][^\W_\u3000-\u9fff]+)*|[A-Za-z]+[-_]?\d[A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)*|\d+[A-Za-z][A-Za-z0-9]*)"
_RUN_RE = re.compile(rf"(?<![A-Za-z0-9_.\u00C0-\u024F-]){_TOKEN}(?:[ \t]+(?:{_TOKEN}|(?:{'|'.join(sorted(VARIANT_WORDS))})\b))*")
_LEAD_WORDS = frozenset(("what which who whom whose where when why how is are was were do does did can could will would "
                         "this that these those aside apart besides during after before since until under with "
                         "without from into by as like among about over "
                         "should shall may might must compare tell list give show name describe explain please "
                         "according based the a an in on at of for and or vs versus between both").split())
# capitalised words that name no entity: units, months, days, languages, generic words that open questions
_NOT_NAMES = frozenset(("usd eur rmb cny jpy gbp gb tb mb kb gib mib w kw kwh v mah mhz ghz ms fps dpi ssd hdd ram cpu "
                        "january february march april may june july august september october november december "
                        "monday tuesday wednesday thursday friday saturday sunday english chinese i ok faq api url "
                        "id sla yes no").split())
_NAME_TAGS = frozenset({"nr", "ns", "nt", "nrt", "nrfg"})
# a sentence that opens with one of these is about what the sentence before it names ("Its warranty period …")
PRONOUN_START_RE = re.compile(r"^\W*(?:it|its|they|their|this|these|he|she|his|her|the\s+(?:device|appliance|"
                              r"product|company|plan|model))\b|^\W*(?:它|其|该|此|他|她)", re.IGNORECASE)
# a question part that points back at what an earlier part asks about ("what known issue did it have?")
_REFERS_BACK_RE = re.compile(r"\b(?:it|its|they|their|them|this|that one)\b|它|其|该|此", re.IGNORECASE)
_MEASURED_KINDS = frozenset({"quantity", "money", "count", "address", "date", "version"})
_ORDINAL_RE = re.compile(r"\d+(?:st|nd|rd|th|s)", re.IGNORECASE)
_SHORT_VERSION_RE = re.compile(r"(?:\b(?:(?-i:[A-Z][a-z]+)|version|firmware|release|build)|版本|固件)\s*(v?\d+\.\d+)(?![\d.]*\d|\s*(?:%|°|(?:ghz|mhz|gbe?|tb|mb|kg|g|w|kw|v|mm|cm|m|km|usd|eur|x|days?|hours?|years?)\b))",
    re.IGNORECASE)


@dataclass(frozen=True)
class Entity:
    """An entity the question asks about: its words (lower case) and whether each must stand in the
    statement itself (``strict``) or may stand anywhere in the evidence."""

    text: str
    words: tuple[str, ...]
    strict: tuple[bool, ...]
    kind: str = "name"  # "version" | "code" | "name" | "place"

    @property
    def key(self) -> str:
        """The distinguishing words ("n1 lite", "team"): its strict words, or all of them."""
        strict = [w for w, s in zip(self.words, self.strict) if s]
        return " ".join(strict or self.words)


@dataclass(frozen=True)
class Target:
    """What a question is about: the entities it names, the qualifiers and currency it asks for, and the
    sides of a comparison (each a strict entity)."""

    question: str
    entities: tuple[Entity, ...] = ()
    qualifiers: tuple[str, ...] = ()
    currency: str = ""
    sides: tuple[Entity, ...] = ()
    measured: bool = False  # it asks for a measured value (a quantity, a price, a count, a date, an address...)

    @property
    def empty(self) -> bool:
        return not (self.entities or self.qualifiers or self.currency or self.sides)

    def describe(self) -> str:
        bits = [*self.qualifiers, *(e.text for e in self.entities)]
        return ", ".join(bits)


# --------------------------------------------------------------------------
# Words
# --------------------------------------------------------------------------


@lru_cache(maxsize=256)
def _phrase_re(phrase: str) -> re.Pattern[str]:
    body = r"[\s\-]+".join(re.escape(p) for p in phrase.split())
    return re.compile(rf"(?<![A-Za-z0-9]){body}(?![A-Za-z0-9])", re.IGNORECASE)


def _has_phrase(text: str, phrase: str) -> bool:
    if is_cjk(phrase[0]):
        return phrase in text
    if not phrase[0].isalnum():
        return phrase in text
    return _phrase_re(phrase).search(text) is not None


def qualifiers_in(text: str, asking: bool = False) -> tuple[str, ...]:
    """The qualifier groups a text names; ``asking``: read as a question (weak words do not count)."""
    found = []
    for group, (english, chinese) in QUALIFIERS.items():
        words = [w for w in (*english, *chinese) if not (asking and w in QUESTION_ONLY_WEAK)]
        if any(_has_phrase(text, w) for w in words):
            found.append(group)
        elif group == "allowed range" and not asking and _RANGE_RE.search(text):
            found.append(group)
    if asking and "average" in found and "typical" in found:
        found.remove("typical")
    return tuple(found)


_RANGE_RE = re.compile(r"\d[\d.,]*\s*[^\s\d]{0,4}\s*(?:to|–|—|-|~|～|到|至)\s*\d", re.IGNORECASE)


def _currency_asked(question: str) -> str:
    for code, (english, chinese, _kinds) in CURRENCIES.items():
        if any(_has_phrase(question, w) for w in english if w.isalpha() and len(w) > 2) or \
                any(w in question for w in chinese if len(w) >= 2):
            return code
    return ""


# --------------------------------------------------------------------------
# The question's target
# --------------------------------------------------------------------------


_ADJECTIVE_RE = re.compile(r"[A-Z][a-z]+(?:ic|ian|ean|ese|ish)")


def _runs(question: str) -> list[list[str]]:
    """Runs of name-like tokens ("Nimbus N1 Lite", "Aurora Team"), question words stripped from the front."""
    out = []
    for m in _RUN_RE.finditer(question):
        words = m.group(0).split()
        while words and words[0].lower() in _LEAD_WORDS:
            words = words[1:]
        if len(words) == 1 and _ADJECTIVE_RE.fullmatch(words[0]) and re.match(r"\s+[a-z]", question[m.end():]):
            continue  # "This Celtic ruler", "an Italian woman": describes, names no one
        if len(words) == 1 and m.start() == len(question) - len(question.lstrip()) and \
                re.fullmatch(r"[A-Z][a-z]+(?:ing|ed|ly)", words[0]):
            continue  # "Meaning …", "Located …": a word capitalised because it opens the question
        # single letters ("U.S"), ordinals ("17th"), units and words glued to a year ("in2014") name no entity
        words = [w for w in words if w.lower() not in _NOT_NAMES and len(w) > 1 and not _ORDINAL_RE.fullmatch(w)
                 and not re.fullmatch(r"[a-z]+\d+", w)]
        out.extend(_split_after_codes(words))
    return out


def _split_after_codes(words: list[str]) -> list[list[str]]:
    """A run that names one thing after another ("Nimbus N1 Nimbus N2", as a rewritten query lists them): a
    word after a model code starts the next name unless it is a code or a variant word ("Nimbus N1 Lite")."""
    runs: list[list[str]] = []
    for word in words:
        if runs and _is_code(runs[-1][-1]) and not _is_code(word) and word.lower() not in VARIANT_WORDS:
            runs.append([word])
        elif runs:
            runs[-1].append(word)
        else:
            runs.append([word])
    return runs


def _is_code(word: str) -> bool:
    return any(ch.isdigit() for ch in word) and any(ch.isalpha() for ch in word)


def _chinese_entities(question: str) -> list[Entity]:
    titled = set(re.findall(r"《([^》]{1,40})》", question))
    found: list[str] = [p for p in ZH_PLACES if p in question] + list(titled)
    tokens = [w for w, _flag in part_of_speech(question)]
    for i, w in enumerate(tokens[:-1]):  # "姆拉登·佩特里奇": a transliterated name, read by its last part
        if w == "·" and (i + 2 >= len(tokens) or tokens[i + 2] != "·") and len(tokens[i + 1]) >= 2 \
                and all(is_cjk(c) for c in tokens[i + 1]):
            found.append(tokens[i + 1])
    found = [p for p in found if not any(p != q and p in q for q in found)]  # "中国" inside "中国大陆"
    for word, flag in part_of_speech(question):
        if flag not in _NAME_TAGS or len(word) < 2 or not all(is_cjk(c) for c in word) or word in found \
                or any(word in f or f in word for f in found):
            continue
        found.append(word)
    out = []
    for w in found:
        core = re.sub(r"(?:地区|省|市|县|区|镇|村|州)$", "", w) if w not in ZH_PLACES else w
        kind = "place" if w in ZH_PLACES else ("name" if w in titled else "tagged")
        out.append(Entity(w, (core if len(core) >= 2 else w,), (False,), kind))
    return out


_QUESTION_WORD_RE = re.compile(r"\b(?:what|which|who|whom|whose|when|where|why|how|is|are|does|do|did|can)\b|[?？吗呢]",
                               re.IGNORECASE)


def _comparison_cue(question: str) -> bool:
    from docmind_core.text.query_signals import comparison_entities

    low = question.lower()
    return any(_has_phrase(low, c) for c in COMPARISON_CUES_EN) or any(c in question for c in COMPARISON_CUES_ZH) \
        or (bool(re.search(r"\s(?:or|vs\.?|versus)\s|还是", question)) and len(comparison_entities(question)) >= 2)


@lru_cache(maxsize=512)
def read_target(question: str) -> Target:
    """The entities, qualifiers, currency and comparison sides of ``question``."""
    entities: list[Entity] = []
    versions = [v for v in values_in(question) if v.kind == "version"]
    # "Aurora 4.3", "firmware 3.4", "固件 3.4": a two-part number after a name or a version word is a version too
    for m in _SHORT_VERSION_RE.finditer(question):
        if not any(v.start <= m.start(1) < v.end for v in versions):
            versions.append(Value(m.group(1).lower().lstrip("v"), "version", m.group(1), m.start(1), m.end(1)))
    for v in versions:
        entities.append(Entity(v.text.strip(), (v.key,), (True,), "version"))
    masked = question
    for v in sorted(versions, key=lambda v: -v.start):
        masked = masked[:v.start] + " " * (v.end - v.start) + masked[v.end:]
    for words in _runs(masked):
        lower = [w.lower() for w in words]
        strict = []
        for i, w in enumerate(lower):
            code = _is_code(w)
            variant = w in VARIANT_WORDS and i > 0
            strict.append(code or variant or (i > 0 and any(_is_code(x) for x in lower[:i])))
        kind = "code" if any(_is_code(w) for w in lower) else ("place" if " ".join(lower) in EN_PLACES else "name")
        entities.append(Entity(" ".join(words), tuple(lower), tuple(strict), kind))
    # a Chinese variant word right after a code: "N1 轻量版"
    for i, e in enumerate(entities):
        if e.kind == "code":
            m = re.search(re.escape(e.text) + r"\s*(" + "|".join(ZH_VARIANT_WORDS[:-1]) + ")", question)
            if m:
                entities[i] = Entity(e.text + " " + m.group(1), e.words + (m.group(1),), e.strict + (True,), "code")
    if re.search(f"[{_CJK}]", question):
        entities.extend(_chinese_entities(question))
    sides: tuple[Entity, ...] = ()
    codes = {e.text.lower() for e in entities if e.kind == "code"}
    # "Nimbus N1 Nimbus N2 maximum power draw" (a model's rewrite of "compare …"): two models listed side by side
    # are read as the sides of a comparison, each answered where it is stated
    if _comparison_cue(question) or (len(codes) >= 2 and not _QUESTION_WORD_RE.search(question)):
        sides = _sides(_compared(question, entities))
    # a qualifier conditions a measured value ("idle power draw", "默认地址"); in a question asking for a name
    # or an open answer it describes what is asked about ("the largest airport in New England"), and the
    # statement that answers may leave it to the one before
    measured = any(p.kind in _MEASURED_KINDS or measure_units(p.text) for p in question_parts(question))
    qualifiers = qualifiers_in(question, asking=True) if measured else ()
    return Target(question, tuple(entities), qualifiers, _currency_asked(question), sides, measured)


def _compared(question: str, entities: Sequence[Entity]) -> list[Entity]:
    """The entities a comparison sets against each other: those next to its "and" / "or" / "和" (the names
    ``query_signals.comparison_entities`` finds); all of them when it finds fewer than two."""
    from docmind_core.text.query_signals import comparison_entities

    names = [n.lower() for n in comparison_entities(question)]
    if len(names) < 2:
        return list(entities)
    return [e for e in entities if any(set(e.words) & set(re.findall(r"[\w.-]+", n)) or e.text.lower() in n
                                       for n in names)]


def part_target(question: str, text: str, whole: Target | None = None) -> Target:
    """The target of the question part ``text`` answers: the part sharing most words with it ("Which version
    first let the N2 join …, and what known issue did it have?" is two parts, and "Its known issue was …"
    answers the second, which names no entity); the whole question's when it has one part or compares."""
    whole = whole if whole is not None else read_target(question)
    pieces = question_parts(question)
    if len(pieces) < 2 or whole.sides:
        return whole
    words = frozenset(keyword_tokens(CITATION_MARKER_RE.sub(" ", text), stem=True))
    best = max(pieces, key=lambda p: len(words & p.words))
    if not words & best.words:
        return whole
    own = read_target(best.text)
    if own.empty and not _REFERS_BACK_RE.search(best.text):
        return whole  # a part that names nothing and points back at nothing is asked of the whole question's target
    return own


def _sides(entities: Sequence[Entity]) -> tuple[Entity, ...]:
    """The compared entities: two or more distinct entities of one kind, each made strict, a family word
    they share ("Nimbus") dropped from their keys."""
    by_kind: dict[str, list[Entity]] = {}
    for e in entities:
        by_kind.setdefault("code" if e.kind in ("code", "version") else e.kind, []).append(e)
    for kind in ("code", "name", "place"):
        group = by_kind.get(kind, [])
        keys = {e.key for e in group}
        if len(group) >= 2 and len(keys) >= 2:
            out = []
            for e in group:
                # "Aurora Team": "team" tells it from "Business"; "Aurora" frames both; "Nimbus N1": its code
                own = [w for w in e.words if sum(w in o.words for o in group) < len(group)] or list(e.words)
                strict = [w for w, s in zip(e.words, e.strict) if s]
                distinct = strict if strict else own[-1:]
                shown = [o for o in e.text.split() if o.lower() in distinct] if len(e.text.split()) == len(e.words) \
                    else distinct
                out.append(Entity(" ".join(shown), tuple(distinct), tuple(True for _ in distinct), e.kind))
            return tuple(dict.fromkeys(out))
    return ()


# --------------------------------------------------------------------------
# A statement against the target
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Statement:
    """One place a value is stated: a sentence or a table row, with what frames it."""

    body: str
    context: str = ""  # section heading, title line, document name
    cells: tuple[str, ...] = ()
    headers: tuple[str, ...] = ()
    evidence: str = ""  # all the evidence text: where a name that frames the question may stand
    row_keys: tuple[str, ...] = ()  # the key cells of the rows of the statement's table(s)


@dataclass(frozen=True)
class Match:
    """A statement read against a target."""

    entities_ok: bool
    qualifiers_ok: bool
    missing_entities: tuple[str, ...] = ()
    missing_qualifiers: tuple[str, ...] = ()
    stated_qualifiers: tuple[str, ...] = ()
    stated_entity: str = ""  # what the statement names instead (a code, a version), for the message
    sides: tuple[str, ...] = ()  # the comparison sides it names

    @property
    def ok(self) -> bool:
        return self.entities_ok and self.qualifiers_ok


def _occurs(word: str, text: str, entity_words: Sequence[str]) -> bool:
    """``word`` stands in ``text`` as itself, not as part of a variant the entity does not name."""
    if is_cjk(word[0]):
        return word in text
    pattern = re.compile(rf"(?<![A-Za-z0-9.]){re.escape(word)}(?![A-Za-z0-9]|\.\d)", re.IGNORECASE)
    for m in pattern.finditer(text):
        after = re.match(r"[\s\-]*([A-Za-z]+|[" + _CJK + r"]+)", text[m.end():])
        nxt = after.group(1).lower() if after else ""
        if nxt and (nxt in VARIANT_WORDS or any(nxt.startswith(z) for z in ZH_VARIANT_WORDS[:-1])) \
                and nxt not in entity_words and _is_code(word):
            continue  # "N1 Lite" is not the N1
        return True
    return False


def _entity_phrase(entity: Entity, text: str) -> bool:
    """A code entity with variant words ("N1 Lite") stands whole, its words next to each other."""
    strict = [w for w, s in zip(entity.words, entity.strict) if s]
    if len(strict) < 2 or entity.kind != "code":
        return True
    body = r"[\s\-]*".join(re.escape(w) for w in strict)
    return re.search(rf"(?<![A-Za-z0-9]){body}(?![A-Za-z0-9])", text, re.IGNORECASE) is not None


def _script_differs(word: str, text: str) -> bool:
    return is_cjk(word[0]) and not re.search(f"[{_CJK}]", text)


def _romanised(word: str, text: str) -> bool:
    from docmind_core.text.pinyin_names import chinese_names

    return any(pattern.search(text) for _w, pattern in chinese_names(word))


def _entity_holds(entity: Entity, near: str, statement: Statement, as_side: bool = False) -> bool:
    key_cell = statement.cells[0] if statement.cells else ""
    for word, strict in zip(entity.words, entity.strict):
        strict = strict or as_side
        if _script_differs(word, near + statement.evidence):
            if _romanised(word, near + statement.evidence) or not _romanised_known(word):
                continue
            return False
        in_near = _occurs(word, near, entity.words)
        if statement.cells and any(_occurs(word, k, entity.words) for k in statement.row_keys):
            # the entity is a row of the table: this row must be it
            if not _occurs(word, key_cell, entity.words):
                return False
            continue
        if in_near:
            continue
        if strict or not (_occurs(word, statement.evidence, entity.words) or _near_spelling(word, statement.evidence)
                          or (entity.kind == "tagged" and all(ch in statement.evidence for ch in word))):
            # jieba tags common words as names ("大洋"); one whose every character the evidence holds may be
            # a word cut otherwise ("太平洋") or a name misspelt, not another name
            return False
    return _entity_phrase(entity, near)


def _near_spelling(word: str, text: str) -> bool:
    """A long name misspelt by one letter in the question ("Eurpean") still names what the evidence spells right."""
    if len(word) < 6 or not word.isalpha() or not word.isascii():
        return False
    word = word.lower()
    for other in set(re.findall(rf"\b{word[0]}[a-z]{{{len(word) - 2},{len(word)}}}\b", text.lower())):
        if _one_edit(word, other):
            return True
    return False


def _one_edit(a: str, b: str) -> bool:
    if a == b:
        return True
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) > len(b):
        a, b = b, a
    i = next((k for k in range(len(a)) if a[k] != b[k]), len(a))
    if len(a) == len(b):
        return a[i + 1:] == b[i + 1:] or (i + 1 < len(a) and a[i] == b[i + 1] and a[i + 1] == b[i] and a[i + 2:] == b[i + 2:])
    return a[i:] == b[i + 1:]


def _romanised_known(word: str) -> bool:
    """A Chinese name with a pinyin spelling to look for (a place or person name); others are not judged."""
    from docmind_core.text.pinyin_names import chinese_names

    return bool(chinese_names(word))


def _value_scope(body: str, value: Value | None) -> str:
    """The stretch of a sentence a value is stated in: its clause up to a semicolon, and not past the
    values before and after it ("maximum … 45 W at full load; typical draw while idle is 18 W")."""
    if value is None:
        return body
    at = next((v for v in values_in(body) if v.same(value)), None)
    if at is None:
        return body
    start = max([m.end() for m in re.finditer(r"[;；。]", body[:at.start])] or [0])
    ends = [m.start() for m in re.finditer(r"[;；。]", body[at.end:])]
    end = at.end + ends[0] if ends else len(body)
    others = [v for v in values_in(body) if v.start != at.start]
    before = [v.end for v in others if start <= v.end <= at.start]
    after = [v.start for v in others if at.end <= v.start <= end]
    lo = max(before) if before else start
    hi = min(after) if after else end
    # a value joined to the one before by "to"/"到" is one range: keep both
    if before and re.fullmatch(r"\s*(?:to|–|—|-|~|～|到|至|and)\s*", body[max(before):at.start], re.IGNORECASE):
        lo = start
    if after and re.fullmatch(r"\s*(?:to|–|—|-|~|～|到|至|and)\s*", body[at.end:min(after)], re.IGNORECASE):
        hi = end
    return body[lo:hi]


def _row_scope(statement: Statement, value: Value | None) -> str:
    cells, headers = statement.cells, statement.headers
    if value is None:
        return " ".join((*headers, cells[0] if cells else ""))
    columns = [j for j, cell in enumerate(cells) if any(value.same(v) for v in values_in(cell))]
    parts = [cells[0]]
    for j in columns:
        parts.append(cells[j])
        if j < len(headers):
            parts.append(headers[j])
    return " ".join(parts)


def _heading(context: str) -> str:
    """The section heading of a context (its lines but the document name, which is last)."""
    lines = [ln for ln in context.split("\n") if ln.strip()]
    return " ".join(lines[:-1]) if len(lines) > 1 else ""


def _places_in(text: str) -> set[str]:
    low = text.lower()
    return {p for p in ZH_PLACES if p in text} | {p for p in EN_PLACES if _has_phrase(low, p)}


def _place_holds(entity: Entity, near: str, statement: Statement, value: Value | None) -> bool:
    """A place stands in the clause its value is stated in ("目前员工约 240 人" is the company's, not the
    Frankfurt office's), or in a sentence or row that names no other place."""
    if not _entity_holds(entity, near, statement, as_side=True):
        return False
    if statement.cells or value is None:
        return True
    scope = _value_scope(statement.body, value)
    at = next((v for v in values_in(scope) if v.same(value)), None)
    if at is not None:
        cuts = [m.end() for m in re.finditer(r"[,，、]\s*", scope[:at.start])]
        ends = [m.start() for m in re.finditer(r"[,，、]", scope[at.end:])]
        clause = scope[max(cuts or [0]):at.end + (ends[0] if ends else len(scope))]
        if _entity_holds(entity, clause, statement, as_side=True):
            return True
    others = {p for p in _places_in(statement.body) if p not in entity.text.lower() and p not in entity.text}
    return not others


def match_statement(target: Target, statement: Statement, value: Value | None = None) -> Match:
    """``statement`` (stating ``value``, when known) read against ``target``."""
    near = f"{statement.body}\n{statement.context}"
    # a comparison is held to its sides; its other names say what is compared ("closer to Canada")
    missing_entities = [e.text for e in target.entities
                        if not target.sides
                        and not (_place_holds(e, near, statement, value) if e.kind == "place" and target.measured
                                 else _entity_holds(e, near, statement))]
    sides = tuple(s.text for s in target.sides if _entity_holds(s, near, statement, as_side=True))
    if target.sides and not sides:
        missing_entities.append(" / ".join(s.text for s in target.sides))
    scope = _row_scope(statement, value) if statement.cells else _value_scope(statement.body, value)
    scope = f"{scope}\n{_heading(statement.context)}"
    stated = qualifiers_in(scope)
    missing_qualifiers = [q for q in target.qualifiers if q not in stated]
    if target.currency and value is not None and value.kind in {c for _e, _z, kinds in CURRENCIES.values()
                                                                 for c in kinds}:
        if value.kind not in CURRENCIES[target.currency][2] and not any(
                _has_phrase(scope, w) for w in (*CURRENCIES[target.currency][0], *CURRENCIES[target.currency][1])):
            missing_qualifiers.append(f"in {target.currency.upper()}")
    stated_entity = ""
    if missing_entities:
        stated_entity = _named_instead(target, statement)
    return Match(not missing_entities, not missing_qualifiers, tuple(missing_entities), tuple(missing_qualifiers),
                 stated, stated_entity, sides)


def _same_entity(entity: Entity, side: Entity) -> bool:
    return set(side.words) <= set(entity.words)


_CODE_IN_TEXT_RE = re.compile(r"(?<![A-Za-z0-9.])(?:[A-Z][A-Za-z]+\s+)?[A-Za-z]+[-_]?\d[A-Za-z0-9]*(?:\s+(?:"
                              + "|".join(w.capitalize() for w in sorted(VARIANT_WORDS)) + r"))?\b")


def _named_instead(target: Target, statement: Statement) -> str:
    """What the statement names where the question names its entity: a version, a code, a row's key."""
    if statement.cells:
        return statement.cells[0].strip()
    text = f"{statement.body}\n{statement.context}"
    if any(e.kind == "version" for e in target.entities):
        versions = [v.text.strip() for v in values_in(text) if v.kind == "version"]
        if versions:
            return versions[0]
    asked = {w for e in target.entities for w in e.words}
    for m in _CODE_IN_TEXT_RE.finditer(text):
        words = m.group(0).lower().split()
        if not set(words) <= asked:
            return m.group(0)
    return ""


# --------------------------------------------------------------------------
# What the sources state instead, in words
# --------------------------------------------------------------------------

QUALIFIER_ZH = {"idle": "待机", "maximum": "最大", "minimum": "最低", "typical": "典型", "average": "平均",
                "default": "默认", "recommended": "推荐", "allowed range": "允许范围", "annual": "年度",
                "monthly": "月度", "total": "总"}


def _attribute(question: str, qualifier: str) -> str:
    """The words the question's qualifier qualifies ("power draw" of "idle power draw of the N1", "功耗")."""
    if detect_language(question) == "zh":
        words = [*QUALIFIERS.get(qualifier, ((), ()))[1]]
        for word in words:
            m = re.search(re.escape(word) + r"([\u4e00-\u9fff]{1,5}?)(?:是|为|有|多少|多|吗|，|？|\?|$)", question)
            if m:
                return m.group(1)
        m = re.search(r"的([\u4e00-\u9fff]{1,5}?)(?:是|为|有|多少|多|吗|，|？|\?|$)", question)
        return m.group(1) if m else ""
    for word in QUALIFIERS.get(qualifier, ((), ()))[0]:
        m = re.search(rf"\b{re.escape(word)}\s+((?:[a-z]+\s+){{0,2}}?[a-z]+)(?=\s+(?:of|for|in|on|at|does|is|do)\b|[?.]|$)",
                      question, re.IGNORECASE)
        if m:
            return m.group(1)
    return ""


def _subject(target: Target) -> str:
    codes = [e.text for e in target.entities if e.kind in ("code", "version")]
    return codes[0] if codes else (target.entities[0].text if target.entities else "")


def stated_instead(question: str, target: Target, match: Match, value: str = "") -> str:
    """One sentence, in the question's language, saying what a statement that misses the target states
    instead: "The sources state the Nimbus N1's maximum power draw (28 W), not its idle power draw."."""
    zh = detect_language(question) == "zh"
    subject = _subject(target)
    if match.missing_entities:
        asked = match.missing_entities[0]
        instead = match.stated_entity
        if zh:
            if instead:
                what = f"数值（{value}）" if value else "内容"
                return f"资料中的这一{what}说的是 {instead}，不是 {asked}；资料没有给出 {asked} 的。"
            return f"资料没有给出 {asked} 的相关内容。"
        if instead:
            stated = f" ({value})" if value else ""
            return f"The sources state this{stated} for {instead}, not for {asked}; they do not state it for {asked}."
        return f"The sources do not state this for {asked}."
    if not match.missing_qualifiers:
        return ""
    asked_q = match.missing_qualifiers[0]
    stated_q = next((q for q in match.stated_qualifiers if q not in target.qualifiers), "")
    attribute = _attribute(question, asked_q)
    if zh:
        zq, sq = QUALIFIER_ZH.get(asked_q, asked_q), QUALIFIER_ZH.get(stated_q, stated_q)
        owner = f"{subject} 的" if subject else ""
        return (f"资料给出的是{owner}{sq}{attribute}（{value}），没有给出{zq}{attribute}。" if value
                else f"资料没有给出{owner}{zq}{attribute}。")
    owner = f"the {subject}'s " if subject else "the "
    stated = f"{stated_q} {attribute}".strip() or "value"
    text = (f"The sources state {owner}{stated} ({value}), not its {asked_q} {attribute}." if value
            else f"The sources do not state {owner}{asked_q} {attribute}.")
    return re.sub(r"\s+([.,)])", r"\1", re.sub(r"  +", " ", text))


def sides_missing(question: str, target: Target, missing: Sequence[str]) -> str:
    """One sentence saying which sides of a comparison the sources do not state."""
    covered = [s.text for s in target.sides if s.text not in missing]
    names = ", ".join(missing)
    if detect_language(question) == "zh":
        return (f"资料只给出了 {'、'.join(covered)} 的情况，没有给出 {'、'.join(missing)} 的。" if covered
                else f"资料没有给出 {'、'.join(missing)} 的情况。")
    return (f"The sources state this for {', '.join(covered)} only; they do not state it for {names}."
            if covered else f"The sources do not state this for {names}.")
