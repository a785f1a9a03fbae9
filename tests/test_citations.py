"""Citation parsing (no model) and the answer's confidence."""

from __future__ import annotations

import pytest

from docmind_core.citations import confidence_from, parse_citations
from docmind_core.models import CitationResult, RetrievedChunk, Tier
from docmind_core.settings import CitationSettings

SOURCES = [
    RetrievedChunk(chunk_id="kb-1", document="手册.pdf", text="…"),
    RetrievedChunk(chunk_id="kb-2", document="faq.md", text="…"),
    RetrievedChunk(chunk_id="web-3", document="Vendor news", text="…", origin="web", url="https://example.org"),
]


def parse(answer: str, min_len: int = 8):
    return parse_citations(answer, SOURCES, min_len)


def test_out_of_range_reference_is_counted_and_marked_invalid():
    answer = "The battery lasts 12 hours [1]. The price is 999 yuan [9]."
    result = parse(answer)
    assert result.invalid_refs == 1
    assert [(o.index, o.valid) for o in result.occurrences] == [(1, True), (9, False)]
    assert [u.index for u in result.used_sources] == [1]
    assert result.coverage == pytest.approx(0.5)  # the second sentence cites nothing valid
    bad = result.occurrences[1]
    assert answer[bad.char_start:bad.char_end] == "[9]"


def test_adjacent_markers():
    answer = "The device weighs 1.2 kg and lasts 12 hours [1][3]."
    result = parse(answer)
    assert [o.index for o in result.occurrences] == [1, 3]
    assert [(u.index, u.chunk_id, u.document, u.origin) for u in result.used_sources] == [
        (1, "kb-1", "手册.pdf", "kb"), (3, "web-3", "Vendor news", "web")]
    spans = [answer[o.char_start:o.char_end] for o in result.occurrences]
    assert spans == ["[1]", "[3]"]
    assert result.coverage == 1.0


@pytest.mark.parametrize("marker", ["[1,3]", "[1, 3]", "[1，3]", "[1、3]"])
def test_grouped_markers(marker):
    answer = f"The device supports fast charging {marker}."
    result = parse(answer)
    assert [o.index for o in result.occurrences] == [1, 3]
    assert all(answer[o.char_start:o.char_end] == marker for o in result.occurrences)
    assert result.coverage == 1.0 and result.invalid_refs == 0


def test_chinese_punctuation_and_full_width_brackets():
    answer = "DM-3000 的续航时间为 12 小时［1］。它支持 65W 快充，半小时可充至八成【2】！价格为 999 元。[3]"
    result = parse(answer)
    assert [o.index for o in result.occurrences] == [1, 2, 3]
    assert result.substantive_sentences == 3
    assert result.cited_sentences == 3  # "。[3]" belongs to the sentence before it
    assert result.coverage == 1.0


def test_chinese_sentences_without_citations_lower_coverage():
    answer = "DM-3000 的续航时间为 12 小时[1]。它的价格没有在资料中说明。保修期为一年，自购买之日起计算[2]；售后服务热线全天开放。"
    result = parse(answer)
    assert result.substantive_sentences == 4
    assert result.cited_sentences == 2
    assert result.coverage == pytest.approx(0.5)


def test_no_citations():
    result = parse("The battery lasts twelve hours on a full charge. It charges in thirty minutes.")
    assert result.occurrences == [] and result.used_sources == []
    assert result.coverage == 0.0 and result.substantive_sentences == 2


def test_greetings_short_sentences_and_lead_ins_are_not_counted():
    answer = "你好！根据资料：\nDM-3000 的续航时间为 12 小时[1]。\n好的。\nHope this helps!"
    result = parse(answer)
    assert result.substantive_sentences == 1 and result.coverage == 1.0


def test_nothing_substantive_gives_no_coverage():
    assert parse("你好！").coverage is None
    assert parse("").coverage is None


def test_minimum_sentence_length_is_configurable():
    answer = "续航 12 小时。价格 999 元[1]。"
    assert parse(answer, min_len=4).substantive_sentences == 2
    assert parse(answer, min_len=8).substantive_sentences == 0


def test_marker_after_english_period_belongs_to_the_sentence():
    result = parse("The battery lasts twelve hours. [1] It charges in thirty minutes. [2]")
    assert result.coverage == 1.0 and result.cited_sentences == 2


SETTINGS = CitationSettings()


@pytest.mark.parametrize("coverage, top, tier, score, band, ungrounded", [
    (1.0, 0.8, Tier.HIGH, 0.8, "HIGH", False),
    (0.5, 0.8, Tier.HIGH, 0.4, "MEDIUM", False),
    (0.5, 0.5, Tier.AMBIGUOUS, 0.25, "LOW", False),
    (0.75, 0.8, Tier.HIGH, 0.6, "HIGH", False),  # band_high is inclusive
    (0.0, 0.2, Tier.LOW, 0.0, "LOW", True),
    (0.0, 0.9, Tier.HIGH, 0.0, "LOW", False),  # uncited but not LOW evidence: not flagged
    (0.04, 0.2, "LOW", 0.008, "LOW", True),
    (None, 0.7, Tier.HIGH, 0.7, "HIGH", False),  # unknown coverage: the top score
    (None, 0.2, Tier.LOW, 0.2, "LOW", False),
    (1.5, 0.5, Tier.HIGH, 0.5, "MEDIUM", False),  # coverage is clamped
])
def test_confidence_bands(coverage, top, tier, score, band, ungrounded):
    confidence = confidence_from(CitationResult(coverage=coverage), top, tier, SETTINGS)
    assert confidence.score == pytest.approx(score)
    assert confidence.band == band
    assert confidence.ungrounded is ungrounded


def test_confidence_without_coverage_when_disabled():
    settings = CitationSettings(confidence_uses_coverage=False)
    assert confidence_from(CitationResult(coverage=0.1), 0.7, Tier.HIGH, settings).score == pytest.approx(0.7)


def test_band_thresholds_follow_settings():
    settings = CitationSettings(band_high=0.9, band_low=0.1)
    assert confidence_from(CitationResult(coverage=1.0), 0.8, Tier.HIGH, settings).band == "MEDIUM"
