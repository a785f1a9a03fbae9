"""Issue 39 item 2: one reader of a stored run's config snapshot (``SettingsSnapshot``), used by the run view, the
what-if regrade, the threshold sweep and the Traces page: it reads every shape a snapshot was stored in, reports
the keys that are no setting, and refuses a bad value with a message naming its key; a sweep point carries a
typed grader patch."""

from __future__ import annotations

import json

import pytest

from docmind_core.errors import ConfigError
from docmind_core.settings import GraderPatch, GraderSettings, Settings, SettingsSnapshot

FLAT = {"grader.high_threshold": 0.8, "grader.low_threshold": 0.3, "retrieval.rrf_k": 7}
NESTED = {"grader": {"high_threshold": 0.8, "low_threshold": 0.3}, "retrieval": {"rrf_k": 7}}


@pytest.mark.parametrize("stored", [FLAT, NESTED, json.dumps(FLAT), json.dumps(NESTED),
                                    Settings().with_overrides(FLAT)], ids=["flat", "nested", "flat-json",
                                                                           "nested-json", "settings"])
def test_every_stored_shape_reads_the_same_settings(stored):
    """Runs record a flat snapshot; older traces and hand-written imports nest it by group or hold JSON text."""
    settings = Settings.from_snapshot(stored)
    assert (settings.grader.high_threshold, settings.grader.low_threshold, settings.retrieval.rrf_k) == (0.8, 0.3, 7)


def test_keys_that_are_no_setting_are_reported_and_left_out():
    snapshot = SettingsSnapshot.read({**FLAT, "grader.removed_knob": 1, "retreival.rrf_k": 3})
    assert snapshot.unknown == ("grader.removed_knob", "retreival.rrf_k")
    assert "grader.removed_knob" not in snapshot.values
    assert snapshot.grader().changes() == {"high_threshold": 0.8, "low_threshold": 0.3}
    assert snapshot.notes() == ["recorded keys that are no setting now (ignored): grader.removed_knob, "
                                "retreival.rrf_k"]
    assert SettingsSnapshot.read(FLAT).notes() == []


def test_a_bad_recorded_value_is_refused_with_its_key():
    wrong_type = SettingsSnapshot.read({"grader.high_threshold": "high"})
    with pytest.raises(ConfigError, match=r"grader\.high_threshold"):
        wrong_type.grader()
    with pytest.raises(ConfigError, match=r"grader\.high_threshold"):
        wrong_type.settings()
    assert any("grader.high_threshold" in note for note in wrong_type.notes())
    with pytest.raises(ConfigError, match="is true/false, not a number"):
        SettingsSnapshot.read({"grader.high_threshold": True}).grader()
    # each value a setting, together not: the rule between the two keys names both
    crossed = SettingsSnapshot.read({"grader.high_threshold": 0.2, "grader.low_threshold": 0.3})
    with pytest.raises(ConfigError, match=r"grader\.low_threshold \(0\.3\) must be below grader\.high_threshold"):
        crossed.grader().over(GraderSettings())
    with pytest.raises(ConfigError, match="out of range|less than or equal"):
        SettingsSnapshot.read({"grader.high_threshold": 1.5}).settings()


def test_what_the_snapshot_did_not_record_comes_from_the_base():
    live = GraderSettings(blend_high=0.9, blend_low=0.2)
    graded = SettingsSnapshot.read({"grader.high_threshold": 0.8}).grader().over(live)
    assert (graded.high_threshold, graded.blend_high, graded.low_threshold) == (0.8, 0.9, live.low_threshold)


def test_a_grader_patch_takes_names_with_or_without_the_group_and_refuses_others():
    assert GraderPatch.of({"grader.high_threshold": 0.7, "low_threshold": 0.1}).dotted() == {
        "grader.high_threshold": 0.7, "grader.low_threshold": 0.1}
    with pytest.raises(ConfigError, match=r"unknown grader setting: grader\.top_k"):
        GraderPatch.of({"top_k": 3})
    with pytest.raises(ConfigError, match=r"grader\.gray_zone_mode"):
        GraderPatch.of({"gray_zone_mode": "sideways"})
    on_top = GraderPatch(high_threshold=0.6).then(GraderPatch(high_threshold=0.7, gray_zone_mode="blend"))
    assert on_top.changes() == {"high_threshold": 0.7, "gray_zone_mode": "blend"}


def test_the_patch_has_every_grader_setting_with_its_type():
    """GraderPatch spells out GraderSettings' fields: a setting added to one and not the other fails here."""
    assert list(GraderPatch.model_fields) == list(GraderSettings.model_fields)
    for name, field in GraderSettings.model_fields.items():
        assert GraderPatch.model_fields[name].annotation == field.annotation | None, name


def test_run_view_thresholds_read_through_the_snapshot_reader():
    from docmind_ui.run_view import thresholds

    default = GraderSettings()
    assert thresholds(NESTED) == (0.8, 0.3)
    assert thresholds(json.dumps(FLAT)) == (0.8, 0.3)
    assert thresholds({"grader.high_threshold": "nan-ish"}) == (default.high_threshold, default.low_threshold)
    assert thresholds({"grader.high_threshold": float("nan")}) == (default.high_threshold, default.low_threshold)
    assert thresholds(None) == (default.high_threshold, default.low_threshold)


def test_a_sweep_point_carries_a_typed_patch_that_apply_uses_whole():
    from docmind_core.experiments.sweep import SWEPT_KEYS, sweep

    result = sweep([], GraderSettings(), highs=(0.8,), lows=(0.3,), modes=("blend",))
    point = result.point(0.8, 0.3, "blend")
    assert isinstance(point.patch, GraderPatch) and point.patch.dotted() == {
        "grader.high_threshold": 0.8, "grader.low_threshold": 0.3, "grader.gray_zone_mode": "blend"}
    assert set(point.patch.changes()) == set(SWEPT_KEYS) == set(result.live.changes())
    assert point.to_dict()["high"] == 0.8 and "patch" not in point.to_dict()
    assert result.to_dict()["live"] == {"grader.high_threshold": 0.9, "grader.low_threshold": 0.25,
                                        "grader.gray_zone_mode": "coverage_first"}
