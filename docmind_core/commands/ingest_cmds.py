"""``docmind ingest`` and ``docmind kb list|show|delete|reindex|check``.

Every command acts through the access facade of ``--as USERNAME`` (the
operator when no name is given), ``Invocation.workbench``, never on a store.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from docmind_core.commands import Invocation, as_user_option, confirm, echo, echo_json, pass_invocation
from docmind_core.errors import CallerError
from docmind_core.values import IngestOutcome, IngestProgress
from docmind_core.text.visible import strip_control, visible_text

_STATUS_MARK = {"added": "+", "replaced": "~", "unchanged": "=", "failed": "!"}


class _ProgressBar:
    """A tqdm bar over files; the fraction within the current file moves it smoothly."""

    def __init__(self, enabled: bool):
        self._bar = None
        self._enabled = enabled

    def __call__(self, event: IngestProgress) -> None:
        if not self._enabled:
            return
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(total=event.file_count, unit="file", file=sys.stderr, dynamic_ncols=True,
                             bar_format="{l_bar}{bar}| {n:.1f}/{total_fmt} [{elapsed}<{remaining}] {postfix}")
        self._bar.n = event.file_index + event.fraction
        self._bar.set_postfix_str(strip_control(f"{event.name} {event.stage}", single_line=True), refresh=False)
        self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def _outcome_line(outcome: IngestOutcome) -> str:
    mark = _STATUS_MARK[outcome.status]
    if outcome.status == "failed":
        return f"{mark} {outcome.name}: FAILED - {outcome.error}"
    return f"{mark} {outcome.name}: {outcome.status}, {outcome.chunks} chunks ({outcome.seconds:.2f}s)"


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--kb", "kb_name", required=True, help="Knowledge base name (created if it does not exist).")
@click.option("--description", default="", help="Description for a newly created knowledge base.")
@click.option("--if-missing", is_flag=True, help="Do nothing when the knowledge base already has documents.")
@click.option("--progress/--no-progress", default=True, show_default=True, help="Show a progress bar.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcomes as JSON.")
@as_user_option
@pass_invocation
def ingest(invocation: Invocation, paths, kb_name, description, if_missing, progress, as_json, as_user):
    """Add files or folders to a knowledge base (unchanged files are skipped, changed ones replaced).

    Exit code 0 when every file landed or was already there, 1 when some failed
    (each listed with its reason; the others landed), 2 when nothing could be ingested.
    """
    bench = invocation.workbench(as_user)
    kb = bench.find_kb(kb_name)
    if kb is not None and if_missing and kb.document_count > 0:
        echo(f"knowledge base '{kb_name}' already has {kb.document_count} documents; nothing to do")
        return
    kb, created = bench.kb_to_write(kb_name, description=description)
    if created and not as_json:
        echo(f"created knowledge base '{kb_name}' ({kb.embedder_id})")
    bar = _ProgressBar(progress and not as_json)
    try:
        outcomes = bench.ingest(kb.id, list(paths), progress=bar)
    finally:
        bar.close()
    if as_json:
        echo_json(json.dumps([o.model_dump() for o in outcomes], ensure_ascii=False, indent=2))
    else:
        for outcome in outcomes:
            echo(_outcome_line(outcome), single_line=True)
        counts = {s: sum(o.status == s for o in outcomes) for s in _STATUS_MARK}
        echo(", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no files found")
    if not outcomes:
        raise CallerError("no files found under the given paths")
    if all(o.status == "failed" for o in outcomes):
        sys.exit(2)
    if any(o.status == "failed" for o in outcomes):
        sys.exit(1)  # a script must not read a partial ingest as a complete one


@click.group()
def kb() -> None:
    """List, inspect, delete or re-index knowledge bases."""


@kb.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@as_user_option
@pass_invocation
def kb_list(invocation: Invocation, as_json, as_user):
    """List knowledge bases with their document and chunk counts."""
    kbs = invocation.workbench(as_user).list_kbs()
    if as_json:
        echo_json(json.dumps([k.model_dump() for k in kbs], ensure_ascii=False, indent=2))
        return
    if not kbs:
        echo("no knowledge bases yet (create one with: docmind ingest PATH --kb NAME)")
        return
    width = max(len(k.name) for k in kbs)
    echo(f"{'name':<{width}}  {'docs':>5}  {'chunks':>7}  embedder")
    for k in kbs:
        echo(f"{k.name:<{width}}  {k.document_count:>5}  {k.chunk_count:>7}  {k.embedder_id}"
             + (f"  - {k.description}" if k.description else ""), single_line=True)


@kb.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@as_user_option
@pass_invocation
def kb_show(invocation: Invocation, name, as_json, as_user):
    """Show one knowledge base and its documents (failed ones with their reason)."""
    bench = invocation.workbench(as_user)
    k = bench.kb_by_name(name)
    docs = bench.list_documents(k.id)
    if as_json:
        echo_json(json.dumps({"kb": k.model_dump(), "documents": [d.model_dump() for d in docs]},
                             ensure_ascii=False, indent=2))
        return
    echo(f"{k.name}: {k.document_count} documents, {k.chunk_count} chunks, embedder {k.embedder_id} "
         f"({k.embedding_dim}-d), created {k.created_at}", single_line=True)
    if k.description:
        echo(f"  {k.description}", single_line=True)
    for d in docs:
        line = f"  [{d.status}] {d.name}  {d.chunk_count} chunks, {d.size} bytes, {d.mime}"
        echo(line, single_line=True)
        if d.error:
            echo(f"      reason: {d.error}", single_line=True)


@kb.command("text")
@click.argument("name")
@click.argument("document")
@as_user_option
@pass_invocation
def kb_text(invocation: Invocation, name, document, as_user):
    """Print the text extracted from one document of a knowledge base (what was chunked and indexed)."""
    bench = invocation.workbench(as_user)
    k = bench.kb_by_name(name)
    found = next((d for d in bench.list_documents(k.id) if d.name == document), None)
    if found is None:
        raise CallerError(f"no document named {document!r} in {name} (see: docmind kb show {name})")
    echo(visible_text(bench.document_text(found.id)))


@kb.command("delete")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@as_user_option
@pass_invocation
def kb_delete(invocation: Invocation, name, yes, as_user):
    """Delete a knowledge base from SQLite, the vector store and the keyword index."""
    bench = invocation.workbench(as_user)
    k = bench.kb_by_name(name)
    if not yes:
        confirm(f"Delete knowledge base '{name}' with {k.document_count} documents?")
    bench.delete_kb(k.id)
    echo(f"deleted knowledge base '{name}'")


@kb.command("share")
@click.argument("name")
@click.option("--visibility", type=click.Choice(["private", "department", "public"]), required=True,
              help="private: owner only; department: the owner's department; public: everyone signed in.")
@as_user_option
@pass_invocation
def kb_share(invocation: Invocation, name, visibility, as_user):
    """Change who may read a knowledge base (its owner or an admin only)."""
    bench = invocation.workbench(as_user)
    updated = bench.set_visibility(bench.kb_by_name(name).id, visibility)
    echo(f"'{name}' is now {updated.visibility}"
         + (f" (department {updated.department})" if updated.visibility == "department" else ""))


@kb.command("reindex")
@click.argument("name")
@as_user_option
@pass_invocation
def kb_reindex(invocation: Invocation, name, as_user):
    """Re-embed a knowledge base with the configured embedder (after changing embedding settings)."""
    bench = invocation.workbench(as_user)
    before = bench.kb_by_name(name)
    count = bench.reindex_kb(before.id)
    now = bench.kb_by_name(name).embedder_id
    was = f" (it was indexed with {before.embedder_id})" if before.embedder_id != now else ""
    echo(f"re-embedded {count} chunks of '{name}' with {now}{was}")


@kb.command("check")
@click.argument("name")
@click.option("--repair", is_flag=True, help="Fix what differs (re-add missing vectors and keyword rows, "
                                             "drop orphans).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@as_user_option
@pass_invocation
def kb_check(invocation: Invocation, name, repair, as_json, as_user):
    """Compare chunk rows, keyword rows and vectors per document. Exit code 1 when they differ (after
    --repair: when the repair could not make them agree)."""
    bench = invocation.workbench(as_user)
    report = bench.check_kb(bench.kb_by_name(name).id, repair=repair)
    if as_json:
        echo_json(json.dumps({**report.model_dump(mode="json"), "ok": report.ok}, ensure_ascii=False, indent=2))
    else:
        for line in report.lines():
            echo(line, single_line=True)
    if not (report.repair_verified if repair else report.ok):
        sys.exit(1)
