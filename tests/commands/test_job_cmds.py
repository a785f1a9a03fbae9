"""``docmind jobs list|show|cancel|retry`` through the real command on its own home."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from docmind_core.cli import cli
from docmind_core.engine import Engine
from docmind_core.ingest.jobs import JobInput
from docmind_core.accounts.users import UserStore
from tests.access_world import FAST_HASHER, PASSWORD

pytestmark = pytest.mark.slow  # a background ingest job on a real engine, driven through the CLI: not in make test-fast


def test_jobs_list_show_retry_and_cancel(tmp_path):
    home = tmp_path / "home"
    engine = Engine.open(home, env={}, warm=False)
    kb = engine.create_kb("notes")
    job = engine.jobs.enqueue(kb.id, None, [JobInput("ok.txt", data=b"The zephyr budget is 40k."),
                                            JobInput("bad.pdf", data=b"%PDF-1.4 broken")])
    engine.jobs.wait(job.id, 60)

    def run(*args):
        result = CliRunner().invoke(cli, ["--home", str(home), "jobs", *args])
        return result

    listed = run("list")
    assert listed.exit_code == 0 and f"#{job.id}" in listed.output and "kb=notes" in listed.output
    assert "1 done, 1 failed" in listed.output
    shown = run("show", str(job.id))
    assert shown.exit_code == 0 and "ok.txt" in shown.output
    assert shown.output.count("bad.pdf") == 1  # the failure names the file once
    data = json.loads(run("show", str(job.id), "--json").output)
    assert data["id"] == job.id and {f["name"]: f["state"] for f in data["files"]} == {"ok.txt": "done",
                                                                                        "bad.pdf": "failed"}
    retried = run("retry", str(job.id))
    assert retried.exit_code == 0 and "queued again" in retried.output and "! bad.pdf:" in retried.output
    assert run("retry", str(job.id), "--no-wait").exit_code == 0  # the failed file can be retried again
    engine.jobs.wait(job.id, 60)
    cancelled = run("cancel", str(job.id))
    assert cancelled.exit_code == 0 and f"job #{job.id}" in cancelled.output
    # another member may not see or touch alice's... here the operator's job
    UserStore(engine.db, hasher=FAST_HASHER).add("bob", PASSWORD, department="x")
    refused = run("show", str(job.id), "--as", "bob")
    assert refused.exit_code == 2 and "may manage" in refused.output
    assert "no ingest jobs" in run("list", "--as", "bob").output
