"""`docmind eval retrieval` on a tiny BEIR folder whose BM25 rankings are known, with hand-computed metrics.

The fixture (tests/fixtures/beir_tiny):
  q1 "kiwi melon" -> only d3 matches; relevant {d3}: nDCG 1, recall 1, MRR 1, answer "kiwi" in chunk 1.
  q2 "lemon"      -> only d4 matches; relevant {d2}: all 0; answer "grape" never retrieved.
  q3 "apple"      -> d1 ("apple banana", shorter) then d5; relevant {d5, d2}:
                     nDCG@10 = (1/log2 3) / (1 + 1/log2 3) = 0.38685, recall = 0.5, MRR = 0.5,
                     answer "orchard" first appears at rank 2.
  q4 has no qrels and is skipped.
Means over 3 queries: nDCG@10 0.46228, recall@5/10/100 0.5, MRR@10 0.5, answer recall@1 1/3, @5 2/3.
"""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from docmind_core.eval.beir import chunk_text, load_beir
from docmind_core.eval.retrieval_eval import answer_hit_at_k, docs_from_chunks, mrr_at_k, ndcg_at_k, recall_at_k
from tests.paths import FIXTURES

FIXTURE = FIXTURES / "beir_tiny"


def test_metric_functions_hand_computed():
    rel = {"d5": 1, "d2": 1}
    assert ndcg_at_k(["d1", "d5"], rel, 10) == pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3)))
    assert ndcg_at_k(["d5", "d2"], rel, 10) == pytest.approx(1.0)
    assert ndcg_at_k(["x"] * 10 + ["d5"], rel, 10) == 0.0
    assert ndcg_at_k(["a", "b", "g2"], {"g2": 2, "g1": 1}, 10) == pytest.approx(
        (2 / math.log2(4)) / (2 + 1 / math.log2(3)))  # gain = the grade (trec_eval / BEIR)
    assert recall_at_k(["d1", "d5", "d2"], rel, 2) == 0.5
    assert mrr_at_k(["d1", "d9", "d2"], rel, 10) == pytest.approx(1 / 3)
    assert mrr_at_k(["d1"], rel, 10) == 0.0
    assert answer_hit_at_k(["no", "the orchard"], ["orchard"], 1) == 0.0
    assert answer_hit_at_k(["no", "the orchard"], ["orchard"], 2) == 1.0
    assert docs_from_chunks(["a", "b", "a", "c"]) == ["a", "b", "c"]


def test_loader_skips_unjudged_queries_and_limit():
    ds = load_beir(FIXTURE)
    assert [q.id for q in ds.queries] == ["q1", "q2", "q3"]
    assert ds.qrels["q3"] == {"d5": 1, "d2": 1}
    assert [q.id for q in load_beir(FIXTURE, limit=2).queries] == ["q1", "q2"]


def test_chunk_text_packs_sentences_with_overlap():
    text = "One two three. Four five six. Seven eight nine. Ten eleven twelve."  # 4 tokens per sentence
    chunks = chunk_text(text, 8, 4)
    assert chunks == ["One two three. Four five six.", "Four five six. Seven eight nine.",
                      "Seven eight nine. Ten eleven twelve."]
    assert chunk_text(text, 0, 0) == [text]


def _run(home, *args):
    from docmind_core.cli import cli

    result = CliRunner().invoke(cli, ["--home", str(home), "eval", "retrieval", str(FIXTURE), *args])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.slow  # the docmind eval CLI end to end
def test_cli_bm25_metrics_match_hand_computation(home):
    report = json.loads(_run(home, "--systems", "bm25", "--answers", "--json"))
    assert report["dataset"] == "beir_tiny" and report["queries"] == 3
    bm25 = report["systems"]["bm25"]
    assert bm25["ndcg@10"] == pytest.approx((1 + 0 + 0.386853) / 3, abs=1e-4)
    for cut in (5, 10, 100):
        assert bm25[f"recall@{cut}"] == pytest.approx(0.5, abs=1e-4)
    assert bm25["mrr@10"] == pytest.approx(0.5, abs=1e-4)
    assert bm25["answer_recall@1"] == pytest.approx(1 / 3, abs=1e-4)
    assert bm25["answer_recall@5"] == pytest.approx(2 / 3, abs=1e-4)


@pytest.mark.slow  # the docmind eval CLI end to end
def test_cli_all_systems_json_shape_and_embedding_cache(home):
    report = json.loads(_run(home, "--json"))
    assert set(report["systems"]) == {"bm25", "vector", "hybrid", "hybrid_rerank"}
    for values in report["systems"].values():
        assert {"ndcg@10", "recall@5", "recall@10", "recall@100", "mrr@10"} <= set(values)
        assert all(0.0 <= values[m] <= 1.0 for m in ("ndcg@10", "recall@5", "mrr@10"))
    cached = sorted((home / "cache" / "embeddings").rglob("*.npy"))
    assert len(cached) == 2  # corpus chunks and queries
    stamps = {p: p.stat().st_mtime_ns for p in cached}
    text = _run(home, "--systems", "vector,hybrid", "--limit", "2")  # table output
    assert "hybrid" in text and "ndcg@10" in text
    # the corpus vectors are reused, not recomputed; only the 2-query subset gets its own file
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items())
    assert len(list((home / "cache" / "embeddings").rglob("*.npy"))) == 3


@pytest.mark.slow  # the docmind eval CLI end to end
def test_cli_rejects_unknown_system(home):
    from docmind_core.cli import cli

    result = CliRunner().invoke(cli, ["--home", str(home), "eval", "retrieval", str(FIXTURE), "--systems", "magic"])
    assert result.exit_code != 0 and "unknown system" in result.output
