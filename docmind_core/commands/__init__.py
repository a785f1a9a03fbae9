"""Subcommands of the ``docmind`` CLI, one module per area, each defining its click groups and commands at
module level; ``docmind_core/cli.py`` adds them to the ``docmind`` group.

Every command reads what one invocation shares from ``ctx.obj``, an :class:`Invocation`: the data folder
(``--home``) and the engine on it, opened on first use and released when the invocation ends.  A command
that acts for someone takes ``--as USERNAME`` (:data:`as_user_option`) and asks the invocation for that
user's access facade (:meth:`Invocation.workbench`).

Anything printed that came from a user, a model or a document goes through
:func:`echo` (or :func:`echo_json`), so a question, answer or name holding
terminal escape sequences cannot retitle the window, hide lines or plant links.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from docmind_core.errors import CallerError
from docmind_core.text.visible import strip_control, terminal_json
from docmind_core.accounts.users import LOCAL_USER, User
from docmind_core.workbench import Channel, Workbench

if TYPE_CHECKING:
    from docmind_core.engine import Engine


def acting_user(engine: Engine, username: str | None) -> User:
    """The named account, or LOCAL_USER (the operator at the server's shell) when no name is given."""
    if not username:
        return LOCAL_USER
    found = engine.account(username)
    if found is None:
        raise CallerError(f"no user named '{username}' (see: docmind user list)")
    return found


class Invocation:
    """What the commands of one ``docmind`` invocation share (``ctx.obj``): the data folder and its engine.

    The engine opens on first use, so ``docmind --help`` and commands that need none stay instant, and at most
    once; :meth:`close` releases it when the invocation ends, so a second invocation in the same process (tests,
    scripts calling ``cli`` twice) opens its own on its own ``--home``.
    """

    def __init__(self, home: Path, engine: Engine | None = None):
        self.home = home
        self._engine = engine

    def engine(self) -> Engine:
        if self._engine is None:
            from docmind_core.engine import Engine  # the heavy imports wait for a command that needs them

            # No background warm-up for a one-shot command: it would only compete with the command, and a
            # daemon thread still inside native code (Chroma, BLAS) when the interpreter exits can crash it.
            self._engine = Engine.open(self.home, warm=False)
        return self._engine

    def workbench(self, as_user: str | None, channel: Channel = "cli") -> Workbench:
        """The access facade of ``--as USERNAME`` (or DOCMIND_USER), else of the operator."""
        engine = self.engine()
        return Workbench(engine, acting_user(engine, as_user), channel=channel)

    def close(self) -> None:
        self._engine = None


pass_invocation = click.make_pass_decorator(Invocation)

# ``--as USERNAME`` (or DOCMIND_USER) on every command that acts for someone: their knowledge-base access applies.
as_user_option = click.option(
    "--as", "as_user", default=None, envvar="DOCMIND_USER", metavar="USERNAME",
    help="Act as this user (their knowledge-base access applies); default: the operator, who sees everything")


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
