"""Query-aware compression: hand-computed caps, sentence choice, and the budget invariant."""

import random

import pytest

from docmind_core.values import RetrievedChunk
from docmind_core.retrieval.compress import SentenceScorer, compress_to_budget, shorten, water_level
from docmind_core.text.tokens import count_tokens


def _chunk(cid, text):
    return RetrievedChunk(chunk_id=cid, document="doc", text=text)


def _sentence(word, n=9):
    return " ".join([word] * n) + "."  # n words + the full stop = n + 1 tokens


FILLER = [_sentence(w, 19) for w in ("alpha", "bravo", "charlie", "delta")]  # 20 tokens each
WARRANTY = "The warranty period lasts two years from the date of purchase."  # 12 tokens


def test_water_level_hand_computed():
    assert water_level([30, 100], 80) == 50
    assert water_level([10, 10, 10], 100) == 10
    assert water_level([40, 40, 40], 60) == 20


def test_under_budget_is_untouched():
    chunks = [_chunk("a", "short text."), _chunk("b", "another one.")]
    out = compress_to_budget("anything", chunks, 100)
    assert [c.text for c in out.chunks] == ["short text.", "another one."]
    assert out.dropped == [] and out.used_tokens == 6


def test_keeps_the_query_relevant_sentences_in_order():
    text = " ".join([FILLER[0], FILLER[1], WARRANTY, FILLER[2], FILLER[3]])
    assert count_tokens(text) == 92
    # budget 48 with an 8-token first chunk: cap = 40 for the long one -> the warranty sentence (12)
    # plus the earliest filler sentence (20), in document order; a second filler would exceed 40
    first = _chunk("a", "Short intro sentence with seven tokens here.")
    assert count_tokens(first.text) == 8
    out = compress_to_budget("How long is the warranty period?", [first, _chunk("b", text)], 48)
    assert out.chunks[0].text == first.text
    assert out.chunks[1].text == f"{FILLER[0]} {WARRANTY}"
    assert out.used_tokens == 8 + 32


def test_drops_lowest_ranked_chunks_when_too_many():
    chunks = [_chunk(str(i), " ".join([_sentence("word")] * 5)) for i in range(6)]  # 50 tokens each
    out = compress_to_budget("word", chunks, 100)
    # a 40-token floor per chunk allows two chunks in 100 tokens (cap 50 each)
    assert [c.chunk_id for c in out.chunks] == ["0", "1"]
    assert [c.chunk_id for c in out.dropped] == ["5", "4", "3", "2"]
    assert all(c.cut_by == "budget" and not c.kept for c in out.dropped)
    assert out.used_tokens <= 100


def test_one_overlong_sentence_is_cut_at_a_token_boundary():
    scorer = SentenceScorer("anything")
    text = " ".join(["word"] * 50)
    short = shorten(text, 10, scorer)
    assert count_tokens(short) == 10 and text.startswith(short)


def test_chinese_budget_and_relevant_sentence():
    text = "产品介绍如下。" * 5 + "DM-3000的保修期为两年。" + "其他说明文字。" * 5
    out = compress_to_budget("DM-3000的保修期是多久？", [_chunk("z", text)], 20)
    assert "保修期为两年" in out.chunks[0].text
    assert count_tokens(out.chunks[0].text) <= 20


@pytest.mark.parametrize("seed", range(25))
def test_budget_is_never_exceeded_mixed_languages(seed):
    rng = random.Random(seed)
    zh = ["检索增强生成把文档切成小块。", "向量检索找语义相近的段落，", "关键词检索擅长编号和专名；", "预算按字计数！"]
    en = ["Hybrid retrieval fuses two rankings.", "The reranker scores each chunk in [0, 1].",
          "Version v2.4.1 fixed the DM-3000 export bug!", "Compression keeps sentences that match the query."]
    chunks = []
    for i in range(rng.randint(1, 12)):
        parts = [rng.choice(zh + en) for _ in range(rng.randint(1, 30))]
        chunks.append(_chunk(str(i), "".join(p if rng.random() < 0.5 else " " + p for p in parts).strip()))
    budget = rng.randint(5, 400)
    out = compress_to_budget("DM-3000 导出 bug 预算", chunks, budget)
    total = sum(count_tokens(c.text) for c in out.chunks)
    assert total == out.used_tokens <= budget
    assert len(out.chunks) + len(out.dropped) == len(chunks)
    assert all(c.text.strip() for c in out.chunks)
