"""Subcommands of the ``docmind`` CLI, one module per area; each exposes ``register(group, get_engine)``.

Anything printed that came from a user, a model or a document goes through
:func:`echo` (or :func:`echo_json`), so a question, answer or name holding
terminal escape sequences cannot retitle the window, hide lines or plant links.
"""

from __future__ import annotations

from pathlib import Path

import click

from docmind_core.safe_text import strip_control, terminal_json


def echo(text: object = "", nl: bool = True, err: bool = False, single_line: bool = False) -> None:
    """``click.echo`` without ANSI/OSC sequences or control characters (``\\n`` and ``\\t`` stay)."""
    click.echo(strip_control(text, single_line=single_line), nl=nl, err=err)


def echo_json(text: str) -> None:
    """``click.echo`` of ``json.dumps`` output, with the control characters it leaves raw escaped."""
    click.echo(terminal_json(text))


def write_or_echo_json(text: str, output: Path | None) -> None:
    """An export: into ``output`` when given (and say so), else onto the terminal."""
    if output:
        output.write_text(text, encoding="utf-8")
        click.echo(f"wrote {output}")
    else:
        echo_json(text)
