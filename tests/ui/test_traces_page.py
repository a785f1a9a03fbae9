"""The Traces page filters mode and tier in the trace store, not in the 500 rows it shows, and reads the runs it
shows or regrades in batches, never one query pair per run (AppTest on app.py)."""

from __future__ import annotations


import pytest
from streamlit.testing.v1 import AppTest

from docmind_core.events import Done, RunStarted
from docmind_core.values import GradeResult, Mode, Tier
from tests.ui.app_support import started_app

pytestmark = pytest.mark.slow  # whole app runs (AppTest) or the demo KB ingested: not in make test-fast
OLD_AGENTIC_LOW = 12
NEWER_RULE_HIGH = 510  # more than the page lists, all newer than the runs asked for
PAIR = "pair-of-two"


def _record(engine, run_id: str, mode: Mode, tier: Tier, pair_id: str | None = None) -> None:
    with engine.traces.recorder(run_id=run_id, question=f"question {run_id}", pair_id=pair_id) as rec:
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
    for side in ("a", "b"):  # the newest runs: a side-by-side pair
        _record(engine, f"pair-{side}", Mode.RULE_PLANNER, Tier.HIGH, pair_id=PAIR)
    yield engine


def _listed(at: AppTest) -> list[str]:
    """Run ids in the page's run table (none when the page says no run matches)."""
    tables = [df.value for df in at.dataframe if "run id" in df.value.columns]
    return list(tables[0]["run id"]) if tables else []


@pytest.mark.parametrize(("label", "value"), [("Mode", Mode.AGENTIC), ("Evidence grade", Tier.LOW)])
def test_old_runs_that_match_are_listed_behind_many_newer_ones(engine, label, value):
    at = _traces_page()
    assert len(_listed(at)) == 500  # the page's cap, filled by the newer runs
    next(m for m in at.multiselect if m.label == label).set_value([value.value]).run()
    assert not at.exception, at.exception
    assert sorted(_listed(at)) == [f"old-{i:03d}" for i in range(OLD_AGENTIC_LOW)]


@pytest.fixture
def reads(monkeypatch):
    """Every read of whole runs from the trace store: ("get", run_id) per single read, ("iter_many", n) per
    batched call with the number of runs it yielded."""
    from docmind_core.store.traces import TraceStore

    calls: list[tuple[str, object]] = []
    one, many = TraceStore.get, TraceStore.iter_many

    def get(self, run_id):
        calls.append(("get", run_id))
        return one(self, run_id)

    def iter_many(self, run_ids, *args, **kwargs):
        at = len(calls)
        calls.append(("iter_many", 0))
        for n, record in enumerate(many(self, run_ids, *args, **kwargs), start=1):
            calls[at] = ("iter_many", n)
            yield record

    monkeypatch.setattr(TraceStore, "get", get)
    monkeypatch.setattr(TraceStore, "iter_many", iter_many)
    return calls


def _traces_page() -> AppTest:
    at = started_app()
    at.switch_page("pages/traces.py").run()
    assert not at.exception, at.exception
    return at


def test_a_picked_pair_is_compared_from_one_batched_read(engine, reads):
    at = _traces_page()
    reads.clear()
    at.selectbox(key="dm_tr_pair").set_value(PAIR).run()
    assert not at.exception, at.exception
    assert "Comparison" in [h.value for h in at.subheader]
    sides = [m.value for m in at.markdown if m.value.startswith(("**A ·", "**B ·"))]
    assert len(sides) == 2 and "pair\\-a" in sides[0] and "pair\\-b" in sides[1], sides  # oldest first: A, B
    assert [kind for kind, _ in reads].count("get") == 0, reads
    # the two records the page shows, and the two it offers as an export: each read once per use, batched
    assert reads == [("iter_many", 2), ("iter_many", 2)], reads


def test_regrading_the_listed_runs_reads_them_in_batches(engine, reads):
    at = _traces_page()
    reads.clear()
    next(b for b in at.button if b.label == "Regrade").click().run()
    assert not at.exception, at.exception
    assert any("of 200 run(s) change evidence grade" in m.value for m in at.markdown)
    assert reads == [("iter_many", 200)], reads[:5]


def test_a_picked_run_that_can_no_longer_be_exported_is_an_error_on_the_page(engine, monkeypatch):
    """A run deleted (or no longer readable) between the list and the export: the page says so instead of
    stopping with a traceback."""
    from docmind_core.errors import NotFound
    from docmind_core.workbench import Workbench

    def gone(self, run_ids):
        raise NotFound(f"trace {run_ids[0]} does not exist")

    monkeypatch.setattr(Workbench, "export_traces", gone)
    at = _traces_page()
    at.selectbox(key="dm_tr_pair").set_value(PAIR).run()
    assert not at.exception, at.exception
    assert any("does not exist" in e.value for e in at.error)
