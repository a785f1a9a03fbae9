"""The Traces page filters mode and tier in the trace store, not in the 500 rows it shows (AppTest on app.py)."""

from __future__ import annotations


import pytest
from streamlit.testing.v1 import AppTest

from docmind_core.events import Done, RunStarted
from docmind_core.models import GradeResult, Mode, Tier
from tests.paths import ROOT

pytestmark = pytest.mark.slow  # whole app runs (AppTest) or the demo KB ingested: not in make test-fast
APP = str(ROOT / "app.py")
OLD_AGENTIC_LOW = 12
NEWER_RULE_HIGH = 510  # more than the page lists, all newer than the runs asked for


def _record(engine, run_id: str, mode: Mode, tier: Tier) -> None:
    with engine.traces.recorder(run_id=run_id, question=f"question {run_id}") as rec:
        rec.record(RunStarted(run_id=run_id, question=f"question {run_id}", kb_ids=[], requested_mode="auto",
                              backends=[], t_ms=0.0))
        rec.record(Done(run_id=run_id, answer="an answer", mode=mode.value, stop_reason="model_done", t_ms=5.0,
                        grade=GradeResult(tier=tier, top_score=0.5, lex_coverage=0.5, kb_entity_weak=False,
                                         web_compensation_needed=False, reason="test")))


@pytest.fixture(scope="module")
def engine(app_engine):
    engine = app_engine
    for i in range(OLD_AGENTIC_LOW):  # recorded first: the oldest runs
        _record(engine, f"old-{i:03d}", Mode.AGENTIC, Tier.LOW)
    for i in range(NEWER_RULE_HIGH):
        _record(engine, f"new-{i:03d}", Mode.RULE_PLANNER, Tier.HIGH)
    yield engine


def _listed(at: AppTest) -> list[str]:
    """Run ids in the page's run table (none when the page says no run matches)."""
    tables = [df.value for df in at.dataframe if "run id" in df.value.columns]
    return list(tables[0]["run id"]) if tables else []


@pytest.mark.parametrize(("label", "value"), [("Mode", Mode.AGENTIC), ("Tier", Tier.LOW)])
def test_old_runs_that_match_are_listed_behind_many_newer_ones(engine, label, value):
    at = AppTest.from_file(APP, default_timeout=90).run()
    assert not at.exception, at.exception
    at.switch_page("pages/traces.py").run()
    assert not at.exception, at.exception
    assert len(_listed(at)) == 500  # the page's cap, filled by the newer runs
    next(m for m in at.multiselect if m.label == label).set_value([value.value]).run()
    assert not at.exception, at.exception
    assert sorted(_listed(at)) == [f"old-{i:03d}" for i in range(OLD_AGENTIC_LOW)]
