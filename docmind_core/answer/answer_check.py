"""The model's answer read against its sources and its question, with the offline reading as a second opinion.

A small local model can write an answer whose claims its sources do not hold, or one that never states the
value the question asks for, while the evidence in front of it does state it (measured with Qwen2.5-Coder
1.5B: "Released: [1]" for a release date, "the version is [1][1]" for a version).  The claim checks
(``claims.py``) and the answer-type check (``answer_type.py``) already see this; they lower the band.  With
``citation.rescue_failed_answer`` on (the ``local_small`` profile turns it on), the pipeline goes one step
further and shows DocMind's offline reading of the same evidence instead, but only when that reading passes
the checks the model's answer failed:

- the evidence was graded HIGH, and the offline answer has a supported claim, none unsupported or
  contradicted, and states every kind of value the question asks for; or
- the evidence was not graded HIGH, the model's answer makes a claim its sources do not hold, and the offline
  reading declines to answer (an honest "the sources do not say" beats a made-up fact); or
- every value the model's answer gives is stated of another entity or under another qualifier than asked
  (target_match.py), or the evidence was not graded HIGH and the answer makes a claim its sources do not hold,
  and the offline reading says what the sources state instead ("The sources state the N1's maximum draw (28 W), not its
  idle draw.").

Otherwise the model's answer stands, with the band its checks give it.  The replaced answer is kept in the
run's ``Fallback`` event, so the timeline shows what the model wrote and why it was not shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from docmind_core.answer.answer_type import KIND_WORDS, check_answer_type
from docmind_core.answer.citations import parse_citations
from docmind_core.answer.target_match import check_target
from docmind_core.text.tokens import detect_language
from docmind_core.values import CitationResult, RetrievedChunk, Tier


@dataclass(frozen=True)
class AnswerReading:
    """What the checks found in one answer."""

    citations: CitationResult
    supported: int
    unsupported: int
    contradicted: int
    missing: tuple[str, ...]  # kinds of value the question asks for that no supported claim states
    off_target: str = ""  # no answered value is stated of the asked entity and qualifier: what is stated instead

    @property
    def fails(self) -> bool:
        return bool(self.unsupported or self.contradicted or self.missing or self.off_target)

    @property
    def holds(self) -> bool:
        """Some claim is found in its source, none is unsupported or contradicted, and the question is answered."""
        return self.supported > 0 and not self.fails

    @property
    def declines(self) -> bool:
        """The answer states nothing from the sources (the offline reader's "the sources do not say")."""
        return self.supported == 0 and self.citations.cited_sentences == 0


def read_answer(question: str, answer: str, sources: Sequence[RetrievedChunk], min_sentence_len: int,
                citations: CitationResult | None = None) -> AnswerReading:
    """The checks of ``answer``; ``citations`` when they were already parsed (and perhaps judged)."""
    citations = citations if citations is not None else parse_citations(answer, sources, min_sentence_len)
    statuses = [c.status for c in citations.claims]
    answered = check_answer_type(question, citations.claims) if question.strip() else None
    target = check_target(question, citations.claims, sources) if question.strip() else None
    off = target is not None and target.matched is False and not target.partial
    return AnswerReading(citations=citations, supported=statuses.count("supported"),
                         unsupported=statuses.count("unsupported"), contradicted=statuses.count("contradicted"),
                         missing=tuple(answered.missing) if answered is not None else (),
                         off_target=(target.note or "off target") if off else "")


def faults(reading: AnswerReading) -> str:
    """What is wrong with an answer, in words, without semicolons or full stops (it goes inside a sentence)."""
    parts = []
    if reading.missing:
        kinds = " or ".join(dict.fromkeys(KIND_WORDS[k] for k in reading.missing))
        parts.append(f"it does not state {kinds}, which the question asks for")
    if reading.contradicted:
        parts.append(f"{reading.contradicted} of its claims contradict{'s' if reading.contradicted == 1 else ''} "
                     f"the cited source")
    if reading.off_target:
        parts.append("it states the value of another product, version or condition than the one asked about")
    if reading.unsupported:
        parts.append(f"{reading.unsupported} of its claims {'is' if reading.unsupported == 1 else 'are'} "
                     f"not found in the sources")
    return " and ".join(parts)


def rescue_reason(model: AnswerReading, offline: AnswerReading, tier: Tier | None) -> str:
    """Why the offline reading replaces the model's answer; "" when the model's answer stands."""
    if not model.fails:
        return ""
    if tier == Tier.HIGH and offline.holds:
        return (f"the language model's answer failed the checks ({faults(model)}), and DocMind's offline reading "
                f"of the same evidence passes them")
    if (model.off_target or (tier != Tier.HIGH and (model.unsupported or model.contradicted))) \
            and offline.off_target:
        return (f"the language model's answer failed the checks ({faults(model)}), and DocMind's offline reading "
                f"says what the sources state instead")
    if tier != Tier.HIGH and (model.unsupported or model.contradicted) and offline.declines:
        return (f"the language model's answer failed the checks ({faults(model)}) on evidence graded "
                f"{tier.value if tier else 'unknown'}, and DocMind's offline reading finds no answer in it")
    return ""


def rescue_notice(question: str, model: AnswerReading) -> str:
    """Put before the offline reading in the answer, in the question's language; one sentence ending in a colon,
    so the claim checks read it as an introduction, not a claim."""
    if detect_language(question) == "zh":
        bits = []
        if model.missing:
            bits.append("没有给出问题所问的" + "或".join(dict.fromkeys(_ZH_KIND.get(k, k) for k in model.missing)))
        if model.off_target:
            bits.append("给出的是其他产品、版本或条件的数值")
        if model.contradicted or model.unsupported:
            bits.append("含有资料中找不到的说法")
        return f"注意：语言模型的回答{'，并且'.join(bits)}，已搁置（保留在运行时间线中），以下是 DocMind 对同一批资料的离线摘录：\n\n"
    return (f"Note: the language model's answer (kept in the run's timeline) is set aside because {faults(model)}, "
            f"so here is DocMind's offline reading of the same sources:\n\n")


_ZH_KIND = {"version": "版本号", "date": "日期", "money": "价格", "count": "数量", "quantity": "数值",
            "name": "名称", "address": "地址"}


@dataclass(frozen=True)
class SecondOpinion:
    """The outcome of reading a written answer, and of the rescue when it failed."""

    model: AnswerReading  # the checks of the answer as written
    reason: str = ""  # why the offline reading replaces it; "" when the written answer stands
    replacement: str = ""  # the notice and the offline reading, shown instead; "" when the written answer stands


def second_opinion(question: str, answer: str, sources: Sequence[RetrievedChunk], min_sentence_len: int,
                   tier: Tier | None, offline_reading: Callable[[], str],
                   citations: CitationResult | None = None) -> SecondOpinion:
    """Read ``answer``; when it fails, compute the offline reading (``offline_reading``, called only then) and
    decide whether it replaces the answer.  The pipeline and ``bench/answer_bands.py --rescue`` share this."""
    model = read_answer(question, answer, sources, min_sentence_len, citations)
    if not model.fails:
        return SecondOpinion(model=model)
    text = offline_reading()
    reason = rescue_reason(model, read_answer(question, text, sources, min_sentence_len), tier)
    if not reason:
        return SecondOpinion(model=model)
    return SecondOpinion(model=model, reason=reason, replacement=rescue_notice(question, model) + text)
