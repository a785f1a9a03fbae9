"""``docmind jobs list|show|cancel|retry``: the background ingest jobs the pages enqueue.

A job runs in the worker of the process that holds it (a server); these commands read and change
its rows, so ``cancel`` stops a job running in a server (its worker polls the flag) and ``retry``
queues a finished job's failed files again (run by this process's worker, which the command waits
for unless ``--no-wait``).
"""

from __future__ import annotations

import json
import time

import click

from docmind_core.commands import Invocation, as_user_option, echo, echo_json, pass_invocation, record_id_type


def _eta(seconds: float | None) -> str:
    return "" if seconds is None else f", ETA {int(seconds) // 60}:{int(seconds) % 60:02d}"


def _job_line(job, kb_names: dict[int, str]) -> str:
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(job.created_at))
    kb = kb_names.get(job.kb_id, f"#{job.kb_id}")
    progress = f" {job.progress:.0%}{_eta(job.eta_s())}" if not job.finished else ""
    note = f" ({job.note})" if job.note else ""
    return f"#{job.id:<5} {when}  {job.state:<11}{progress}  kb={kb}  {job.summary()}{note}"


def _job_json(job) -> dict:
    data = job.model_dump()
    data.update(progress=round(job.progress, 4), eta_s=job.eta_s())
    for f, row in zip(job.files, data["files"]):
        row["message"] = f.message
    return data


@click.group()
def jobs() -> None:
    """Background ingest jobs (uploads from the Knowledge bases page)."""


@jobs.command("list")
@click.option("--kb", "kb_name", default=None, help="Only this knowledge base's jobs.")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 1000))
@click.option("--json", "as_json", is_flag=True)
@as_user_option
@pass_invocation
def list_jobs(invocation: Invocation, kb_name, limit, as_json, as_user):
    """Recent jobs, newest first (the KBs you own; every KB's for admins)."""
    bench = invocation.workbench(as_user)
    kb_id = bench.kb_by_name(kb_name).id if kb_name else None
    found = bench.list_jobs(kb_id, limit=limit)
    if as_json:
        echo_json(json.dumps([_job_json(j) for j in found], ensure_ascii=False, indent=2))
        return
    if not found:
        echo("no ingest jobs")
        return
    names = {kb.id: kb.name for kb in bench.list_kbs()}
    for job in found:
        echo(_job_line(job, names), single_line=True)


@jobs.command("show")
@click.argument("job_id", type=record_id_type("job id"))
@click.option("--json", "as_json", is_flag=True)
@as_user_option
@pass_invocation
def show_job(invocation: Invocation, job_id, as_json, as_user):
    """One job with each file's state, chunks and error."""
    bench = invocation.workbench(as_user)
    job = bench.get_job(job_id)
    if as_json:
        echo_json(json.dumps(_job_json(job), ensure_ascii=False, indent=2))
        return
    echo(_job_line(job, {kb.id: kb.name for kb in bench.list_kbs()}), single_line=True)
    for f in job.files:
        if f.state == "failed":  # the message names the file already
            echo(f"  {f.state:<11} {f.message or f.name}", single_line=True)
            continue
        detail = f"{f.outcome or f.stage}, {f.chunks} chunks" if f.state == "done" else \
            f"{f.stage} {f.progress:.0%}{_eta(f.eta_s())}"
        echo(f"  {f.state:<11} {f.name}  {detail}", single_line=True)


@jobs.command("cancel")
@click.argument("job_id", type=record_id_type("job id"))
@as_user_option
@pass_invocation
def cancel_job(invocation: Invocation, job_id, as_user):
    """Cancel a queued job, or ask the worker running it to stop."""
    bench = invocation.workbench(as_user)
    job = bench.cancel_job(job_id)
    echo(f"job #{job.id}: {'cancelled' if job.state == 'cancelled' else 'cancel requested'} ({job.state})")


@jobs.command("retry")
@click.argument("job_id", type=record_id_type("job id"))
@click.option("--wait/--no-wait", default=True, show_default=True,
              help="Wait for the retried files (they run in this process).")
@click.option("--timeout", default=3600.0, show_default=True, type=click.FloatRange(1, 86400))
@as_user_option
@pass_invocation
def retry_job(invocation: Invocation, job_id, wait, timeout, as_user):
    """Queue a finished job's failed, cancelled and interrupted files again."""
    bench = invocation.workbench(as_user)
    job = bench.retry_job(job_id)
    echo(f"job #{job.id}: {job.summary()} queued again")
    if wait:
        deadline = time.monotonic() + timeout
        while not job.finished and time.monotonic() < deadline:
            time.sleep(0.3)
            job = bench.get_job(job_id)
        echo(_job_line(job, {kb.id: kb.name for kb in bench.list_kbs()}), single_line=True)
        for f in job.files:
            if f.state == "failed":
                echo(f"  ! {f.message}", single_line=True)
