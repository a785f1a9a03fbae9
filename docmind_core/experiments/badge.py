"""What a KB's "Supported by the sources" verdict has earned: how many of its labelled supported answers were right.

Counted from the analysts' labels (``run_labels``): a labelled run counts when the answer was shown as
"Supported by the sources" (the verdict level ``supported`` of docmind_core/answer/verdict.py, kept on the
label when it is given) and it is *right* when its label is ``correct``; ``partly``, ``wrong`` and
``should_abstain`` are not right.  The rate's 95% interval is the Wilson score interval: it stays inside
0..100% and keeps its coverage near 95% at the small counts and the rates near 100% that labels give
(the normal approximation collapses to a zero-width interval at 100%).

A KB group (the KBs of one question) counts the labelled runs that asked only KBs of the group.  Below
:data:`MIN_LABELLED` labelled supported answers no rate is stated: at 19 right of 20 the interval is
already 76-99%, and with fewer it is wider than the rate is informative.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Iterable, Sequence

from pydantic import BaseModel

from docmind_core.answer.verdict import LABELS
from docmind_core.experiments.datasets import LabelTally, RunLabel

MIN_LABELLED = 20  # labelled "Supported" answers before a rate is stated
Z_95 = 1.959963984540054  # the two-sided 95% normal quantile
INTERVAL_METHOD = "Wilson score interval, 95%"
RIGHT_VERDICT = "correct"
SUPPORTED_LEVEL = "supported"


def wilson_interval(right: int, labelled: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of ``right`` successes in ``labelled`` trials, as two fractions."""
    if labelled <= 0:
        raise ValueError("no labelled answer: the interval is undefined")
    if not 0 <= right <= labelled:
        raise ValueError(f"{right} right of {labelled} labelled is not a count")
    p = right / labelled
    z2 = z * z
    centre = (p + z2 / (2 * labelled)) / (1 + z2 / labelled)
    half = z * math.sqrt(p * (1 - p) / labelled + z2 / (4 * labelled * labelled)) / (1 + z2 / labelled)
    return max(0.0, centre - half), min(1.0, centre + half)


class KbBadge(BaseModel):
    """The statement a KB (or KB group) has earned from its labels, and the figures it is made of."""

    kb_ids: list[int]
    kb_names: list[str]
    right: int  # labelled supported answers that were right
    labelled: int  # labelled supported answers
    labelled_runs: int  # every labelled run of the KB(s), whatever its verdict
    rate: float | None = None  # right / labelled, when enough are labelled
    low: float | None = None
    high: float | None = None
    min_labelled: int = MIN_LABELLED
    needed: int = 0  # more labelled supported answers before a rate is stated
    method: str = INTERVAL_METHOD
    statement: str = ""

    @property
    def stated(self) -> bool:
        return self.rate is not None


def tally(labels: Iterable[RunLabel]) -> list[LabelTally]:
    """Labels counted as the store counts them (``DatasetStore.label_tallies``)."""
    counts = Counter((tuple(sorted(label.kb_ids)), label.answer_verdict, label.verdict) for label in labels)
    return [LabelTally(*key, runs=n) for key, n in counts.items()]


def in_scope(kb_ids_of_run: Sequence[int], kb_ids: Sequence[int]) -> bool:
    """A labelled run belongs to a KB group when every KB it asked is in the group (and it asked one)."""
    return bool(kb_ids_of_run) and set(kb_ids_of_run) <= set(kb_ids)


def kb_badge(tallies: Iterable[LabelTally], kb_ids: Sequence[int], kb_names: Sequence[str]) -> KbBadge:
    """The badge of the KB(s) ``kb_ids`` (named ``kb_names``) from these tallies (of any KBs; filtered here)."""
    mine = [t for t in tallies if in_scope(t.kb_ids, kb_ids)]
    supported = [t for t in mine if t.answer_verdict == SUPPORTED_LEVEL]
    labelled = sum(t.runs for t in supported)
    right = sum(t.runs for t in supported if t.verdict == RIGHT_VERDICT)
    badge = KbBadge(kb_ids=sorted(kb_ids), kb_names=list(kb_names), right=right, labelled=labelled,
                    labelled_runs=sum(t.runs for t in mine))
    where = "this KB" if len(kb_ids) == 1 else "these KBs"
    head = f"'{LABELS[SUPPORTED_LEVEL]}' answers in {where}"
    if labelled >= MIN_LABELLED:
        badge.rate = right / labelled
        badge.low, badge.high = wilson_interval(right, labelled)
        badge.statement = (f"{head}: {right} of {labelled} labelled were right ({badge.rate:.0%}, 95% "
                           f"interval {badge.low * 100:.0f}–{badge.high * 100:.0f}%, Wilson score)")
    else:
        badge.needed = MIN_LABELLED - labelled
        so_far = (f"{right} of {labelled} labelled so far {'was' if right == 1 else 'were'} right"
                  if supported else "no such answer labelled yet")
        badge.statement = (f"{head}: too few labelled to state a rate ({so_far}); {badge.needed} more labelled "
                           f"'{LABELS[SUPPORTED_LEVEL]}' answer{'s' if badge.needed != 1 else ''} needed "
                           f"(at least {MIN_LABELLED})")
    others = badge.labelled_runs - badge.labelled
    if others:  # labels of answers shown with another verdict: kept, counted for nothing here
        badge.statement += f". {others} other labelled answer{'s' if others != 1 else ''} had another verdict"
    return badge
