"""Chinese names across scripts: "Sima You" in an English question and 司马攸 in a Chinese passage.

A multilingual encoder ties most of a question to a passage in the other language, but not a romanised
Chinese name to its characters: "Who was Sima You?" sits as near to any Western Jin passage as to the one
about 司马攸.  This module reads the name itself, through Hanyu Pinyin (the readings of ``pypinyin``):

* an English question's romanised names are runs of capitalised words that spell whole pinyin syllables
  ("Sima You", "Dong'an", "Dashadi"; "Western" and "Metro" are not pinyin), two syllables at least, since a
  single syllable matches too many characters to mean anything;
* a Chinese question's names are the words jieba tags as a person or a place (``nr``, ``nrfg``, ``ns``), and
  their pinyin is looked for in an English passage as the words a writer would use ("sima qian",
  "simaqian", "Sima-Qian").

``NameBridge.shares`` says, for each passage of a batch, the share of the question's names it holds, among
the names some passage of the batch holds (a "name" found nowhere, like "Line" read as li-ne, counts for
nobody).  The reranker reads it for a passage in the other language than the question, where no other
lexical signal can see the name.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

from docmind_core.text.tokens import detect_language, is_cjk, part_of_speech

_NAME_TAGS = frozenset({"nr", "nrfg", "ns"})
_CAPITALISED_RUN = re.compile(r"[A-Z][a-z]+(?:['’\-][a-z]+)*(?:\s+[A-Z][a-z]+(?:['’\-][a-z]+)*)*")
_MAX_SPLITS = 4  # readings of one spelling tried ("xian": xian or xi'an)
_MAX_NAME_LETTERS = 24  # a longer word is no romanised name ("Zhongguorenmin" is 14)
_lock = threading.Lock()


@dataclass(frozen=True)
class RomanisedName:
    """A romanised name of an English question: its words and the syllable sequences it can spell."""

    text: str
    spellings: tuple[tuple[str, ...], ...]


@lru_cache(maxsize=1)
def _characters_by_syllable() -> dict[str, str]:
    """Toneless syllable -> every character with that reading (ü spelled both v and u, as English writes it)."""
    from pypinyin.pinyin_dict import pinyin_dict

    out: dict[str, list[str]] = {}
    for codepoint, readings in pinyin_dict.items():
        char = chr(codepoint)
        if not is_cjk(char):
            continue
        for reading in readings.split(","):
            plain = _toneless(reading)
            # interjections read m, n, ng, hm: no vowel, and they would split "Sima" into si-m-a
            if not plain.isascii() or not plain.isalpha() or not any(v in plain for v in "aeiouv"):
                continue
            for spelling in {plain, plain.replace("v", "u")}:
                out.setdefault(spelling, []).append(char)
    return {syllable: "".join(chars) for syllable, chars in out.items()}


def _toneless(reading: str) -> str:
    """'lǘ' -> 'lv', 'fān' -> 'fan'."""
    plain = unicodedata.normalize("NFKD", reading.replace("ü", "v").replace("Ü", "v"))
    return "".join(c for c in plain if not unicodedata.combining(c)).lower()


def _splits(word: str) -> list[tuple[str, ...]]:
    """The ways ``word`` (lower-case letters) spells whole syllables, fewest syllables first."""
    if len(word) > _MAX_NAME_LETTERS:
        return []
    syllables = _characters_by_syllable()
    n = len(word)
    # finishes[i]: word[i:] spells whole syllables. Walking only into such positions keeps the search linear
    # in the splits found: "ananan...x" would otherwise try every way to cut the run before failing at the x.
    finishes = [False] * n + [True]
    for i in range(n - 1, -1, -1):
        finishes[i] = any(finishes[j] and word[i:j] in syllables for j in range(i + 1, min(n, i + 6) + 1))
    found: list[tuple[str, ...]] = []

    def walk(start: int, done: tuple[str, ...]) -> None:
        if len(found) >= _MAX_SPLITS:
            return
        if start == n:
            found.append(done)
            return
        for end in range(min(n, start + 6), start, -1):  # no syllable is longer than six letters
            if finishes[end] and word[start:end] in syllables:
                walk(end, done + (word[start:end],))

    if finishes[0]:
        walk(0, ())
    return sorted(found, key=len)


def romanised_names(question: str) -> list[RomanisedName]:
    """The runs of capitalised words of ``question`` that spell pinyin, two syllables or more."""
    out: list[RomanisedName] = []
    for run in _CAPITALISED_RUN.finditer(_ascii_letters(question)):
        words = run.group(0).split()
        # a run breaks at a word that is not pinyin: "the Western Jin" keeps nothing, "Sima You" stays whole
        current: list[list[tuple[str, ...]]] = []
        texts: list[str] = []
        for word in words + [""]:
            parts = [p for p in re.split(r"['’\-]", word.lower()) if p] if word else []
            options = _word_spellings(parts) if parts else []
            if options:
                current.append(options)
                texts.append(word)
                continue
            if current:
                spellings = _join(current)
                if spellings and len(spellings[0]) >= 2:
                    out.append(RomanisedName(" ".join(texts), tuple(spellings)))
            current, texts = [], []
    return out


def _ascii_letters(text: str) -> str:
    """Tone marks and ü dropped, so "Lǚ Bù" reads as "Lu Bu"."""
    plain = unicodedata.normalize("NFKD", text.replace("ü", "u").replace("Ü", "U"))
    return "".join(c for c in plain if not unicodedata.combining(c))


def _word_spellings(parts: list[str]) -> list[tuple[str, ...]]:
    """Syllable sequences of one word (its apostrophe- or hyphen-separated parts each spelled whole)."""
    splits = [_splits(part) for part in parts]
    return _join(splits) if all(splits) else []


def _join(pieces: list[list[tuple[str, ...]]]) -> list[tuple[str, ...]]:
    """The pieces' syllable sequences one after another: at most ``_MAX_SPLITS`` of the combinations."""
    options: list[tuple[str, ...]] = [()]
    for piece in pieces:
        options = [o + s for o in options for s in piece][:_MAX_SPLITS]
    return options


@lru_cache(maxsize=512)
def _name_pattern(spellings: tuple[tuple[str, ...], ...]) -> re.Pattern[str]:
    """One regular expression over Chinese text: a run of characters that read as any spelling of the name."""
    table = _characters_by_syllable()
    branches = ["".join(f"[{table[s]}]" for s in spelling) for spelling in spellings]
    return re.compile("|".join(f"(?:{b})" for b in branches))


def chinese_names(question: str) -> list[tuple[str, re.Pattern[str]]]:
    """A Chinese question's person and place names, each with the pattern its pinyin makes in English text."""
    from pypinyin import lazy_pinyin

    out: list[tuple[str, re.Pattern[str]]] = []
    seen: set[str] = set()
    for word, flag in part_of_speech(question):
        if flag not in _NAME_TAGS or len(word) < 2 or word in seen or not all(is_cjk(c) for c in word):
            continue
        seen.add(word)
        with _lock:  # pypinyin's phrase tables load lazily
            syllables = [_toneless(s) for s in lazy_pinyin(word)]
        if len(syllables) < 2 or not all(s.isascii() and s.isalpha() for s in syllables):
            continue
        # "sima qian", "simaqian", "Sima-Qian", "Sima Qian's": syllables joined by nothing, a space or a hyphen
        body = r"[\s\-']?".join(re.escape(s).replace("v", "(?:v|u|ü)") for s in syllables)
        out.append((word, re.compile(rf"(?<![a-z]){body}(?![a-z])", re.IGNORECASE)))
    return out


def _load_readings() -> None:
    from pypinyin import lazy_pinyin

    with _lock:
        lazy_pinyin("长安")  # pypinyin's import and its phrase table (~0.5-0.7 s)


# What a warm-up loads so the first question that crosses languages does not pay for it; each ~0.5 s, so a
# warm-up can pause between them (Engine.warm_up)
WARM_STEPS = (_load_readings, _characters_by_syllable)


class NameBridge:
    """The question's names, read once; ``shares`` reads them against a batch of passages."""

    def __init__(self, question: str):
        self.language = detect_language(question)
        if self.language == "en":
            self._patterns = [_name_pattern(n.spellings) for n in romanised_names(question)]
        else:
            self._patterns = [pattern for _word, pattern in chinese_names(question)]

    @property
    def empty(self) -> bool:
        return not self._patterns

    def shares(self, texts: Sequence[str], other: Sequence[bool] | None = None) -> list[float]:
        """Per passage, the share of the question's names it holds, among the names any of ``texts`` holds;
        0 for a passage in the question's own language (its words speak for themselves).  ``other``: which
        passages are in the other language, when the caller has read that already."""
        if not self._patterns:
            return [0.0] * len(texts)
        if other is None:
            other = [detect_language(t) != self.language for t in texts]
        held = [[bool(p.search(t)) for p in self._patterns] if o else [] for t, o in zip(texts, other)]
        somewhere = [any(h[i] for h in held if h) for i in range(len(self._patterns))]
        total = sum(somewhere)
        if not total:
            return [0.0] * len(texts)
        return [sum(h[i] for i in range(len(h)) if somewhere[i]) / total if h else 0.0 for h in held]
