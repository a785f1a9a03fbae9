"""Extractive answers for the offline engine: quote the sentences and table rows that answer, cite each one.

What the question asks for is read once, by ``text/value_kinds`` (the reading the answer-type check uses):
the kind of value each part asks for (a date, a price, a count, a quantity in a named measure, an address,
a version, a name) and its *entities* (codes, numbers, capitalised names) and *content terms* (what is asked
about: "warranty", "续航").  The sources are read as units: sentences, and table rows, which are rendered as
sentences ("Nimbus N1: Price 1,490 USD", the row's key cell first, then the header: value pairs the question
asks about); a chunk's title line only frames its sentences.  A unit scores

* the weighted share of the question's terms it holds, each weighted by how rare it is among the units of
  the context (a term every passage repeats tells the units apart less than one only the answer holds); an
  attribute word also matches its synonym in the other language ("价格" / "Price"), and an entity named
  elsewhere in the same chunk still counts partly ("Its warranty period is two years");
* a bonus when it states a value of the asked kind that the question does not already state.

Which units may be quoted at all: when the question names entities or asks for a value, a unit must name an
entity of the question (itself, or in the sentence just before it) or state an asked value about the asked
thing; filler ("公司专注于企业知识管理") does neither and is never quoted.  When some unit holds a content term,
only such units are kept; when some unit states an asked value, only those; when a unit in the question's
language answers, only units in that language.  Otherwise the answer quotes the other language's sentences
and says so ("（来源为英文）", "(the source is in Chinese)").  Sentences that add nothing beyond the question's
own words, table header rows and weak candidates (below 60% of the best) are left out.  A question that
asks for a value, where no unit holds what it asks about, is not answered by units that merely name its
entities ("Nimbus 目前有 N1 和 N2 两个型号" for a price).

Around the chosen sentences: a comparison ("Who was born first, X or Y?") gets the best sentence about each
side; an English sentence whose subject is its chunk's subject, not named in full ("She also starred …"),
is quoted with the chunk's title ("Laura Osnes: She also starred …"); a quoted sentence that names another
source's title brings that source's best sentence (the next hop of a chain question).  With nothing
relevant, the answer says plainly that the sources do not answer.

Across scripts words match only names and codes.  Given an encoder (the engine passes its embedder), the reader
also reads the other language by meaning (``_read_across``): when nothing in the other language answers by
words and nothing in the question's own language holds much of what it asks, the other language's units
closest to the question are quoted, if close enough and clearly closer than the best answer in the question's
language ("What does a flashing red light … mean?" → "红灯闪烁表示硬件故障…", with "(the source is in Chinese)").

The neighbouring fact is never quoted as the answer (``text/targets.py``): a unit that states the asked value of
another entity ("N2", "3.2.1", the "Nimbus N1" row for "the N1 Lite") or under another qualifier ("Maximum power
draw" for "idle") is left out, and when only such units remain the answer says what they state instead ("The
sources state the Nimbus N1's maximum power draw (28 W), not its idle power draw.").  A comparison answers from
the table rows of each side ("Compare the Team and Business plans": both rows) and says which side the sources
do not state.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass
from typing import Sequence

from docmind_core.backends.embedders import query_vectors
from docmind_core.backends.protocols import Embedder
from docmind_core.values import RetrievedChunk
from docmind_core.text.tokens import CITATION_MARKER_RE, detect_language, is_cjk, keyword_tokens, salient_terms, sentences
from docmind_core.text.query_signals import comparison_entities, split_foci
from docmind_core.text.table_rows import parse_row_statement
from docmind_core.text.targets import (
    PRONOUN_START_RE, Statement, Target, match_statement, part_target, read_target, sides_missing, stated_instead,
)
from docmind_core.text.value_kinds import QuestionPart, alternatives, question_parts, states_value, values_in

log = logging.getLogger(__name__)

MAX_QUOTED_SENTENCES = 3
MAX_PER_SOURCE = 2
MAX_SENTENCE_CHARS = 240
MIN_RELEVANCE = 0.3  # share of the question's salient weight a sentence must contain
MIN_RELEVANCE_WITH_ENTITY = 0.2  # ... or this much when it names a code, number or name of the question
RELATIVE_CUT = 0.6  # candidates below this fraction of the best score are dropped
ENTITY_WEIGHT = 1.6  # salient_terms weight of codes, numbers and capitalised names
ENTITY_IN_CONTEXT = 0.8  # an entity named elsewhere in the chunk still frames the sentence
ENTITY_ONLY_MIN_SHARE = 0.5  # without any content term, a sentence must carry this much of the entities
SYNONYM_CREDIT = 0.8  # an attribute word found as its synonym ("价格" for "Price")
HEADING_PENALTY = 0.1
SAME_LANGUAGE_BONUS = 0.1  # quote in the question's language when the evidence offers both
VALUE_BONUS = 0.25  # the unit states a value of the kind the question asks for
NAME_BONUS = 0.05  # ... a name, which any new word satisfies: a weak sign
ROW_BONUS = 0.2  # a table row of the named entity whose header names the asked attribute
RARITY_FLOOR = 0.2  # the least weight a term keeps however many units hold it
# Reading across languages with an encoder (cosine similarity of question and unit), chosen on the tuning
# questions of bench/crosslang_reader.py: the highest minimum within 0.05 of the best containment (lower, the
# reader hardly ever declines when the answering passage is missing), and the narrower margin (a wider one
# adds a question a direction by quoting the answer's neighbours too).  The lead did not move the tuning set;
# it encodes that same-language pairs score higher for the same meaning.
CROSS_MIN_SIMILARITY = 0.35  # the other language's best unit must be at least this close to the question
CROSS_LEAD = 0.03  # ... and this much closer than the best lexical answer in the question's language
CROSS_MARGIN = 0.05  # units this close to the best one are quoted too
CROSS_KEEP_WORDS_SHARE = 0.4  # a same-language answer holding this share of the content terms is not overruled
CROSS_MAX_UNITS = 40  # units embedded per answer, best-ranked sources first (80: the same answers, slower)
CROSS_MAX_RIVALS = 5

_HOW_MUCH_EN = re.compile(r"\bhow (?:long|much|many|often|far|big|large|old|tall|heavy)\b", re.IGNORECASE)
_HOW_MUCH_ZH = re.compile(r"(?:是|为)?多(?:少|久|长|高|大|重|远|贵|宽|快)")
_ZH_QUESTION_WORDS = re.compile(r"(?:是|为|在)?(?:什么|哪些|哪个|哪里|哪儿|怎么样|怎样|怎么|如何)")
# Words that frame a question ("what does X mean", "how to handle X") rather than name what is asked;
# answers rarely repeat them, so they must not decide which sentence is quoted.
_FRAME_WORDS = frozenset("""意思 含义 意味 意味着 表示 代表 处理 解决 办 应该 需要 可以 分别 各自 对比 比较 mean means
    meaning stand handle deal do does happen compare comparison versus vs""".split())
_END_PUNCT = "。！？!?.…"
# "成立于 2019 年" is a date, not a duration: "how long" is not answered by it
_CALENDAR_YEAR = re.compile(r"(?<![\d.])(?:1[5-9]|20)\d{2}\s*(?:年|years?\b)", re.IGNORECASE)
_TABLE_RULE = re.compile(r"^[\s|:\-–—+=]*$")


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

    def synonym_credit(self, term: str) -> float:
        """The credit of the term, or of a synonym of it in either language ("价格" / "Price")."""
        direct = self.credit(term)
        if direct > 0:
            return direct
        stem = keyword_tokens(term, stem=True)
        forms = alternatives(stem[0] if stem else term) | alternatives(term)
        for alt in forms - {term}:
            if (is_cjk(alt[0]) and alt in self.lower) or alt in self.stemmed or alt in self.plain:
                return SYNONYM_CREDIT
        return 0.0


def _clip(sentence: str) -> str:
    """The sentence on one line, cut to ``MAX_SENTENCE_CHARS`` at a word's end: a cut word ("the Oppos…")
    would read as a name the source never states."""
    text = re.sub(r"\s+", " ", CITATION_MARKER_RE.sub("", sentence)).strip()
    if len(text) > MAX_SENTENCE_CHARS:
        head = text[:MAX_SENTENCE_CHARS]
        if text[MAX_SENTENCE_CHARS].isalnum() and head[-1:].isascii() and head[-1:].isalnum() and " " in head:
            head = head[:head.rindex(" ")]
        text = head.rstrip(" ,;:-–") + "…"
    return text


def _is_bare_title(text: str) -> bool:
    """A short line without sentence punctuation or figures ("Power and environment"): a title
    extracted from a PDF or a table, which names a topic but states nothing."""
    if text.startswith("#") or has_number(text) or re.search(r"[。！？!?.；;:：，,]", text):
        return False
    return len(text.split()) <= 5 if detect_language(text) == "en" else len(text) <= 12


# --------------------------------------------------------------------------
# The units of the sources: sentences and table rows
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Unit:
    """A sentence or a table row of one source, as it is matched (a row: every header: value pair)."""

    text: str
    source: int  # 1-based source number
    position: int
    prev: str = ""  # the unit before it in its chunk: "Its warranty period …" is about what that one names
    cells: tuple[str, ...] = ()  # a table row: its cells, the key cell first
    headers: tuple[str, ...] = ()  # ... and its table's header cells (empty: the table has none)

    @property
    def is_row(self) -> bool:
        return bool(self.cells)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def render_row(cells: Sequence[str], headers: Sequence[str], columns: Sequence[int] | None = None) -> str:
    """A table row as a sentence: "Nimbus N1: Price 1,490 USD, Memory 16 GB" (its key cell, then the
    header: value pairs of ``columns``, all columns when None)."""
    key = cells[0]
    chosen = [j for j in (columns if columns is not None else range(1, len(cells))) if 0 < j < len(cells)]
    if headers and len(headers) == len(cells):
        pairs = [f"{headers[j]} {cells[j]}" if headers[j] else cells[j] for j in chosen if cells[j]]
    else:
        pairs = [cells[j] for j in chosen if cells[j]]
    return f"{key}: {', '.join(pairs)}" if pairs else key


def _merged(pieces: list[str]) -> list[str]:
    """Sentences with their fragments put back: "Leo Varadkar ( ;" + "born 18 January 1979) is …" was cut
    at a semicolon inside a parenthesis, and quoting the second half loses the name it is about."""
    out: list[str] = []
    for piece in pieces:
        if out and not out[-1].startswith("#"):
            prev = out[-1]
            open_paren = prev.count("(") + prev.count("（") > prev.count(")") + prev.count("）")
            lower_start = piece[:1].isascii() and piece[:1].islower() and prev[-1:] not in _END_PUNCT
            if open_paren or lower_start:
                out[-1] = f"{prev} {piece}"
                continue
        out.append(piece)
    return out


def _title_line(text: str) -> str:
    """The chunk's first line when it is a title ("Leo Varadkar", "海岚数据（Halcyon Data）公司简介"): no
    sentence punctuation, short, and more text follows.  It frames the chunk; it answers nothing."""
    first, sep, rest = text.partition("\n")
    first = first.strip()
    if not sep or not rest.strip() or not first or first.startswith("#") or first.count("|") >= 2 \
            or parse_row_statement(first) is not None:
        return ""
    if first[-1] in _END_PUNCT + ":：;；" or len(first) > 80:
        return ""
    return first


def source_units(text: str, source: int) -> list[_Unit]:
    """The sentences and table rows of one chunk, in order (its title line left out)."""
    title = _title_line(text)
    body = text.partition("\n")[2] if title else text
    units: list[_Unit] = []
    prose: list[str] = []
    headers: tuple[str, ...] = ()

    def add(unit_text: str, cells: tuple[str, ...] = (), head: tuple[str, ...] = ()) -> None:
        units.append(_Unit(unit_text, source, len(units), units[-1].text if units else title, cells, head))

    def flush() -> None:
        for sentence in _merged([p for p in sentences("\n".join(prose)) if p.strip()]):
            add(sentence)
        prose.clear()

    for line in body.split("\n"):
        statement = parse_row_statement(line)
        if statement is not None:  # "Plan: Team · Price per seat: 12 EUR": a row that names its columns
            flush()
            columns, cells = statement
            add(render_row(cells, columns), tuple(cells), tuple(columns))
            continue
        if line.count("|") >= 2:
            flush()
            if _TABLE_RULE.match(line):
                continue
            cells = tuple(_cells(line))
            if not headers and not any(ch.isdigit() for ch in line):
                headers = cells  # a header row names the columns; it states nothing
                continue
            if cells and cells[0]:
                add(render_row(cells, headers), cells, headers if len(headers) == len(cells) else ())
        elif line.strip():
            headers = ()  # prose ends the table
            prose.append(line)
    flush()
    return units


_PRONOUN_START = re.compile(r"^(?:he|she|it|they|his|her|its|their|this|these|the\s+(?:film|song|album|band|company|"
                            r"series|book|novel|show|game|team|club|city|town|station|ship))\b", re.IGNORECASE)


def attributed(sentence: str, title: str) -> str:
    """An English sentence whose subject is its chunk's subject, not named in full ("She also starred
    in …", "Gadot is known for …", "(October 23, 1924 – …) was …"), prefixed with the chunk's title line
    ("Laura Osnes: She also starred in …"), so the quote says whom it is about."""
    name = re.sub(r"\s*[(（][^)）]*[)）]\s*$", "", title).strip()
    if not name or is_cjk(name[0]) or detect_language(sentence) != "en" or name.lower() in sentence.lower():
        return sentence
    if len(name.split()) > 5 or re.search(r"\s[-–—:|]\s|[:：|]", name):
        return sentence  # a document's heading ("Nimbus N2 Edge Appliance - Datasheet"), not a subject's name
    words = [w for w in re.findall(r"[A-Z][\w'’-]{3,}", name) if w.lower() not in ("the", "this")]
    # "Gadot is known for …", "In 1998, Mexia …": the subject, named in part near the start
    by_part = any(re.search(rf"\b{re.escape(w)}\b", sentence[:40]) for w in words)
    if by_part or _PRONOUN_START.match(sentence) or sentence[:1] in "(（" or sentence[:1].islower():
        return f"{name}: {sentence}"
    return sentence


# --------------------------------------------------------------------------
# What the question asks for, and how well each unit answers it
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Question:
    text: str
    terms: dict[str, float]  # salient terms without question words
    asked: tuple[QuestionPart, ...]  # the parts that ask for a kind of value
    language: str

    @property
    def entities(self) -> list[str]:
        return [t for t, w in self.terms.items() if w >= ENTITY_WEIGHT]

    @property
    def content(self) -> list[str]:
        return [t for t, w in self.terms.items() if w < ENTITY_WEIGHT]

    @property
    def asks_value(self) -> bool:
        """A value other than a name: a name is "any new word", too weak to decide what is quoted."""
        return any(p.kind != "name" for p in self.asked)

    def states_asked(self, text: str) -> bool:
        return any(p.kind != "name" and states_value(p.kind, _CALENDAR_YEAR.sub(" ", text) if "year" in p.units
                                                     else text, self.text, p.units) for p in self.asked)

    def states_name(self, text: str) -> bool:
        return any(p.kind == "name" and states_value(p.kind, text, self.text) for p in self.asked)


def read_question(question: str) -> _Question:
    asked = tuple(p for p in question_parts(question) if p.kind is not None)
    return _Question(question, question_terms(question), asked, detect_language(question))


@dataclass
class _Candidate:
    unit: _Unit
    text: str  # as quoted (a row: the columns the question asks about)
    score: float
    content_hit: bool
    entity_hit: bool
    direct_share: float
    valued: bool  # states a value of the asked kind
    language: str
    content_share: float = 0.0  # share of the question's content-term weight it holds itself

    @property
    def sentence(self) -> "ScoredSentence":
        return ScoredSentence(self.text, self.unit.source, self.score)


def _rarity(terms: dict[str, float], indexes: Sequence[_TextIndex]) -> dict[str, float]:
    """Per term, a weight by how few units of the context hold it (1.0 for a term only one unit holds)."""
    n = max(len(indexes), 1)
    out = {}
    for term in terms:
        df = sum(1 for index in indexes if index.synonym_credit(term) > 0)
        out[term] = max(RARITY_FLOOR, math.log((n + 1) / (df + 0.5)) / math.log((n + 1) / 1.5)) if n > 1 else 1.0
    return out


def _row_columns(q: _Question, unit: _Unit) -> tuple[list[int] | None, bool]:
    """The columns of a row the question asks about (None: all), and whether a header named them (rather
    than an asked value found in a cell)."""
    if not unit.headers:
        return None, False
    wanted = set()
    for term in q.content:
        stem = keyword_tokens(term, stem=True)
        wanted |= alternatives(stem[0] if stem else term) | alternatives(term) | {term}
    by_header = [j for j in range(1, len(unit.headers))
                 if set(keyword_tokens(unit.headers[j], stem=True)) & wanted
                 or any(is_cjk(w[0]) and w in unit.headers[j] for w in wanted)]
    if by_header:
        return by_header, True
    by_value = [j for j in range(1, len(unit.cells)) if q.states_asked(unit.cells[j])]
    return by_value or None, False


_CODE = re.compile(r"\b[A-Za-z]+[-_]?\d[\w.-]*\b")


def _other_codes(q: _Question, key: str) -> bool:
    """The key cell names a model or code ("N1") and the question names codes, but not that one."""
    asked = {t for t in q.entities if any(ch.isdigit() for ch in t) and not t.isdigit()}
    named = {m.group(0).lower() for m in _CODE.finditer(key)}
    return bool(asked and named and not (named & asked))


def context_units(sources: Sequence[RetrievedChunk]) -> list[_Unit]:
    """The units of every source that could be quoted, in source order (fragments and bare titles left out)."""
    units = [u for number, chunk in enumerate(sources, start=1) for u in source_units(chunk.text, number)]
    return [u for u in units if len(_clip(u.text)) >= 6 and (u.is_row or not _is_bare_title(_clip(u.text)))]


def _shown(q: _Question, unit: _Unit, title: str) -> str:
    """The unit as it would be quoted: a row with the columns the question asks about, a sentence with its
    subject when it leaves it out."""
    if unit.is_row:
        return _clip(render_row(unit.cells, unit.headers, _row_columns(q, unit)[0]))
    return attributed(_clip(unit.text), title)


def _candidates(question: str, sources: Sequence[RetrievedChunk]) -> list[_Candidate]:
    q = read_question(question)
    question_tokens = set(keyword_tokens(question, stem=True))
    chunk_indexes: dict[int, _TextIndex] = {}
    title_indexes: dict[int, _TextIndex] = {}
    titles: dict[int, str] = {}
    for number, chunk in enumerate(sources, start=1):
        chunk_indexes[number] = _TextIndex(chunk.text)
        titles[number] = _title_line(chunk.text)
        title_indexes[number] = _TextIndex(f"{_title_line(chunk.text)} {chunk.document}")
    units = context_units(sources)
    # a row the question names ("Compare the Team and Business plans") is matched with its column names too:
    # it asks about the rows under "Plan", though no cell says "plan"
    indexes = [_TextIndex(_clip(u.text) + (" " + " ".join(u.headers) if u.is_row and _row_named(q, u) else ""))
               for u in units]
    rarity = _rarity(q.terms, indexes)
    weights = {t: w * rarity[t] for t, w in q.terms.items()}
    total, plain_total = sum(weights.values()), sum(q.terms.values())
    content_total = sum(w for t, w in q.terms.items() if w < ENTITY_WEIGHT)
    entities = q.entities
    found: list[_Candidate] = []
    n = len(sources)
    for unit, index in zip(units, indexes):
        text = _clip(unit.text)
        if index.stemmed and index.stemmed <= question_tokens:
            continue  # says nothing the question did not (e.g. a heading repeating it)
        hit = direct = plain_hit = content_direct = 0.0
        content_hit = entity_hit = meaningful = False
        for term, weight in q.terms.items():
            is_entity = weight >= ENTITY_WEIGHT
            credit = index.credit(term) if is_entity else index.synonym_credit(term)
            if credit > 0:
                hit += credit * weights[term]
                plain_hit += credit * weight
                direct += credit * weight
                content_direct += 0.0 if is_entity else credit * weight
                content_hit = content_hit or not is_entity
                entity_hit = entity_hit or is_entity
                meaningful = meaningful or weight >= 0.6  # not just a single common character (0.5)
            elif (is_entity and chunk_indexes[unit.source].credit(term) > 0) or \
                    title_indexes[unit.source].synonym_credit(term) > 0:
                # what the chunk (or its title: "海岚数据…公司简介") names frames every sentence of it
                hit += ENTITY_IN_CONTEXT * weights[term]
                plain_hit += ENTITY_IN_CONTEXT * weight
        if not meaningful or total <= 0:
            continue
        share, plain_share, direct_share = hit / total, plain_hit / plain_total, direct / plain_total
        if plain_share < MIN_RELEVANCE and not (entity_hit and plain_share >= MIN_RELEVANCE_WITH_ENTITY):
            continue
        score_extra = 0.0
        if unit.is_row and _other_codes(q, unit.cells[0]):
            continue  # the row of a sibling ("Nimbus N1" when the question asks about the N2)
        shown = _shown(q, unit, titles[unit.source])
        if unit.is_row and entity_hit and _row_columns(q, unit)[1]:
            score_extra = ROW_BONUS  # the cell under the asked attribute (a header named it), in the entity's row
        valued = q.states_asked(shown)
        # filler: a unit that names no entity of the question (nor follows one that does) is about something
        # else, however many common words it shares, unless it states an asked value of the asked thing
        if entities and not entity_hit:
            antecedent = _TextIndex(unit.prev)
            about_it = valued and content_hit
            if not any(antecedent.credit(e) > 0 for e in entities) and not about_it:
                continue
        language = detect_language(shown)
        score = share + score_extra
        score += 0.05 * (1 - (unit.source - 1) / max(n, 1))  # tie-breakers: earlier (better ranked) sources
        if text.startswith("#"):
            score -= HEADING_PENALTY
        if valued:
            score += VALUE_BONUS
        elif q.states_name(unit.text):
            score += NAME_BONUS
        if language == q.language:
            score += SAME_LANGUAGE_BONUS
        found.append(_Candidate(unit, shown, score, content_hit, entity_hit, direct_share, valued, language,
                                content_direct / content_total if content_total else 0.0))
    return _without_sibling_rows(q, found)


def _row_named(q: _Question, row: _Unit) -> bool:
    """The question names the row's entity, its first cell ("the Business plan", "in Q3")."""
    key = _TextIndex(row.cells[0])
    return any(key.credit(e) > 0 for e in q.entities)


def _without_sibling_rows(q: _Question, found: list[_Candidate]) -> list[_Candidate]:
    """When the question names a row of a table ("the Business plan"), the other rows of that table
    ("Team", "Enterprise") are siblings, not answers."""
    tables = {c.unit.source for c in found if c.unit.is_row and _row_named(q, c.unit)}
    return [c for c in found if not (c.unit.is_row and c.unit.source in tables and not _row_named(q, c.unit))]


def _answers(q: _Question, c: _Candidate) -> bool:
    about = c.content_hit or not q.content  # "两个型号" states a number, not the price asked about
    if q.asks_value:
        return c.valued and about
    return c.content_hit or (c.entity_hit and c.direct_share >= ENTITY_ONLY_MIN_SHARE)


def _read_across(q: _Question, sources: Sequence[RetrievedChunk], lexical: Sequence[_Candidate],
                 encoder: Embedder) -> list[_Candidate] | None:
    """The units in the other language that answer the question by meaning, best first; None when words
    already reach across (a code, a name, "价格" / "Price"), when nothing in the other language is close
    enough, or when a unit in the question's language that answers lexically is as close.

    Lexical matching sees across scripts only names and codes: "What does a flashing red light on a Nimbus
    appliance mean?" shares "Nimbus appliance" with English filler ("Aurora can use a Nimbus edge appliance
    …") and nothing with "红灯闪烁表示硬件故障".  A multilingual encoder scores both; the other language wins only
    when its best unit is clearly closer to the question than the best lexical answer in the question's
    own language, whose scores run higher for the same meaning."""
    if any(c.language != q.language and _answers(q, c) for c in lexical):
        return None
    if any(c.language == q.language and _answers(q, c) and c.content_share >= CROSS_KEEP_WORDS_SHARE for c in lexical):
        return None  # a unit in the question's language holds most of what it asks about: words decide
    titles = {number: _title_line(chunk.text) for number, chunk in enumerate(sources, start=1)}
    other = [u for u in context_units(sources) if detect_language(_clip(u.text)) != q.language]
    other = other[:CROSS_MAX_UNITS]  # best-ranked sources first
    if not other:
        return None
    rivals = sorted((c for c in lexical if c.language == q.language and _answers(q, c)),
                    key=lambda c: c.score, reverse=True)[:CROSS_MAX_RIVALS]
    shown = [_shown(q, u, titles[u.source]) for u in other]
    try:
        question_vector = query_vectors(encoder, [q.text])[0]  # e5: the query side
        vectors = encoder.embed(shown + [c.text for c in rivals])
    except Exception as exc:  # noqa: BLE001 - an encoder that fails leaves the answer to words, never breaks it
        log.warning("the offline reader could not embed for a cross-language reading (%s: %s); words only",
                    type(exc).__name__, exc)
        return None
    similarity = vectors @ question_vector
    across, rival = similarity[:len(other)], similarity[len(other):]
    best = float(across.max())
    if best < CROSS_MIN_SIMILARITY or (len(rival) and best < float(rival.max()) + CROSS_LEAD):
        return None
    found = [_Candidate(u, text, float(sim), True, False, 0.0, q.states_asked(text), detect_language(text))
             for u, text, sim in zip(other, shown, across) if sim >= best - CROSS_MARGIN]
    if q.asks_value:
        # as with words: a unit near in meaning that states no value of the asked kind does not answer "how much"
        found = [c for c in found if c.valued]
        if not found:
            return None
    return sorted(found, key=lambda c: c.score, reverse=True)


def _heading_of(unit: _Unit, units_by_source: dict[int, list[_Unit]]) -> str:
    """The Markdown heading the unit stands under in its chunk ("### Firmware 3.2.1 — 2026-02-10")."""
    heading = ""
    for other in units_by_source.get(unit.source, []):
        if other.position >= unit.position:
            break
        if other.text.startswith("#"):
            heading = other.text.lstrip("#").strip()
    return heading


class _TargetReader:
    """Reads units of the sources against the question's target (``text/targets.py``)."""

    def __init__(self, question: str, sources: Sequence[RetrievedChunk]):
        self.question = question
        self.target: Target = read_target(question)
        self.parts = [p for p in question_parts(question) if p.kind is not None]
        self.sources = sources
        self.evidence = "\n".join(f"{c.document}\n{c.text}" for c in sources)
        self.units = {n: source_units(c.text, n) for n, c in enumerate(sources, start=1)}
        self.keys = {n: tuple(u.cells[0] for u in units if u.cells) for n, units in self.units.items()}

    def statement(self, unit: _Unit) -> Statement:
        chunk = self.sources[unit.source - 1]
        antecedent = unit.prev if PRONOUN_START_RE.match(unit.text) else ""  # "Its warranty …" is the X2's
        context = " \n".join(x for x in (antecedent, _title_line(chunk.text), _heading_of(unit, self.units),
                                          chunk.document) if x)
        body = " | ".join(unit.cells) if unit.is_row else unit.text
        if unit.text.startswith("#"):  # a heading is quoted with its section's sentences (_with_section_text)
            section = []
            for other in self.units.get(unit.source, [])[unit.position + 1:]:
                if other.text.startswith("#"):
                    break
                section.append(other.text)
            body = " ".join([body, *section[:3]])
        return Statement(body, context, unit.cells, unit.headers if len(unit.headers) == len(unit.cells) else (),
                         self.evidence, self.keys.get(unit.source, ()))

    def read(self, unit: _Unit, shown: str, target: Target | None = None):
        """The best match of the unit's answering values (the match, and the value's text) against ``target``
        (the question's, by default)."""
        target = target if target is not None else self.target
        statement = self.statement(unit)
        asked = {v.key for v in values_in(self.question)}
        values = [v for v in values_in(CITATION_MARKER_RE.sub(" ", shown)) if v.key not in asked]
        if self.parts:
            values = [v for v in values if any(states_value(p.kind, v.text, self.question, p.units)
                                               for p in self.parts)] or values
        matches = [(match_statement(target, statement, v), v.text.strip()) for v in values] or \
            [(match_statement(target, statement), "")]
        return min(matches, key=lambda mv: (not mv[0].ok, len(mv[0].missing_entities) + len(mv[0].missing_qualifiers)))

    def on_target(self, candidates: Sequence[_Candidate]) -> tuple[list[_Candidate], list[tuple[_Candidate, object, str]]]:
        """The candidates on target, and those off it with their match and value (best first)."""
        if self.target.empty:
            return list(candidates), []
        kept, off = [], []
        for c in candidates:
            match, value = self.read(c.unit, c.text, part_target(self.question, c.text, self.target))
            (kept if match.ok else off).append(c if match.ok else (c, match, value))
        return kept, off


def _ranked_candidates(question: str, sources: Sequence[RetrievedChunk],
                       encoder: Embedder | None = None, off_target: list | None = None) -> list[_Candidate]:
    """The candidates that answer, best first; those that state the asked value of another entity or under
    another qualifier are left out (and appended to ``off_target`` when given)."""
    ranked = _ranked_by_words(question, sources, encoder)
    kept, off = _TargetReader(question, sources).on_target(ranked)
    if off_target is not None:
        off_target.extend(off)
    return kept


def _ranked_by_words(question: str, sources: Sequence[RetrievedChunk],
                     encoder: Embedder | None = None) -> list[_Candidate]:
    q = read_question(question)
    candidates = _candidates(question, sources)
    if encoder is not None:
        across = _read_across(q, sources, candidates, encoder)
        if across is not None:
            return across

    # the question's language first, when a unit in it answers
    same = [c for c in candidates if c.language == q.language]
    if any(_answers(q, c) for c in same):
        candidates = same
    if q.content:
        with_content = [c for c in candidates if c.content_hit]
        if with_content:
            candidates = with_content
        elif q.asks_value:
            # a value of what? "Nimbus 目前有 N1 和 N2 两个型号" names the models and states a number, and
            # says nothing of their price
            candidates = []
        else:
            # the asked-for word may be only implied, as in "AUR-4012 是什么意思": a unit naming most of
            # the question's entities still answers
            candidates = [c for c in candidates if c.entity_hit and c.direct_share >= ENTITY_ONLY_MIN_SHARE]
    if q.asks_value and any(c.valued for c in candidates):
        candidates = [c for c in candidates if c.valued]
    candidates.sort(key=lambda c: c.score, reverse=True)
    if candidates:
        best = candidates[0].score
        candidates = [c for c in candidates if c.score >= RELATIVE_CUT * best]
    return candidates


def rank_sentences(question: str, sources: Sequence[RetrievedChunk],
                   encoder: Embedder | None = None) -> list[ScoredSentence]:
    """Sentences and rendered rows of the sources that answer the question, best first (possibly none).
    ``encoder``: a multilingual embedder, to read units in the other language by meaning."""
    return [c.sentence for c in _ranked_candidates(question, sources, encoder)]


def _names(text: str, focus: str) -> bool:
    index = _TextIndex(text)
    words = [w for w in keyword_tokens(focus, stem=False) if w not in _FRAME_WORDS]
    return bool(words) and all(index.credit(w) > 0 for w in words)


def cover_each_focus(question: str, chosen: list[ScoredSentence],
                     sources: Sequence[RetrievedChunk]) -> list[ScoredSentence]:
    """For a question about several things ("N1 and N2", "Who was born first, X or Y?"), the best sentence
    about each one the chosen sentences leave out, read with the question asked of that one alone ("X born
    first"), so a comparison has both sides.  Each side comes first, then the other chosen sentences."""
    foci = comparison_entities(question)
    if len(foci) < 2:
        return chosen
    titles = {n: _title_line(chunk.text) or chunk.document for n, chunk in enumerate(sources, start=1)}
    sides: list[ScoredSentence] = []
    for focus, sub_question in zip(foci, split_foci(question)):
        if any(_names(s.text, focus) for s in sides):
            continue
        own = [s for s in chosen if _names(s.text, focus)]
        if own:
            sides.append(own[0])
            continue
        # the best answer about it; failing that, any unit about it, one with an asked value first
        pool = _ranked_candidates(sub_question, sources) + _TargetReader(sub_question, sources).on_target(sorted(
            _candidates(sub_question, sources), key=lambda c: (c.valued, c.score), reverse=True))[0]
        for c in pool:
            if _names(c.text, focus) or _names(titles[c.unit.source], focus):
                if c.text not in {s.text for s in sides}:
                    sides.append(c.sentence)
                    break
    rest = [s for s in chosen if s not in sides]
    return sides + rest[:max(0, MAX_QUOTED_SENTENCES - len(sides))]


_CLAUSE_SPLIT_RE = re.compile(r"\s*,?\s+and\s+(?=(?:who|what|when|where|which|how|whose|why)\b)"
                              r"|[，,；;]\s*(?:以及|并且|还有|另外)?(?=[^，,；;]*(?:谁|什么|多少|哪|何时|几))",
                              re.IGNORECASE)
_PRONOUN_RE = re.compile(r"\b(?:it|its|they|them|their|this|that|these|those|he|she|him|her)\b|[它其该此]",
                         re.IGNORECASE)


def question_clauses(question: str) -> list[str]:
    """The questions a compound question asks ("What is the budget and who leads it?": two); [] for one."""
    parts = [p.strip(" ,，;；") for p in _CLAUSE_SPLIT_RE.split(question.strip())]
    parts = [p for p in parts if p]
    return parts if len(parts) >= 2 else []


def answer_each_clause(question: str, chosen: list[ScoredSentence], sources: Sequence[RetrievedChunk],
                       encoder: Embedder | None = None) -> list[ScoredSentence]:
    """``chosen`` with the best answer to each clause of a compound question that it leaves unanswered: the
    whole question asks for a value, so only units stating one were kept, and "who leads it" went unread.
    A clause that says "it", or names nothing ("由谁负责"), is about what the other clauses' answers are about:
    it is answered from their documents first (never from a glossary's "A lead programmer is …")."""
    clauses = question_clauses(question)
    if not clauses:
        return chosen
    out = list(chosen)
    for clause in clauses:
        ranked = rank_sentences(clause, sources, encoder)
        if not ranked or any(r.text == c.text for r in ranked for c in out):
            continue
        if out and (_PRONOUN_RE.search(clause) or not read_question(clause).entities):  # "由谁负责": it too
            documents = {sources[c.source - 1].document for c in out}
            ranked = [r for r in ranked if sources[r.source - 1].document in documents] or ranked
        out.append(ranked[0])
    return out[:max(MAX_QUOTED_SENTENCES, len(clauses))]


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


def cite(sentence: str, number: int) -> str:
    """The sentence with its marker placed before the final punctuation: "…12 小时[1]。"."""
    m = re.search(r"[。！？!?.；;…:：]+$", sentence)
    body, end = (sentence[:m.start()], m.group(0)) if m else (sentence, "")
    if not end or end[-1] in ":：":
        end = "。" if detect_language(sentence) == "zh" else "."
    space = "" if body and is_cjk(body[-1]) else " "
    return f"{body.rstrip()}{space}[{number}]{end}"


def bridge_lines(question: str, chosen: Sequence[ScoredSentence],
                 sources: Sequence[RetrievedChunk]) -> list[ScoredSentence]:
    """The next hop of a chain question: when the best quoted sentence names another source's subject
    ("… a psychology professor at Columbia University" and a source titled "Columbia University"), that
    source's best sentence for the question, read with the name as one of its entities."""
    if not chosen:
        return []
    lead = chosen[0]
    lead_lower, question_lower = lead.text.lower(), question.lower()
    quoted = {s.text for s in chosen}
    for number, chunk in enumerate(sources, start=1):
        if number == lead.source:
            continue
        name = re.sub(r"\s*[(（][^)）]*[)）]\s*$", "", _title_line(chunk.text) or chunk.document).strip()
        if len(name) < 4 or name.lower() in question_lower or name.lower() not in lead_lower:
            continue
        for c in _ranked_by_words(f"{question} {name}", [chunk]):  # the next hop names the bridge, not the asked
            if c.text not in quoted and not any(c.text in q or q in c.text for q in quoted):
                return [ScoredSentence(c.text, number, c.score)]
    return []


def _language_note(lines: Sequence[ScoredSentence], language: str) -> str:
    """"（来源为英文）" when the quoted sentences are in the other language, "（部分来源为英文）" when some are."""
    other = [s for s in lines if detect_language(s.text) != language]
    if not other:
        return ""
    every = len(other) == len(lines)
    if language == "zh":
        return "（来源为英文）" if every else "（部分来源为英文）"
    return " (the source is in Chinese)" if every else " (some sources are in Chinese)"


def extractive_answer(question: str, sources: Sequence[RetrievedChunk], language: str,
                      low_confidence: bool = False, encoder: Embedder | None = None) -> str:
    """The cited extractive answer in the question's language (``language`` is "zh" or "en"); ``encoder``:
    a multilingual embedder, to find the answer in sources in the other language."""
    zh = language == "zh"
    off_target: list = []
    ranked = [c.sentence for c in _ranked_candidates(question, sources, encoder, off_target)]
    chosen = answer_each_clause(question, select_sentences(ranked), sources, encoder)  # "… and who leads it?"
    if not chosen and len(comparison_entities(question)) >= 2 and not read_question(question).asks_value:
        chosen = cover_each_focus(question, [], sources)  # nothing about both at once: the best about each
    rows, missing_sides = side_rows(question, sources)
    if rows:
        chosen = rows + [s for s in chosen if s.text not in {r.text for r in rows}][:max(0, MAX_QUOTED_SENTENCES
                                                                                         - len(rows))]
    if chosen:
        lines = _with_section_text(chosen if rows else cover_each_focus(question, chosen, sources), sources)
        lines += bridge_lines(question, chosen, sources)
        note = _language_note(lines, language)
        if zh:
            lead = f"以下资料与问题只部分相关，仅供参考{note}：" if low_confidence else f"根据资料{note}："
        else:
            lead = f"The sources only partly match the question{note}; here is what they say:" if low_confidence \
                else f"According to the sources{note}:"
        if not rows:
            missing_sides = covered_sides(question, lines, sources)
        tail = [sides_missing(question, read_target(question), missing_sides)] if missing_sides else []
        return "\n".join([lead] + [cite(s.text, s.source) for s in lines] + tail)
    if off_target:
        # only the neighbouring fact is there: say what it states, not that it answers
        candidate, match, value = off_target[0]
        return cite(stated_instead(question, read_target(question), match, value), candidate.unit.source)
    names = ("、" if zh else ", ").join(dict.fromkeys(s.document for s in sources))
    unnamed = _unnamed_entities(question, sources)
    if zh:
        if unnamed:
            return f"检索到的资料（{names}）没有提到 {'、'.join(unnamed)}，因此我无法根据资料作答。"
        return f"检索到的资料（{names}）中没有能回答这个问题的内容，因此我无法根据资料作答。"
    if unnamed:
        return f"The retrieved sources ({names}) do not mention {', '.join(unnamed)}, so I cannot answer it from them."
    return (f"The retrieved sources ({names}) do not contain an answer to this question, "
            "so I cannot answer it from them.")


def _unnamed_entities(question: str, sources: Sequence[RetrievedChunk]) -> list[str]:
    """The versions and codes of the question no source names ("3.3.0" when the notes list 3.2.1 and 3.1.0)."""
    text = "\n".join(f"{c.document}\n{c.text}" for c in sources).lower()
    out = []
    for entity in read_target(question).entities:
        if entity.kind in ("version", "code") and entity.key and \
                not re.search(rf"(?<![a-z0-9.]){re.escape(entity.key)}(?![a-z0-9]|\.\d)", text):
            out.append(entity.text)
    return out


def _asked_columns(q: _Question, unit: _Unit) -> list[int] | None:
    """The columns of a row a comparison asks about: those a header names, all (None) when the question names
    no attribute or names what the rows are ("plans" over a "Plan" column), [] when it names one no column has."""
    columns, by_header = _row_columns(q, unit)
    if by_header or not q.content or not unit.headers:
        return columns if by_header else None
    key_header = _TextIndex(unit.headers[0])
    if any(key_header.synonym_credit(term) > 0 for term in q.content):
        return None
    return []


def covered_sides(question: str, lines: Sequence[ScoredSentence], sources: Sequence[RetrievedChunk]) -> list[str]:
    """The compared sides no quoted line states: none names the side (itself, or by its source's title or
    document name) together with what is compared ("weight" in "Compare the weight of the N1 and the N2")."""
    target = read_target(question)
    q = read_question(question)
    missing = []
    for side in target.sides:
        named = False
        for line in lines:
            chunk = sources[line.source - 1]
            where = f"{line.text}\n{_title_line(chunk.text)}\n{chunk.document}"
            index = _TextIndex(line.text)
            if target.measured and q.content and not any(index.synonym_credit(term) > 0 for term in q.content):
                continue  # a measured comparison: the line must state the measure
            if all(re.search(rf"(?<![a-z0-9]){re.escape(w)}(?![a-z0-9])", where, re.IGNORECASE) or
                   (is_cjk(w[0]) and w in where) for w in side.words):
                named = True
                break
        if not named:
            missing.append(side.text)
    return missing


def side_rows(question: str, sources: Sequence[RetrievedChunk]) -> tuple[list[ScoredSentence], list[str]]:
    """For a comparison ("Compare the Team and Business plans", "N1 和 N2 的内存有什么区别"), the table row of
    each side, with the columns the question asks about (all when it names none), and the sides no row
    states; ([], []) when the question compares nothing or no side has a row."""
    reader = _TargetReader(question, sources)
    sides = reader.target.sides
    if not sides:
        return [], []
    q = read_question(question)
    rows: list[ScoredSentence] = []
    missing: list[str] = []
    for side in sides:
        found = None
        for number, units in reader.units.items():
            for unit in units:
                if not unit.is_row or not unit.cells[0]:
                    continue
                statement = reader.statement(unit)
                match = match_statement(reader.target, statement)
                if side.text in match.sides and match.entities_ok and match.qualifiers_ok:
                    columns = _asked_columns(q, unit)
                    if columns == []:
                        continue  # the row states none of what is compared ("weight" in a price table)
                    found = ScoredSentence(_clip(render_row(unit.cells, unit.headers, columns)), number, 1.0)
                    break
            if found is not None:
                break
        if found is None:
            missing.append(side.text)
        else:
            rows.append(found)
    return (rows, missing) if rows else ([], [])
