"""Words a reader sees while a run streams and beside a stopped run (issue 38 item 4)."""

from __future__ import annotations

from docmind_core.events import AnswerStarted, Done, ErrorRaised
from docmind_core.reports.timeline import RunDigest, problem_lines, progress_words, timeline
from tests.reports.test_compare import sample_run


def test_the_streaming_status_says_what_happens_not_the_prompt_name():
    start = next(e for e in sample_run() if isinstance(e, AnswerStarted))
    assert progress_words(start) == "Writing the answer"
    row = next(r for r in timeline(sample_run()) if r.kind == "start")
    assert row.title == "Writing the answer" and row.fields["prompt"] == "knowledge_qa"
    statuses = [progress_words(e) for e in sample_run(mode="AGENTIC")]
    assert "Searching, round 1" in statuses
    assert not [s for s in statuses if "knowledge_qa" in s or "_" in s]


def test_a_stopped_run_says_stopped_by_you_instead_of_the_timeouts_it_caused():
    events = sample_run()
    events.insert(-1, ErrorRaised(stage="retrieval.doc_search", message="timeout: no answer within 8000 ms",
                                  t_ms=39.0))
    failed = RunDigest.from_events(events)
    assert problem_lines(failed) == ["retrieval.doc_search: timeout: no answer within 8000 ms"]
    done = events[-1]
    assert isinstance(done, Done)
    events[-1] = done.model_copy(update={"cancelled": True})
    lines = problem_lines(RunDigest.from_events(events))
    assert len(lines) == 1 and lines[0].startswith("Stopped by you") and "timeout" not in lines[0]
