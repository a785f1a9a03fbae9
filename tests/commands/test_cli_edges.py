"""Issue 40 items 3, 6, 7, 8 and 9 through the ``docmind`` command: ids, names and text from outside are
parsed or refused at the edge, with a clear message, no traceback, nothing of another user's in any message, and
every message escaped."""

from __future__ import annotations

import ast
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from docmind_core import cli as cli_module
from docmind_core.engine import Engine, stored_settings

pytestmark = pytest.mark.slow  # the CLI on a real engine, several invocations

COMMANDS = Path(cli_module.__file__).parent / "commands"
SECRET_DOC = "salary-review-2026.md"


def invoke(home, *args, input=None):
    """One invocation as a fresh process would run it; a crash (anything but a clean exit) fails the test."""
    result = CliRunner().invoke(cli_module.cli, ["--home", str(home), *args], input=input)
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        f"{args} crashed: {result.exception!r}\n{result.output}"
    assert "Traceback" not in result.output
    return result


def add_user(home, name, *extra):
    out = invoke(home, "user", "add", name, "--password-stdin", *extra, input=f"{name}-password-1\n")
    assert out.exit_code == 0, out.output


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """alice with a private KB holding a document, a public KB; bob a member; boss an admin."""
    root = tmp_path_factory.mktemp("edges")
    home = root / "home"
    for name in ("alice", "bob"):
        add_user(home, name)
    add_user(home, "boss", "--role", "admin")
    secret = root / SECRET_DOC
    secret.write_text("# Salaries\n\nThe REDFOX salary band is 90k.\n", encoding="utf-8")
    assert invoke(home, "ingest", str(secret), "--kb", "alice_priv", "--as", "alice", "--no-progress").exit_code == 0
    assert invoke(home, "ingest", str(secret), "--kb", "alice_pub", "--as", "alice", "--no-progress").exit_code == 0
    assert invoke(home, "kb", "share", "alice_pub", "--visibility", "public", "--as", "alice").exit_code == 0
    note = root / "note.md"
    note.write_text("# Note\n\nThe BLUEJAY plan ships in May.\n", encoding="utf-8")
    return home, note


# -- item 3: ids ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("args, what", [
    (("jobs", "show", "1180591620717411303424"), "job id"),
    (("jobs", "cancel", "--", "-4"), "job id"),
    (("memory", "forget", "0"), "memory id"),
    (("apikey", "revoke", "99999999999999999999999"), "API key id"),
    (("experiment", "show", "1e3"), "experiment id"),
    (("traces", "show", "../../etc/passwd"), "run id"),
    (("traces", "export", "ok-id", "x" * 500), "run id"),
    (("conversation", "delete", "a b", "--yes"), "conversation id"),
    (("ask", "hello", "--conversation", "\x1b]0;x\x07"), "conversation id"),
])
def test_an_id_no_record_can_have_is_refused_before_any_lookup(world, args, what):
    home, _ = world
    refused = invoke(home, *args)
    assert refused.exit_code == 2, refused.output
    assert f"{what}: " in refused.output and "is not a valid id" in refused.output
    assert "\x1b" not in refused.output and "x" * 100 not in refused.output


# -- item 6: a private KB's name reveals nothing ---------------------------------------------------------


def test_writing_to_a_private_name_does_not_say_a_kb_holds_it(world):
    home, note = world
    refused = invoke(home, "ingest", str(note), "--kb", "alice_priv", "--as", "bob", "--no-progress")
    shown = invoke(home, "kb", "show", "alice_priv", "--as", "bob")
    assert refused.exit_code == shown.exit_code == 2
    # kb show says "it does not exist, or bob may not read it": the ingest refusal must not contradict it
    assert "does not exist, or bob may not read it" in shown.output
    for word in ("taken", "exists", "held", "owned", "private", "alice"):
        assert word not in refused.output.replace("alice_priv", "NAME"), refused.output
    assert "may not use the knowledge base name 'alice_priv'" in refused.output


def test_kb_list_as_a_member_names_no_document_of_anothers_kb_on_any_channel(world):
    """The engine's start-up repair logged a line per repaired document, on stderr, whoever ran the command."""
    home, _ = world
    leave_half_written(home, SECRET_DOC, "alice_priv")
    listed = invoke(home, "kb", "list", "--as", "bob")
    assert listed.exit_code == 0
    assert SECRET_DOC not in listed.output and "alice_priv" not in listed.output
    assert "left out" in listed.stderr  # that something was withheld is said, not what
    # the operator still sees the repair lines
    leave_half_written(home, SECRET_DOC, "alice_pub")
    operator = invoke(home, "kb", "list")
    assert SECRET_DOC in operator.stderr and "left out" not in operator.stderr


def leave_half_written(home, document: str, kb_name: str) -> None:
    """The document as an ingest killed half-way leaves it: pending, owned by no live process."""
    with sqlite3.connect(home / "docmind.db") as con:
        changed = con.execute("UPDATE documents SET status = 'pending', lease_id = NULL WHERE name = ? AND kb_id = "
                              "(SELECT id FROM knowledge_bases WHERE name = ?)", [document, kb_name]).rowcount
    assert changed == 1


# -- item 7: security keys fail closed ---------------------------------------------------------------------


@pytest.mark.parametrize("stored", ["{tru", '"maybe"', "2"])
def test_an_unusable_stored_auth_enabled_keeps_sign_in_on(tmp_path, stored):
    home = tmp_path / "home"
    Engine.open(home, env={}, warm=False)
    with sqlite3.connect(home / "docmind.db") as con:
        con.execute("INSERT OR REPLACE INTO config (key, value, updated_at) VALUES ('auth.enabled', ?, '2024')",
                    [stored])
        con.execute("INSERT OR REPLACE INTO config (key, value, updated_at) "
                    "VALUES ('auth.allow_public_without_sign_in', '{', '2024')")
    assert stored_settings(home).auth.enabled is True  # what `docmind serve` and the web app's gate read
    assert stored_settings(home).auth.allow_public_without_sign_in is False
    got = invoke(home, "config", "get", "auth.enabled")
    assert got.stdout.strip() == "True"
    listed = invoke(home, "config", "list")
    assert "until it is reset, auth.enabled is true" in listed.output
    assert invoke(home, "config", "reset", "auth.enabled").exit_code == 0
    assert stored_settings(home).auth.enabled is False  # reset: the default again


# -- item 8: every message escaped; look-alike names refused ----------------------------------------------


def test_created_shared_and_deleted_messages_show_markers_not_raw_controls(world):
    home, note = world
    name = "rep\u202eort\x1b]0;pwned\x07x"
    created = invoke(home, "ingest", str(note), "--kb", name, "--no-progress")
    shared = invoke(home, "kb", "share", name, "--visibility", "public")
    deleted = invoke(home, "kb", "delete", name, "--yes")
    for result in (created, shared, deleted):
        assert result.exit_code == 0, result.output
        assert "\u202e" not in result.output and "\x1b" not in result.output and "\x07" not in result.output
        assert "rep<U+202E>ort" in result.output
    assert "created knowledge base" in created.output and "is now public" in shared.output


def test_search_warnings_show_markers(capsys):
    from docmind_core.commands.eval_cmds import _print_search
    from docmind_core.values import IndexGap, PendingIngest, SearchResult

    name = "fin\u202eance\x1b[2J"
    _print_search(SearchResult(query="q", chunks=[], candidates=[],
                               index_gaps=[IndexGap(kb_id=1, kb_name=name, missing_vectors=2, total=5)],
                               pending=[PendingIngest(kb_id=1, kb_name=name, pending_documents=1,
                                                      searched_documents=1)]))
    out = capsys.readouterr().out
    assert out.count("fin<U+202E>ance") >= 2 and "\u202e" not in out and "\x1b" not in out


def test_no_command_prints_around_the_escaping_helpers():
    """Every message goes through commands.echo / echo_json / confirm: no module calls click's own."""
    offenders = []
    for path in [*COMMANDS.glob("*.py"), Path(cli_module.__file__)]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        helpers = {n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
                   and n.name in ("echo", "echo_json", "confirm")} if path.name == "__init__.py" else set()
        allowed = {id(n) for h in helpers for n in ast.walk(h)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and id(node) not in allowed:
                func = node.func
                if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "click" \
                        and func.attr in ("echo", "secho", "confirm", "prompt") and not _constant_prompt(node):
                    offenders.append(f"{path.name}:{node.lineno}")
                if isinstance(func, ast.Name) and func.id == "print":
                    offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == []


def _constant_prompt(node: ast.Call) -> bool:
    """click.prompt with a fixed question (a password, the first admin's name) prints nothing from outside."""
    return node.func.attr == "prompt" and all(isinstance(a, ast.Constant) for a in node.args)


@pytest.mark.parametrize("name, as_user, answer", [
    ("alice_pr\u0456v", "bob", "unavailable"),  # Cyrillic i, beside a KB bob may not read: the plain refusal
    ("Alice_priv", "bob", "unavailable"),
    ("Alice_priv", "alice", "looks like"),  # beside her own KB: named
    ("\u0430lice_pub", "bob", "looks like"),  # Cyrillic a, beside a public KB bob reads
    ("alice\u200b_pub", "boss", "looks like"),
    ("ALICE_PRIV", None, "looks like"),  # the operator reads everything
])
def test_look_alike_kb_names_are_refused(world, name, as_user, answer):
    home, note = world
    args = ["ingest", str(note), "--kb", name, "--no-progress"] + (["--as", as_user] if as_user else [])
    refused = invoke(home, *args)
    assert refused.exit_code == 2, refused.output
    if answer == "looks like":
        assert "looks like the name of the knowledge base 'alice_p" in refused.output
    else:  # word for word the refusal of the name itself, which says nothing of alice_priv
        exact = invoke(home, "ingest", str(note), "--kb", "alice_priv", "--as", as_user, "--no-progress")
        assert refused.output.replace(name, "NAME") == exact.output.replace("alice_priv", "NAME")
    with sqlite3.connect(home / "docmind.db") as con:
        assert con.execute("SELECT count(*) FROM knowledge_bases WHERE name = ?", [name]).fetchone()[0] == 0


# -- item 9: empty and undecodable questions --------------------------------------------------------------


@pytest.mark.parametrize("args", [("ask", ""), ("ask", "   \n\t"), ("search", " ", "--kb", "alice_pub")])
def test_an_empty_question_is_refused_not_run(world, args):
    home, _ = world
    refused = invoke(home, *args, "--as", "bob")
    assert refused.exit_code == 2
    assert "is empty" in refused.output and "incomplete" not in refused.output


def test_an_argument_that_is_not_utf8_is_refused_with_a_clear_message(world):
    home, note = world
    undecodable = b"caf\xff budget".decode("utf-8", "surrogateescape")  # what Python makes of such argv bytes
    for args in (("ask", undecodable), ("ingest", str(note), "--kb", undecodable)):
        refused = invoke(home, *args)
        assert refused.exit_code == 2, refused.output
        assert "not valid UTF-8" in refused.output and "caf\\xff" in refused.output
        assert "codec" not in refused.output
