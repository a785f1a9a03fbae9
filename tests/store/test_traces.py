"""TraceStore: exact event round-trips, filters, pairs, JSON export/import."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from docmind_core.errors import NotFound
from docmind_core.events import Done, Token
from docmind_core.values import Mode, Tier
from docmind_core.settings import Settings
from docmind_core.store.db import Database
from docmind_core.store.traces import TraceFormatError, TraceRecord, TraceStore
from tests.fakes.sample_events import sample_events


@pytest.fixture
def store(db):
    return TraceStore(db)


def record_run(store: TraceStore, run_id: str, *, user_id=1, kb_ids=(1, 2), mode="AGENTIC", tier=Tier.AMBIGUOUS,
               tokens=12, pair_id=None, requested_mode="auto") -> list:
    events = sample_events(run_id, tokens=tokens, mode=mode, tier=tier)
    with store.recorder(run_id=run_id, question=events[0].question, requested_mode=requested_mode, kb_ids=kb_ids,
                        config=Settings().flat(), user_id=user_id, conversation_id="conv-1", pair_id=pair_id) as rec:
        for event in events:
            rec.record(event)
    return events


def test_every_event_kind_round_trips_exactly(store):
    events = record_run(store, "run-1")
    record = store.get("run-1")
    assert isinstance(record, TraceRecord)
    assert record.events == events
    assert [type(e) for e in record.events] == [type(e) for e in events]
    assert record.config == Settings().flat()
    meta = record.meta
    assert (meta.run_id, meta.question, meta.user_id, meta.kb_ids, meta.conversation_id) == \
        ("run-1", "DM-3000 的保修期是多久？", 1, [1, 2], "conv-1")
    # Set from the done event:
    assert (meta.mode, meta.tier, meta.stop_reason) == ("AGENTIC", "AMBIGUOUS", "model_done")
    assert meta.duration_ms == events[-1].t_ms
    assert record.done == events[-1]


def test_events_are_stored_with_seq_kind_and_t_ms(store, db):
    events = record_run(store, "run-1")
    rows = db.db.execute("SELECT seq, kind, t_ms FROM trace_events WHERE run_id = 'run-1' ORDER BY seq").fetchall()
    assert [r[0] for r in rows] == list(range(len(events)))
    assert [(r[1], r[2]) for r in rows] == [(e.kind, e.t_ms) for e in events]


def test_many_tokens_are_buffered_not_written_one_by_one(store, db, monkeypatch):
    events = sample_events("run-big", tokens=3000)
    rec = store.recorder(run_id="run-big", question="q", config={})
    writes: list[int] = []  # transactions, counted rather than timed: a busy machine slows both ways alike
    real_transaction = db.transaction
    monkeypatch.setattr(db, "transaction", lambda *a, **k: writes.append(1) or real_transaction(*a, **k))
    for event in events[:-1]:
        rec.record(event)
    # Before done at most one buffer's worth is unwritten.
    stored = db.db.execute("SELECT COUNT(*) FROM trace_events WHERE run_id = 'run-big'").fetchone()[0]
    assert len(events) - 1 - stored < 200
    rec.record(events[-1])
    rec.finish()
    assert len(writes) * 100 <= len(events), f"{len(events)} events took {len(writes)} writes"
    assert store.get("run-big").events == events


def test_a_run_without_done_is_kept_as_incomplete(store):
    events = sample_events("run-x")
    rec = store.recorder(run_id="run-x", question="q", config={})
    for event in events[:5]:
        rec.record(event)
    rec.finish()
    rec.finish()  # idempotent
    rec.record(events[5])  # ignored after finish
    record = store.get("run-x")
    assert record.events == events[:5]
    assert record.meta.stop_reason == "incomplete" and record.meta.mode == ""
    assert record.done is None


def test_list_filters(store):
    record_run(store, "a", user_id=1, kb_ids=[1], mode="AGENTIC", tier=Tier.HIGH)
    record_run(store, "b", user_id=2, kb_ids=[2], mode="RULE_PLANNER", tier=Tier.LOW)
    record_run(store, "c", user_id=1, kb_ids=[1, 2], mode="RULE_PLANNER", tier=Tier.HIGH)
    ids = lambda rows: [r.run_id for r in rows]  # noqa: E731
    assert ids(store.list()) == ["c", "b", "a"]  # newest first
    assert ids(store.list(user_id=1)) == ["c", "a"]
    assert ids(store.list(mode="RULE_PLANNER")) == ["c", "b"]
    assert ids(store.list(tier="HIGH")) == ["c", "a"]
    assert ids(store.list(kb_id=2)) == ["c", "b"]
    assert ids(store.list(kb_id=1, mode="AGENTIC")) == ["a"]
    assert ids(store.list(stop_reason="model_done")) == ["c", "b", "a"]
    assert ids(store.list(stop_reason="max_iterations")) == []
    assert ids(store.list(limit=1)) == ["c"]
    assert ids(store.list(question_contains="dm-3000")) == ["c", "b", "a"]
    assert ids(store.list(question_contains="nothing like this")) == []
    assert ids(store.list(conversation_id="conv-1", user_id=2)) == ["b"]
    assert ids(store.list(since=datetime.now(timezone.utc) - timedelta(minutes=5))) == ["c", "b", "a"]
    assert ids(store.list(since=datetime.now(timezone.utc) + timedelta(minutes=5))) == []
    first = store.list(user_id=2)[0]
    assert first.event_count == len(sample_events("b")) and first.tier == "LOW"


def test_list_takes_several_modes_and_tiers(store):
    record_run(store, "a", mode="AGENTIC", tier=Tier.HIGH)
    record_run(store, "b", mode="RULE_PLANNER", tier=Tier.LOW)
    record_run(store, "c", mode="SELECTED_DOC", tier=Tier.AMBIGUOUS)
    ids = lambda rows: [r.run_id for r in rows]  # noqa: E731
    assert ids(store.list(mode=[Mode.AGENTIC, Mode.SELECTED_DOC])) == ["c", "a"]
    assert ids(store.list(tier=(Tier.LOW, Tier.AMBIGUOUS), mode=["RULE_PLANNER"])) == ["b"]
    assert ids(store.list(mode=Mode.AGENTIC)) == ["a"]
    assert ids(store.list(mode=[], tier=[])) == ["c", "b", "a"]  # an empty choice filters nothing


def test_delete(store):
    record_run(store, "a")
    store.delete("a")
    with pytest.raises(NotFound):
        store.get("a")
    with pytest.raises(NotFound):
        store.delete("a")
    assert store.list() == []


def test_side_by_side_pair(store):
    pair = store.new_pair_id()
    record_run(store, "rule", mode="RULE_PLANNER", pair_id=pair, requested_mode="rule")
    record_run(store, "agentic", mode="AGENTIC", pair_id=pair, requested_mode="agentic")
    record_run(store, "other")
    assert [r.run_id for r in store.list(pair_id=pair)] == ["agentic", "rule"]  # newest first


def test_export_import_round_trip_of_one_trace(store, tmp_path):
    events = record_run(store, "run-1")
    text = store.export_json(["run-1"])
    document = json.loads(text)
    assert document["format"] == "docmind-traces" and document["kind"] == "trace"
    # Into another installation: same run id, events identical, labelled imported.
    other = TraceStore(Database(tmp_path / "other.db"))
    (new_id,) = other.import_json(text, user_id=7)
    assert new_id == "run-1"
    record = other.get(new_id)
    assert record.events == events
    assert record.meta.label == "imported" and record.meta.user_id == 7 and record.meta.conversation_id is None
    assert record.config == store.get("run-1").config
    assert (record.meta.mode, record.meta.tier) == ("AGENTIC", "AMBIGUOUS")


def test_importing_into_the_same_store_gets_a_fresh_run_id(store):
    record_run(store, "run-1")
    (new_id,) = store.import_json(store.export_json(["run-1"]))
    assert new_id != "run-1"
    record = store.get(new_id)
    assert record.events[0].run_id == new_id and record.done.run_id == new_id
    assert [e for e in record.events if isinstance(e, Token)] == \
        [e for e in store.get("run-1").events if isinstance(e, Token)]


def test_export_import_of_a_comparison_keeps_it_a_pair(store, tmp_path):
    pair = store.new_pair_id()
    rule = record_run(store, "rule", mode="RULE_PLANNER", pair_id=pair)
    agentic = record_run(store, "agentic", mode="AGENTIC", pair_id=pair)
    text = store.export_json(["rule", "agentic"])
    assert json.loads(text)["kind"] == "comparison"
    other = TraceStore(Database(tmp_path / "other.db"))
    ids = other.import_json(text)
    assert ids == ["rule", "agentic"]
    records = [other.get(i) for i in ids]
    assert records[0].events == rule and records[1].events == agentic
    assert records[0].meta.pair_id == records[1].meta.pair_id != pair
    assert [r.run_id for r in reversed(other.list(pair_id=records[0].meta.pair_id))] == ids


@pytest.mark.parametrize("text, message", [
    ("not json", "not a JSON file"),
    ('{"format": "something-else"}', "not a DocMind trace export"),
    ('{"format": "docmind-traces", "version": 99, "kind": "trace", "runs": []}', "unsupported trace export version"),
    ('{"format": "docmind-traces", "version": 1, "kind": "trace", "runs": []}', "contains no runs"),
    ('{"format": "docmind-traces", "version": 1, "kind": "trace", "runs": [{"meta": {}}]}', "malformed"),
])
def test_import_refuses_bad_files_with_a_message(store, text, message):
    with pytest.raises(TraceFormatError, match=message):
        store.import_json(text)
    assert store.list() == []


def test_import_refuses_unknown_events_and_stores_nothing(store):
    record_run(store, "run-1")
    document = json.loads(store.export_json(["run-1"]))
    document["runs"][0]["events"].append({"kind": "teleport", "t_ms": 1})
    document["runs"][0]["meta"]["run_id"] = "run-2"
    with pytest.raises(TraceFormatError, match="cannot read"):
        store.import_json(json.dumps(document))
    assert [r.run_id for r in store.list()] == ["run-1"]


def test_sources_by_run_for_the_markdown_export(store):
    events = record_run(store, "run-1")
    done = events[-1]
    assert isinstance(done, Done)
    assert store.sources_by_run(["run-1", "missing", ""]) == {"run-1": done.sources}


def _counting_statements(db) -> list[str]:
    """The SQL statements run on this thread's connection from now on."""
    statements: list[str] = []
    db.db.conn.set_trace_callback(statements.append)
    return statements


def test_a_pair_and_an_export_read_their_runs_in_one_batch_not_a_query_pair_per_run(store, db):
    pair = store.new_pair_id()
    for i in range(5):
        record_run(store, f"side-{i}", mode="RULE_PLANNER", pair_id=pair, tokens=3)
    statements = _counting_statements(db)
    in_order_started = [r.run_id for r in reversed(store.list(pair_id=pair))]  # as Workbench.pair_runs reads
    assert [r.run_id for r in store.iter_many(in_order_started)] == [f"side-{i}" for i in range(5)]
    assert len(statements) == 3, statements  # the pair's listing, then the runs and their events
    statements.clear()
    document = json.loads(store.export_json(["side-3", "side-1"]))
    assert [r["meta"]["run_id"] for r in document["runs"]] == ["side-3", "side-1"]  # in the order asked
    assert len(statements) == 2, statements
    db.db.conn.set_trace_callback(None)
    with pytest.raises(NotFound, match="missing"):
        store.export_json(["side-1", "missing"])
