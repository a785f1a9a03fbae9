"""Langfuse export through the real SDK against a local OTLP receiver on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import time
import uuid
from datetime import datetime

import pytest

from docmind_core.backends.factory import build_exporter
from docmind_core.backends.observation_plan import plan_observations
from docmind_core.backends.tracing import LangfuseExporter, NullExporter
from docmind_core.settings import Settings
from docmind_core.store.db import Database
from docmind_core.store.traces import TraceStore
from tests.fakes.otlp_receiver import OtlpReceiver
from tests.fakes.sample_events import sample_events

STAGES = ["index_incomplete", "ingest_pending", "scope", "understanding", "routing", "agentic_round_1", "retrieval",
          "rerank", "grader", "web_compensation", "judge_evidence", "fallback", "error", "notice", "generation"]


@pytest.fixture
def record(tmp_path):
    store = TraceStore(Database(tmp_path / "docmind.db"))
    with store.recorder(run_id="run-1", question="DM-3000 的保修期是多久？", kb_ids=[1], config=Settings().flat(),
                        user_id=7, conversation_id="conv-9") as rec:
        for event in sample_events("run-1"):
            rec.record(event)
    return store.get("run-1")


def keys() -> tuple[str, str]:
    # The SDK keeps one client per public key per process: a fresh key per test keeps tests apart.
    return f"pk-lf-{uuid.uuid4().hex[:8]}", "sk-lf-test"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_run_is_exported_as_one_trace_with_stage_spans_and_a_generation(record):
    public, secret = keys()
    with OtlpReceiver() as receiver:
        exporter = LangfuseExporter(public, secret, receiver.host, timeout_s=5)
        try:
            exporter.export(record)
            assert exporter.flush(10)
            spans = receiver.wait_for(len(STAGES) + 3)
        finally:
            exporter.close()
    assert receiver.basic_auth() == (public, secret)
    by_name = {s.name: s for s in spans}
    root = by_name["docmind_run"]
    assert root.parent_span_id == "" and root.scope == "docmind"
    assert {s.trace_id for s in spans} == {root.trace_id}  # one trace per run
    for stage in STAGES:
        assert by_name[stage].parent_span_id == root.span_id, stage
    assert [s.name for s in spans if s.parent_span_id == root.span_id] == STAGES  # the order the run had
    # Model calls nest under the stage that made them.
    assert by_name["llm_understanding"].parent_span_id == by_name["understanding"].span_id
    assert by_name["llm_agent_round"].parent_span_id == by_name["agentic_round_1"].span_id

    gen = by_name["generation"].attributes
    assert gen["langfuse.observation.type"] == "generation"
    assert gen["langfuse.observation.model.name"] == "qwen-plus"
    assert json.loads(gen["langfuse.observation.usage_details"]) == {"input": 1500, "output": 120, "total": 1620}
    assert "completion_start_time" in " ".join(gen)
    understanding_call = by_name["llm_understanding"].attributes
    assert understanding_call["langfuse.observation.model.name"] == "qwen-plus"
    assert json.loads(understanding_call["langfuse.observation.usage_details"])["input"] == 320
    assert by_name["understanding"].attributes["langfuse.observation.type"] == "span"

    # Trace-level attributes and input/output on the root.
    attrs = root.attributes
    assert attrs["langfuse.trace.name"] == "docmind_run"
    assert attrs["user.id"] == "7" and attrs["session.id"] == "conv-9"
    assert "DM-3000" in attrs["langfuse.observation.input"]
    assert attrs["langfuse.observation.output"] == record.done.answer
    assert by_name["error"].attributes["langfuse.observation.level"] == "ERROR"
    assert by_name["fallback"].attributes["langfuse.observation.level"] == "WARNING"

    # Real timing: the run's wall-clock start and each stage's own duration.
    started_ns = int(datetime.fromisoformat(record.meta.started_at).timestamp() * 1e9)
    assert abs(root.start_ns - started_ns) < 1_000_000
    assert by_name["understanding"].duration_ms == pytest.approx(210.5, abs=0.01)
    assert by_name["agentic_round_1"].duration_ms == pytest.approx(180.0, abs=0.01)
    assert root.duration_ms == pytest.approx(record.done.t_ms, abs=0.01)


@pytest.mark.slow  # waits out a real deadline or runs the docmind command: make test only
def test_down_receiver_neither_slows_nor_breaks_export(record):
    public, secret = keys()
    exporter = LangfuseExporter(public, secret, f"http://127.0.0.1:{closed_port()}", timeout_s=1)
    try:
        started = time.monotonic()
        exporter.export(record)  # must return at once
        assert time.monotonic() - started < 0.2
        exporter.flush(5)
        assert time.monotonic() - started < 5
        assert exporter.exported_runs == 0
        assert exporter.status().live  # configured, just not reachable
    finally:
        exporter.close()


@pytest.mark.slow  # waits out a real deadline or runs the docmind command: make test only
def test_hanging_receiver_is_bounded_by_the_timeout(record):
    public, secret = keys()
    with OtlpReceiver(hang_s=8) as receiver:
        exporter = LangfuseExporter(public, secret, receiver.host, timeout_s=1)
        try:
            started = time.monotonic()
            exporter.export(record)
            assert time.monotonic() - started < 0.2
            assert exporter.flush(6), "the export thread should give up after its timeout"
            assert time.monotonic() - started < 6
            assert exporter.exported_runs == 0 and "did not accept" in exporter.last_error
        finally:
            exporter.close()


def test_build_exporter_from_env():
    off = build_exporter(Settings().tracing, env={})
    assert isinstance(off, NullExporter) and off.status().live is False
    assert "LANGFUSE_PUBLIC_KEY" in off.status().how_to_enable
    off.export(object())  # accepts anything, does nothing
    public, secret = keys()
    env = {"LANGFUSE_PUBLIC_KEY": public, "LANGFUSE_SECRET_KEY": secret, "LANGFUSE_BASE_URL": "http://127.0.0.1:1/"}
    on = build_exporter(Settings().tracing, env=env)
    try:
        assert isinstance(on, LangfuseExporter) and on.host == "http://127.0.0.1:1"
        # Rebuilding backends (any settings change) hands back the same exporter for the same key ...
        faster = Settings().with_overrides({"tracing.export_timeout_s": 1.5}).tracing
        assert build_exporter(faster, env=env) is on and on.timeout_s == 1.5
        # ... and a new host for that key is reported, not silently dropped.
        moved = build_exporter(Settings().with_overrides({"tracing.langfuse_host": "http://127.0.0.1:4"}).tracing, env)
        assert isinstance(moved, NullExporter) and "restart DocMind" in moved.status().detail
    finally:
        on.close()
    configured = Settings().with_overrides({"tracing.langfuse_host": "http://127.0.0.1:2"})
    public, secret = keys()
    on = build_exporter(configured.tracing, env={"LANGFUSE_PUBLIC_KEY": public, "LANGFUSE_SECRET_KEY": secret,
                                                 "LANGFUSE_HOST": "http://127.0.0.1:3"})
    try:
        assert on.host == "http://127.0.0.1:2"  # the config key wins over the environment
    finally:
        on.close()


def test_plan_for_an_offline_run_without_model_calls(record):
    done = record.done.model_copy(update={"model_calls": [], "backend": "offline"})
    offline = record.model_copy(update={"events": record.events[:-1] + [done]})
    plan = plan_observations(offline)
    generation = plan.children[-1]
    assert generation.name == "generation" and generation.model == "offline" and generation.usage is None
    assert not any(c.name.startswith("llm_") for c in plan.children)
    assert all(c.start_ms <= c.end_ms for c in plan.children)
