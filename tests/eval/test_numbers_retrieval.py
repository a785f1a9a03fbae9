"""Retrieval metrics on a hand-made 3-query qrels, expected values computed from the definitions BEIR reports
(trec_eval via pytrec_eval: nDCG gain = the grade, log2(rank + 1) discount; recall and MRR over the documents
graded > 0; a query judged only non-relevant is scored, with 0)."""

from __future__ import annotations

import math

import pytest

from docmind_core.eval.beir import load_beir
from docmind_core.eval.retrieval_eval import mrr_at_k, ndcg_at_k, recall_at_k

# qa: graded 2 / 1, one judged non-relevant; qb: one relevant; qc: judged, nothing relevant
QRELS = {"qa": {"d1": 2, "d2": 1, "d3": 0}, "qb": {"d4": 1}, "qc": {"d5": 0}}
RUNS = {"qa": ["d3", "d2", "d1"], "qb": ["d9", "d8", "d4"], "qc": ["d5", "d6"]}


def test_graded_ndcg_uses_the_grade_as_gain():
    # qa: DCG = 0 + 1/log2(3) + 2/log2(4) = 0.63093 + 1; ideal = 2 + 1/log2(3) = 2.63093
    expected = (1 / math.log2(3) + 2 / 2) / (2 + 1 / math.log2(3))
    assert ndcg_at_k(RUNS["qa"], QRELS["qa"], 10) == pytest.approx(expected)  # 0.6198; 2^g - 1 gave 0.5732
    assert ndcg_at_k(RUNS["qb"], QRELS["qb"], 10) == pytest.approx(0.5)  # 1 / log2(4)
    assert ndcg_at_k(RUNS["qc"], QRELS["qc"], 10) == 0.0


def test_recall_and_mrr_count_only_documents_graded_above_zero():
    assert recall_at_k(RUNS["qa"], QRELS["qa"], 2) == pytest.approx(0.5)  # d2 of {d1, d2}; d3 (grade 0) is not
    assert recall_at_k(RUNS["qa"], QRELS["qa"], 3) == 1.0
    assert mrr_at_k(RUNS["qa"], QRELS["qa"], 10) == pytest.approx(0.5)  # d3 at rank 1 is judged non-relevant
    assert mrr_at_k(RUNS["qb"], QRELS["qb"], 10) == pytest.approx(1 / 3)
    assert recall_at_k(RUNS["qc"], QRELS["qc"], 10) == 0.0 and mrr_at_k(RUNS["qc"], QRELS["qc"], 10) == 0.0


def test_a_query_judged_only_non_relevant_is_kept_and_an_unjudged_one_is_not(tmp_path):
    (tmp_path / "corpus.jsonl").write_text("".join(f'{{"id": "d{i}", "text": "doc {i}"}}\n' for i in range(1, 6)))
    (tmp_path / "queries.jsonl").write_text('{"id": "qa", "text": "a"}\n{"id": "qc", "text": "c"}\n'
                                            '{"id": "qz", "text": "z"}\n')
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nqa\td1\t2\nqa\td3\t0\nqc\td5\t0\n")
    ds = load_beir(tmp_path)
    assert [q.id for q in ds.queries] == ["qa", "qc"]  # qc is judged (all 0): BEIR scores it 0; qz is unjudged
    assert ds.qrels == {"qa": {"d1": 2}, "qc": {}}
