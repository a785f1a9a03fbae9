"""Issue 40 item 9 at the access facade every page, command and tool goes through: an empty question is refused
before a run starts, and an upload name with a lone surrogate (a browser can send one) is stored readable."""

from __future__ import annotations

import pytest

from docmind_core.errors import CallerError
from docmind_core.accounts.users import LOCAL_USER
from docmind_core.engine import Engine
from docmind_core.ingest.jobs import JobInput
from docmind_core.workbench import Workbench

TEXT = b"# Plan\n\nThe BLUEJAY plan ships in May with 12 people.\n"


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    engine = Engine.open(tmp_path_factory.mktemp("edges") / "home", env={}, warm=False)
    return Workbench(engine, LOCAL_USER, channel="web")


@pytest.mark.parametrize("question", ["", "  ", "\n\t "])
def test_an_empty_question_is_refused_before_any_run(bench, question):
    runs_before = len(bench.list_traces())
    with pytest.raises(CallerError, match="question is empty"):
        bench.ask(question, [])
    with pytest.raises(CallerError, match="query is empty"):
        bench.search(question, [])
    assert len(bench.list_traces()) == runs_before  # no run, no trace


def test_an_upload_name_with_a_lone_surrogate_is_stored_readable(bench):
    kb = bench.create_kb("uploads")
    job = bench.enqueue_ingest(kb.id, [JobInput("pl\ud800an.md", data=TEXT), JobInput("ok.md", data=TEXT + b"!")])
    job = bench._engine.jobs.wait(job.id, 120)
    assert [f.name for f in job.files] == ["pl\ufffdan.md", "ok.md"]
    assert [f.state for f in job.files] == ["done", "done"], [f.error for f in job.files]
    assert sorted(d.name for d in bench.list_documents(kb.id)) == ["ok.md", "pl\ufffdan.md"]


@pytest.mark.parametrize("call", ["get_job", "cancel_job", "document_text", "forget_memory", "revoke_api_key"])
def test_an_id_no_record_can_have_is_refused_by_name(bench, call):
    """Issue 40 item 3 behind every edge: such an id reached SQLite and raised OverflowError."""
    with pytest.raises(CallerError, match="is not a valid id"):
        getattr(bench, call)(1180591620717411303424)
