"""Hostile trace exports through TraceStore.import_json: refused with a message (never a traceback), or imported
under an id every page and command can name."""

from __future__ import annotations

import json

import pytest

from docmind_core.events import Done, Reranked, RunStarted
from docmind_core.values import RetrievedChunk
from docmind_core.store.db import Database
from docmind_core.store.traces import TraceFormatError, TraceStore


@pytest.fixture
def traces(tmp_path):
    store = TraceStore(Database(tmp_path / "docmind.db"))
    with store.recorder(run_id="r1", question="q?") as rec:
        rec.record(RunStarted(run_id="r1", question="q?", kb_ids=[], requested_mode="auto", backends=[]))
        rec.record(Done(run_id="r1", answer="an answer", mode="NONE", stop_reason="model_done"))
    return store


def _export(traces, **meta) -> dict:
    document = json.loads(traces.export_json(["r1"]))
    document["runs"][0]["meta"].update(meta)
    return document


def test_json_nested_too_deeply_is_refused_as_not_json(traces):
    text = '{"format": "docmind-traces", "version": 1, "runs": ' + "[" * 100_000 + "]" * 100_000 + "}"
    with pytest.raises(TraceFormatError, match="not a JSON file"):
        traces.import_json(text)


@pytest.mark.parametrize("bad_id", ["", "../../x\n\x1b[2J", "<b>x</b>", "x" * 500])
def test_a_run_id_no_page_or_command_can_name_gets_a_fresh_one(traces, bad_id):
    (new_id,) = traces.import_json(json.dumps(_export(traces, run_id=bad_id)))
    assert new_id != bad_id and len(new_id) == 32 and new_id.isalnum()
    assert traces.get(new_id).done.run_id == new_id


def test_a_run_without_events_is_refused_and_nothing_is_imported(traces):
    document = _export(traces, run_id="second")
    document["runs"].insert(0, json.loads(traces.export_json(["r1"]))["runs"][0])
    document["kind"] = "comparison"
    document["runs"][1]["events"] = []
    before = len(traces.list())
    with pytest.raises(TraceFormatError, match="run second has no events"):
        traces.import_json(json.dumps(document))
    assert len(traces.list()) == before  # the first run of the file was not kept either


@pytest.mark.slow  # the whole app (AppTest)
def test_an_imported_trace_with_markup_in_every_field_replays_inert_on_the_traces_page(app_engine):
    from tests.test_hostile_text import (IMAGE, QUESTION, _app_page, _assert_nothing_fetches_or_links_out,
                                         _markdown_strings)
    from tests.markdown_probe import text_of

    markup = f"{QUESTION} <script>alert(1)</script> <style>body{{display:none}}</style>"
    store = app_engine.traces
    with store.recorder(run_id="src", question="q?") as rec:
        rec.record(RunStarted(run_id="src", question="q?", kb_ids=[], requested_mode="auto", backends=[]))
        rec.record(Reranked(candidates=[RetrievedChunk(chunk_id="c1", document=markup, text=markup)],
                            reranker=markup))  # a candidate: the score chart is drawn with the snapshot's thresholds
        rec.record(Done(run_id="src", answer="a", mode="NONE", stop_reason="model_done"))
    document = json.loads(store.export_json(["src"]))
    run = document["runs"][0]
    run["meta"].update(question=markup, mode=markup, tier=markup, stop_reason=markup)
    run["config"] = {"grader.high_threshold": markup, "grader.low_threshold": markup, markup: markup}
    run["events"][0]["question"] = markup
    run["events"][-1].update(answer=markup, stop_reason=markup)
    (imported,) = store.import_json(json.dumps(document))
    at = _app_page("pages/traces.py")
    listed = list(next(df.value for df in at.dataframe if "run id" in df.value.columns)["run id"])
    at.session_state["dm_tr_table"] = {"selection": {"rows": [listed.index(imported)], "columns": [], "cells": []}}
    at.run()
    assert not at.exception, at.exception  # the snapshot's thresholds were read with float(): a ValueError
    strings = _markdown_strings(at)
    _assert_nothing_fetches_or_links_out(strings)
    assert any(IMAGE in text_of(s) for s in strings), "the imported question is shown, as text"


def test_an_imported_runs_listing_is_read_from_its_events_not_from_what_the_file_claims(traces):
    """The list, its filters and the pair view show mode, tier, stop reason, question and duration; a file could
    claim tier HIGH for a run whose events ended otherwise, and the Traces list showed the claim."""
    document = _export(traces, mode="AGENTIC", tier="HIGH", stop_reason="model_done", question="a made-up claim",
                       duration_ms=1.0)
    (new_id,) = traces.import_json(json.dumps(document))
    meta = traces.get(new_id).meta
    assert (meta.mode, meta.tier, meta.stop_reason, meta.question) == ("NONE", "", "model_done", "q?")
    assert [r.run_id for r in traces.list(tier="HIGH")] == []
    # a run whose events stop before its done event is incomplete, whatever the file says
    cut = _export(traces, tier="HIGH", stop_reason="model_done")
    cut["runs"][0]["events"] = [e for e in cut["runs"][0]["events"] if e["kind"] != "done"]
    (cut_id,) = traces.import_json(json.dumps(cut))
    assert (traces.get(cut_id).meta.tier, traces.get(cut_id).meta.stop_reason) == ("", "incomplete")
