"""Claim-level support: each claim of an answer read against the words of the source it cites — pure text,
no model call.

An answer is split into claims: sentences, list items and table rows (a sentence whose markers stand in
its middle, "X is 45 W [2] and Y is 28 W [1].", gives one claim per marked part).  A claim states

- *values*: numbers with their units ("45 W", "45 瓦", "1,490 USD", "$9,999", "99.9%"), addresses and
  versions ("192.168.50.1", "3.2.1"), dates ("2026-02-10");
- *names*: codes and model names ("N2", "AUR-4012") and capitalised names ("Nimbus", "Aurora");
- *attribute words*: the rest of its content words ("maximum power draw", "默认 管理 地址").

A source is read as *units*: each sentence (with the section heading, the chunk's title line and the
document name as context, which may give the names), each table row (a Markdown/pipe row, a row of a
CSV block, or a "column: value; column: value." line, with the header naming each cell) and each window
of two neighbouring sentences of one section.  A claim is **supported** by a source when one unit holds
all its names, every value it states and at least ``ATTRIBUTE_MIN_SHARE`` of its attribute words; in a
table row a value must sit in the column the claim's attribute names, so "the maximum power draw of the
N2 is 2 TB" is not supported by the row whose Storage cell says 2 TB.  Words spread over a chunk, over
other rows or over two sources do not count.  A claim is **contradicted** when one sentence or row holds
its names and attribute with another value of the same kind ("28 W" where the claim says "45 W").

A claim that states no value and fewer than ``MIN_CONTENT_TERMS`` content words ("Based on the sources
[2], the answer is in the documents.", a bare file name) states nothing checkable and is unsupported.  A
claim about the sources themselves ("the sources do not mention X", :data:`ABSENCE_RE`) is
``not_checkable``: it is never attributed to a source and never counts as supported.

A claim with markers is checked against the sources it cites: supported when one of them supports it,
contradicted when one contradicts it, otherwise unsupported (the reason names another source that does
support it, if any).  A claim without a marker is checked against every source; a supporting one becomes
its inferred citation.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

from docmind_core.values import ClaimCheck, ClaimStatus, RetrievedChunk
from docmind_core.text.table_rows import parse_row_statement
from docmind_core.text.tokens import (
    CITATION_MARKER_RE as MARKER_RE,
    ENGLISH_STOP_WORDS,
    detect_language,
    is_cjk,
    keyword_tokens,
    marker_numbers,
    split_sentences,
)
from docmind_core.text.value_kinds import Value, alternatives, values_in

ATTRIBUTE_MIN_SHARE = 0.5  # weighted share of a claim's attribute words one unit must hold
NO_VALUE_MIN_SHARE = 0.6  # the same for a claim without a value: its words are all there is to check
MIN_CONTENT_TERMS = 2  # a claim with no value and fewer content words than this states nothing checkable
WINDOW_MAX_CHARS = 320  # two neighbouring sentences of one section read together, when this short
EVIDENCE_MAX_CHARS = 400

# --------------------------------------------------------------------------
# Sentences of the answer (shared with citations.py)
# --------------------------------------------------------------------------

_LEADING_MARKERS_RE = re.compile(r"(?:\s*" + MARKER_RE.pattern + r")+")  # used with .match(pos)
GREETING_RE = re.compile(
    r"^(?:你好|您好|嗨|谢谢|不客气|希望(?:以上|这些)?(?:内容|回答)?(?:对你|对您)?有(?:所)?帮助|如有(?:其他|更多)?问题|"
    r"hi|hello|hey|thanks|thank you|you'?re welcome|i hope (?:this|that) helps|hope (?:this|that) helps|"
    r"let me know if)", re.IGNORECASE)
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

# Hedges about the evidence as a whole ("The sources only partly match the question;"): about the sources too.
_HEDGE_RE = re.compile(
    r"\b(?:the|these|provided|retrieved)\s+(?:\w+\s+)?" + _SOURCES + r"\s+(?:only\s+)?(?:partly|partially|"
    r"do\s+not\s+fully|don't\s+fully)\s+(?:match|answer|cover|address|relate)"
    r"|(?:资料|文档|来源)[^。！？]{0,12}(?:只?部分相关|仅供参考|不完全)", re.IGNORECASE)


def about_the_sources(text: str) -> bool:
    """A claim about the sources themselves (they lack or only partly hold something), not about the world."""
    return bool(ABSENCE_RE.search(text) or _HEDGE_RE.search(text))


def clean_length(sentence: str) -> int:
    return len(re.sub(r"\s+", "", MARKER_RE.sub("", sentence)))


def is_substantive(sentence: str, min_len: int) -> bool:
    bare = MARKER_RE.sub("", sentence).strip()
    if clean_length(bare) < min_len or not re.search(r"\w", bare):
        return False
    # "According to the sources:" introduces, it does not claim; "Released: [1]" cites a claim it never states
    if bare.rstrip().endswith((":", "：")) and not MARKER_RE.search(sentence):
        return False
    if _TABLE_RULE_RE.match(bare):
        return False
    stripped = bare.lstrip("-*#>•·0123456789.、) \t")
    return not GREETING_RE.match(stripped)


def sentence_units(answer: str) -> list[tuple[int, int, int, int]]:
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


def holds(t_start: int, t_end: int, m_start: int, m_end: int, start: int, end: int) -> bool:
    """The sentence unit (text span, marker span) holds the marker answer[start:end]."""
    return min(t_start, m_start) <= start and end <= max(t_end, m_end)


# --------------------------------------------------------------------------
# Values, names and attribute words
# --------------------------------------------------------------------------

# values that are also kinds one "same attribute, another value" contradiction may compare
_CONTRADICTABLE = frozenset({"%", "w", "kw", "v", "kg", "g", "mm", "cm", "m", "km", "tb", "gb", "mb", "kb",
                             "pb", "gbe", "ghz", "mhz", "usd", "eur", "cny", "day", "hour", "minute", "second",
                             "week", "month", "year", "user", "seat", "person", "customer", "degree", "page",
                             "query", "core", "port", "ip", "version", "date"})
_FILE_RE = re.compile(r"[\w.\-/]+\.(?:md|markdown|txt|pdf|docx?|html?|csv|xlsx?|pptx?|json|eml)\b", re.IGNORECASE)
_LIST_LEAD_RE = re.compile(r"^\s*(?:[-*•·>+]+|#+|\(?[（(]?\d{1,2}[)）.、]|[一二三四五六七八九十]+[、.．]"
                           r"|第[一二三四五六七八九十\d]+[步条项]?[：:]?)\s*")
_TABLE_RULE_RE = re.compile(r"^[\s|:\-–—+=]*$")
CODE_NAME_RE = re.compile(r"(?<![A-Za-z0-9_.,-])\d+[A-Za-z][A-Za-z0-9]*\b"
                           r"|\b[A-Za-z]+[A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)*\d[A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)*\b"
                           r"|\b[A-Za-z]+(?:[-_][A-Za-z0-9]+)*-\d+\b")
_CAPITALISED_RE = re.compile(r"(?<![\w'])[A-Z][A-Za-z]+(?:[A-Z][a-z]+)*\b")
# Words that say where an answer comes from rather than what is true: a claim of only these states nothing.
_GENERIC_EN = frozenset(keyword_tokens(
    "based according source sources document documents answer answers information info context passage passages "
    "text texts provided given retrieved relevant found mentioned mention mentions stated states state says say "
    "refer refers reference references above following detail details question questions data knowledge base "
    "content contents material materials see shown show shows described describes listed lists result results "
    "following note notes available find found please check", stem=True))
_GENERIC_ZH = frozenset({"根据", "资料", "文档", "来源", "信息", "内容", "答案", "问题", "相关", "参考", "提供", "显示",
                         "如下", "以下", "上述", "提到", "说明", "可以", "查看", "请", "所述", "中", "里", "表示", "意思",
                         "是指", "指的是", "意味着", "代表"})
# Words that say what kind of thing a code is ("error code AUR-4012"): the source's heading names the code alone.
_DESCRIPTORS = frozenset({"错误", "代码", "错误代码", "报错", "error", "code", "status"})


@lru_cache(maxsize=4096)
def _stems(text: str) -> frozenset[str]:
    return frozenset(keyword_tokens(text, stem=True))


def _term_weight(term: str) -> float:
    if term in _DESCRIPTORS:
        return 0.25
    if is_cjk(term[0]):
        return 0.5 if len(term) == 1 else 1.0
    return 1.0


@dataclass(frozen=True)
class ClaimContent:
    """What one claim states: its values, names and attribute words (stemmed), and its language."""

    values: tuple[Value, ...]
    names: tuple[str, ...]
    attributes: tuple[str, ...]
    language: str
    about_sources: bool = False  # ABSENCE_RE: the claim is about the sources, not the world

    @property
    def content_free(self) -> bool:
        return not self.values and len(self.names) + len(self.attributes) < MIN_CONTENT_TERMS


def _bare(text: str) -> str:
    """The claim without markers, list numbering, file names and Markdown emphasis."""
    bare = MARKER_RE.sub(" ", text)
    bare = _FILE_RE.sub(" ", bare)
    bare = re.sub(r"[*_`]{1,3}", " ", bare)
    bare = re.sub(r"<[^>\s]+>", " ", bare)  # "<hostname>": a placeholder, not a word of the sources
    prev = None
    while prev != bare:
        prev = bare
        bare = _LIST_LEAD_RE.sub("", bare, count=1)
    return bare.replace("|", " ").strip()


def claim_content(text: str, source_names: frozenset[str] = frozenset()) -> ClaimContent:
    """The values, names and attribute words of one claim (``source_names``: capitalised words the sources
    use as names, so a name opening the claim still counts as one)."""
    bare = _bare(text)
    about = about_the_sources(MARKER_RE.sub("", text))
    values = values_in(bare)
    rest = bare
    for v in sorted(values, key=lambda v: -v.start):
        rest = rest[:v.start] + " " + rest[v.end:]
    names: list[str] = []
    for m in CODE_NAME_RE.finditer(rest):
        names.append(m.group(0).lower())
    first = re.match(r"\s*([A-Za-z]+)", rest)
    for m in _CAPITALISED_RE.finditer(rest):
        word = m.group(0)
        low = word.lower()
        if low in ENGLISH_STOP_WORDS or low in _GENERIC_EN:
            continue
        if first and m.start() == first.start(1) and low not in source_names:
            continue  # "Customers ..." opens a sentence; "Aurora ..." is a name the sources use
        names.append(low)
    names = list(dict.fromkeys(n for n in names if n))
    name_stems = set()
    for n in names:
        name_stems.update(keyword_tokens(n, stem=True))
        name_stems.add(n)
    attributes = []
    for tok in keyword_tokens(rest, stem=True):
        if tok in name_stems or tok in _GENERIC_EN or tok in _GENERIC_ZH or tok.isdigit():
            continue
        if not any(ch.isalnum() for ch in tok):
            continue
        attributes.append(tok)
    return ClaimContent(tuple(dict.fromkeys(values)), tuple(names), tuple(dict.fromkeys(attributes)),
                        detect_language(bare) if bare else "en", about)


def code_names(text: str) -> tuple[str, ...]:
    """The codes a text names ("N2", "AUR-4012", "DM-3000"), lower case: its names that hold a digit."""
    return tuple(n for n in claim_content(text).names if any(ch.isdigit() for ch in n))


# --------------------------------------------------------------------------
# Units of a source: sentences, table rows, small windows
# --------------------------------------------------------------------------


@dataclass
class Unit:
    """One place of a source a claim may be read from."""

    body: str  # shown as evidence
    context: str = ""  # section heading, title line and document name: where names may come from
    headers: tuple[str, ...] = ()  # a table row: each cell's column name
    cells: tuple[str, ...] = ()
    window: bool = False  # two sentences read together: may support, never contradicts
    lower: str = ""
    stems: frozenset[str] = frozenset()
    values: tuple[Value, ...] = ()
    language: str = "en"
    cell_values: tuple[tuple[Value, ...], ...] = ()
    header_stems: tuple[frozenset[str], ...] = ()
    section: str = ""  # the markdown heading ("### Firmware 3.2.0") whose section this unit is in, if any

    def __post_init__(self) -> None:
        whole = f"{self.context}\n{self.body}" + ("\n" + " ".join(self.headers) if self.headers else "")
        self.lower = whole.lower()
        self.stems = _stems(whole)
        self.values = tuple(values_in(self.body) + values_in(self.context))
        self.language = detect_language(self.body)
        if self.cells:
            self.cell_values = tuple(tuple(values_in(c)) for c in self.cells)
            self.header_stems = tuple(_stems(h) for h in self.headers)

    def has_term(self, term: str) -> bool:
        return any(self._has(t) for t in alternatives(term))

    def _has(self, term: str) -> bool:
        if is_cjk(term[0]) or not term.isalpha():
            if any(ch.isdigit() for ch in term):
                return re.search(rf"(?<![0-9a-z]){re.escape(term)}(?![0-9a-z])", self.lower) is not None
            return term in self.lower or term in self.stems
        return term in self.stems or term in self.lower.split()

    def has_name(self, name: str) -> bool:
        if re.search(rf"(?<![0-9a-z]){re.escape(name)}(?![0-9a-z])", self.lower):
            return True
        return all(self.has_term(t) for t in keyword_tokens(name, stem=True)) and bool(keyword_tokens(name))


_HEADING_RE = re.compile(r"^\s*#{1,6}\s+\S")
_KV_CELL_RE = re.compile(r"^\s*([^:：;；]{1,60})[:：]\s*(.+?)\s*$")


def _is_bare_title(line: str) -> bool:
    s = line.strip()
    if not s or len(s) > 60 or re.search(r"[。！？!?；;:：，,]$|[.]$", s) or "|" in s:
        return False
    return len(s.split()) <= 6 if detect_language(s) == "en" else len(s) <= 16


def _pipe_cells(line: str) -> list[str] | None:
    if line.count("|") < 1:
        return None
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    return cells if len(cells) >= 2 else None


def _kv_row(line: str) -> tuple[list[str], list[str]] | None:
    """A "column: value · column: value" line (how table rows are ingested, text/table_rows.py), or the older
    "column: value; column: value." form: its column names and values."""
    statement = parse_row_statement(line)
    if statement is not None:
        return statement
    parts = [p for p in re.split(r"[;；]\s*", line.strip().rstrip("。.")) if p.strip()]
    if len(parts) < 2:
        return None
    heads, cells = [], []
    for part in parts:
        m = _KV_CELL_RE.match(part)
        if not m:
            return None
        heads.append(m.group(1).strip())
        cells.append(m.group(2).strip())
    return heads, cells


def _csv_block(lines: list[str], start: int) -> int:
    """The end of a block of CSV lines starting at ``start`` (same field count >= 3, at least 3 lines)."""
    def fields(line: str) -> int:
        try:
            return len(next(csv.reader([line])))
        except (csv.Error, StopIteration):
            return 0
    n = fields(lines[start])
    if n < 3:
        return start
    end = start + 1
    while end < len(lines) and lines[end].strip() and fields(lines[end]) == n:
        end += 1
    return end if end - start >= 3 else start


@lru_cache(maxsize=512)
def source_units(text: str, document: str = "") -> tuple[Unit, ...]:
    """The sentences, table rows and windows of one source text."""
    lines = text.split("\n")
    doc_context = re.sub(r"[_\-.]+", " ", re.sub(r"\.[A-Za-z0-9]{1,5}$", "", document))
    title = ""
    first = next((ln.strip() for ln in lines if ln.strip()), "")
    if first and (len(first) <= 100 and (_HEADING_RE.match(first) or _is_bare_title(first) or len(first) <= 60)):
        title = first.lstrip("#").strip()
    units: list[Unit] = []
    heading = ""
    section_heading = ""  # a markdown heading only: a short plain line may be a title, not a section's subject
    section: list[Unit] = []  # sentence units of the current section, for windows

    def context() -> str:
        return " \n".join(x for x in dict.fromkeys((title, heading, doc_context)) if x)

    def close_section() -> None:
        for a, b in zip(section, section[1:]):
            joined = f"{a.body} {b.body}"
            if len(joined) <= WINDOW_MAX_CHARS:
                units.append(Unit(joined, a.context, window=True))
        section.clear()

    i = 0
    table_header: list[str] | None = None
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            i += 1
            continue
        end = _csv_block(lines, i)
        if end > i:  # a CSV block: the first line names the columns
            header = next(csv.reader([lines[i]]))
            for row_line in lines[i + 1:end]:
                cells = next(csv.reader([row_line]))
                units.append(Unit(row_line.strip(), context(), tuple(header), tuple(cells)))
            i = end
            continue
        cells = _pipe_cells(stripped)
        if cells is not None:
            if _TABLE_RULE_RE.match(stripped):
                i += 1
                continue
            if table_header is None and not values_in(stripped):
                table_header = cells
            else:
                headers = tuple(table_header[j] if table_header and j < len(table_header) else ""
                                for j in range(len(cells)))
                units.append(Unit(stripped, context(), headers, tuple(cells)))
            i += 1
            continue
        table_header = None
        kv = _kv_row(stripped)
        if kv is not None:
            units.append(Unit(stripped, context(), tuple(kv[0]), tuple(kv[1])))
            i += 1
            continue
        if _HEADING_RE.match(stripped) or (_is_bare_title(stripped) and i + 1 < len(lines)):
            close_section()
            heading = stripped.lstrip("#").strip()
            section_heading = heading if _HEADING_RE.match(stripped) else ""
            units.append(Unit(heading, context()))
            i += 1
            continue
        for s, e in split_sentences(line):
            sentence = line[s:e].strip()
            if sentence:
                unit = Unit(sentence, context(), section=section_heading)
                units.append(unit)
                section.append(unit)
        i += 1
    close_section()
    return tuple(units)


# --------------------------------------------------------------------------
# Reading one claim against one unit, one source, all sources
# --------------------------------------------------------------------------


_CROSS = "names and values stated together (in another language)"


@dataclass(frozen=True)
class Verdict:
    status: ClaimStatus
    evidence: str = ""
    reason: str = ""


def _attribute_share(content: ClaimContent, unit: Unit) -> float:
    if not content.attributes:
        return 1.0
    total = sum(_term_weight(t) for t in content.attributes)
    hit = sum(_term_weight(t) for t in content.attributes if unit.has_term(t))
    return hit / total if total else 1.0


def _read_unit(content: ClaimContent, unit: Unit) -> Verdict | None:
    """supported / contradicted by this unit, or None when it says neither."""
    if not all(unit.has_name(n) for n in content.names):
        return None
    cross = content.language != unit.language
    share = _attribute_share(content, unit)
    # a claim anchored by a value or a code name needs half its words; one with neither needs more
    need = ATTRIBUTE_MIN_SHARE if content.values or any(re.search(r"\d", n) for n in content.names) \
        else NO_VALUE_MIN_SHARE
    if cross and content.values:
        share = 1.0  # another language: its values and names are what can be read
    if share < need:
        return None
    if not content.values:
        matched = len(content.names) + sum(1 for t in content.attributes if unit.has_term(t))
        return Verdict("supported", unit.body, "names and words stated together") if matched >= 2 else None
    columns = _attribute_columns(content, unit)
    missing: list[Value] = []
    in_named = False
    for v in content.values:
        where = _value_columns(v, unit)
        if where is None:
            if not any(v.same(u) for u in unit.values):
                missing.append(v)
        elif not where or (columns and not (where & (columns | {0}))):
            missing.append(v)  # not in this row, or under a column the claim does not name (nor the subject's)
        else:
            in_named = in_named or bool(where & columns)
    if columns and not missing and not in_named:
        missing = [v for v in content.values if _value_columns(v, unit)]  # the named column states none of them
    if not missing:
        return Verdict("supported", unit.body, _CROSS if cross else "names, attribute and values stated together")
    if unit.window or cross or not content.attributes:
        return None
    for v in missing:
        if v.kind not in _CONTRADICTABLE:
            continue
        pool = [u for j in columns for u in unit.cell_values[j]] if columns else list(unit.values)
        other = [u for u in pool if u.kind == v.kind and u.key != v.key]
        if not columns and len({u.key for u in pool if u.kind == v.kind}) > 1:
            continue  # "290 USD for the N1 and 390 USD for the N2": which value is the claim's attribute is unclear
        if other:
            return Verdict("contradicted", unit.body,
                           f"the source gives {other[0].text.strip()} where the claim says {v.text.strip()}")
    return None


def _states_values(content: ClaimContent, unit: Unit) -> bool:
    """The unit names the claim's subject with all its values (in words the claim may not use): the
    claim may be right, so another value elsewhere in the source is no contradiction."""
    return bool(content.values) and all(unit.has_name(n) for n in content.names) and all(
        any(v.same(u) for u in unit.values) for v in content.values)


def _attribute_columns(content: ClaimContent, unit: Unit) -> set[int]:
    if not unit.cells:
        return set()
    attrs = set(content.attributes)
    out = set()
    named = {alt for a in attrs for alt in alternatives(a)}
    for j, stems in enumerate(unit.header_stems):
        if stems and stems & named and not (_stems(unit.cells[j]) & attrs):
            out.add(j)
    return out


def _value_columns(v: Value, unit: Unit) -> set[int] | None:
    """The cells of a table row holding ``v`` (None for a unit that is no table row)."""
    if not unit.cells:
        return None
    return {j for j, vals in enumerate(unit.cell_values) if any(v.same(u) for u in vals)}


def _normalised(text: str) -> str:
    return re.sub(r"[\s|*_`]+", "", text).lower()


def _quoted(claim_text: str, source_text: str) -> str:
    """The claim quoted word for word from the source (extractive answers quote): the source line, or ""."""
    core = _bare(claim_text).rstrip("。.!！?？;；:：… ").replace("…", "").strip()
    norm = _normalised(core)
    if len(norm) < 8:
        return ""
    for line in source_text.split("\n"):
        if norm in _normalised(line):
            return line.strip()
    return ""


def read_source(content: ClaimContent, claim_text: str, source: RetrievedChunk) -> Verdict:
    """The claim read against one source: supported, contradicted or unsupported."""
    quote = _quoted(claim_text, source.text)
    if quote and not content.content_free:
        return Verdict("supported", quote, "quoted from the source")
    contradiction: Verdict | None = None
    units = source_units(source.text, source.document)
    for unit in units:
        verdict = _read_unit(content, unit)
        if verdict is None:
            continue
        if verdict.status == "supported":
            return verdict
        contradiction = contradiction or verdict
    if contradiction is not None and not any(_states_values(content, unit) for unit in units):
        return contradiction
    return Verdict("unsupported", "", _missing_reason(content, source))


def supporting_units(claim_text: str, source: RetrievedChunk, names: frozenset[str] = frozenset()) -> list[Unit]:
    """The sentences and rows of ``source`` that state the claim (one it quotes, or one that supports it;
    a two-sentence window only when no single unit does): where target_match.py reads its entity and
    qualifier."""
    content = claim_content(claim_text, names)
    units = source_units(source.text, source.document)
    core = _normalised(_bare(claim_text))
    single = [u for u in units if not u.window and (
        (len(_normalised(u.body)) >= 8 and _normalised(u.body) in core)
        or (_read_unit(content, u) or Verdict("unsupported")).status == "supported")]
    if single:
        return single
    return [u for u in units if u.window and (_read_unit(content, u) or Verdict("unsupported")).status == "supported"]


def _missing_reason(content: ClaimContent, source: RetrievedChunk) -> str:
    lower = source.text.lower()
    absent = [n for n in content.names if n not in lower]
    if absent:
        return f"the source does not name {', '.join(absent[:3])}"
    values = {u for unit in source_units(source.text, source.document) for u in unit.values}
    lost = [v.text.strip() for v in content.values if not any(v.same(u) for u in values)]
    if lost:
        return f"the source does not state {', '.join(lost[:3])}"
    return "no one sentence, row or window of the source states it"


def source_names(sources: Sequence[RetrievedChunk]) -> frozenset[str]:
    """Capitalised words the sources use inside a sentence: names a claim may open with."""
    names: set[str] = set()
    for s in sources:
        for m in re.finditer(r"(?<=[\w,;:)] )([A-Z][A-Za-z0-9]+)", s.text):
            names.add(m.group(1).lower())
    return frozenset(names)


def check_claim(text: str, sources: Sequence[RetrievedChunk], cited: Sequence[int] = (),
                names: frozenset[str] | None = None) -> ClaimCheck:
    """One claim checked against the sources it cites (1-based ``cited``) or, uncited, against all of them.
    ``char_start``/``char_end`` of the result are 0 and len(text); :func:`check_claims` places them."""
    names = source_names(sources) if names is None else names
    content = claim_content(text, names)
    valid = [n for n in dict.fromkeys(cited) if 1 <= n <= len(sources)]
    base = dict(text=text, char_start=0, char_end=len(text), cited=valid)
    if content.about_sources:
        return ClaimCheck(**base, status="not_checkable", reason="a statement about the sources, not a fact")
    if content.content_free:
        return ClaimCheck(**base, status="unsupported", reason="states nothing checkable (no value, no names)")
    if valid:
        verdicts = [(n, read_source(content, text, sources[n - 1])) for n in valid]
        for n, v in verdicts:
            if v.status == "supported":
                return ClaimCheck(**base, status="supported", source_index=n, evidence=_clip(v.evidence),
                                  reason=v.reason)
        for n, v in verdicts:
            if v.status == "contradicted":
                return ClaimCheck(**base, status="contradicted", source_index=n, evidence=_clip(v.evidence),
                                  reason=v.reason)
        elsewhere = next((n for n in range(1, len(sources) + 1) if n not in valid
                          and read_source(content, text, sources[n - 1]).status == "supported"), None)
        reason = "; ".join(f"[{n}] {v.reason}" for n, v in verdicts)
        if elsewhere is not None:
            reason += f"; source [{elsewhere}] states it, uncited"
        return ClaimCheck(**base, status="unsupported", reason=reason)
    contradiction: tuple[int, Verdict] | None = None
    support: tuple[int, Verdict] | None = None
    for n, source in enumerate(sources, start=1):
        v = read_source(content, text, source)
        if v.status == "supported" and v.reason != _CROSS:
            support = (n, v)
            break
        if v.status == "supported" and support is None:
            support = (n, v)  # kept unless a source in the claim's own language states it
        if v.status == "contradicted" and contradiction is None:
            contradiction = (n, v)
    if support is not None:
        n, v = support
        return ClaimCheck(**base, status="supported", source_index=n, inferred=True, evidence=_clip(v.evidence),
                          reason=v.reason)
    if contradiction is not None:
        n, v = contradiction
        return ClaimCheck(**base, status="contradicted", source_index=n, evidence=_clip(v.evidence),
                          reason=v.reason)
    return ClaimCheck(**base, status="unsupported",
                      reason="no source states it in one sentence, row or window" if sources else "no sources")


def _clip(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= EVIDENCE_MAX_CHARS else text[:EVIDENCE_MAX_CHARS].rstrip() + "…"


# --------------------------------------------------------------------------
# The claims of an answer
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class ClaimSpan:
    """One claim of an answer: its text span and the marker numbers it carries."""

    start: int
    end: int
    numbers: tuple[int, ...] = ()  # the valid and invalid numbers of its own markers


def split_claims(answer: str, min_sentence_len: int = 8) -> list[ClaimSpan]:
    """The claims of ``answer``: its substantive sentences, list items and table rows (a sentence with
    markers inside it is cut after each marker that has a substantive part on both sides), plus short
    ones that state a value ("45 W [2].").  A line holding only markers, numbering and file names is a
    claim only when the answer has no other."""
    claims: list[ClaimSpan] = []
    references: list[ClaimSpan] = []
    markers = list(MARKER_RE.finditer(answer))
    for t_start, t_end, m_start, m_end in sentence_units(answer):
        lo, hi = min(t_start, m_start), max(t_end, m_end)
        inside = [m for m in markers if lo <= m.start() and m.end() <= hi]
        pieces: list[tuple[int, int]] = []
        cut = lo
        for m in inside:
            if m.end() >= t_end:
                break
            before, after = answer[cut:m.end()], answer[m.end():t_end]
            if clean_length(before) >= min_sentence_len and clean_length(after) >= min_sentence_len and \
                    re.search(r"\w", MARKER_RE.sub("", after)) and not claim_content(before).content_free:
                pieces.append((cut, m.end()))
                cut = m.end()
        pieces.append((cut, hi))
        for a, b in pieces:
            text = answer[a:b]
            own = [m for m in inside if a <= m.start() and m.end() <= b]
            span = ClaimSpan(a, b, tuple(n for m in own for n in marker_numbers(m)))
            bare = _bare(text)
            if not re.search(r"\w", bare):
                if own or clean_length(text) >= min_sentence_len:
                    references.append(span)
                continue
            if is_substantive(text, min_sentence_len) or (values_in(bare) and not _TABLE_RULE_RE.match(bare)
                                                            and not GREETING_RE.match(bare)):
                if _is_table_header_row(text):
                    continue
                claims.append(span)
    if not claims:
        return references
    return claims


def _is_table_header_row(text: str) -> bool:
    return text.count("|") >= 2 and not values_in(_bare(text)) and not MARKER_RE.search(text)


def check_claims(answer: str, sources: Sequence[RetrievedChunk], min_sentence_len: int = 8) -> list[ClaimCheck]:
    """Each claim of ``answer`` checked against the sources numbered [1..len(sources)]."""
    names = source_names(sources)
    out: list[ClaimCheck] = []
    for span in split_claims(answer, min_sentence_len):
        check = check_claim(answer[span.start:span.end], sources, span.numbers, names)
        check = check.model_copy(update={"char_start": span.start, "char_end": span.end})
        out.extend(_by_clause(answer, span, check, sources, names) if check.status != "supported" else [check])
    return out


_CLAUSE_BREAK_RE = re.compile(r"\s*[，；、]\s*(?:而|但|并且|同时)?\s*|\s*(?:[,;]\s*(?:while|whereas|and|but)?|"
                              r"\s(?:while|whereas|but)|\s(?:and)(?=\s+(?:the|its|it|their)\b))\s+|(?:而|但是?|并且|同时)",
                              re.IGNORECASE)


def _by_clause(answer: str, span: ClaimSpan, whole: ClaimCheck, sources: Sequence[RetrievedChunk],
               names: frozenset[str]) -> list[ClaimCheck]:
    """A sentence joining two facts ("the N1 draws 28 W, while the N2 draws 45 W") that no one source states
    whole: its clauses, each stating a value, are read as claims of their own (all supported, or the
    sentence stays one claim, as checked whole)."""
    text = answer[span.start:span.end]
    cuts = [m for m in _CLAUSE_BREAK_RE.finditer(text)]
    if not cuts:
        return [whole]
    bounds, pos = [], 0
    for m in cuts:
        bounds.append((pos, m.start()))
        pos = m.end()
    bounds.append((pos, len(text)))
    clauses = [(a, b) for a, b in bounds if text[a:b].strip()]
    # a lead-in that states nothing ("根据[1]中的信息", "According to [1]") is not a clause of its own
    clauses = [(a, b) for a, b in clauses if values_in(_bare(text[a:b])) or not _is_lead_in(text[a:b], names)]
    if len(clauses) < 2 or not all(values_in(_bare(text[a:b])) for a, b in clauses):
        return [whole]
    checks = []
    for a, b in clauses:
        check = check_claim(text[a:b], sources, span.numbers, names)
        if check.status != "supported":
            return [whole]
        checks.append(check.model_copy(update={"char_start": span.start + a, "char_end": span.start + b}))
    return checks


def _is_lead_in(clause: str, names: frozenset[str]) -> bool:
    content = claim_content(clause, names)
    return content.content_free or content.about_sources


def claim_counts(claims: Sequence[ClaimCheck]) -> dict[str, int]:
    counts = {"supported": 0, "unsupported": 0, "contradicted": 0, "not_checkable": 0}
    for c in claims:
        counts[c.status] += 1
    return counts
