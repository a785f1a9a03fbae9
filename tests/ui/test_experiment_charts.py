"""The sweep's Plotly figures: a heatmap with no point above the safety floor says so on its grid."""

from __future__ import annotations

from docmind_core.experiments.sweep import SweepPoint, SweepResult
from docmind_core.settings import GraderPatch
from docmind_ui.experiment_charts import sweep_curves, sweep_heatmap


def _result(not_high: float) -> SweepResult:
    points = [SweepPoint(GraderPatch(high_threshold=h, low_threshold=l, gray_zone_mode="coverage_first"),
                         high_count=2, precision=1.0, recall=0.5, f1=0.667, unanswerable_not_high=not_high,
                         live=(h, l) == (0.9, 0.25))
              for h in (0.8, 0.9) for l in (0.2, 0.25)]
    return SweepResult(points=points, live=GraderPatch(high_threshold=0.9, low_threshold=0.25,
                                                       gray_zone_mode="coverage_first"),
                       runs=4, positives=2, unanswerable=2, skipped=0)


def test_a_heatmap_with_no_point_above_the_floor_says_so_on_the_grid():
    """Every cell was blank and the axes autoscaled to −0.5 … 1.5: an empty chart with nothing said."""
    fig = sweep_heatmap(_result(0.75), "coverage_first", "f1", 0.9)
    notes = [a.text for a in fig.layout.annotations]
    assert any("No point keeps unanswerable questions not HIGH in 90%" in n for n in notes), notes
    assert tuple(fig.layout.xaxis.range)[0] <= 0.2 and tuple(fig.layout.xaxis.range)[1] >= 0.25
    assert tuple(fig.layout.yaxis.range)[0] <= 0.8 and tuple(fig.layout.yaxis.range)[1] >= 0.9
    assert sweep_curves(_result(0.75), "coverage_first", 0.9).data  # the curves still draw every rate


def test_a_heatmap_with_points_above_the_floor_has_no_such_note():
    fig = sweep_heatmap(_result(1.0), "coverage_first", "f1", 0.9)
    assert not fig.layout.annotations
    assert fig.data[0].z[1][1] is not None
