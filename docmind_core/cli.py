"""The ``docmind`` command: a thin click front over the Engine.

Each invocation puts an :class:`~docmind_core.commands.Invocation` on ``ctx.obj``: its data folder, and the
engine on it, opened on first use (so ``docmind --help`` stays instant) with the same composition root as
the UI, and released when the invocation ends.  The commands live in ``docmind_core/commands/``, one module
per area; this module adds them to the ``docmind`` group.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from docmind_core.commands import Invocation, echo, pass_invocation
from docmind_core.commands.agentic_cmds import eval_agentic
from docmind_core.commands.ask_cmds import ask, config, traces
from docmind_core.commands.eval_cmds import eval_group, search
from docmind_core.commands.experiment_cmds import dataset, experiment
from docmind_core.commands.ingest_cmds import ingest, kb
from docmind_core.commands.job_cmds import jobs
from docmind_core.commands.memory_cmds import conversation_group, memory_group
from docmind_core.commands.serve_cmds import serve
from docmind_core.commands.user_cmds import apikey_group, mcp_group, user_group
from docmind_core.engine import default_home
from docmind_core.errors import DocMindError


class _StderrWarnings(logging.Handler):
    """The config store's warnings (a stored value skipped, naming its key) on stderr, without escapes."""

    def emit(self, record: logging.LogRecord) -> None:
        echo(f"warning: {record.getMessage()}", err=True, single_line=True)


def _warn_on_stderr() -> None:
    logger = logging.getLogger("docmind_core.store.config_store")
    if not any(isinstance(h, _StderrWarnings) for h in logger.handlers):
        logger.addHandler(_StderrWarnings(logging.WARNING))


class _FriendlyGroup(click.Group):
    """Show DocMindError messages as they are, without a traceback."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except DocMindError as exc:
            echo(f"error: {exc}", err=True)  # messages can quote names and inputs: no terminal escapes
            sys.exit(2)


@click.group(cls=_FriendlyGroup)
@click.option("--home", type=click.Path(file_okay=False, path_type=Path), envvar="DOCMIND_HOME",
              help="Data folder (database, vectors, caches). Default: ./data")
@click.version_option(package_name="docmind")
@click.pass_context
def cli(ctx: click.Context, home: Path | None) -> None:
    """DocMind: agentic RAG over your document collections."""
    invocation = Invocation((home or default_home()).resolve())
    ctx.obj = invocation
    ctx.call_on_close(invocation.close)
    _warn_on_stderr()


@cli.command()
@pass_invocation
def backends(invocation: Invocation) -> None:
    """Show which backend is live for each role."""
    engine = invocation.engine()
    for status in engine.backends():
        mark = "live" if status.live else "embedded default"
        echo(f"{status.role:<14} {status.name:<40} [{mark}] {status.detail}", single_line=True)
        if not status.live and status.how_to_enable:
            click.echo(f"{'':<14} to enable: {status.how_to_enable}")
    for note in engine.backend_notes():
        echo(f"note: {note}")


eval_group.add_command(eval_agentic)
for command in (ingest, kb, search, eval_group, ask, config, traces, user_group, apikey_group, mcp_group, dataset,
                experiment, jobs, memory_group, conversation_group, serve):
    cli.add_command(command)


def main() -> None:
    from docmind_core.process import prepare_process

    prepare_process()  # the process-wide set-up, once, before any command opens an engine
    cli(prog_name="docmind")


if __name__ == "__main__":
    main()
