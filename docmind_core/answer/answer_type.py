"""Does the answer answer the question?  What kind of value a question asks for, and whether a supported
claim of the answer states one — pure text, no model call.

The claim checks (claims.py) read each claim against its source; they cannot see that an answer whose every
claim is supported never states what was asked ("The firmware version that first let the N2 join an Aurora
tenant is [1], which states 'New: the N2 can join …'": quoted, supported, and no version).  This module reads
the question instead.

A question is cut into its parts ("Which firmware version first let …, and what known issue did it have?" is
two).  Each part asks for one kind of value, or for none:

- ``version`` ("which/what version", "哪个版本"), ``date`` ("when", "what year", "什么时候", "哪一年"),
  ``money`` ("how much does … cost", "price", "价格", "多少钱"), ``count`` ("how many", "多少个", "几位"),
  ``quantity`` ("how much/long/big", "what is the maximum power draw", "多少", "多久"), ``name`` ("who",
  "where", "叫什么", "在哪里") and ``address`` ("what address/URL/command", "地址", "命令");
- none: a yes/no question ("Is there …", "…吗", "是否"), an open one ("how do I", "why", "what does X
  mean", "怎么处理", "为什么") or a choice between named alternatives ("…, X or Y?", "还是").

A part naming a measure ("the maximum power draw", "保留期") asks for a value in its units (W, a duration): the
pricing row "Nimbus N2 | 2,390 USD | 32 GB | … | see the N2 datasheet" states numbers, and no power draw.

A part that asks for a kind is *answered* when a supported claim states a value of that kind the question
does not already state ("when was 3.2.1 released" is not answered by "3.2.1").  A claim that shares no word
with the part but shares words with another part of the question answers that other part, not this one: the
version in "The known issue is … (fixed in 3.2.1)" does not say which version first let the N2 join.  A part
with fewer than two words of its own ("允许的范围是多少") reads the words of the whole question.

The check is lenient by design: a value of the kind anywhere in a supported claim counts, since what it must
catch is an answer that states none; whether the value is the right one is the claim checks' job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from docmind_core.values import ClaimCheck
from docmind_core.text.tokens import keyword_tokens
# the question reading and the value patterns live in text/, shared with the offline reader
from docmind_core.text.value_kinds import (  # noqa: F401  (re-exported)
    KIND_WORDS, QuestionPart, ValueKind, bare_text as _bare, kind_of, measure_units, question_parts, states_value,
)

# --------------------------------------------------------------------------
# The answer against the question
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class AnswerTypeCheck:
    """The kinds of value the question asks for, and those no supported claim states."""

    asked: tuple[ValueKind, ...] = ()
    missing: tuple[ValueKind, ...] = ()

    @property
    def answers(self) -> bool | None:
        """True: every asked kind is stated; False: one is not; None: the question asks for no value."""
        return None if not self.asked else not self.missing

    @property
    def reason(self) -> str:
        """In words, for the confidence reason ("" when the question is answered or asks for no value)."""
        if not self.missing:
            return ""
        kinds = " or ".join(dict.fromkeys(KIND_WORDS[k] for k in self.missing))
        return f"does not answer the question: it asks for {kinds} and no supported claim states one"


def _belongs_elsewhere(words: frozenset[str], part: QuestionPart, parts: Sequence[QuestionPart],
                       own: frozenset[str]) -> bool:
    if words & own:
        return False
    return any(words & other.words for other in parts if other is not part)


def check_answer_type(question: str, claims: Sequence[ClaimCheck]) -> AnswerTypeCheck:
    """Which kinds of value ``question`` asks for that no supported claim of the answer states."""
    parts = question_parts(question)
    asked = [p for p in parts if p.kind is not None]
    if not asked:
        return AnswerTypeCheck()
    everything = frozenset().union(*(p.words for p in parts))
    supported = [(c.text, frozenset(keyword_tokens(_bare(c.text), stem=True))) for c in claims
                 if c.status == "supported"]
    missing: list[ValueKind] = []
    for part in asked:
        own = part.words if len(part.words) >= 2 else everything
        if not any(states_value(part.kind, text, question, part.units)
                   and not _belongs_elsewhere(words, part, parts, own)
                   for text, words in supported):
            missing.append(part.kind)
    return AnswerTypeCheck(tuple(dict.fromkeys(p.kind for p in asked)), tuple(dict.fromkeys(missing)))
