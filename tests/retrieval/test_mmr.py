"""MMR selection with hand-computed marginal scores."""

import numpy as np
import pytest

from docmind_core.values import RetrievedChunk, StageScores
from docmind_core.retrieval.mmr import mmr_select


def _chunk(i, rerank=None):
    return RetrievedChunk(chunk_id=str(i), document="d", text=f"t{i}", scores=StageScores(rerank=rerank))


# a and b are near-duplicates (cos 0.96); c is orthogonal to both.
VECS = np.array([[1.0, 0.0, 0.0], [0.96, 0.28, 0.0], [0.0, 0.0, 1.0]], dtype=np.float32)


def test_lambda_one_keeps_relevance_order():
    chunks = [_chunk(0, 0.9), _chunk(1, 0.8), _chunk(2, 0.5)]
    picks = mmr_select(None, chunks, VECS, 1.0, 3)
    assert [p.index for p in picks] == [0, 1, 2]
    assert [p.mmr for p in picks] == pytest.approx([0.9, 0.8, 0.5])


def test_redundant_chunk_loses_to_a_different_one():
    chunks = [_chunk(0, 0.9), _chunk(1, 0.8), _chunk(2, 0.5)]
    picks = mmr_select(None, chunks, VECS, 0.5, 2)
    # step 1: 0.5*0.9 = 0.45 (index 0). step 2: b = 0.5*0.8 - 0.5*0.96 = -0.08; c = 0.5*0.5 - 0 = 0.25
    assert [p.index for p in picks] == [0, 2]
    assert picks[0].mmr == pytest.approx(0.45)
    assert picks[1].mmr == pytest.approx(0.25)


def test_relevance_falls_back_to_query_cosine():
    chunks = [_chunk(0), _chunk(1), _chunk(2)]
    query = np.array([0.0, 0.0, 1.0], dtype=np.float32)
    picks = mmr_select(query, chunks, VECS, 0.7, 1)
    assert picks[0].index == 2 and picks[0].mmr == pytest.approx(0.7)


def test_k_larger_than_pool_and_empty_input():
    assert len(mmr_select(None, [_chunk(0, 0.3)], VECS[:1], 0.5, 10)) == 1
    assert mmr_select(None, [], np.zeros((0, 3)), 0.5, 3) == []
    with pytest.raises(ValueError):
        mmr_select(None, [_chunk(0, 0.3)], VECS[:1], 1.5, 1)
