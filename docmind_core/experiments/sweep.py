"""Threshold sweep without model calls: an experiment's stored runs re-graded over a grid of
``grader.high_threshold`` x ``grader.low_threshold`` x ``grader.gray_zone_mode``.

Each run's graded input (the query and the chunks its first grading saw, ``regrade.graded_input``) is
read once; its top score and lexical coverage do not depend on the thresholds, so every grid point asks
the CRAG grader itself (``CragGrader.tier_for``) for the tier: one grader, as in the what-if regrade.
As there (one rule, ``regrade.regrade_settings``), each run keeps the grader settings it was recorded with
(its trace's config snapshot) for every key the sweep does not sweep; only a key the snapshot lacks comes from
the live settings, and a recorded key that is no longer a grader setting is ignored.

For each point: precision and recall of HIGH for the positives (answerable questions with their gold in
context), and the not-HIGH rate on unanswerable questions (labelled so, or asked with their gold left
out).  ``recommend`` picks the best point under an objective (``OBJECTIVE_HELP`` says each in one line)
among the points that keep the not-HIGH rate on unanswerable questions at or above a safety floor
(``experiments.sweep_floor``, default 0.90, or the floor the caller gives):

* ``f1``          F1 of HIGH for the positives;
* ``safe_recall`` highest HIGH recall (ties: higher precision);
* ``balanced``    mean of precision, recall and the unanswerable not-HIGH rate.

No objective trades safety for recall: when no grid point reaches the floor, or no unanswerable run
was swept (the floor cannot be checked), nothing is recommended and ``Recommendation.reason`` says why;
``Recommendation.safest`` is then the point with the highest not-HIGH rate, for the user to read, not to
apply blindly.

Ties go to the point nearest the live thresholds, so a flat objective does not move them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, Sequence

from docmind_core.reports.regrade import graded_input, recorded_grader, regrade_settings
from docmind_core.answer.grade import CoverageReport, CragGrader, chunk_score, coverage_report
from docmind_core.errors import ConfigError
from docmind_core.values import Tier
from docmind_core.settings import GRAY_ZONE_MODES, GraderPatch, GraderSettings

Objective = Literal["f1", "safe_recall", "balanced"]
OBJECTIVES: tuple[str, ...] = ("f1", "safe_recall", "balanced")
# What each objective maximises, in one line an analyst reads beside the choice (page and CLI).
OBJECTIVE_HELP: dict[str, str] = {
    "f1": "F1 of HIGH on answerable questions with their gold in context: precision and recall together",
    "safe_recall": "as many answerable questions HIGH as possible (recall); ties go to higher precision",
    "balanced": "mean of precision, recall and the not-HIGH rate on unanswerable questions",
}
DEFAULT_FLOOR = 0.9  # the settings default of experiments.sweep_floor
SWEPT_KEYS = ("high_threshold", "low_threshold", "gray_zone_mode")  # the GraderPatch fields a grid point sets
HIGH_GRID = tuple(round(0.30 + 0.05 * i, 2) for i in range(14))  # 0.30 .. 0.95
LOW_GRID = tuple(round(0.05 + 0.05 * i, 2) for i in range(12))  # 0.05 .. 0.60


@dataclass(frozen=True)
class SweepInput:
    """One stored run, reduced to what its tier depends on, and its label."""

    run_id: str
    variant: str
    top: float
    coverage: CoverageReport
    positive: bool  # answerable and gold in context
    unanswerable: bool
    empty: bool  # no evidence: LOW whatever the thresholds
    recorded: GraderPatch = field(default_factory=GraderPatch)  # the run's grader settings, swept keys left out


@dataclass(frozen=True)
class SweepPoint:
    patch: GraderPatch  # the grid point's thresholds and gray-zone mode (SWEPT_KEYS), as applied to settings
    high_count: int
    precision: float | None  # of HIGH for the positives
    recall: float | None
    f1: float | None
    unanswerable_not_high: float | None
    live: bool = False

    @property
    def high(self) -> float:
        return self.patch.high_threshold  # type: ignore[return-value]  # a grid point sets every swept key

    @property
    def low(self) -> float:
        return self.patch.low_threshold  # type: ignore[return-value]

    @property
    def mode(self) -> str:
        return self.patch.gray_zone_mode  # type: ignore[return-value]

    def to_dict(self) -> dict[str, Any]:
        """As exported and shown: ``high``, ``low``, ``mode`` beside the rates."""
        rates = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "patch"}
        return {"high": self.high, "low": self.low, "mode": self.mode, **rates}

    def objective(self, objective: Objective) -> float:
        """The objective's value at this point, whatever its safety (``meets`` tells that)."""
        p, r = self.precision or 0.0, self.recall or 0.0
        nh = self.unanswerable_not_high if self.unanswerable_not_high is not None else 1.0
        if objective == "f1":
            return self.f1 or 0.0
        if objective == "safe_recall":
            return r + 0.001 * p
        return (p + r + nh) / 3.0

    def meets(self, floor: float) -> bool:
        """Unanswerable questions stay not-HIGH in at least ``floor`` of their runs here (unknown: no)."""
        return self.unanswerable_not_high is not None and self.unanswerable_not_high >= floor - 1e-9


@dataclass(frozen=True)
class Recommendation:
    """A sweep's answer under one objective and safety floor, with the change it predicts."""

    objective: str
    floor: float
    point: SweepPoint | None  # the best point at or above the floor; None: nothing is recommended
    safest: SweepPoint | None  # the highest not-HIGH rate on unanswerable (below the floor when point is None)
    live: SweepPoint | None
    reason: str  # one line in words: what was picked, or why nothing was

    def change(self) -> dict[str, tuple[float | None, float | None]]:
        """Rate -> (live, recommended) of answerable-with-gold -> HIGH and unanswerable -> not HIGH."""
        target = self.point
        return {"answerable with gold in context: HIGH": (_rate(self.live, "recall"), _rate(target, "recall")),
                "unanswerable: not HIGH": (_rate(self.live, "unanswerable_not_high"),
                                           _rate(target, "unanswerable_not_high"))}

    def to_dict(self) -> dict[str, Any]:
        return {"objective": self.objective, "floor": self.floor, "reason": self.reason,
                "recommended": self.point.to_dict() if self.point else None,
                "safest": self.safest.to_dict() if self.safest else None,
                "change": {k: {"live": a, "recommended": b} for k, (a, b) in self.change().items()}}


def _rate(point: SweepPoint | None, attr: str) -> float | None:
    return None if point is None else getattr(point, attr)


def check_floor(floor: float) -> float:
    """The floor as a float in [0, 1]; anything else is refused."""
    try:
        value = float(floor)
    except (TypeError, ValueError):
        raise ConfigError(f"the sweep's safety floor must be a number from 0 to 1, got {floor!r}") from None
    if not 0.0 <= value <= 1.0:
        raise ConfigError(f"the sweep's safety floor must be from 0 to 1, got {value}")
    return value


@dataclass
class SweepResult:
    points: list[SweepPoint]
    live: GraderPatch  # the swept keys' values the user runs with now
    runs: int
    positives: int
    unanswerable: int
    skipped: int  # runs with no graded retrieval (e.g. chit-chat scope) or no done event

    def point(self, high: float, low: float, mode: str) -> SweepPoint | None:
        return next((p for p in self.points if abs(p.high - high) < 1e-9 and abs(p.low - low) < 1e-9
                     and p.mode == mode), None)

    def recommend(self, objective: Objective = "f1", floor: float = DEFAULT_FLOOR) -> SweepPoint | None:
        """The best point under ``objective`` that keeps unanswerable questions not-HIGH >= ``floor``."""
        return self.recommendation(objective, floor).point

    def recommendation(self, objective: Objective = "f1", floor: float = DEFAULT_FLOOR) -> Recommendation:
        if objective not in OBJECTIVES:
            raise ConfigError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
        floor = check_floor(floor)
        live = next((p for p in self.points if p.live), None)
        lh, ll, lm = self.live.high_threshold, self.live.low_threshold, self.live.gray_zone_mode

        def near_live(p: SweepPoint) -> float:
            return -(abs(p.high - lh) + abs(p.low - ll) + (0 if p.mode == lm else 0.5))

        known = [p for p in self.points if p.unanswerable_not_high is not None]
        safest = max(known, key=lambda p: (p.unanswerable_not_high, round(p.objective(objective), 9),
                                           near_live(p))) if known else None
        if not self.points:
            return Recommendation(objective, floor, None, None, live, "No graded run: nothing to recommend.")
        if not known:
            return Recommendation(objective, floor, None, None, live,
                                  "No unanswerable run was swept, so the safety floor cannot be checked: nothing "
                                  "is recommended. Add unanswerable questions or ask with the gold left out.")
        safe = [p for p in self.points if p.meets(floor)]
        if not safe:
            same = live is not None and live.unanswerable_not_high == safest.unanswerable_not_high
            return Recommendation(objective, floor, None, safest, live,
                                  f"No threshold point keeps unanswerable questions not HIGH in {floor:.0%} of "
                                  f"their runs (the best reaches {safest.unanswerable_not_high:.1%}"
                                  f"{', as the live thresholds do' if same else ''}): nothing is recommended.")
        best = max(safe, key=lambda p: (round(p.objective(objective), 9), near_live(p)))
        return Recommendation(objective, floor, best, safest, live,
                              f"The best {objective} among points keeping unanswerable questions not HIGH in at "
                              f"least {floor:.0%} of their runs.")

    def to_dict(self) -> dict[str, Any]:
        return {"type": "docmind.threshold_sweep", "live": self.live.dotted(), "runs": self.runs,
                "positives": self.positives, "unanswerable": self.unanswerable, "skipped": self.skipped,
                "points": [p.to_dict() for p in self.points]}


def sweep_input(record: Any, variant: str, positive: bool, unanswerable: bool) -> SweepInput | None:
    """The run reduced for the sweep; None when no retrieval was graded in it, or its recorded grader settings
    are not settings (a value of the wrong type)."""
    query, chunks = graded_input(record)
    if chunks is None:
        return None
    run_id = record.meta.run_id if hasattr(record, "meta") else ""
    try:
        recorded = recorded_grader(record.config if hasattr(record, "config") else record.get("config"),
                                   except_keys=SWEPT_KEYS)
    except ConfigError:
        return None
    if not chunks:
        return SweepInput(run_id, variant, 0.0, CoverageReport(0.0, False, False), positive, unanswerable, True,
                          recorded)
    top = max(chunk_score(c) for c in chunks)
    return SweepInput(run_id, variant, top, coverage_report(query, chunks), positive, unanswerable, False, recorded)


def sweep(inputs: Sequence[SweepInput], live: GraderSettings, highs: Sequence[float] = HIGH_GRID,
          lows: Sequence[float] = LOW_GRID, modes: Sequence[str] = GRAY_ZONE_MODES, skipped: int = 0) -> SweepResult:
    """Every (high, low, mode) with low < high, plus the live point, scored over ``inputs``.

    Each input is graded with its recorded settings (``SweepInput.recorded``) over ``live`` for the keys
    it was not recorded with; the grid sets the swept keys.  An input whose recorded settings do not make
    valid grader settings is left out and counted in ``skipped``.
    """
    grader = CragGrader()
    bases: dict[GraderPatch, GraderSettings | None] = {}
    usable: list[SweepInput] = []
    for x in inputs:
        if x.recorded not in bases:
            try:  # once per distinct recording; each grid point then only replaces the swept keys
                bases[x.recorded] = regrade_settings(x.recorded, live)
            except ConfigError:
                bases[x.recorded] = None
        if bases[x.recorded] is None:
            skipped += 1
        else:
            usable.append(x)
    inputs = usable
    grid = {(round(h, 4), round(l, 4), m) for h in highs for l in lows for m in modes if l < h}
    live_key = (round(live.high_threshold, 4), round(live.low_threshold, 4), live.gray_zone_mode)
    grid.add(live_key)
    positives = sum(1 for x in inputs if x.positive)
    unanswerable = sum(1 for x in inputs if x.unanswerable)
    points: list[SweepPoint] = []
    for high, low, mode in sorted(grid):
        point = GraderPatch(high_threshold=high, low_threshold=low, gray_zone_mode=mode)
        # valid by construction (low < high, and no other rule holds a swept key): no validation per grid point
        settings = {recorded: b.model_copy(update=point.changes()) for recorded, b in bases.items() if b is not None}
        tp = high_count = unanswerable_high = 0
        for x in inputs:
            tier = Tier.LOW if x.empty else grader.tier_for(x.top, x.coverage, settings[x.recorded])[0]
            if tier is Tier.HIGH:
                high_count += 1
                tp += x.positive
                unanswerable_high += x.unanswerable
        precision = tp / high_count if high_count else None
        recall = tp / positives if positives else None
        f1 = (2 * precision * recall / (precision + recall)) if precision and recall else (0.0 if positives else None)
        not_high = (unanswerable - unanswerable_high) / unanswerable if unanswerable else None
        points.append(SweepPoint(point, high_count, _r(precision), _r(recall), _r(f1), _r(not_high),
                                 live=(high, low, mode) == live_key))
    live_patch = GraderPatch(**{name: getattr(live, name) for name in SWEPT_KEYS})
    return SweepResult(points, live_patch, len(inputs), positives, unanswerable, skipped)


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
