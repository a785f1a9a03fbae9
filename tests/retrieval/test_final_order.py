"""The final order keeps some of fusion beside the reranker (issue 22 part 3: with the reranker alone, hybrid +
rerank fell below fusion alone on SciFact and HotpotQA; bench/rerank_blend.py fits the weight)."""

from __future__ import annotations

import math
from typing import Sequence

import pytest

from docmind_core.backends.protocols import Reranker
from docmind_core.eval.retrieval_eval import reranked
from docmind_core.retrieval.refine import EvidenceRefiner, final_relevance
from docmind_core.settings import Settings
from docmind_core.values import BackendStatus, RetrievedChunk, StageScores


def _logit(p: float) -> float:
    return math.log(p / (1 - p))


def test_the_best_fused_chunk_keeps_its_score_and_the_others_give_up_log_odds():
    out = final_relevance([0.8, 0.8, 0.6], [0.9, 0.5, 0.7], 1.5)
    assert out[0] == pytest.approx(0.8)  # fused 0.9 is the pool's best: min-max 1
    assert _logit(out[1]) == pytest.approx(_logit(0.8) - 1.5)  # the pool's worst fused: min-max 0
    assert _logit(out[2]) == pytest.approx(_logit(0.6) - 1.5 * (1 - 0.5))
    assert out[0] > out[1] > out[2]  # fusion breaks the reranker's tie; 1.5 log-odds do not undo 0.8 vs 0.6


def test_weight_zero_is_the_reranker_alone_and_a_large_weight_is_fusion_alone():
    rerank, fused = [0.9, 0.6, 0.3], [0.2, 0.5, 0.9]
    assert final_relevance(rerank, fused, 0.0) == rerank
    big = final_relevance(rerank, fused, 50.0)
    assert sorted(range(3), key=lambda i: -big[i]) == [2, 1, 0]


def test_a_chunk_no_fusion_scored_counts_the_pool_mean():
    # a web result has no fused score: it is neither lifted nor sunk by the others' fusion
    out = final_relevance([0.7, 0.7, 0.7], [1.0, 0.0, None], 2.0)
    assert _logit(out[2]) == pytest.approx(_logit(0.7) + 2.0 * (0.5 - 1.0))
    assert final_relevance([0.7], [None], 2.0) == pytest.approx([0.7])


class _FixedReranker:
    """Reranker protocol: the scores it is given, by chunk id."""

    name = "fixed"

    def __init__(self, scores: dict[str, float]):
        self.scores = scores

    def score(self, query: str, chunks: Sequence[RetrievedChunk]) -> list[float]:
        return [self.scores[c.chunk_id] for c in chunks]

    def status(self) -> BackendStatus:
        return BackendStatus(role="reranker", name=self.name, live=True)


def _chunks() -> list[RetrievedChunk]:
    # "a" is the reranker's narrow favourite; fusion put it last, "b" first
    return [RetrievedChunk(chunk_id=cid, document=f"{cid}.md", text=text, scores=StageScores(fused=fused))
            for cid, text, fused in (("b", "Pump warranty: two years from purchase.", 1.0),
                                     ("c", "Filters are replaced every six months.", 0.5),
                                     ("a", "The warranty lasts two years.", 0.1))]


@pytest.mark.parametrize("weight, first", [(0.0, "a"), (1.5, "b")])
def test_the_refining_pass_and_the_retrieval_eval_order_alike(weight, first):
    reranker = _FixedReranker({"a": 0.80, "b": 0.70, "c": 0.20})
    assert isinstance(reranker, Reranker)
    settings = Settings().with_overrides({"retrieval.rerank_fusion_weight": weight, "retrieval.final_top_k": 3,
                                          "retrieval.mmr_lambda": 1.0})
    result = EvidenceRefiner(None, reranker).refine("How long is the pump warranty?", _chunks(), settings)
    assert result.chunks[0].chunk_id == first
    # the grader reads the reranker's own probability, whatever the order
    assert {c.chunk_id: c.scores.rerank for c in result.chunks} == {"a": 0.8, "b": 0.7, "c": 0.2}
    assert [c.chunk_id for c in reranked(reranker, "q", _chunks(), settings)][0] == first
    assert Settings().retrieval.rerank_fusion_weight == 1.5


def test_the_refiner_records_which_chunks_were_scored_across_languages(embedder):
    from docmind_core.backends.rerankers import OfflineReranker

    question = "Which river flows through the old town of Lijiang?"
    chunks = [RetrievedChunk(chunk_id=str(i), document="d", text=t, scores=StageScores(fused=0.5))
              for i, t in enumerate(["丽江古城位于云南省西北部，玉河水系穿城而过。", "云南省是中国西南部的一个省份，省会是昆明。",
                                     "世界文化遗产是联合国教科文组织认定的文物和遗址。",
                                     "The old town hall floods every spring."])]
    result = EvidenceRefiner(None, OfflineReranker(embedder)).refine(question, chunks, Settings())
    across = {c.text[:4]: c.scores.rerank_across for c in result.candidates}
    assert across == {"丽江古城": True, "云南省是": True, "世界文化": True, "The ": False}
    assert any(c.scores.rerank_across for c in result.chunks)  # kept chunks say it too
