"""Fusion: hand-computed RRF and convex (min-max) scores."""

import pytest

from docmind_core.retrieval.fusion import convex_fuse, min_max, rrf_fuse


def test_rrf_equal_weights_hand_computed():
    vector = [("a", 0.9), ("b", 0.8), ("c", 0.1)]
    keyword = [("c", 12.0), ("a", 3.0)]
    fused = dict(rrf_fuse([vector, keyword], k=60))
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["b"] == pytest.approx(1 / 62)
    assert fused["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert [item for item, _ in rrf_fuse([vector, keyword], k=60)] == ["a", "c", "b"]


def test_rrf_weights_and_small_k():
    fused = dict(rrf_fuse([[("x", 1.0), ("y", 0.5)], [("y", 9.0)]], weights=[0.2, 0.8], k=1))
    assert fused["x"] == pytest.approx(0.2 / 2)
    assert fused["y"] == pytest.approx(0.2 / 3 + 0.8 / 2)


def test_rrf_counts_a_duplicate_once_at_its_best_rank():
    fused = dict(rrf_fuse([[("a", 1.0), ("a", 0.5), ("b", 0.2)]], k=0))
    assert fused == {"a": pytest.approx(1.0), "b": pytest.approx(1 / 3)}


def test_min_max():
    assert min_max([2.0, 4.0, 3.0]) == [0.0, 1.0, 0.5]
    assert min_max([7.0, 7.0]) == [1.0, 1.0]
    assert min_max([]) == []


def test_convex_hand_computed():
    vector = [("a", 0.8), ("b", 0.6), ("c", 0.4)]  # normalised: a 1.0, b 0.5, c 0.0
    keyword = [("c", 10.0), ("d", 6.0), ("a", 2.0)]  # normalised: c 1.0, d 0.5, a 0.0
    fused = dict(convex_fuse([vector, keyword], weights=[0.2, 0.8]))
    assert fused["a"] == pytest.approx(0.2)
    assert fused["b"] == pytest.approx(0.1)
    assert fused["c"] == pytest.approx(0.8)
    assert fused["d"] == pytest.approx(0.4)
    assert [i for i, _ in convex_fuse([vector, keyword], weights=[0.2, 0.8])] == ["c", "d", "a", "b"]


def test_convex_ties_keep_first_appearance_and_empty_lists_work():
    assert convex_fuse([[("a", 1.0), ("b", 1.0)], []]) == [("a", 1.0), ("b", 1.0)]
    assert convex_fuse([[], []]) == []


def test_bad_weights_are_refused():
    with pytest.raises(ValueError):
        rrf_fuse([[("a", 1.0)]], weights=[0.5, 0.5])
    with pytest.raises(ValueError):
        convex_fuse([[("a", 1.0)]], weights=[-1.0])
