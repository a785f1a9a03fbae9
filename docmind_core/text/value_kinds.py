"""What a question asks for and what values a text states: the readings the answer checks (answer/) and
the offline reader (backends/offline/) share, so both agree on "what the question asks for".

* Values a text states (:func:`values_in`): numbers with their units ("45 W", "1,490 USD", "290公里"),
  addresses, versions, dates; the unit tables (:data:`UNITS`, :data:`ZH_UNIT_PATTERN`).
* The parts of a question and the kind of value each asks for (:func:`question_parts`, :func:`kind_of`):
  version, date, money, count, quantity in a named measure (:func:`measure_units`), name or address.
* Whether a text states a value of a kind the question does not already state (:func:`states_value`).

Pure functions over text; the reasoning behind each rule is in answer/answer_type.py and answer/claims.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from docmind_core.text.tokens import CITATION_MARKER_RE, keyword_tokens

# --------------------------------------------------------------------------
# Values a text states
# --------------------------------------------------------------------------

UNITS: dict[str, str] = {
    "%": "%", "percent": "%", "％": "%",
    "w": "w", "watt": "w", "watts": "w", "瓦": "w", "瓦特": "w", "kw": "kw", "千瓦": "kw",
    "v": "v", "伏": "v", "kg": "kg", "公斤": "kg", "千克": "kg", "g": "g", "克": "g",
    "mm": "mm", "毫米": "mm", "cm": "cm", "厘米": "cm", "m": "m", "米": "m", "km": "km", "公里": "km",
    "tb": "tb", "gb": "gb", "mb": "mb", "kb": "kb", "pb": "pb", "gbe": "gbe", "ghz": "ghz", "mhz": "mhz",
    "usd": "usd", "dollars": "usd", "dollar": "usd", "美元": "usd", "eur": "eur", "euros": "eur", "欧元": "eur",
    "rmb": "cny", "cny": "cny", "yuan": "cny", "元": "cny", "人民币": "cny",
    "days": "day", "day": "day", "天": "day", "日": "day", "hours": "hour", "hour": "hour", "h": "hour",
    "小时": "hour", "个小时": "hour", "minutes": "minute", "minute": "minute", "min": "minute", "mins": "minute",
    "分钟": "minute", "seconds": "second", "second": "second", "s": "second", "sec": "second", "秒": "second",
    "秒钟": "second", "weeks": "week", "week": "week", "周": "week", "months": "month", "month": "month",
    "个月": "month", "years": "year", "year": "year", "年": "year",
    "users": "user", "user": "user", "seats": "seat", "seat": "seat", "employees": "person", "people": "person",
    "staff": "person", "人": "person", "名": "person", "位": "person", "customers": "customer", "家": "customer",
    "degrees": "degree", "degree": "degree", "度": "degree", "°c": "degree", "℃": "degree",
    "pages": "page", "page": "page", "页": "page", "documents": "document", "份": "document",
    "queries": "query", "cores": "core", "core": "core", "核": "core", "ports": "port", "port": "port",
    "ns": "ns", "ms": "ms", "us": "us", "μs": "us", "nm": "nm", "um": "um", "μm": "um", "mg": "mg", "ml": "ml",
    "mmol": "mmol", "kda": "kda", "hz": "hz", "khz": "khz", "mtorr": "mtorr", "kpa": "kpa", "mpa": "mpa",
    "个": "", "million": "million", "万": "wan", "亿": "yi", "billion": "billion", "x": "x", "倍": "x",
}
_EN_UNIT = "|".join(sorted((re.escape(u) for u in UNITS if u.isascii() and u.isalpha()), key=len, reverse=True))
ZH_UNIT_PATTERN = "|".join(sorted((re.escape(u) for u in UNITS if not u.isascii()), key=len, reverse=True))
# ASCII look-arounds: a number glued to Chinese ("全长290公里") is a value, one inside a code ("AES-256") is not
_VALUE_RE = re.compile(
    r"(?P<ip>(?<![A-Za-z0-9_.])\d{1,3}(?:\.\d{1,3}){3}(?![A-Za-z0-9_.]))"
    r"|(?P<date>(?<![A-Za-z0-9_.-])\d{4}-\d{1,2}(?:-\d{1,2})?(?![A-Za-z0-9_-]))"
    r"|(?P<version>(?<![A-Za-z0-9_.])v?\d+\.\d+\.\d+(?:\.\d+)*(?![A-Za-z0-9_]|\.\d))"
    r"|(?P<cur>[$€¥￥])\s?(?P<curnum>\d[\d,]*(?:\.\d+)?)"
    r"|(?<![A-Za-z0-9_.,-])(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?![\d,]*\.\d)"
    r"(?:\s*-?\s*(?P<unit>%|％|°c|℃|(?:" + _EN_UNIT + r")(?![a-z])|(?:" + ZH_UNIT_PATTERN + r")))?",
    re.IGNORECASE)
_CURRENCY_SYMBOL = {"$": "usd", "€": "eur", "¥": "cny", "￥": "cny"}


@dataclass(frozen=True)
class Value:
    """A value a text states: its normalised number or string, and its kind (unit; "" for a bare number)."""

    key: str
    kind: str
    text: str
    start: int = 0
    end: int = 0

    def same(self, other: "Value") -> bool:
        if self.key != other.key:
            return False
        return self.kind == other.kind or not self.kind or not other.kind


def _number(raw: str) -> str:
    n = raw.replace(",", "")
    if "." in n:
        n = n.rstrip("0").rstrip(".")
    return n or "0"


def values_in(text: str) -> list[Value]:
    out: list[Value] = []
    for m in _VALUE_RE.finditer(text):
        if m.group("ip"):
            out.append(Value(m.group("ip"), "ip", m.group(0), m.start(), m.end()))
        elif m.group("date"):
            parts = m.group("date").split("-")
            out.append(Value("-".join(str(int(p)) for p in parts), "date", m.group(0), m.start(), m.end()))
        elif m.group("version"):
            out.append(Value(m.group("version").lower().lstrip("v"), "version", m.group(0), m.start(), m.end()))
        elif m.group("cur"):
            out.append(Value(_number(m.group("curnum")), _CURRENCY_SYMBOL[m.group("cur")], m.group(0),
                             m.start(), m.end()))
        else:
            unit = (m.group("unit") or "").lower()
            if not unit and re.match(r"[A-Za-z]", text[m.end():m.end() + 1]):
                continue  # "13TH", "3DS", "7XX": a name with a number in it (claim_content keeps it as one)
            out.append(Value(_number(m.group("num")), UNITS.get(unit, unit), m.group(0), m.start(), m.end()))
    return out


# Attribute words a source may use for the claim's word, both ways and across English and Chinese: a
# short list of the attributes product documents state with values.
_SYNONYM_GROUPS = (
    ("price", "cost", "priced", "pay", "fee", "价格", "售价", "价钱", "多少钱", "费用", "报价"),
    ("power", "draw", "consumption", "consume", "watt", "功耗", "功率", "耗电"),
    ("storage", "disk", "drive", "ssd", "capacity", "存储", "硬盘", "磁盘", "容量"),
    ("memory", "ram", "内存"),
    ("processor", "cpu", "core", "处理器"),
    ("employee", "staff", "people", "headcount", "员工", "人数"),
    ("headquarter", "hq", "based", "总部", "位于"),
    ("address", "url", "ip", "地址"),
    ("retention", "retain", "keep", "kept", "store", "保留", "保存", "保留期"),
    ("release", "released", "publish", "发布", "发布日期"),
    ("uptime", "availability", "sla", "可用性"),
    ("weight", "weigh", "重量"),
    ("size", "dimension", "尺寸"),
    ("error", "code", "错误", "代码", "错误代码"),
    ("fix", "fixed", "resolve", "修复"),
    ("default", "默认"),
    ("maximum", "max", "peak", "最大", "最高"),
    ("minimum", "min", "least", "最小", "最低", "至少"),
    ("founded", "establish", "成立"),
    ("temperature", "温度"),
    ("discount", "折扣", "优惠"),
    ("lead", "led", "head", "headed", "负责", "负责人", "领导", "牵头"),  # "who leads it?" / "is led by"
    ("budget", "预算"),
)


@lru_cache(maxsize=1)
def _synonyms() -> dict[str, frozenset[str]]:
    out: dict[str, set[str]] = {}
    for group in _SYNONYM_GROUPS:
        forms = {w for word in group for w in (keyword_tokens(word, stem=True) or [word])} | set(group)
        for form in forms:
            out.setdefault(form, set()).update(forms)
    return {k: frozenset(v) for k, v in out.items()}


def alternatives(term: str) -> frozenset[str]:
    """The attribute words (stemmed, either language) that name the same attribute as ``term``."""
    return _synonyms().get(term, frozenset((term,)))


# --------------------------------------------------------------------------
# What a question asks for
# --------------------------------------------------------------------------

ValueKind = Literal["version", "date", "money", "count", "quantity", "name", "address"]

KIND_WORDS: dict[str, str] = {
    "version": "a version", "date": "a date or time", "money": "a price", "count": "a count",
    "quantity": "a number with its unit", "name": "a name", "address": "an address, URL or command",
}

# --------------------------------------------------------------------------
# The parts of a question, and the kind of value each asks for
# --------------------------------------------------------------------------

_EN_WH = r"(?:what|which|when|where|who|whom|whose|how|why)"
_ZH_WH = r"(?:什么|哪|谁|多少|多久|多长|多大|几|如何|怎么|怎样|为什么|为何|何时|是否|吗)"
_PART_BREAK_RE = re.compile(
    r"[?？;；。!！]+"
    r"|,?\s+(?:and|or|but)\s+(?=" + _EN_WH + r"\b|(?:is|are|was|were|does|do|did|can|could|will|has|have)\s)"
    r"|,\s*(?=" + _EN_WH + r"\b)"
    r"|[，、]\s*(?:以及|还有|并且|而且|那么)?|以及|并且",
    re.IGNORECASE)
_ANY_CUE_RE = re.compile(r"\b" + _EN_WH + r"\b|^\s*(?:is|are|was|were|does|do|did|can|could|will|would|should|"
                         r"has|have|had)\b|" + _ZH_WH, re.IGNORECASE)

_YES_NO_RE = re.compile(
    r"^\s*(?:and\s+|so\s+|also\s+)?(?:is|are|was|were|does|do|did|can|could|will|would|should|has|have|had|may|"
    r"might|must|shall|isn't|aren't|doesn't|don't|didn't|can't)\b"
    r"|(?:吗|(?<![什怎那这多])么|嘛)\s*$|是否|有没有|能否|能不能|可否|可不可以|是不是|会不会|支不支持|有无",
    re.IGNORECASE)
_VERSION_RE = re.compile(r"\b(?:which|what)\b.*\b(?:version|release|build)s?\b|\bversion\s+(?:number|no)\b"
                         r"|\b(?:which|what)\s+firmware\b"
                         r"|(?:哪|什么|几).{0,6}版本|版本号|哪一?版|哪个固件", re.IGNORECASE)
_DATE_RE = re.compile(
    r"^\s*(?:and\s+|but\s+|so\s+)?(?:since\s+)?when\b|\b(?:what|which)\s+(?:\w+\s+)?(?:date|year|day|month|time|"
    r"quarter|week)\b|\bhow\s+long\s+ago\b|\bon\s+what\s+date\b"
    r"|什么时候|什么时间|何时|几时|哪一?年|哪一?天|哪个月|几月|几号|几点|哪一?日|(?:日期|时间)(?:是|为)?(?:什么|哪)",
    re.IGNORECASE)
_MONEY_RE = re.compile(
    r"\bhow\s+much\b.*\b(?:cost|costs|charge|charges|pay|price|priced|fee|fees|spend)\b"
    r"|\b(?:what|which)\b.*\b(?:price|prices|pricing|cost|costs|fee|fees|charge|rate\s+card)\b"
    r"|多少钱|(?:价格|售价|价钱|费用|报价|收费|定价|单价|价位)", re.IGNORECASE)
_COUNT_RE = re.compile(
    r"\bhow\s+many\b|\b(?:what|which)\s+(?:is\s+|are\s+)?(?:the\s+)?(?:total\s+)?number\s+of\b"
    r"|多少(?:个|位|名|人|家|种|款|台|条|次|项)|(?<![哪那这前后头])几(?:个|位|名|家|种|款|台|条|次|项)|有多少(?!钱)",
    re.IGNORECASE)
# open questions (why / how / in what way) and alternatives ("X or Y?", "还是") ask for no value of a kind
_OPEN_RE = re.compile(r"\bwhy\b|\bhow\s+come\b|\bmean(?:s|ing)?\b|什么意思|含义|为什么|为何|怎样|怎么样|如何|怎么|,\s*[^,]+\s+or\s+[^,]+$|还是", re.IGNORECASE)
# a code or serial the question asks for ("编号是多少", "型号"): a name, not a quantity
_CODE_ASKED_RE = re.compile(r"编号|号码|代号|型号|代码|\b(?:code|id|serial)\b", re.IGNORECASE)
_QUANTITY_RE = re.compile(
    r"\bhow\s+(?:much|long|big|large|far|old|fast|heavy|tall|wide|high|deep|hot|cold|often|soon)\b"
    r"|\bwhat\s+(?:percentage|proportion|share|ratio|fraction|rate|size|capacity)\b"
    r"|多少|多久|多长|多大(?!学)|多重(?=[？?呢]|$)|多高|多远|多快|多宽|多深|(?<![那这前后头])几(?:天|年|月|小时|分钟|秒|周|倍|成)"
    r"|百分之几",
    re.IGNORECASE)
_NAME_RE = re.compile(
    r"^\s*(?:and\s+|but\s+|so\s+)?(?:who|whom|whose|where)\b|\bwhat(?:'s|\s+is|\s+are|\s+was)\s+(?:the\s+)?"
    r"(?:\w+\s+)?names?\b|\b(?:which|what)\s+(?:company|companies|person|people|team|city|country|region|vendor|"
    r"customer|partner|product|organisation|organization|department)\b"
    r"|谁|哪里|哪儿|在哪|哪个(?:城市|国家|地区|公司|部门|团队|产品|客户)|哪家|哪位|叫什么|什么名字|名称是|什么地方",
    re.IGNORECASE)
_ADDRESS_RE = re.compile(
    r"\b(?:what|which)(?:'s|\s+is|\s+are|\s+was)?\s+(?:the\s+|its\s+|their\s+)?(?:[\w-]+\s+){0,3}?(?:address|"
    r"addresses|url|urls|link|ip|endpoint|hostname|port|path|command|commands|email|e-mail|website|domain|uri)\b"
    r"|(?:什么|哪|多少|是).{0,4}(?:地址|网址|链接|命令|端口|路径|邮箱|域名|指令)|(?:地址|网址|链接|命令|端口|路径|邮箱|域名|指令)"
    r"(?:是|为)?(?:什么|多少|哪)", re.IGNORECASE)
# "what is the maximum power draw of …": the head of the noun phrase after "what is (the)" names a measure
_WHAT_NOUN_RE = re.compile(
    r"^\s*(?:and\s+)?(?:what|which)(?:'s|\s+(?:is|are|was|were))?\s+(?:the\s+|its\s+|their\s+)?"
    r"(?P<np>(?:[\w-]+\s+){0,4}?[\w-]+)\s*(?:\b(?:of|for|on|in|at|with|that|does|do|did|is|are|was|were|will|"
    r"can|has|have|when|if|per|under|from|to)\b|$)", re.IGNORECASE)
_MEASURES = frozenset({
    "power", "draw", "consumption", "wattage", "weight", "capacity", "size", "storage", "memory", "ram", "length",
    "height", "width", "depth", "speed", "throughput", "latency", "temperature", "voltage", "uptime",
    "percentage", "rate", "ratio", "duration", "period", "timeout", "interval", "frequency", "bandwidth",
    "distance", "population", "revenue", "budget", "salary", "age", "amount", "total", "limit", "maximum",
    "minimum", "dimensions", "resolution", "sla", "quota", "lifetime", "warranty", "headcount",
})
_ZH_MEASURE_RE = re.compile(r"(?:功耗|功率|重量|容量|尺寸|速度|温度|电压|保留期|期限|时长|上限|下限|比例|百分比|带宽|延迟|"
                            r"可用性|人数|数量|金额|面积|距离|保修期)(?:是(?:什么|多少|几)|为(?:多少|几))")

# words that say what kind of value is asked, not what it is about: not a part's own words
_CUE_WORDS = frozenset(keyword_tokens(
    "what which when where who whom whose how why much many long big large version versions release date year "
    "day month time price prices cost costs number name address url command first", stem=True)) | {
    "哪里", "哪儿", "多少", "多久", "什么", "哪个", "哪些", "版本", "价格", "时候", "时间", "日期", "地址", "名字",
    "名称", "分别", "范围", "命令"}


# a measure the question names, and the units (claims.py's kinds) a value of it is stated in: the pricing row
# "Nimbus N2 | 2,390 USD | 32 GB | … | see the N2 datasheet" states numbers, and no power draw
_TIME = frozenset({"day", "hour", "minute", "second", "week", "month", "year", "ms", "us", "ns"})
_LENGTH = frozenset({"mm", "cm", "m", "km", "nm", "um"})
_MEASURE_UNITS: tuple[tuple[re.Pattern[str], frozenset[str]], ...] = (
    (re.compile(r"\b(?:power|draw|wattage|consumption)\b|功耗|功率|耗电", re.I), frozenset({"w", "kw"})),
    (re.compile(r"\bweigh(?:t|s)?\b|\bheavy\b|重量|多重", re.I), frozenset({"kg", "g", "mg"})),
    (re.compile(r"\b(?:storage|memory|ram|disk)\b|内存|存储|硬盘", re.I), frozenset({"tb", "gb", "mb", "kb", "pb"})),
    (re.compile(r"\btemperature\b|温度", re.I), frozenset({"degree"})),
    (re.compile(r"\bdimensions?\b|尺寸", re.I), _LENGTH),
    (re.compile(r"\bvoltage\b|电压", re.I), frozenset({"v"})),
    (re.compile(r"\b(?:uptime|percentage|availability)\b|百分比|百分之|可用性", re.I), frozenset({"%"})),
    (re.compile(r"\bhow\s+long\b", re.I), _TIME | _LENGTH),
    (re.compile(r"\b(?:duration|period|retention|timeout|interval|lifetime|warranty)\b|多久|多长时间|期限|保留期|"
                r"时长|保修期", re.I), _TIME),
)


@dataclass(frozen=True)
class QuestionPart:
    """One part of a question: its text, the kind of value it asks for (None: yes/no or open), its words,
    and for a named measure ("power draw", "保留期") the units its value is stated in (empty: any)."""

    text: str
    kind: ValueKind | None
    words: frozenset[str]
    units: frozenset[str] = frozenset()


def kind_of(part: str) -> ValueKind | None:
    """The kind of value one question part asks for; None for a yes/no or an open question."""
    text = part.strip()
    if not text or _YES_NO_RE.search(text) or _OPEN_RE.search(text):
        return None
    if _COUNT_RE.search(text):
        return "count"
    if _VERSION_RE.search(text):
        return "version"
    if _DATE_RE.search(text):
        return "date"
    if _ADDRESS_RE.search(text):
        return "address"
    if _MONEY_RE.search(text):
        return "money"
    if _CODE_ASKED_RE.search(text):
        return "name"
    if _QUANTITY_RE.search(text) or _ZH_MEASURE_RE.search(text):
        return "quantity"
    if _NAME_RE.search(text):
        return "name"
    m = _WHAT_NOUN_RE.match(text)
    if m and m.group("np").split()[-1].lower() in _MEASURES:
        return "quantity"
    return None


def measure_units(part: str) -> frozenset[str]:
    """The units a value of the measure ``part`` names is stated in (empty: none named, any unit)."""
    for pattern, units in _MEASURE_UNITS:
        if pattern.search(part):
            return units
    return frozenset()


def question_parts(question: str) -> list[QuestionPart]:
    """The parts of ``question``; a piece without any question word joins the piece after it (or before,
    at the end): "根据文档，X 是多少" is one part."""
    pieces = [p.strip() for p in _PART_BREAK_RE.split(question) if p and p.strip()]
    merged: list[str] = []
    carry = ""
    for piece in pieces:
        text = f"{carry} {piece}".strip() if carry else piece
        if _ANY_CUE_RE.search(piece):
            merged.append(text)
            carry = ""
        else:
            carry = text
    if carry:
        if merged:
            merged[-1] = f"{merged[-1]} {carry}"
        else:
            merged.append(carry)
    out = []
    for p in merged:
        kind = kind_of(p)
        units = measure_units(p) if kind == "quantity" else frozenset()
        out.append(QuestionPart(p, kind, frozenset(keyword_tokens(p, stem=True)) - _CUE_WORDS, units))
    return out


# --------------------------------------------------------------------------
# Values of each kind in a claim
# --------------------------------------------------------------------------

_NUMBER_WORD_RE = re.compile(
    r"\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|fifty|"
    r"sixty|hundred|thousand|million|billion|dozen|half|single|double|twice)\b"
    r"|[一二两三四五六七八九十百千万亿半]+\s*[\u4e00-\u9fff%]",
    re.IGNORECASE)
_MONTHS = r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|" \
          r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
_DATE_WORD_RE = re.compile(
    r"\b" + _MONTHS + r"\b\.?|\b(?:1[5-9]|20|21)\d{2}\b|\b\d{1,2}:\d{2}\b|\b\d{1,2}\s*(?:am|pm)\b|\bq[1-4]\b"
    r"|\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|today|yesterday|tomorrow|ago|daily|weekly|"
    r"monthly|yearly|annually|midnight|noon)\b"
    r"|[\d一二三四五六七八九十〇零]+\s*(?:年|月|日|号|点)|(?:上午|下午|凌晨|中午|晚上|每天|每周|每月|每年|昨天|今天|明天)"
    r"|(?:周|星期)[一二三四五六日天]|\b\d+(?:st|nd|rd|th)\s+centur(?:y|ies)\b|\b(?:century|centuries|decade|era)\b"
    r"|\d+\s*时(?:\s*\d+\s*分)?|[初晚早盛仲孟季][春夏秋冬]|年前|年后|世纪|年代|时代|时期|期间|时候|之后|以后|之前|当时|那一刻|"
    r"春节|[初末]期|幕末|[春夏秋冬]季|[\u4e00-\u9fff]朝", re.IGNORECASE)
# a number in words with its unit ("three years", "两年", "半小时")
_WORDED_VALUE_RE = re.compile(
    r"\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|fifty|"
    r"sixty|a\s+hundred|hundred|a\s+thousand|thousand|a\s+dozen|half\s+an?|an?)\s+(?P<unit>[a-z]+)\b"
    r"|[一二两三四五六七八九十百千万半]+\s*(?P<unit_zh>" + ZH_UNIT_PATTERN + r")",
    re.IGNORECASE)
_TIME_UNITS = frozenset({"day", "hour", "minute", "second", "week", "month", "year", "ms"})
_VERSION_WORD_RE = re.compile(r"\bv\d+(?:\.\d+)*\b|(?:version|firmware|release|build|版本|固件)\s*v?\d+(?:\.\d+)*"
                              r"|[A-Za-z0-9][\w.+-]*\s*版(?:本)?|\b[\w.+-]+\s+(?:version|edition)\b",
                              re.IGNORECASE)
_ADDRESS_VALUE_RE = re.compile(
    r"https?://\S+|\bwww\.\S+|[\w.+-]+@[\w-]+\.[\w.-]+|\b[\w-]+(?:\.[\w-]+)*:\d{2,5}\b|`[^`]+`"
    r"|(?:^|\s)(?:/[\w.-]+){2,}|\b[A-Za-z]:\\|\b[\w-]+\.(?:com|cn|io|net|org|local|internal|dev|ai)\b"
    r"|[\u4e00-\u9fff]{2,}(?:省|市|区|县|镇|乡|村|路|街|道|号|大厦|楼)|[→>»]|\b(?:sudo|curl|wget|pip|npm|apt(?:-get)?|git|ssh|systemctl|docker|kubectl|docmind)\s+\S+",
    re.IGNORECASE)
_FREE_RE = re.compile(r"\b(?:free|no\s+charge|no\s+cost|at\s+no\s+extra\s+cost)\b|免费|不收费", re.IGNORECASE)
_NUMERIC_KINDS_EXCLUDED = frozenset({"ip", "version"})
_CURRENCIES = frozenset({"usd", "eur", "cny"})


def bare_text(text: str) -> str:
    """The text without citation markers."""
    return CITATION_MARKER_RE.sub(" ", text)


def _fresh_values(claim: str, question: str):
    asked = values_in(question)
    return [v for v in values_in(claim) if not any(v.same(q) and v.kind == q.kind for q in asked)]


def _fresh_matches(pattern: re.Pattern[str], claim: str, question: str) -> bool:
    lower = question.lower()
    return any(m.group(0).strip().lower() not in lower for m in pattern.finditer(claim))


def states_value(kind: ValueKind, claim: str, question: str, units: frozenset[str] = frozenset()) -> bool:
    """``claim`` states a value of ``kind`` (in one of ``units``, when given) that ``question`` does not
    already state."""
    claim = bare_text(claim)
    values = _fresh_values(claim, question)
    if units:
        return any(v.kind in units for v in values) or any(
            UNITS.get((m.group("unit") or m.group("unit_zh")).lower()) in units
            for m in _WORDED_VALUE_RE.finditer(claim))
    if kind == "version":
        return any(v.kind == "version" or (v.kind == "" and "." in v.key) for v in values) or \
            _fresh_matches(_VERSION_WORD_RE, claim, question)
    if kind == "date":
        return any(v.kind in ("date", "year") or v.kind in _TIME_UNITS for v in values) or \
            _fresh_matches(_DATE_WORD_RE, claim, question)
    if kind == "money":  # a currency, or a bare number (a price column); 45 W or 32 GB is no price
        return any(v.kind in _CURRENCIES or v.kind == "" for v in values) or bool(_FREE_RE.search(claim)) or \
            _fresh_matches(_NUMBER_WORD_RE, claim, question)
    if kind in ("quantity", "count"):
        return any(v.kind not in _NUMERIC_KINDS_EXCLUDED for v in values) or \
            _fresh_matches(_NUMBER_WORD_RE, claim, question)
    if kind == "address":
        return any(v.kind == "ip" for v in values) or _fresh_matches(_ADDRESS_VALUE_RE, claim, question)
    # a name: some word the question does not hold (lenient: a claim restating the question names nothing)
    return bool(set(keyword_tokens(claim, stem=True)) - set(keyword_tokens(question, stem=True)) - _CUE_WORDS)
