"""The offline engine's tool policy: deterministic, but it really acts on what it reads.

Round 1 plans from the question alone: one ``searchDocs`` per focus of a
comparison (or one for the whole question), ``keywordSearch`` for exact codes,
versions and quoted names, ``webSearch`` for time-aware questions when offered.
Later rounds read the observations: for a chain question it searches again
with entities the best passages introduced (titles, proper nouns, 《》 titles)
that the question did not name; it reformulates once when the question's
salient terms stay poorly covered; it stops when coverage is adequate or a
round brought nothing new.  All state comes from the transcript, so one
policy object serves every run and thread.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Sequence

from docmind_core.backends.protocols import AgentTranscript, AgentTurn, ToolCallRequest, ToolSpec
from docmind_core.models import RetrievedChunk
from docmind_core.text import (
    ENGLISH_STOP_WORDS, TIME_KEYWORD_PATTERN, is_cjk, keyword_tokens, salient_terms, sentences,
)

ADEQUATE_COVERAGE = 0.75
_MAX_HOP_ENTITIES = 2
_BEST_CHUNKS = 2

_CJK = r"\u3400-\u4dbf\u4e00-\u9fff"
_CODE_RE = re.compile(r"\b(?:[A-Za-z]+[-_]?\d[\w.-]*|v?\d+(?:\.\d+){1,3}[a-z]?|[A-Z]{2,}\d*)\b")
_QUOTED_RE = re.compile(r"[\"“「『《]([^\"”」』》]{2,60})[\"”」』》]")
_BOOK_RE = re.compile(r"《([^》]{1,40})》")
# Conjunctions that separate the foci of a comparison.  "or"/vs always split; "and"-like words only with a cue.
_STRONG_SPLIT_RE = re.compile(r"\s+(?:or|vs\.?|versus|compared (?:with|to))\s+|还是|VS", re.IGNORECASE)
_WEAK_SPLIT_RE = re.compile(r"\s+and\s+|、|和|与|及|跟|同")
_COMPARISON_CUE_RE = re.compile(
    r"\b(?:both|same|between|compare|comparison|difference|differ|common|older|younger|first|earlier|later|"
    r"larger|bigger|smaller|more|less|longer|shorter|higher|taller|share|shared|located)\b|"
    r"^(?:are|were|is|was|do|did|does|have|has)\b|"
    r"对比|比较|区别|差异|异同|分别|各自|哪个|哪一个|谁更|更", re.IGNORECASE)
_CN_LEAD_RE = re.compile(r"^(?:请|请问|帮我|麻烦)?(?:对比|比较|分析|介绍|说说|讲讲|看看)?(?:一下)?")
_CN_TAIL_RE = re.compile(r"(?:的|之间|在|有|哪个|谁|是否|分别|各自|区别|差异|异同|优缺点|有什么|有何|相比).*$")
_EN_LEAD_RE = re.compile(r"^.*?\b(?:between|compare|of|is|are|was|were|did|do|does|has|have)\s+", re.IGNORECASE)
_CONNECTORS = r"(?:[ \t]+(?:(?:of|the|for|to|de|la|le|von|van|du|in|on|a)[ \t]+)*)"  # never across lines
_NAME_CONNECTORS = r"(?:[ \t]+(?:(?:of|the|for|de|la|le|von|van|du|y)[ \t]+)*)"  # "met X in Y" is two names
_WORD = r"[\w'’&-]*(?:\.(?=[A-Za-z]))?[\w'’&-]*"  # "Mt.Carmel"-style inner dots, never a sentence's full stop
_INITIAL = r"[A-Z]\.(?=[ \t]+[A-Z])"  # "Roger O. Egeberg", "Gerald R. Ford"
_FOCUS_RUN_RE = re.compile(rf"(?:{_INITIAL}|[A-Z0-9]{_WORD})(?:{_CONNECTORS}(?:{_INITIAL}|[A-Z0-9]{_WORD}))*")
_NAME_RUN_RE = re.compile(rf"(?:{_INITIAL}|[A-Z]{_WORD})(?:{_NAME_CONNECTORS}(?:{_INITIAL}|[A-Z]{_WORD}))*")
_ID_LIKE_RE = re.compile(r"^[\w-]*\d[\w-]*$|\.\w{1,5}$")  # "hp00277", "manual.pdf": names of files, not things
_GENERIC_CAPS = frozenset(
    "the a an he she it they his her its their this that these those in on at of for and but or as by with from "
    "january february march april may june july august september october november december monday tuesday "
    "wednesday thursday friday saturday sunday american british english french german italian spanish chinese "
    "japanese canadian australian russian indian irish scottish dutch swedish korean mexican european "
    "are were is was do did does which who what where when how why whose whom both".split())

# Words that ask for the comparison itself; they add nothing to a per-focus search.
_COMPARISON_WORDS = frozenset("对比 比较 区别 差异 异同 分别 各自 相比 compare compared comparison difference differences "
                              "versus vs both same".split())

_posseg_lock = threading.Lock()


@dataclass(frozen=True)
class _Plan:
    tool: str
    query: str


class OfflineToolPolicy:
    """Which tools to call next, decided by rules over the transcript (no model)."""

    def next_turn(self, transcript: AgentTranscript, tools: Sequence[ToolSpec]) -> AgentTurn:
        offered = {t.name for t in tools}
        done_round = len(transcript.rounds)
        question = transcript.rewritten_query or transcript.question
        if done_round == 0:
            plans = self._first_round(question, transcript.question, offered)
        else:
            plans = self._later_round(transcript, question, offered)
        ran = _queries_run(transcript)
        plans = [p for p in plans if p.tool in offered and (p.tool, _norm(p.query)) not in ran]
        plans = list(dict.fromkeys(plans))
        if not plans:
            return AgentTurn(tool_calls=[], text="The evidence gathered is enough; stopping.")
        calls = [ToolCallRequest(id=f"offline_{done_round + 1}_{i}", name=p.tool, arguments={"query": p.query})
                 for i, p in enumerate(plans, 1)]
        return AgentTurn(tool_calls=calls, text=_explain(done_round, plans))

    # -- round 1 -----------------------------------------------------------------
    def _first_round(self, question: str, original: str, offered: set[str]) -> list[_Plan]:
        foci = split_foci(question)
        plans = [_Plan("searchDocs", q) for q in foci] if len(foci) >= 2 else [_Plan("searchDocs", question)]
        for exact in exact_terms(original if original else question):
            plans.append(_Plan("keywordSearch", exact))
        if "webSearch" in offered and (TIME_KEYWORD_PATTERN.search(original) or TIME_KEYWORD_PATTERN.search(question)):
            plans.append(_Plan("webSearch", question))
        return plans

    # -- later rounds ------------------------------------------------------------
    def _later_round(self, transcript: AgentTranscript, question: str, offered: set[str]) -> list[_Plan]:
        last = transcript.rounds[-1]
        if not any(obs.new_chunk_ids for obs in last):
            return []  # nothing new came back: more of the same will not help
        seen = _all_chunks(transcript)
        coverage, missing = coverage_of(question, seen)
        hops_done = any(obs.call.arguments.get("_hop") or _is_hop(obs.call.arguments.get("query", ""), question)
                        for rnd in transcript.rounds[1:] for obs in rnd)
        comparison = len(split_foci(question)) >= 2
        subjects = question_entities(question)
        # a later query names a subject and asks for an attribute, never one without the other
        tail = hop_tail(question, subjects, missing)
        if not comparison and not hops_done and tail:
            best = _best_chunks(question, [c for obs in last for c in obs.chunks])
            entities = bridge_entities(question, best)[:_MAX_HOP_ENTITIES]
            if entities:
                return [_Plan("searchDocs", f"{e} {' '.join(tail)}") for e in entities]
        wanted = attribute_terms(question, subjects, missing, limit=6, missing_only=True)
        if coverage < ADEQUATE_COVERAGE and not _reformulated(transcript) and wanted:
            subject = " ".join(subjects[:2])
            if subject or len(wanted) >= 2:
                return [_Plan("keywordSearch", f"{subject} {' '.join(wanted)}".strip())]
        return []


# --------------------------------------------------------------------------
# Question analysis
# --------------------------------------------------------------------------

def comparison_entities(question: str) -> list[str]:
    """The names a comparison question compares ("Nimbus N1", "N2"); [] when it compares nothing nameable."""
    text = question.strip().rstrip("?？。.!！")
    parts = _STRONG_SPLIT_RE.split(text)
    strong = len(parts) >= 2
    if not strong and _COMPARISON_CUE_RE.search(text):
        parts = _WEAK_SPLIT_RE.split(text)
    parts = [p.strip(" ,，:：;；") for p in parts if p and p.strip(" ,，:：;；")]
    if len(parts) < 2:
        return []
    names = [_focus_name(p, i, len(parts), strong) for i, p in enumerate(parts)]
    names = [n for n in names if n]
    if len(names) < 2 or len(set(n.lower() for n in names)) < 2:
        return []
    return names


def split_foci(question: str) -> list[str]:
    """The separately searchable foci of a comparison, each with the question's shared terms; [] if none."""
    names = comparison_entities(question)
    if not names:
        return []
    text = question.strip().rstrip("?？。.!！")
    name_tokens = {t for n in names for t in keyword_tokens(n, stem=False)}
    shared = [t for t in dict.fromkeys(keyword_tokens(text, stem=False))
              if t not in name_tokens and t not in _COMPARISON_WORDS][:4]
    return [" ".join([n, *shared]).strip() for n in names]


_QUESTION_LEAD = frozenset("are were is was do did does which who what where when how why whose whom both the a an "
                           "in on at of".split())


def _strip_generic(run: str, lead: frozenset[str] = _GENERIC_CAPS) -> str:
    words = run.split()
    while words and words[0].lower() in lead:
        words = words[1:]
    return " ".join(words)


def _focus_name(part: str, index: int, count: int, strong: bool) -> str:
    if re.search(f"[{_CJK}]", part):
        name = _CN_LEAD_RE.sub("", part) if index == 0 else part
        name = _CN_TAIL_RE.sub("", name) if index == count - 1 else name
        return name.strip()
    runs = [_strip_generic(r, _QUESTION_LEAD) for r in _FOCUS_RUN_RE.findall(part)]
    runs = [r for r in runs if r]
    if runs:  # the left part's last name-like run, the right part's first
        return runs[-1] if index == 0 else runs[0]
    if not strong:
        return ""  # "worlds and alien species": a plain "and" only separates names
    if index == 0:
        tail = re.split(r"[,，:：]", part)[-1]
        return _EN_LEAD_RE.sub("", tail).strip()
    return re.split(r"\b(?:in|on|at|for|with|which|who|that|when)\b", part, maxsplit=1)[0].strip()


# Words that ask (what, where, how long, 意思 ...): they name no attribute, so a later query never rests on them.
QUESTION_WORDS = frozenset(
    "什么 意思 哪里 哪儿 多少 多久 怎么 怎么办 怎样 如何 为什么 是否 哪个 哪些 谁 几 吗 呢 应该 报 分别 各自 是 有 "
    "what which who whom whose where when why how much many mean means does did do".split())
_CJK_FUNCTION_CHARS = frozenset("和与及跟同在的了是对把被从向于为以而或")
# Units and currencies: capitalised in text, but never the subject of a question
_UNIT_NAMES = frozenset("usd eur rmb cny jpy gbp gb tb mb kb gib mib w kw kwh v mah mhz ghz ms fps dpi".split())


def question_entities(question: str) -> list[str]:
    """The question's own subjects: codes, quoted and 《》 titles, capitalised names, Chinese proper nouns."""
    found = [*exact_terms(question), *_BOOK_RE.findall(question)]
    for run in _NAME_RUN_RE.findall(question):
        name = _strip_generic(_strip_generic(run, _QUESTION_LEAD))
        if name and name.lower() not in QUESTION_WORDS and name.lower() not in ENGLISH_STOP_WORDS:
            found.append(name)
    if re.search(f"[{_CJK}]", question):
        found += re.findall(f"[{_CJK}]{{1,8}}(?:·[{_CJK}]{{1,8}})+", question)  # 莱昂德罗·内托: one name
        found += _chinese_proper_nouns(question, flags=("nr", "nrt", "ns", "nt", "nz"))
    names: list[str] = []
    for name in dict.fromkeys(n.strip() for n in found if n.strip()):
        if name.lower() in _UNIT_NAMES or any(name != other and name in other for other in found):
            continue  # "N2" inside "Nimbus N2": keep the longer name only
        names.append(name)
    return names


def hop_tail(question: str, subjects: Sequence[str], missing: Sequence[str]) -> list[str]:
    """What a hop query adds to its bridge entity: the question's terms the evidence still misses (a missing
    subject of the question is the other end of the bridge, so it stays), always with an attribute among them;
    [] when the question asks for no attribute at all."""
    attributes = attribute_terms(question, subjects, missing)
    if not attributes:
        return []
    tail = [t for t in missing if t not in QUESTION_WORDS and t not in ENGLISH_STOP_WORDS
            and t not in _UNIT_NAMES][:3]
    if not set(tail) & set(attribute_terms(question, subjects, missing, limit=len(missing) or 1)):
        tail.append(attributes[0])
    return tail


def attribute_terms(question: str, subjects: Sequence[str], missing: Sequence[str], limit: int = 3,
                    missing_only: bool = False) -> list[str]:
    """What the question asks about its subjects: salient terms that are neither subject nor question words,
    those the evidence still misses first."""
    subject_tokens = {t.lower() for s in subjects for t in keyword_tokens(s, stem=False)}

    subject_text = " ".join(subjects).lower()

    def usable(term: str) -> bool:
        in_subject = term in subject_tokens or (is_cjk(term[0]) and term in subject_text)
        return (not in_subject and term not in QUESTION_WORDS and term not in ENGLISH_STOP_WORDS
                and term not in _UNIT_NAMES)

    # plain words name the attribute ("population", "surfer"); numbers and capitalised words are constraints
    capitalised = {w.lower() for w in re.findall(r"\b[A-Z][A-Za-z0-9]+", question)}

    def plain_first(terms: list[str]) -> list[str]:
        return sorted(terms, key=lambda t: t in capitalised or any(c.isdigit() for c in t))  # stable

    wanted = plain_first([t for t in missing if usable(t)])
    if wanted or missing_only:
        return wanted[:limit]
    # nothing is missing: the question's main attribute alone keeps a hop query short and still well-formed
    asked = [t for t, _ in sorted(salient_terms(question).items(), key=lambda kv: -kv[1]) if usable(t)]
    return plain_first(asked)[:1]


def exact_terms(question: str) -> list[str]:
    """Codes, versions and quoted names that deserve an exact keyword search."""
    found = [m.group(1).strip() for m in _QUOTED_RE.finditer(question)]
    found += [m.group(0) for m in _CODE_RE.finditer(question) if not re.fullmatch(r"(?:19|20)\d{2}", m.group(0))]
    return list(dict.fromkeys(f for f in found if f))


def coverage_of(question: str, chunks: Sequence[RetrievedChunk]) -> tuple[float, list[str]]:
    """Weighted share of the question's salient terms found in the chunks, and the missing terms."""
    terms = salient_terms(question)
    if not terms:
        return 1.0, []
    present: set[str] = set()
    for chunk in chunks:
        present.update(keyword_tokens(f"{chunk.document} {chunk.text}", stem=False))
    total = sum(terms.values())
    hit = sum(w for t, w in terms.items() if t in present)
    missing = [t for t, _ in sorted(terms.items(), key=lambda kv: -kv[1]) if t not in present]
    return hit / total, missing


def bridge_entities(question: str, chunks: Sequence[RetrievedChunk]) -> list[str]:
    """Names the best chunks introduce that the question does not contain (the next hop's subject)."""
    own = {t.lower() for t in keyword_tokens(question, stem=False)}
    scored: dict[str, float] = {}

    def add(name: str, weight: float) -> None:
        name = re.sub(r"\s*\([^)]*\)\s*$", "", name).strip(" ,.;:'’\"")
        half = name.split()
        if len(half) % 2 == 0 and half[: len(half) // 2] == half[len(half) // 2:]:
            name = " ".join(half[: len(half) // 2])  # "Lori L. Holt Lori L. Holt": a title line run into its text
        toks = [t.lower() for t in keyword_tokens(name, stem=False)]
        if not toks or len(name) < 2 or all(t in own for t in toks) or name.lower() in _GENERIC_CAPS:
            return
        if all(t in _UNIT_NAMES for t in toks):
            return  # "USD", "GB": a table's unit, not the next hop's subject
        if is_cjk(name[0]) and name[0] in _CJK_FUNCTION_CHARS:
            return  # "和沙": jieba glued a conjunction to the next word; not a name
        novelty = sum(1 for t in toks if t not in own) / len(toks)
        scored[name] = scored.get(name, 0.0) + weight * novelty

    for rank, chunk in enumerate(chunks):
        decay = 1.0 / (1 + rank)
        lowered_text = set(re.findall(r"\b[a-z][a-z'’-]+\b", chunk.text))
        if not _ID_LIKE_RE.search(chunk.document.strip()):
            add(chunk.document, 1.5 * decay)
        for title in _BOOK_RE.findall(chunk.text):
            add(title, 2.0 * decay)
        if re.search(f"[{_CJK}]", chunk.text):
            for word in _chinese_proper_nouns(chunk.text):
                add(word, 1.2 * decay)
        for sentence in sentences(chunk.text):
            # a name in a sentence that also speaks of the question's terms is more likely the hop
            shared = own & {t.lower() for t in keyword_tokens(sentence, stem=False)}
            context = 0.5 + min(1.0, len(shared) / 3)
            for match in _NAME_RUN_RE.finditer(sentence):
                name = _strip_generic(match.group(0))
                words = name.split()
                if (len(words) == 1 and match.start() == 0 and len(words[0]) <= 8
                        and words[0].lower() in lowered_text):
                    continue  # "New version ...": a short word capitalised by its sentence, also seen in lower case
                if words and not (len(words) == 1 and words[0].lower() in ENGLISH_STOP_WORDS):
                    add(name, (1.0 + 0.3 * (len(words) - 1)) * decay * context)
    return [n for n, _ in sorted(scored.items(), key=lambda kv: (-kv[1], kv[0]))]


def _chinese_proper_nouns(text: str, flags: tuple[str, ...] = ("nr", "ns", "nt", "nz")) -> list[str]:
    import jieba.posseg as pseg

    with _posseg_lock:  # jieba's lazy initialisation is not thread-safe
        pairs = [(p.word, p.flag) for p in pseg.cut(text[:600])]
    return [w for w, flag in pairs if flag in flags and len(w) >= 2]


# --------------------------------------------------------------------------
# Transcript reading
# --------------------------------------------------------------------------

def _norm(query: str) -> str:
    return " ".join(sorted(set(keyword_tokens(query)))) or query.strip().lower()


def _queries_run(transcript: AgentTranscript) -> set[tuple[str, str]]:
    return {(obs.call.name, _norm(str(obs.call.arguments.get("query", ""))))
            for rnd in transcript.rounds for obs in rnd}


def _all_chunks(transcript: AgentTranscript) -> list[RetrievedChunk]:
    seen: dict[str, RetrievedChunk] = {}
    for rnd in transcript.rounds:
        for obs in rnd:
            for chunk in obs.chunks:
                seen.setdefault(chunk.chunk_id, chunk)
    return list(seen.values())


def _best_chunks(question: str, chunks: Sequence[RetrievedChunk]) -> list[RetrievedChunk]:
    """The chunks that cover the question best (lexically), ties broken by retrieval order."""
    terms = salient_terms(question)
    unique = list({c.chunk_id: c for c in chunks}.values())

    def score(item: tuple[int, RetrievedChunk]) -> tuple[float, int]:
        rank, chunk = item
        toks = set(keyword_tokens(f"{chunk.document} {chunk.text}", stem=False))
        return (-sum(w for t, w in terms.items() if t in toks), rank)

    return [c for _, c in sorted(enumerate(unique), key=score)][:_BEST_CHUNKS]


def _is_hop(query: str, question: str) -> bool:
    """A later-round searchDocs query that names something the question does not."""
    own = set(keyword_tokens(question, stem=False))
    return bool(set(keyword_tokens(query, stem=False)) - own)


def _reformulated(transcript: AgentTranscript) -> bool:
    return any(obs.call.name == "keywordSearch" for rnd in transcript.rounds[1:] for obs in rnd)


def _explain(done_round: int, plans: Sequence[_Plan]) -> str:
    what = "; ".join(f"{p.tool}({p.query})" for p in plans)
    return f"Round {done_round + 1}: {what}"
