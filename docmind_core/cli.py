"""The ``docmind`` command: a thin click front over the Engine.

The engine is opened lazily, once per invocation, so ``docmind --help`` stays
instant and every subcommand shares the same composition root as the UI.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from pathlib import Path

import click

from docmind_core.commands import echo
from docmind_core.errors import DocMindError

_COMMAND_MODULES = ("ingest_cmds", "eval_cmds", "ask_cmds", "agentic_cmds", "user_cmds", "experiment_cmds",
                    "job_cmds", "serve_cmds")


class _EngineHolder:
    """One engine per data folder: an invocation with another --home (several in one process, as in
    tests or scripts calling ``cli`` twice) must never act on the previous folder's engine."""

    def __init__(self) -> None:
        self.home: Path | None = None
        self._engine = None
        self._engine_home: Path | None = None

    def __call__(self):
        from docmind_core.engine import Engine, default_home

        home = (self.home or default_home()).resolve()
        if self._engine is None or self._engine_home != home:
            # No background warm-up for a one-shot command: it would only compete with the command, and a
            # daemon thread still inside native code (Chroma, BLAS) when the interpreter exits can crash it.
            self._engine = Engine.open(home, warm=False)
            self._engine_home = home
        return self._engine


_holder = _EngineHolder()


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
def cli(home: Path | None) -> None:
    """DocMind: agentic RAG over your document collections."""
    if home is not None:
        os.environ["DOCMIND_HOME"] = str(home)
    _holder.home = home
    _warn_on_stderr()


@cli.command()
def backends() -> None:
    """Show which backend is live for each role."""
    engine = _holder()
    for status in engine.backends():
        mark = "live" if status.live else "embedded default"
        echo(f"{status.role:<14} {status.name:<40} [{mark}] {status.detail}", single_line=True)
        if not status.live and status.how_to_enable:
            click.echo(f"{'':<14} to enable: {status.how_to_enable}")
    for note in engine.backend_notes():
        echo(f"note: {note}")


for _name in _COMMAND_MODULES:
    _module = importlib.import_module(f"docmind_core.commands.{_name}")
    _module.register(cli, _holder)


def main() -> None:
    from docmind_core.process import prepare_process

    prepare_process()  # the process-wide set-up, once, before any command opens an engine
    cli(prog_name="docmind")


if __name__ == "__main__":
    main()
