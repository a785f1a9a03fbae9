"""What can be read off a question's text (and its evidence's text) without a model.

Shared by the stages (scope check, routing) and the offline engine (understanding, tool policy), so
both read a question the same way.  Pure functions over text; nothing here calls a backend.

* The scope fast path: zero model calls for unmistakable requests.  It fires only when the whole
  message is clearly one of a few patterns (a greeting, "what can you do", "remember that ...",
  "summarise our conversation", "translate your last answer"); anything less certain returns ``None``
  and the understanding call decides, because sending a real knowledge question down a non-retrieval
  path costs more than one extra model call.
* Question analysis: the entities a comparison compares, exact codes and quoted names, the question's
  subjects and asked attributes, the terms the evidence still misses, and the names a passage
  introduces (the next hop of a chain question).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from docmind_core.values import RetrievedChunk, Scope, Turn
from docmind_core.text.tokens import ENGLISH_STOP_WORDS, is_cjk, keyword_tokens, part_of_speech, salient_terms, sentences

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
    r"对比|比较|区别|差异|差别|异同|不同|不一样|一样|相同|相比|比起|相较|分别|各自|哪个|哪一|哪[条款种家位座所只部台]|"
    r"谁更|谁的|谁先|谁是|更", re.IGNORECASE)
_CN_LEAD_RE = re.compile(r"^(?:请|请问|帮我|麻烦)?(?:对比|比较|分析|介绍|说说|讲讲|看看)?(?:一下)?")
_CN_TAIL_RE = re.compile(r"(?:的|之间|在|有|哪|谁|是否|分别|各自|区别|差异|差别|异同|优缺点|有什么|有何|相比|比起|相较|"
                         r"不同|一样|相同).*$")
_EN_LEAD_RE = re.compile(r"^.*?\b(?:between|compare|of|is|are|was|were|did|do|does|has|have)\s+", re.IGNORECASE)
_CONNECTORS = r"(?:[ \t]+(?:(?:of|the|for|to|de|la|le|von|van|du|in|on|a)[ \t]+)*)"  # never across lines
_NAME_CONNECTORS = r"(?:[ \t]+(?:(?:of|the|for|de|la|le|von|van|du|y)[ \t]+)*)"  # "met X in Y" is two names
_WORD = r"[\w'’&-]*(?:\.(?=[A-Za-z]))?[\w'’&-]*"  # "Mt.Carmel"-style inner dots, never a sentence's full stop
_INITIAL = r"[A-Z]\.(?=[ \t]+[A-Z])"  # "Roger O. Egeberg", "Gerald R. Ford"
_CAPITAL = r"(?:[a-z](?=[A-Z]))?[A-Z0-9]"  # "iPhone", "eBay": a name with one small letter in front
_FOCUS_RUN_RE = re.compile(rf"(?:{_INITIAL}|{_CAPITAL}{_WORD})(?:{_CONNECTORS}(?:{_INITIAL}|{_CAPITAL}{_WORD}))*")
_NAME_RUN_RE = re.compile(rf"(?:{_INITIAL}|[A-Z]{_WORD})(?:{_NAME_CONNECTORS}(?:{_INITIAL}|[A-Z]{_WORD}))*")
_ID_LIKE_RE = re.compile(r"^[\w-]*\d[\w-]*$|\.\w{1,5}$")  # "hp00277", "manual.pdf": names of files, not things
_GENERIC_CAPS = frozenset(
    "the a an he she it they his her its their this that these those in on at of for and but or as by with from "
    "january february march april may june july august september october november december monday tuesday "
    "wednesday thursday friday saturday sunday american british english french german italian spanish chinese "
    "japanese canadian australian russian indian irish scottish dutch swedish korean mexican european "
    "are were is was do did does which who what where when how why whose whom both".split())

# Words that ask for the comparison itself; they add nothing to a per-focus search.
_COMPARISON_WORDS = frozenset("对比 比较 区别 差异 差别 异同 分别 各自 相比 比起 相较 不同 一样 相同 哪个 哪 谁 和 与 跟 同 及 "
                              "compare compared comparison difference differences versus vs both same".split())




@dataclass(frozen=True)
class ScopeDecision:
    scope: Scope
    confidence: float
    reason: str  # in words, for the timeline ("the message is only a greeting, so nothing is searched")
    memory_text: str = ""  # for MEMORY_COMMAND: what to store


# Conversation acts: a message made only of these (one or several: "hello, who are you?") needs no retrieval.
# Each pattern matches one whole clause; clauses are split on punctuation, so "hello world program in python"
# or "what can you do with the DM-3000 remote?" never match.
_GREETING_ACT = re.compile(
    r"(?:你好|您好|嗨|哈喽|哈啰|早上好|早安|下午好|晚上好|晚安|在吗|在不在|再见|拜拜)(?:呀|啊|哈|了|啦|你|您)*"
    r"|(?:hi|hello|hey|hiya|good (?:morning|afternoon|evening)|bye|goodbye|see you)(?: there| docmind| again)?",
    re.IGNORECASE)
_THANKS_ACT = re.compile(
    r"(?:谢谢|多谢|感谢|谢啦|谢谢你|谢谢您|非常感谢|辛苦了|好的谢谢)(?:呀|啊|哈|了|啦|你|您)*"
    r"|(?:thanks|thank you(?: (?:so|very) much)?|thx|cheers)(?: docmind)?",
    re.IGNORECASE)
_ACKNOWLEDGEMENT_ACT = re.compile(r"(?:好的|明白了|知道了|收到)(?:呀|啊|哈|了|啦)*|ok(?:ay)?|got it|great|perfect",
                                  re.IGNORECASE)
_CAPABILITY_ACT = re.compile(
    r"(?:请问)?(?:你|您)(?:能|可以|会)(?:做|干|帮我做|帮我)?(?:些)?(?:什么|啥)(?:事情|事)?"
    r"|(?:你|您)(?:有|都有)(?:什么|哪些)(?:功能|能力|本事)|(?:请)?(?:介绍一下|介绍下)(?:你|您)自己"
    r"|(?:你|您)(?:是)?(?:谁|什么|哪位)(?:呀|啊)?|(?:你|您)叫什么(?:名字)?"
    r"|what can you do(?: for me)?|what do you do|who are you|what are you|who am i talking to"
    r"|what(?:'s| is) your name|(?:please )?introduce yourself|tell me about yourself"
    r"|how can you help(?: me)?|what are your (?:capabilities|features)|help",
    re.IGNORECASE)
_ACT_SPLIT = re.compile(r"[\s]*[,，。.!！?？;；~～…、]+[\s]*|\s+(?=and\s)", re.IGNORECASE)
_ACT_FILLER = re.compile(r"^(?:and|so|well|oh|um|嗯|那|那么|请问)\s*", re.IGNORECASE)
_ACT_WORDS = {"greeting": "a greeting", "thanks": "thanks", "acknowledgement": "an acknowledgement",
              "capability": "a question about DocMind itself"}


def conversation_acts(text: str) -> list[str] | None:
    """The conversation acts a whole message is made of (greeting, thanks, acknowledgement, capability), or None when any
    part of it is something else (a question about the documents, a request, a name we do not know)."""
    acts: list[str] = []
    for clause in _ACT_SPLIT.split(text.strip()):
        clause = _ACT_FILLER.sub("", clause.strip())
        if not clause:
            continue
        for name, pattern in (("greeting", _GREETING_ACT), ("thanks", _THANKS_ACT),
                              ("acknowledgement", _ACKNOWLEDGEMENT_ACT), ("capability", _CAPABILITY_ACT)):
            if pattern.fullmatch(clause):
                acts.append(name)
                break
        else:
            return None
    return acts or None


def _act_reason(acts: list[str]) -> str:
    named = list(dict.fromkeys(_ACT_WORDS[a] for a in acts))
    said = named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]
    return f"the message is only {said}, so nothing is searched"


_MEMORY_ZH = re.compile(r"^\s*(?:请|麻烦)?(?:帮我)?(?:记住|记一下|记下|记好)[:：,，\s]*(?P<text>.+?)\s*$")
_MEMORY_EN = re.compile(r"^\s*(?:please\s+)?(?:remember|note|keep in mind)\s+(?:that\s+)?(?P<text>.+?)\s*$",
                        re.IGNORECASE)

_SUMMARY_ZH = re.compile(
    r"(?:总结|概括|归纳|回顾|梳理)(?:一下)?.{0,6}(?:我们|咱们|上面|以上|刚才|之前|前面|目前为止)?.{0,6}(?:的)?"
    r"(?:对话|聊天|讨论|谈话|聊的|说的|问答)")
_SUMMARY_EN = re.compile(
    r"\b(?:summari[sz]e|recap|sum up)\b.{0,20}\b(?:our|this|the|what we)\b.{0,15}"
    r"\b(?:conversation|chat|discussion|talk(?:ed)?|exchange)\b", re.IGNORECASE)
_TRANSLATE_ZH = re.compile(
    r"(?:把|将)?(?:你|您)(?:的)?(?:上面|上一条|上一个|刚才|之前|前面|最后)?(?:的)?(?:回答|回复|答案|话)"
    r".{0,8}(?:翻译|译成|译为)|翻译(?:一下)?(?:你|您)(?:的)?(?:上面|上一条|上一个|刚才|之前|前面)?(?:的)?(?:回答|回复|答案|话)")
_TRANSLATE_EN = re.compile(
    r"\btranslate\b.{0,12}\b(?:your|the|that)\s+(?:last|previous|above|earlier)?\s*(?:answer|reply|response|message)\b",
    re.IGNORECASE)
_RECALL_CHAT = re.compile(
    r"(?:我|我们)(?:刚才|之前|前面|上面)(?:问|说|聊)了(?:什么|些什么|啥)|"
    r"\bwhat (?:did|have) (?:i|we) (?:just )?(?:ask(?:ed)?|say|said|talk(?:ed)? about)\b", re.IGNORECASE)

# A memory command is a statement, not a question: "do you remember ..." must reach the model path.
_QUESTION_LIKE = re.compile(r"[?？]\s*$|^\s*(?:do|did|can|could|will|would)\s+you\b|吗\s*[?？]?\s*$", re.IGNORECASE)


def fast_scope(question: str, history: Sequence[Turn] | None = None) -> ScopeDecision | None:
    """A confident scope from surface patterns, or None to let the model decide."""
    text = question.strip()
    if not text:
        return None
    for pattern, reason in ((_SUMMARY_ZH, "summarise_conversation"), (_SUMMARY_EN, "summarise_conversation"),
                            (_TRANSLATE_ZH, "translate_last_answer"), (_TRANSLATE_EN, "translate_last_answer"),
                            (_RECALL_CHAT, "recall_conversation")):
        if pattern.search(text):
            return ScopeDecision(Scope.META_DIALOGUE, 0.95, f"regex:{reason}")
    acts = conversation_acts(text)
    if acts:
        scope = Scope.CAPABILITY if "capability" in acts else Scope.CHITCHAT
        return ScopeDecision(scope, 0.95 if scope is Scope.CHITCHAT else 0.9, _act_reason(acts))
    if not _QUESTION_LIKE.search(text):
        memory = memory_text(text)
        if memory:
            return ScopeDecision(Scope.MEMORY_COMMAND, 0.9, "regex:memory_command", memory_text=memory)
    return None


def memory_text(question: str) -> str:
    """What a "remember that ..." / "记住 ..." command asks to store, or "" when it is not one."""
    for pattern in (_MEMORY_ZH, _MEMORY_EN):
        m = pattern.match(question.strip())
        if m and len(m.group("text")) >= 2:
            return m.group("text").rstrip("。.!！ ")
    return ""


# --------------------------------------------------------------------------
# Question analysis
# --------------------------------------------------------------------------

# What makes entities set side by side a comparison: a question asking which/who of them, a comparative, or a
# word for difference or sameness.  "Is there an app for iOS or Android?" names two things and compares nothing.
_COMPARISON_ASK_RE = re.compile(
    r"\b(?:which|who|whose|whom|both|same|different|difference|differ|compare|compared|comparison|common|versus|"
    r"vs|older|oldest|younger|youngest|larger|largest|bigger|biggest|smaller|smallest|longer|longest|shorter|"
    r"shortest|higher|highest|taller|tallest|faster|fastest|slower|cheaper|cheapest|earlier|earliest|later|first|"
    r"more|most|less|fewer|better|best|worse|heavier|lighter|newer|closer|further|farther)\b|"
    r"哪|谁|更|最|比|区别|差异|差别|不同|不一样|一样|相同|异同|对比|相比|相较|分别|各自", re.IGNORECASE)


def compares_entities(question: str) -> bool:
    """Whether the question sets two or three named entities against each other ("A 和 B 哪个更…", "A vs B",
    "Who is older, A or B?", "the difference between A and B")."""
    return bool(_COMPARISON_ASK_RE.search(question)) and len(comparison_entities(question)) >= 2


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
                           "in on at of compare contrast".split())


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
    "what which who whom whose where when why how much many mean means does did do type kind sort".split())
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


# A role the question asks through ("the director of X") and the passive a passage states it with ("directed by
# Y"): the name after the passive is the bridge to the next hop.
_ROLE_PASSIVES = {
    "director": "directed", "author": "written", "writer": "written", "founder": "founded", "producer": "produced",
    "composer": "composed", "creator": "created", "designer": "designed", "developer": "developed",
    "publisher": "published", "owner": "owned", "builder": "built", "architect": "designed", "manager": "managed",
    "coach": "coached", "star": "starring", "performer": "performed", "singer": "sung", "host": "hosted",
    "inventor": "invented", "painter": "painted", "editor": "edited",
}


def _role_passive(question: str) -> re.Pattern[str] | None:
    """"(directed|...) by " for the roles the question names, or None when it names none."""
    asked = {w.lower().rstrip("s") for w in re.findall(r"[A-Za-z]+", question)}
    verbs = sorted({v for role, v in _ROLE_PASSIVES.items() if role in asked})
    if not verbs:
        return None
    return re.compile(rf"\b(?:{'|'.join(verbs)})(?:\s+and\s+\w+)?(?:\s+by)?\s*$", re.IGNORECASE)


def bridge_entities(question: str, chunks: Sequence[RetrievedChunk]) -> list[str]:
    """Names the best chunks introduce that the question does not contain (the next hop's subject)."""
    own = {t.lower() for t in keyword_tokens(question, stem=False)}
    role_passive = _role_passive(question)
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
                    # "written and directed by Adriana Trigiani" answers "the director of ..." itself
                    role = 3.0 if role_passive and role_passive.search(sentence[:match.start()]) else 1.0
                    add(name, (1.0 + 0.3 * (len(words) - 1)) * decay * context * role)
    return [n for n, _ in sorted(scored.items(), key=lambda kv: (-kv[1], kv[0]))]


def _chinese_proper_nouns(text: str, flags: tuple[str, ...] = ("nr", "ns", "nt", "nz")) -> list[str]:
    return [w for w, flag in part_of_speech(text[:600]) if flag in flags and len(w) >= 2]
