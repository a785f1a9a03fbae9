"""An offline excerpt standing in for a model answer that failed its checks is never banded HIGH.

The 1.5B's agentic q14 (bench/RESULTS.md): asked "Nimbus 报 NIM-201 错误应该怎么办？", it joined the three steps of
the troubleshooting list in one sentence, which no one line of the source states, so the claim checks failed it
and the rescue showed the offline excerpt instead.  The excerpt states the error's cause, not what to do: every
claim holds, the question asks for no value the answer-type check could miss, and the evidence was graded HIGH,
so the excerpt was banded HIGH, a wrong answer in HIGH."""

from __future__ import annotations

from docmind_core.answer.citations import confidence_from, parse_citations
from docmind_core.settings import CitationSettings
from docmind_core.values import RetrievedChunk, StageScores, Tier

QUESTION = "Nimbus 报 NIM-201 错误应该怎么办？"
SOURCE = RetrievedChunk(
    chunk_id="t1", document="troubleshooting_zh.md", scores=StageScores(rerank=0.95),
    text="## NIM-201：风扇故障或机箱温度过高\n\n原因：风扇停转或者通风口被堵住。固件 3.2.0 存在待机唤醒后风扇不转的问题。\n\n"
         "处理步骤：\n1. 确认设备周围至少留有 10 厘米的通风空间。\n2. 将固件升级到 3.2.1 或更高版本。\n"
         "3. 如果升级后仍报错，请联系技术支持更换风扇模块。")
EXCERPT = ("注意：语言模型的回答含有资料中找不到的说法，已搁置（保留在运行时间线中），以下是 DocMind 对同一批资料的离线摘录：\n\n"
           "根据资料：\nNIM-201：风扇故障或机箱温度过高[1]。\n原因：风扇停转或者通风口被堵住[1]。\n"
           "固件 3.2.0 存在待机唤醒后风扇不转的问题[1]。")


def band(stand_in: bool) -> tuple[str, str]:
    citations = parse_citations(EXCERPT, [SOURCE], 8)
    assert citations.unsupported_claims == 0 and citations.contradicted_claims == 0  # every claim holds
    confidence = confidence_from(citations, 0.95, Tier.HIGH, CitationSettings(), question=QUESTION,
                                 stand_in=stand_in)
    return confidence.band, confidence.reason


def test_the_excerpt_alone_would_be_high():
    assert band(stand_in=False)[0] == "HIGH"  # what the run showed before: nothing else caps it


def test_as_a_stand_in_it_is_at_most_medium_and_says_why():
    shown, reason = band(stand_in=True)
    assert shown == "MEDIUM" and "stands in for the model's answer, which failed its checks" in reason
