"""``docmind user ...``, ``docmind apikey ...`` and ``docmind mcp serve``.

Passwords are read by a hidden prompt (typed twice) or, for scripts, as one
line on stdin with ``--password-stdin``; they are never taken as an argument,
where they would land in shell history and ``ps`` output.

Every command goes through the access facade (``Invocation.workbench``) of one
acting user, read the same way everywhere: ``--as USERNAME``, else
``DOCMIND_USER``, else the operator at the server's shell (``LOCAL_USER``, an
admin).  So
``DOCMIND_USER=bob docmind user add eve --role admin`` is bob's request, and
refused.
"""

from __future__ import annotations

import json
import sys

import click

from docmind_core.commands import (
    Invocation, as_user_option, confirm, echo, echo_json, pass_invocation, record_id_type,
)
from docmind_core.errors import AccessDenied, CallerError
from docmind_core.accounts.users import ADMIN_PASSWORD_ENV, ADMIN_USER_ENV, LOCAL_USER, ROLES, User
from docmind_core.workbench import Workbench


def read_password(password_stdin: bool, confirm: bool = True) -> str:
    """One password: a line on stdin for scripts, else a hidden prompt (typed twice)."""
    if password_stdin:
        line = sys.stdin.readline()
        return line.rstrip("\r\n")
    return click.prompt("Password", hide_input=True, confirmation_prompt=confirm)


def ensure_first_admin(engine, interactive: bool) -> User | None:
    """Make sure an admin exists: from DOCMIND_ADMIN_USER/PASSWORD, else by asking on a terminal.

    Returns the admin created now, or None when one existed (or nobody could be asked).
    """
    created = engine.ensure_admin_from_env()
    operator = Workbench(engine, LOCAL_USER, channel="cli")
    if created is not None or operator.user_count("admin") > 0:
        return created
    if not interactive:
        return None
    echo(f"No admin account exists yet (set {ADMIN_USER_ENV} and {ADMIN_PASSWORD_ENV}, or create one now).")
    username = click.prompt("Admin user name")
    return operator.add_user(username, read_password(False), role="admin")


# -- users ---------------------------------------------------------------
@click.group("user")
def user_group() -> None:
    """Manage the people who may sign in."""


@user_group.command("add")
@click.argument("username")
@click.option("--department", default="", help="Department, for KBs shared with a department")
@click.option("--role", type=click.Choice(ROLES), default="member", show_default=True)
@click.option("--password-stdin", is_flag=True, help="Read the password as one line from stdin")
@as_user_option
@pass_invocation
def user_add(invocation: Invocation, username: str, department: str, role: str, password_stdin: bool,
             as_user: str | None) -> None:
    """Create an account (the password is asked for, never passed as an argument)."""
    bench = invocation.workbench(as_user)
    if not bench.user.is_admin:  # refused before a password is asked for (the facade refuses it too)
        raise AccessDenied("only an admin may create user accounts")
    added = bench.add_user(username, read_password(password_stdin), department=department, role=role)
    echo(f"added {added.role} '{added.username}' (id {added.id})"
         + (f" in department '{added.department}'" if added.department else ""))


@user_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output")
@as_user_option
@pass_invocation
def user_list(invocation: Invocation, as_json: bool, as_user: str | None) -> None:
    """List accounts."""
    found = invocation.workbench(as_user).list_users()
    if as_json:
        echo_json(json.dumps([u.model_dump() for u in found], ensure_ascii=False, indent=2))
        return
    if not found:
        echo("no users yet: docmind user add NAME --role admin")
    for u in found:
        echo(f"{u.id:>4}  {u.username:<20} {u.role:<7} {u.department}", single_line=True)


@user_group.command("passwd")
@click.argument("username")
@click.option("--password-stdin", is_flag=True, help="Read the new password as one line from stdin")
@as_user_option
@pass_invocation
def user_passwd(invocation: Invocation, username: str, password_stdin: bool, as_user: str | None) -> None:
    """Set a new password (an admin's for anyone, yours for yourself)."""
    bench = invocation.workbench(as_user)
    if not bench.user.is_admin and username != bench.user.username:
        raise AccessDenied("only an admin may change another user's password")  # before asking for one
    bench.set_password(username, read_password(password_stdin))
    echo(f"password changed for '{username}' (signed out of every browser)")


@user_group.command("remove")
@click.argument("username")
@click.option("--transfer-to", "transfer_to", default=None, metavar="USER",
              help="Give the account's knowledge bases, datasets, experiments, conversations and traces to "
                   "USER; without it they are deleted")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation")
@as_user_option
@pass_invocation
def user_remove(invocation: Invocation, username: str, transfer_to: str | None, yes: bool, as_user: str | None) -> None:
    """Delete an account: what it owned is transferred (--transfer-to) or deleted, with counts.

    Its sessions, API keys, memories and personal config values are always deleted; its id is
    never handed out again.
    """
    bench = invocation.workbench(as_user)
    if not any(u.username == username for u in bench.list_users()):
        raise CallerError(f"no user named '{username}' (see: docmind user list)")
    if transfer_to is not None and not any(u.username == transfer_to for u in bench.list_users()):
        raise CallerError(f"no user named '{transfer_to}' to transfer to (see: docmind user list)")
    if not yes:
        fate = (f"transfer what it owns to '{transfer_to}'" if transfer_to
                else "DELETE its knowledge bases, datasets, experiments, conversations and traces")
        confirm(f"Remove '{username}', {fate}, and delete its API keys, memories and personal config?")
    report = bench.remove_user(username, transfer_to=transfer_to)
    echo(report.summary())


@user_group.command("retired")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output")
@as_user_option
@pass_invocation
def user_retired(invocation: Invocation, as_json: bool, as_user: str | None) -> None:
    """Ids of removed accounts (never handed out again), why, and what still carries each."""
    found = invocation.workbench(as_user).list_retired_accounts()
    if as_json:
        echo_json(json.dumps([r.__dict__ for r in found], ensure_ascii=False, indent=2))
        return
    if not found:
        echo("no removed accounts")
    for r in found:
        rows = ", ".join(f"{t}: {n}" for t, n in r.rows.items()) or "no rows"
        echo(f"{r.id:>4}  {r.username or '(unknown)':<16} {r.retired_at}  {rows}\n      {r.reason}")


@user_group.command("init-admin")
@as_user_option
@pass_invocation
def user_init_admin(invocation: Invocation, as_user: str | None) -> None:
    """Create the first admin from DOCMIND_ADMIN_USER/DOCMIND_ADMIN_PASSWORD, or by asking."""
    bench = invocation.workbench(as_user)
    if not bench.user.is_admin:
        raise AccessDenied("only an admin may create the first admin")
    created = ensure_first_admin(invocation.engine(), interactive=sys.stdin.isatty())
    if created is not None:
        echo(f"created admin '{created.username}'")
    elif bench.user_count("admin"):
        echo("an admin already exists")
    else:
        raise CallerError(f"no admin: set {ADMIN_USER_ENV} and {ADMIN_PASSWORD_ENV}, or run this on a terminal")


# -- API keys ------------------------------------------------------------
@click.group("apikey")
def apikey_group() -> None:
    """Issue and revoke API keys (for the MCP server)."""


@apikey_group.command("create")
@click.argument("username")
@click.option("--label", default="", help="What the key is for, shown in listings")
@as_user_option
@pass_invocation
def apikey_create(invocation: Invocation, username: str, label: str, as_user: str | None) -> None:
    """Issue a key acting as USERNAME; it is printed once and cannot be shown again."""
    key = invocation.workbench(as_user).create_api_key(username, label=label)
    echo(key)
    echo(f"(API key for '{username}'; store it now: only its hash is kept)", err=True)


@apikey_group.command("list")
@click.option("--user", "username", default=None, help="Only this user's keys")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output")
@as_user_option
@pass_invocation
def apikey_list(invocation: Invocation, username: str | None, as_json: bool, as_user: str | None) -> None:
    """List keys (prefix, owner, label, state); never the keys themselves."""
    found = invocation.workbench(as_user).list_api_keys(username)
    if as_json:
        echo_json(json.dumps([k.model_dump() for k in found], ensure_ascii=False, indent=2))
        return
    for k in found:
        state = "active" if k.active else f"revoked {k.revoked_at}"
        echo(f"{k.id:>4}  {k.prefix}...  {k.username:<16} {state:<10} {k.label}", single_line=True)


@apikey_group.command("revoke")
@click.argument("key_id", type=record_id_type("API key id"))
@as_user_option
@pass_invocation
def apikey_revoke(invocation: Invocation, key_id: int, as_user: str | None) -> None:
    """Revoke a key by its id (see: docmind apikey list); it stops working at once."""
    revoked = invocation.workbench(as_user).revoke_api_key(key_id)
    echo(f"revoked key {revoked.id} ({revoked.prefix}...) of '{revoked.username}'")


# -- MCP -----------------------------------------------------------------
@click.group("mcp")
def mcp_group() -> None:
    """The MCP tool server for other agents."""


@mcp_group.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(1, 65535))
@click.option("--allowed-host", "allowed_hosts", multiple=True,
              help="Host[:port] clients use to reach this server when not on loopback (repeatable)")
@pass_invocation
def mcp_serve(invocation: Invocation, host: str, port: int, allowed_hosts: tuple[str, ...]) -> None:
    """Serve searchDocs, keywordSearch, webSearch, recall_memory, store_memory and kb_meta over MCP."""
    from docmind_core.mcp_server import MCP_PATH, serve

    engine = invocation.engine()
    engine.start_warm_up()  # a long-running server: pay the first call's one-off costs now
    if not any(k.active for k in invocation.workbench(None).list_api_keys()):
        echo("note: no active API key yet; create one with: docmind apikey create USERNAME", err=True)
    echo(f"MCP endpoint: http://{host}:{port}{MCP_PATH} (send X-API-Key or Authorization: Bearer)",
         err=True)
    serve(engine, host=host, port=port, allowed_hosts=list(allowed_hosts) or None)
