"""The KB badge's figure: the Wilson interval against published values, what is counted, and the wording
with too few labels."""

from __future__ import annotations

import pytest

from docmind_core.experiments.badge import MIN_LABELLED, kb_badge, tally, wilson_interval
from docmind_core.experiments.datasets import RunLabel


# Newcombe (1998), "Two-sided confidence intervals for the single proportion", Table I, method 3 (Wilson
# score, no continuity correction)
@pytest.mark.parametrize("right, labelled, low, high", [
    (81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605), (0, 20, 0.0, 0.1611), (1, 29, 0.0061, 0.1718),
])
def test_wilson_interval_matches_published_values(right, labelled, low, high):
    got = wilson_interval(right, labelled)
    assert got == pytest.approx((low, high), abs=6e-5)


def test_wilson_interval_refuses_what_is_not_a_count():
    with pytest.raises(ValueError):
        wilson_interval(0, 0)
    with pytest.raises(ValueError):
        wilson_interval(5, 4)


def _labels(kb_ids, right: int, wrong: int, partly: int = 0, level: str = "supported") -> list[RunLabel]:
    verdicts = ["correct"] * right + ["wrong"] * wrong + ["partly"] * partly
    return [RunLabel(run_id=f"{kb_ids}-{level}-{i}", verdict=v, answer_verdict=level, kb_ids=list(kb_ids))
            for i, v in enumerate(verdicts)]


def _badge(labels: list[RunLabel], kb_ids, names):
    return kb_badge(tally(labels), kb_ids, names)


def test_statement_of_46_right_of_48():
    badge = _badge(_labels([1], 46, 2), [1], ["manuals"])
    assert (badge.right, badge.labelled, badge.needed) == (46, 48, 0)
    assert "46 of 48 labelled were right (96%, 95% interval 86–99%, Wilson score)" in badge.statement
    assert badge.statement.startswith("'Supported by the sources' answers in this KB")


def test_too_few_labels_say_how_many_more_are_needed():
    few = _badge(_labels([1], MIN_LABELLED - 2, 1), [1], ["manuals"])
    assert few.rate is None and few.low is None and few.needed == 1
    assert "too few labelled to state a rate" in few.statement
    assert f"{MIN_LABELLED - 2} of {MIN_LABELLED - 1} labelled so far were right" in few.statement
    assert f"1 more labelled 'Supported by the sources' answer needed (at least {MIN_LABELLED})" in few.statement
    enough = _badge(_labels([1], MIN_LABELLED - 2, 2), [1], ["manuals"])
    assert enough.stated and enough.needed == 0 and "too few" not in enough.statement
    none = _badge([], [1], ["manuals"])
    assert "no such answer labelled yet" in none.statement and f"{MIN_LABELLED} more" in none.statement


def test_only_supported_answers_count_and_partly_is_not_right():
    labels = _labels([1], 3, 0, partly=2) + _labels([1], 4, 1, level="partly_supported")
    badge = _badge(labels, [1], ["manuals"])
    assert (badge.right, badge.labelled, badge.labelled_runs) == (3, 5, 10)
    assert "5 other labelled answers had another verdict" in badge.statement


def test_a_group_counts_runs_that_asked_only_its_kbs():
    labels = _labels([1], 2, 0) + _labels([2], 1, 1) + _labels([1, 2], 1, 0) + _labels([1, 3], 5, 0)
    assert _badge(labels, [1], ["a"]).labelled == 2
    group = _badge(labels, [1, 2], ["a", "b"])
    assert (group.right, group.labelled) == (4, 5)
    assert group.statement.startswith("'Supported by the sources' answers in these KBs")


def test_the_stores_tallies_count_what_its_labels_say(tmp_path):
    from docmind_core.experiments.datasets import DatasetStore
    from docmind_core.store.db import Database
    from docmind_core.store.migrations import migrate

    db = Database(tmp_path / "labels.db")
    migrate(db.db)
    store = DatasetStore(db)
    for i, label in enumerate(_labels([2, 1], 3, 1) + _labels([1], 2, 2, partly=1, level="partly_supported")):
        store.set_label(label.model_copy(update={"run_id": f"run-{i}"}))
    store.set_label(RunLabel(run_id="run-0", verdict="wrong", answer_verdict="supported", kb_ids=[1, 2]))  # corrected
    assert sorted(store.label_tallies()) == sorted(tally(store.labels()))
    assert kb_badge(store.label_tallies(), [1, 2], ["a", "b"]).right == 2
