"""Experiment metrics on known data: bootstrap intervals, paired differences, the tier confusion matrix,
answer containment, gold matching, the threshold sweep's counts, and dataset/variant parsing."""

from __future__ import annotations

import numpy as np
import pytest

from docmind_core.experiments.datasets import DatasetError, DatasetItem, gold_document_ids, parse_jsonl
from docmind_core.experiments.metrics import (
    RunScore, bootstrap_interval, confusion_matrix, contains_answer, gold_ndcg10, gold_recall, paired_difference,
)
from docmind_core.experiments.records import ExperimentError, parse_variant
from docmind_core.experiments.sweep import SweepInput, sweep
from docmind_core.answer.grade import CoverageReport
from docmind_core.values import RetrievedChunk, StageScores
from docmind_core.settings import GraderSettings


def test_bootstrap_interval_of_known_data():
    constant = bootstrap_interval([0.7] * 20)
    assert (constant.mean, constant.low, constant.high, constant.n) == (0.7, 0.7, 0.7, 20)
    coin = bootstrap_interval([0.0, 1.0] * 50)  # mean 0.5, standard error 0.05: 95% about [0.40, 0.60]
    assert coin.mean == 0.5
    assert 0.38 <= coin.low <= 0.42 and 0.58 <= coin.high <= 0.62
    assert bootstrap_interval([0.0, 1.0] * 50) == coin  # fixed seed: the same report twice
    small = bootstrap_interval([0.0, 1.0] * 5)
    assert small.high - small.low > coin.high - coin.low  # fewer questions, wider interval
    assert bootstrap_interval([]).mean is None and bootstrap_interval([]).text() == "n/a"
    assert bootstrap_interval([None, 1.0, float("nan")]).n == 1  # unmeasured values are left out


def _score(item: int, variant: str, value: float | None, tier: str = "HIGH", answerable: bool = True,
           gold: bool | None = True, left_out: bool = False) -> RunScore:
    return RunScore(item_id=item, variant=variant, gold_left_out=left_out, answerable=answerable, question=f"q{item}",
                    answer_containment=value, tier=tier, gold_in_context=gold if answerable else None)


def test_paired_differences_use_the_questions_both_variants_answered():
    a = [_score(i, "a", v) for i, v in enumerate([0, 0, 1, 1, 0, 1, 0, 0])]
    b = [_score(i, "b", v) for i, v in enumerate([1, 0, 1, 1, 1, 1, 1, 0])] + [_score(99, "b", 1.0)]
    diff = paired_difference("answer_containment", a, b, "a", "b")
    assert diff.difference.n == 8  # item 99 has no partner
    assert diff.difference.mean == pytest.approx(3 / 8)
    assert diff.difference.low <= 3 / 8 <= diff.difference.high
    same = paired_difference("answer_containment", a, a, "a", "a")
    assert (same.difference.mean, same.difference.low, same.difference.high) == (0.0, 0.0, 0.0)
    assert not same.significant
    shifted = paired_difference("answer_containment", [_score(i, "a", 0.0) for i in range(30)],
                                [_score(i, "b", 1.0) for i in range(30)], "a", "b")
    assert shifted.significant and shifted.difference.low == 1.0
    # the same item asked with its gold left out is another question: never paired with the plain one
    lgo = [_score(0, "b", 1.0, left_out=True)]
    assert paired_difference("answer_containment", [_score(0, "a", 0.0)], lgo, "a", "b").difference.n == 0


def test_confusion_matrix_counts_tiers_by_answerability():
    scores = [_score(1, "a", None, "HIGH"), _score(2, "a", None, "HIGH"), _score(3, "a", None, "LOW", gold=False),
              _score(4, "a", None, "HIGH", answerable=False), _score(5, "a", None, "AMBIGUOUS", answerable=False),
              _score(6, "a", None, "none", gold=None)]
    failed = _score(7, "a", None, "HIGH")
    failed.failed = True
    matrix = confusion_matrix(scores + [failed])
    assert matrix["answerable, gold in context"] == {"HIGH": 2, "AMBIGUOUS": 0, "LOW": 0, "none": 0}
    assert matrix["answerable, gold not in context"]["LOW"] == 1
    assert matrix["unanswerable"] == {"HIGH": 1, "AMBIGUOUS": 1, "LOW": 0, "none": 0}
    assert matrix["answerable, no gold label"]["none"] == 1
    assert sum(sum(r.values()) for r in matrix.values()) == 6  # the failed run is not counted


def test_answer_containment_and_gold_matching():
    assert contains_answer("The N2 draws 45W at full load.", ["45 W"])
    assert contains_answer("N1 costs 1,490 USD and N2 2,390 USD", [["1,490", "2,390"]])
    assert not contains_answer("N1 costs 1,490 USD", [["1,490", "2,390"]])  # all-of: one fact is not enough
    assert contains_answer("闪烁红灯表示硬件故障", ["hardware fault", "硬件故障"])
    assert not contains_answer("anything", [])
    assert gold_document_ids(["d3", "faq.md"], {"d3.txt": 7, "faq.md": 2, "d30.txt": 9}) == {7, 2}
    # every document the metrics count as gold is left out, also when two share a stem
    assert gold_document_ids(["faq"], {"faq.md": 2, "faq.pdf": 3, "faq2.md": 4}) == {2, 3}

    def chunk(doc: str, cid: str, rerank: float) -> RetrievedChunk:
        return RetrievedChunk(chunk_id=cid, document=doc, text="x", scores=StageScores(rerank=rerank))

    item = DatasetItem(question="q?", gold_doc_ids=["d3", "d5"])
    sources = [chunk("d3.txt", "c1", 0.9), chunk("d4.txt", "c2", 0.8)]
    assert gold_recall(sources, item) == 0.5
    assert gold_ndcg10([chunk("d4.txt", "c2", 0.9), chunk("d3.txt", "c1", 0.8)], item) == pytest.approx(
        (1 / np.log2(3)) / (1 + 1 / np.log2(3)))
    by_chunk = DatasetItem(question="q?", gold_chunk_ids=["c2"])
    assert gold_recall(sources, by_chunk) == 1.0


def test_sweep_counts_precision_recall_and_unanswerable_not_high():
    full = CoverageReport(1.0, True, True)

    def x(top: float, positive: bool, unanswerable: bool = False) -> SweepInput:
        return SweepInput("r", "v", top, full, positive, unanswerable, False)

    inputs = [x(0.9, True), x(0.8, True), x(0.6, False), x(0.7, False, True), x(0.3, False, True)]
    result = sweep(inputs, GraderSettings(), highs=[0.5, 0.75, 0.85], lows=[0.2], modes=["rerank_only"])
    at_075 = result.point(0.75, 0.2, "rerank_only")
    assert at_075.high_count == 2 and at_075.precision == 1.0 and at_075.recall == 1.0
    assert at_075.unanswerable_not_high == 1.0
    at_05 = result.point(0.5, 0.2, "rerank_only")  # HIGH for 0.9, 0.8, 0.6, 0.7
    assert at_05.high_count == 4 and at_05.precision == 0.5 and at_05.unanswerable_not_high == 0.5
    at_085 = result.point(0.85, 0.2, "rerank_only")
    assert at_085.recall == 0.5
    live = next(p for p in result.points if p.live)
    assert (live.high, live.low, live.mode) == (0.9, 0.25, "coverage_first")
    assert result.recommend("f1") == at_075
    assert result.recommend("safe_recall") == at_075


def test_bad_dataset_lines_and_variants_are_refused():
    with pytest.raises(DatasetError, match="line 2"):
        parse_jsonl('{"question": "ok?"}\n{"question": ""}\n')
    with pytest.raises(DatasetError, match="line 1: not JSON"):
        parse_jsonl("{nope\n")
    items = parse_jsonl('{"id": 3, "question": "Why?", "gold_docs": ["a.md"], "answers": [["x", "y"]]}\n')
    assert items[0].external_id == "3" and items[0].gold_doc_ids == ["a.md"] and items[0].answers == [["x", "y"]]
    assert parse_variant("strict:rule:grader.high_threshold=0.8").overrides == {"grader.high_threshold": 0.8}
    with pytest.raises(ExperimentError, match="llm.model"):
        parse_variant("x:rule:llm.model=gpt")  # a backend key would change every run, not this variant's
    with pytest.raises(ExperimentError, match="low_threshold"):
        parse_variant("x:rule:grader.low_threshold=0.9")
    with pytest.raises(ExperimentError):
        parse_variant("x:sideways")


def test_cancel_pressed_twice_leaves_a_live_runner_cancelling(tmp_path):
    """A second Cancel must not mark a live run 'cancelled' (its runner would never see the request and a
    resume could start a second runner on the same rows)."""
    from docmind_core.experiments.datasets import DatasetStore
    from docmind_core.experiments.experiment_store import ExperimentStore
    from docmind_core.experiments.records import Variant
    from docmind_core.store.db import Database

    db = Database(tmp_path / "docmind.db")
    datasets = DatasetStore(db)
    dataset = datasets.create("d", [DatasetItem(question="q?")])
    store = ExperimentStore(db)
    made = store.create("e", dataset.id, [Variant(name="rule", mode="rule")], datasets.items(dataset.id), None)
    store.take_over(made.id, "runner-1", retry_failed=False)
    assert store.request_cancel(made.id) == "cancelling"
    assert store.request_cancel(made.id) == "cancelling"  # the runner is still alive
    assert store.heartbeat(made.id) == "cancelling"  # so it sees the request and stops
    with pytest.raises(Exception, match="already being run"):
        store.take_over(made.id, "runner-2", retry_failed=False)


@pytest.mark.parametrize("answer", [
    "Orion O3 的采样率是 250 Hz。［1］Orion O3 的电池续航 36 小时。[2]",  # markers after the Chinese sentence end
    'The specs say "the Orion O3 samples at 250 Hz." [1] The Orion O3 battery lasts 36 hours." [2]',  # after a quote
])
def test_citation_support_checks_the_sentence_the_citation_parser_gives_each_marker(answer):
    """metrics checked each marker against the sentence after it when the marker followed a sentence end;
    it must use the one rule of docmind_core.answer.citations (the sentence the marker ends)."""
    from docmind_core.answer.citations import cited_sentences, parse_citations, sentence_support
    from docmind_core.events import Done
    from docmind_core.experiments.metrics import citation_support
    from docmind_core.reports.timeline import RunDigest

    sources = [RetrievedChunk(chunk_id="s1", document="specs.md",
                              text="Orion O3 传感器的采样率是 250 Hz. The Orion O3 samples at 250 Hz."),
               RetrievedChunk(chunk_id="s2", document="battery.md",
                              text="Orion O3 的电池续航 36 小时. The Orion O3 battery lasts 36 hours.")]
    done = Done(run_id="r", answer=answer, mode="RULE_PLANNER", sources=sources,
                citations=parse_citations(answer, sources))
    pairs = [(c.index, c.text) for c in cited_sentences(answer)]
    assert [i for i, _ in pairs] == [1, 2]
    assert all(sentence_support(text, [sources[i - 1]]).sources for i, text in pairs)  # each supports its own
    assert citation_support(RunDigest.from_events([done])) == (2, 2)


def test_a_cited_sentence_that_says_the_sources_lack_something_is_not_checked_for_support():
    """"The sources do not mention X. [1]" cannot be supported by [1]: the citation parser leaves such a
    sentence unchecked, and the metric must too (it counted it as cited but unsupported)."""
    from docmind_core.answer.citations import parse_citations
    from docmind_core.events import Done
    from docmind_core.experiments.metrics import citation_support
    from docmind_core.reports.timeline import RunDigest

    sources = [RetrievedChunk(chunk_id="s1", document="specs.md", text="The Orion O3 samples at 250 Hz.")]
    answer = ("The Orion O3 samples at 250 Hz. [1] "
              "The sources do not mention the Nova X2 battery life in hours. [1]")
    done = Done(run_id="r", answer=answer, mode="RULE_PLANNER", sources=sources,
                citations=parse_citations(answer, sources))
    assert citation_support(RunDigest.from_events([done])) == (1, 1)
