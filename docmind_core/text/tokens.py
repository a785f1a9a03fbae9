"""Language-aware text helpers shared by every stage.

* ``count_tokens``: one consistent count for Chinese and English without a
  downloaded tokenizer (tiktoken fetches its files at first use).  Each CJK
  character counts as one token; a latin word as one token plus one per eight
  characters beyond the first; other symbols as one.  It over-counts slightly
  against BPE tokenizers, which is the safe side for a budget.
* ``split_sentences``: Chinese (。！？；…) and English (. ! ?) sentence ends,
  with abbreviations, decimals and version numbers kept whole.
* ``keyword_tokens``: what the keyword index and lexical coverage see: jieba
  words for Chinese, lower-cased (optionally stemmed) English words, codes such
  as ``DM-3000`` or ``v2.4.1`` kept whole as well as split, stop words removed.
"""

from __future__ import annotations

import importlib
import logging
import re
import threading
from typing import Iterator, Sequence
from functools import lru_cache

import jieba

jieba.setLogLevel(logging.WARNING)
_jieba_lock = threading.Lock()

_CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_RE = re.compile(f"[{_CJK}]")
_TOKEN_RE = re.compile(f"[{_CJK}]|[A-Za-z0-9]+|[^\\s{_CJK}A-Za-z0-9]")
_LONG_WORD_RE = re.compile(r"[A-Za-z0-9]{9,}")
# A code starts at a word's first character and its runs never give back characters (no separator is
# alphanumeric, so that never changes a match): without both, a run of n letters costs n² steps.
_CODE_RE = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9]++(?:[-_./][A-Za-z0-9]++)+")
_WORD_RE = re.compile(r"[A-Za-z0-9]+(?:'[a-z]+)?")

# A citation marker, the one definition the parser, the chip renderer, the history cleaner and the offline
# answerers share: [3], [1,3], [1，3], [1、3], full-width ［1］ and 【1】 ([1][3] is two markers). Group 1 holds
# the numbers; read them with marker_numbers().
CITATION_MARKER_RE = re.compile(r"[\[［【]\s*(\d{1,3}(?:\s*[,，、]\s*\d{1,3})*)\s*[\]］】]")
_MARKER_NUMBER_RE = re.compile(r"\d{1,3}")


def marker_numbers(marker: re.Match[str]) -> list[int]:
    """The source numbers of one :data:`CITATION_MARKER_RE` match, in the order written."""
    return [int(n) for n in _MARKER_NUMBER_RE.findall(marker.group(1))]


# Words that tie a question to a time, so its answer may have changed since the documents were written: "latest",
# relative dates ("last quarter", "上个月", "这周", "近两年") and explicit years ("2025年", "Q3 2025").  The planner
# adds web search for them, the offline understanding marks the question time-aware, the offline tool policy
# searches the web.  A year is four digits that are not part of a code or version ("DM-2024", "v2024.1"); a
# Chinese character before it is fine ("公司2024年").
_CN_COUNT = r"[一二两三四五六七八九十几\d]+"
TIME_KEYWORD_PATTERN = re.compile(
    r"最新|近期|近日|近来|最近|目前|当前|现在|如今|眼下|今天|今日|昨天|前天|前几天|这几天|这两天|更新日志|"
    r"(?:今|去|前|明|本)年|(?:这|本|上|下)(?:个)?(?:月|季度|星期|礼拜)|(?:这|本|上|下)周|"
    rf"(?:近|过去|最近)(?:的)?{_CN_COUNT}(?:个)?(?:年|月|季度|周|星期|天|日)|"
    r"\blatest\b|\bcurrent(?:ly)?\b|\brecent(?:ly)?\b|\bnewest\b|\bnowadays\b|\bup[- ]to[- ]date\b|\bas of\b|"
    r"\b(?:this|last|next|past|previous|coming) (?:year|quarter|month|week|weekend|decade)\b|"
    r"\b(?:past|last|previous) (?:few|couple of|several|\d+|two|three) (?:days|weeks|months|quarters|years)\b|"
    r"\b(?:today|tonight|yesterday|tomorrow)\b|\bso far\b|\bchangelog\b|\brelease notes\b|"
    r"(?<![A-Za-z0-9_.\-])(?:19|20)\d{2}(?![\d.\-])",
    re.IGNORECASE,
)

# Words that ask about several things at once (a comparison): understanding upgrades SIMPLE to MEDIUM for them.
MULTI_FOCUS_PATTERN = re.compile(
    r"对比|比较|区别|差异|异同|分别|各自|\bvs\.?(?=\s|$)|\bversus\b|\bcompar(?:e|ed|ing|ison)\b|\bdifferences? between\b",
    re.IGNORECASE,
)

ENGLISH_STOP_WORDS = frozenset(
    """a an the and or but if then else of to in on at by for with from as is are was were be been being
    this that these those it its it's i you he she we they them his her our your their me my mine us do does did
    done have has had having not no nor so than too very can could should would will shall may might must
    what which who whom whose when where why how all any both each few more most other some such only own same
    about above after again against below between into through during before under over out up down off once
    here there just also s t don now ok please tell explain describe give show let know yes""".split()
)

CHINESE_STOP_WORDS = frozenset(
    """的 了 是 在 和 与 及 或 也 就 都 而 被 把 让 给 对 从 向 以 于 之 其 这 那 这个 那个 这些 那些 什么 怎么
    怎样 如何 哪些 哪个 哪 吗 呢 啊 吧 呀 嘛 哦 么 请 请问 一下 一个 我 你 他 她 它 我们 你们 他们 有 没有 还 又 很 更
    最 会 能 可以 要 想 吧 着 过 得 地 个 为 为什么 多少 几 是否 是不是 告诉 介绍 说说 讲讲 一 下 上 中 等 及其 以及""".split()
)

_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st vs etc e.g i.e eg ie no fig inc ltd co corp dept approx est vol pp al".split()
)


def is_cjk(ch: str) -> bool:
    return bool(_CJK_RE.match(ch))


def detect_language(text: str) -> str:
    """'zh' when CJK characters make up a fair share of the letters, else 'en'."""
    cjk = len(_CJK_RE.findall(text))
    latin = sum(len(w) for w in _WORD_RE.findall(text))
    return "zh" if cjk and cjk * 3 >= latin else "en"


def crosses_language(question: str, top_dense_texts: Sequence[str]) -> bool:
    """Most of the best dense hits are in the other language than the question (Chinese vs English).

    A monolingual collection never crosses, so its fusion and reranking are unchanged; measured on the
    cross-language sets of bench/crosslang.py.
    """
    if len(top_dense_texts) < 2:
        return False
    asked = detect_language(question)
    other = sum(detect_language(t) != asked for t in top_dense_texts)
    return other * 2 > len(top_dense_texts)


@lru_cache(maxsize=4096)
def count_tokens(text: str) -> int:
    # Cached: one search counts the same passages in expansion and again in compression.
    return uncached_count_tokens(text)


def uncached_count_tokens(text: str) -> int:
    """:func:`count_tokens` without its cache, for a text that must not stay alive in it (a document)."""
    # One per token, plus (len - 1) // 8 for latin runs; only runs of 9+ characters add anything,
    # so those are found by a second regex instead of looping over every token in Python.
    return len(_TOKEN_RE.findall(text)) + sum((len(w) - 1) // 8 for w in _LONG_WORD_RE.findall(text))


# A latin run is handed out in spans of at most this many characters (a multiple of 8, so the spans of a run
# cost exactly what the run costs): the chunker can cut a run of megabytes (one "word" without a space) like
# any other text, and no chunk, so no encoder input, holds more than a chunk's worth of it.
SPAN_RUN_CHARS = 64
_SPAN_RE = re.compile(f"[{_CJK}]|[A-Za-z0-9]{{1,{SPAN_RUN_CHARS}}}|[^\\s{_CJK}A-Za-z0-9]")


def iter_token_spans(text: str, pos: int = 0, endpos: int | None = None) -> Iterator[tuple[int, int, int]]:
    """(start, end, cost) of each counted token in order, one at a time (the costs add up to
    ``count_tokens(text)``; the chunker cuts an over-long sentence at token boundaries): a sentence of millions
    of characters (a text without punctuation) is cut without a list of all its tokens, and a latin run longer
    than :data:`SPAN_RUN_CHARS` comes in spans of that length.  ``pos``/``endpos`` look at ``text[pos:endpos]``
    without copying it (offsets stay those of ``text``); ``pos`` is the end of an earlier span (or 0)."""
    for m in _SPAN_RE.finditer(text, pos, len(text) if endpos is None else endpos):
        tok = m.group(0)
        yield m.start(), m.end(), 1 + (len(tok) - 1) // 8 if len(tok) > 1 else 1


def truncate_to_tokens(text: str, max_tokens: int) -> str:
    """The longest prefix of ``text`` within ``max_tokens`` (cut at a token boundary)."""
    if max_tokens <= 0:
        return ""
    used = 0
    for m in _TOKEN_RE.finditer(text):
        tok = m.group(0)
        cost = 1 + (len(tok) - 1) // 8 if len(tok) > 1 else 1
        if used + cost > max_tokens:
            return text[: m.start()].rstrip()
        used += cost
    return text


# --------------------------------------------------------------------------
# Sentences
# --------------------------------------------------------------------------

_CN_END = "。！？；…!?;"
_SENT_RE = re.compile(r"[^。！？；…!?;.\n]*(?:[。！？；…!?;]+[”’」』）)]*|\.+|\n+|$)")


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Character spans (start, end) of sentences, covering the text without gaps or overlaps."""
    return list(iter_sentence_spans(text))


def iter_sentence_spans(text: str) -> Iterator[tuple[int, int]]:
    """:func:`split_sentences` one span at a time (see :class:`SentenceScanner`)."""
    scanner = SentenceScanner()
    scanner.feed(text)
    scanner.finish()
    return scanner.spans()


_BREAK_RE = re.compile(r"[。！？；…!?;\n.]")  # where a sentence may end
NONBLANK_RE = re.compile(r"\S")  # the same test as str.strip(): Unicode whitespace
_CLOSERS = "”’」』）)\"'"
_PERIOD_TAIL = ".\"')”’"
_LOOKBACK = 12  # characters before a period that _is_sentence_period reads


class SentenceScanner:
    """Sentence spans of a text that arrives in pieces, the same as of the whole text at once.

    :meth:`feed` pieces, take the spans that are certain with :meth:`spans` (absolute offsets), and
    :meth:`finish` at the end.  A span is held back while more text could still change it (a run of
    line breaks or closing quotes that reaches the end of what has arrived, a period whose next
    character is unknown).  A whitespace-only piece joins the sentence before it, so a span comes once
    the next non-blank text has started.  Only ``text[keep_from:]`` is kept: :meth:`discard_before`
    drops what the caller has used (a large document is split in bounded memory).
    """

    def __init__(self) -> None:
        self.text = ""  # the buffered text; text[0] is at absolute offset base
        self.base = 0
        self.final = False
        self._start = 0  # where the piece being scanned began
        self._i = 0  # scan position
        self._pending: tuple[int, int] | None = None  # the last non-blank span, not yet handed out
        self._nonblank = False  # the piece being scanned has non-whitespace text before _checked
        self._checked = 0

    @property
    def end(self) -> int:
        """Absolute offset just past the text that has arrived."""
        return self.base + len(self.text)

    def feed(self, piece: str) -> None:
        self.text += piece

    def finish(self) -> None:
        self.final = True

    def slice(self, start: int, end: int) -> str:
        return self.text[start - self.base:end - self.base]

    @property
    def piece_start(self) -> int:
        """Where the piece being scanned began (its text becomes the next span)."""
        return self._start

    def open_piece(self) -> tuple[int, int] | None:
        """(start, scanned up to) of the sentence being scanned once it has non-blank text: it will be a
        span starting there and ending at or after the second offset."""
        return (self._start, self._i) if self._nonblank and not self.final else None

    def keep_from(self) -> int:
        """The first offset the scanner itself still needs (the held-back span and the look-behind)."""
        keep = self._i - _LOOKBACK
        return min(keep, self._pending[0]) if self._pending is not None else keep

    def discard_before(self, offset: int) -> None:
        """Forget the text before ``offset`` (capped at what the scanner needs); copies only when it pays."""
        cut = min(offset, self.keep_from()) - self.base
        if cut > 0 and cut * 2 >= len(self.text):
            self.text = self.text[cut:]
            self.base += cut

    def spans(self) -> Iterator[tuple[int, int]]:
        """The spans that are certain now, in order."""
        text, base, final = self.text, self.base, self.final
        n = len(text)
        start, i = self._start - base, self._i - base
        while True:
            m = _BREAK_RE.search(text, i)
            if m is None:
                i = n
                break
            i = m.start()
            ch = text[i]
            end = None
            if ch == "\n" or ch in _CN_END:
                run = "\n" if ch == "\n" else _CN_END + _CLOSERS
                j = i + 1
                while j < n and text[j] in run:
                    j += 1
                if j == n and not final:
                    break  # the run may go on in the next piece
                end = j
            else:  # "."
                if i + 1 == n and not final:
                    break  # a period's meaning depends on the next character
                if _is_sentence_period(text, i):
                    j = i + 1
                    while j < n and text[j] in _PERIOD_TAIL:
                        j += 1
                    if j == n and not final:
                        break
                    end = j
            if end is None:
                i += 1
                continue
            if self._nonblank or NONBLANK_RE.search(text, max(start, self._checked - base), end):
                if self._pending is not None:
                    yield self._pending
                self._pending = (start + base, end + base)
            elif self._pending is not None:
                self._pending = (self._pending[0], end + base)
            start = i = end
            self._nonblank, self._checked = False, end + base
        self._start, self._i = start + base, i + base
        if not final:
            # Remember whether the piece so far is blank, so its start need not be kept to ask again.
            if not self._nonblank:
                self._nonblank = bool(NONBLANK_RE.search(text, max(start, self._checked - base), i))
                self._checked = i + base
            if self._nonblank and self._pending is not None:
                # The piece being scanned ends non-blank, so nothing more can join the held-back span.
                yield self._pending
                self._pending = None
            return
        if start < n:
            if (self._nonblank or NONBLANK_RE.search(text, max(start, self._checked - base), n)
                    or self._pending is None):
                if self._pending is not None:
                    yield self._pending
                self._pending = (start + base, n + base)
            else:
                self._pending = (self._pending[0], n + base)
            self._start = self._i = n + base
        if self._pending is not None:
            yield self._pending
            self._pending = None


def _is_sentence_period(text: str, i: int) -> bool:
    n = len(text)
    nxt = text[i + 1] if i + 1 < n else ""
    prev = text[i - 1] if i > 0 else ""
    if prev.isdigit() and nxt.isdigit():  # 3.14, v2.4.1
        return False
    if nxt and not nxt.isspace() and nxt not in "\"')”’":
        return False  # e.g. "example.com", "e.g"
    m = re.search(r"([A-Za-z][A-Za-z.]*)$", text[max(0, i - 12): i])
    if m:
        word = m.group(1).lower().rstrip(".")
        if word in _ABBREVIATIONS:
            return False
        if len(word) == 1 and word.isalpha() and prev.isupper():  # initials: "J. Smith", "U.S."
            return bool(re.search(r"\d ?$", text[max(0, i - 3): i - 1]))  # but a unit ends one: "draws 45 W."
    return True


def sentences(text: str) -> list[str]:
    return [text[a:b].strip() for a, b in split_sentences(text) if text[a:b].strip()]


# --------------------------------------------------------------------------
# Keyword tokens
# --------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _stemmer():
    try:
        import Stemmer  # PyStemmer

        return Stemmer.Stemmer("english")
    except Exception:  # optional: without it English words are kept as they are
        return None


@lru_cache(maxsize=50000)
def _stem(word: str) -> str:
    s = _stemmer()
    return s.stemWord(word) if s is not None else word


def _jieba_words(segment: str) -> list[str]:
    with _jieba_lock:  # jieba's lazy initialisation is not thread-safe
        return jieba.lcut(segment)


def load_segmenter() -> None:
    """Load jieba's dictionary now (~0.7 s), not at the first Chinese text."""
    with _jieba_lock:
        jieba.initialize()


def load_tagger() -> None:
    """Load jieba's part-of-speech tables now (~0.5 s), not at the first question naming someone."""
    importlib.import_module("jieba.posseg")  # its import reads the tables


def part_of_speech(text: str) -> list[tuple[str, str]]:
    """(word, jieba part-of-speech flag) of ``text``, under the same lock as every other jieba call (the
    tokenizer and the tagger share jieba's lazy initialisation)."""
    import jieba.posseg as pseg

    with _jieba_lock:
        return [(p.word, p.flag) for p in pseg.cut(text)]


_SEGMENT_RE = re.compile(f"([{_CJK}]+)")


def keyword_tokens(text: str, stem: bool = True) -> list[str]:
    """Tokens for BM25 and lexical coverage, stop words removed, in text order."""
    plain = list(_cached_plain_tokens(text)) if len(text) <= _CACHED_TEXT_CHARS else _plain_tokens(text)
    return stem_tokens(plain) if stem else plain


# One search tokenises its question about eight times (keyword search, reranker, compression, ...):
# short texts (questions) are cached; chunk texts are tokenised once at ingest and stored instead.
_CACHED_TEXT_CHARS = 512


@lru_cache(maxsize=1024)
def _cached_plain_tokens(text: str) -> tuple[str, ...]:
    return tuple(_plain_tokens(text))


def forget_cached_tokens() -> None:
    """Empty the question-token cache, so the next tokenising of any text runs jieba again (for measuring
    how often text is tokenised)."""
    _cached_plain_tokens.cache_clear()


def _plain_tokens(text: str) -> list[str]:
    out: list[str] = []
    for code in _CODE_RE.findall(text):
        out.append(code.lower())
    for part in _SEGMENT_RE.split(text):
        if not part:
            continue
        if _CJK_RE.match(part):
            for w in _jieba_words(part):
                w = w.strip()
                if w and w not in CHINESE_STOP_WORDS:
                    out.append(w)
        else:
            for w in _WORD_RE.findall(part):
                low = w.lower()
                if low not in ENGLISH_STOP_WORDS:
                    out.append(low)
    return out


def stem_tokens(tokens: list[str]) -> list[str]:
    """Stem the plain English words among ``keyword_tokens(..., stem=False)``; codes, numbers and
    Chinese words stay as they are.  ``stem_tokens(keyword_tokens(t, stem=False)) == keyword_tokens(t)``."""
    return [_stem(t) if t.isascii() and t.isalpha() else t for t in tokens]


def stored_terms(text: str) -> str:
    """A chunk's keyword tokens in the form kept with it at ingest (``ChunkRecord.terms``): unstemmed,
    space-separated (no token contains whitespace); ``split_terms`` reads it back."""
    return " ".join(keyword_tokens(text, stem=False))


def split_terms(stored: str) -> list[str]:
    return stored.split(" ") if stored else []


def salient_terms(text: str) -> dict[str, float]:
    """Query terms with weights: codes, numbers, capitalised names and long CJK words count more."""
    weights: dict[str, float] = {}
    capitalised = {w.lower() for w in re.findall(r"\b[A-Z][A-Za-z0-9]+", text)}
    for tok in keyword_tokens(text, stem=False):
        w = 1.0
        if any(c.isdigit() for c in tok) or _CODE_RE.fullmatch(tok):
            w = 2.0
        elif tok in capitalised:
            w = 1.6
        elif is_cjk(tok[0]) and len(tok) >= 3:
            w = 1.4
        elif is_cjk(tok[0]) and len(tok) == 1:
            w = 0.5
        weights[tok] = max(weights.get(tok, 0.0), w)
    return weights


def normalise_query(query: str) -> str:
    """Canonical form used to detect a repeated search in one run."""
    toks = keyword_tokens(query, stem=True)
    return " ".join(sorted(set(toks))) if toks else re.sub(r"\s+", " ", query.strip().lower())


@lru_cache(maxsize=8192)
def chunk_terms(chunk_text: str, stored: str | None = None) -> tuple[frozenset[str], frozenset[tuple[str, str]], str]:
    """(terms, adjacent stemmed pairs, lower-cased text) of a chunk.

    ``stored`` is the chunk's keyword tokens as kept at ingest (``ChunkRecord.terms``); with it, no
    jieba pass runs.  Without it (web pages, older rows) the text is tokenised, and the result is
    cached because the same chunks come back query after query.
    """
    plain = split_terms(stored) if stored is not None else keyword_tokens(chunk_text, stem=False)
    stemmed = stem_tokens(plain)  # the same stemming keyword_tokens(stem=True) applies, without a second jieba pass
    present = frozenset(plain) | frozenset(stemmed)
    return present, frozenset(zip(stemmed, stemmed[1:])), chunk_text.lower()
