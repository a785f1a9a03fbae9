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
    """DocMind's logged warnings, through the current invocation's :class:`LogWarnings` (who may see what)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.invocation: Invocation | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if self.invocation is not None:
            self.invocation.warnings.add(record)


_WARNINGS = _StderrWarnings()


def _warn_on_stderr(invocation: Invocation) -> None:
    # On the package's logger, so nothing of it reaches Python's last-resort handler (which printed every
    # warning raw, the start-up repairs of other users' documents included).
    logger = logging.getLogger("docmind_core")
    if _WARNINGS not in logger.handlers:
        logger.addHandler(_WARNINGS)
    _WARNINGS.invocation = invocation


def undecodable_argument(args: list[str]) -> str:
    """Why a command-line argument is refused, or "": Python reads bytes that are not UTF-8 as lone surrogates,
    which break wherever the text is written (the database, a log, the terminal)."""
    for position, arg in enumerate(args, start=1):
        if any("\ud800" <= c <= "\udfff" for c in arg):
            # the bytes as typed when Python escaped them (U+DC80..U+DCFF), else the surrogates as \\udXXX
            escaped_bytes = not any("\ud800" <= c < "\udc80" for c in arg)
            raw = arg.encode("utf-8", "surrogateescape" if escaped_bytes else "backslashreplace")
            shown = raw[:60].decode("ascii", "backslashreplace") + ("…" if len(raw) > 60 else "")
            return (f"argument {position} is not valid UTF-8 text ({shown}): DocMind reads what is typed as "
                    "UTF-8; type it again in a UTF-8 terminal (or rename the file)")
    return ""


class _FriendlyGroup(click.Group):
    """Show DocMindError messages as they are, without a traceback (click's own usage errors quote what was
    typed as Python literals: escaped already); refuse an argument that is not UTF-8 before any command reads it."""

    def parse_args(self, ctx, args):
        refusal = undecodable_argument(args)
        if refusal:
            raise click.UsageError(refusal, ctx)
        return super().parse_args(ctx, args)

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
    _warn_on_stderr(invocation)


@cli.command()
@pass_invocation
def backends(invocation: Invocation) -> None:
    """Show which backend is live for each role."""
    engine = invocation.engine()
    for status in engine.backends():
        mark = "live" if status.live else "embedded default"
        echo(f"{status.role:<14} {status.name:<40} [{mark}] {status.detail}", single_line=True)
        if not status.live and status.how_to_enable:
            echo(f"{'':<14} to enable: {status.how_to_enable}")
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
