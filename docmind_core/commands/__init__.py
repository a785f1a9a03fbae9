"""Subcommands of the ``docmind`` CLI, one module per area, each defining its click groups and commands at
module level; ``docmind_core/cli.py`` adds them to the ``docmind`` group.

Every command reads what one invocation shares from ``ctx.obj``, an :class:`Invocation`: the data folder
(``--home``) and the engine on it, opened on first use and released when the invocation ends.  A command
that acts for someone takes ``--as USERNAME`` (:data:`as_user_option`) and asks the invocation for that
user's access facade (:meth:`Invocation.workbench`).

Everything a command prints goes through :func:`echo` (or :func:`echo_json`,
:func:`confirm`), so a question, answer or name holding terminal escape
sequences cannot retitle the window, hide lines or plant links, and bidi and
invisible characters show as ``<U+202E>`` markers (``text/visible.py``); no
command calls ``click.echo`` itself (``tests/commands/test_cli_edges.py``).

Ids typed on the command line are parsed by :func:`record_id_type` and
:func:`text_id_type` (``accounts/ids.py``): an id no record can have is refused
before any lookup.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import click

from docmind_core.accounts.ids import record_id, text_id
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


class LogWarnings:
    """DocMind's logged warnings during one invocation, on stderr, shown only to whoever may read everything.

    Opening the engine repairs what interrupted work left in *every* knowledge base and logs one line per
    repair, naming the document; so does the job worker.  A member acting with ``--as`` must not read the
    names of other users' documents, on any channel.  So the config store's warnings (about the global
    config, which everyone signed in reads) are shown at once; any other is held until the acting user is
    known, then shown to the operator or an admin, and only counted for anyone else (:meth:`close` says how
    many were left out)."""

    ALWAYS_SHOWN = ("docmind_core.store.config_store",)

    def __init__(self) -> None:
        self._sees_all: bool | None = None  # None: the acting user is not known yet
        self._held: list[logging.LogRecord] = []
        self._lock = threading.RLock()  # the job worker logs from its own thread
        self.left_out = 0

    def add(self, record: logging.LogRecord) -> None:
        with self._lock:
            if record.name in self.ALWAYS_SHOWN or self._sees_all:
                _show_warning(record)
            elif self._sees_all is None:
                self._held.append(record)
            else:
                self.left_out += 1

    def decide(self, sees_all: bool) -> None:
        """The acting user is known: the held warnings are shown, or counted."""
        with self._lock:
            if self._sees_all is not None:
                return
            self._sees_all = sees_all
            held, self._held = self._held, []
            for record in held:
                self.add(record)

    def close(self) -> None:
        self.decide(False)  # never decided: --as named nobody usable, so nothing of others is shown
        if self.left_out:
            echo(f"note: {self.left_out} warning(s) from work DocMind did in the background (start-up repairs, "
                 "ingest jobs) were left out: they can name other users' documents, so only the operator or an "
                 "admin sees them", err=True)
            self.left_out = 0


def _show_warning(record: logging.LogRecord) -> None:
    text = record.getMessage()
    if record.exc_info:  # an unexpected failure: its traceback is for the operator or an admin
        text += "\n" + logging.Formatter().formatException(record.exc_info)
    echo(f"warning: {text}", err=True, single_line=not record.exc_info)


class Invocation:
    """What the commands of one ``docmind`` invocation share (``ctx.obj``): the data folder and its engine.

    The engine opens on first use, so ``docmind --help`` and commands that need none stay instant, and at most
    once; :meth:`close` releases it when the invocation ends, so a second invocation in the same process (tests,
    scripts calling ``cli`` twice) opens its own on its own ``--home``.  ``warnings``: what DocMind logs meanwhile,
    shown as the acting user may see it (:class:`LogWarnings`).
    """

    def __init__(self, home: Path, engine: Engine | None = None):
        self.home = home
        self._engine = engine
        self.warnings = LogWarnings()
        self._acting_as: str | None = None  # the --as name while the engine opens for it

    def engine(self) -> Engine:
        if self._engine is None:
            from docmind_core.engine import Engine  # the heavy imports wait for a command that needs them

            if not self._acting_as:
                self.warnings.decide(True)  # a command for the operator (no --as)
            # No background warm-up for a one-shot command: it would only compete with the command, and a
            # daemon thread still inside native code (Chroma, BLAS) when the interpreter exits can crash it.
            self._engine = Engine.open(self.home, warm=False)
        return self._engine

    def workbench(self, as_user: str | None, channel: Channel = "cli") -> Workbench:
        """The access facade of ``--as USERNAME`` (or DOCMIND_USER), else of the operator."""
        self._acting_as = as_user
        engine = self.engine()
        user = acting_user(engine, as_user)
        self.warnings.decide(user.is_admin)  # the operator (LOCAL_USER) is an admin
        return Workbench(engine, user, channel=channel)

    def close(self) -> None:
        self._engine = None
        self.warnings.close()


pass_invocation = click.make_pass_decorator(Invocation)

# ``--as USERNAME`` (or DOCMIND_USER) on every command that acts for someone: their knowledge-base access applies.
as_user_option = click.option(
    "--as", "as_user", default=None, envvar="DOCMIND_USER", metavar="USERNAME",
    help="Act as this user (their knowledge-base access applies); default: the operator, who sees everything")


def echo(text: object = "", nl: bool = True, err: bool = False, single_line: bool = False) -> None:
    """``click.echo`` without ANSI/OSC sequences or control characters (``\\n`` and ``\\t`` stay), bidi and
    invisible characters shown as markers."""
    click.echo(strip_control(text, single_line=single_line), nl=nl, err=err)


def echo_json(text: str) -> None:
    """``click.echo`` of ``json.dumps`` output, with the control characters it leaves raw escaped."""
    click.echo(terminal_json(text))


def confirm(question: str) -> None:
    """``click.confirm`` (abort on no) with the question as :func:`echo` would print it."""
    click.confirm(strip_control(question, single_line=True), abort=True)


def write_or_echo_json(text: str, output: Path | None) -> None:
    """An export: into ``output`` when given (and say so), else onto the terminal."""
    if output:
        output.write_text(text, encoding="utf-8")
        echo(f"wrote {output}")
    else:
        echo_json(text)


class _IdType(click.ParamType):
    """A command-line id parsed by ``accounts/ids.py``: one that no record can have is refused (InvalidId, shown
    by the ``docmind`` group like any DocMindError) before the command runs."""

    def __init__(self, what: str, parse):
        self.name = what
        self._parse = parse

    def convert(self, value, param, ctx):
        return self._parse(value, self.name)


def record_id_type(what: str) -> click.ParamType:
    """A record id argument whose refusal names ``what`` ("job id")."""
    return _IdType(what, record_id)


def text_id_type(what: str) -> click.ParamType:
    """A run or conversation id argument whose refusal names ``what``."""
    return _IdType(what, text_id)
