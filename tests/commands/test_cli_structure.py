"""How the ``docmind`` command is put together (issue 24): every command is a module-level click command that
``cli.py`` adds, and an invocation keeps what it chose (``--home``) on ``ctx.obj``, not in the process
environment."""

from __future__ import annotations

import os
from collections.abc import Iterator

import click
from click.testing import CliRunner

from docmind_core.cli import cli

# set at the entry point for the whole process (offline model hub), not per invocation
PROCESS_WIDE = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    for name, command in group.commands.items():
        yield (*path, name), command
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))


def test_every_command_is_defined_at_module_level_in_a_commands_module():
    found = dict(_commands(cli))
    assert {"ingest", "kb", "ask", "config", "eval", "serve", "jobs"} <= {path[0] for path in found}
    nested = [" ".join(path) for path, command in found.items() if "<locals>" in command.callback.__qualname__]
    assert nested == []
    outside = [" ".join(path) for path, command in found.items() if path != ("backends",)
               and not command.callback.__module__.startswith("docmind_core.commands.")]
    assert outside == []


def test_an_invocation_leaves_the_process_environment_alone(tmp_path, monkeypatch):
    monkeypatch.delenv("DOCMIND_HOME", raising=False)
    before = {k: v for k, v in os.environ.items() if k not in PROCESS_WIDE}
    # refused before any server or engine starts: the command reads the home's settings and ends
    result = CliRunner().invoke(cli, ["--home", str(tmp_path / "home"), "serve", "--server.address", "0.0.0.0"])
    assert result.exit_code == 2 and "not started" in result.output, result.output
    assert {k: v for k, v in os.environ.items() if k not in PROCESS_WIDE} == before
