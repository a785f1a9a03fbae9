"""Accounts: argon2 hashing and verification, refusals, the first admin, API keys."""

from __future__ import annotations

import json

import pytest
from argon2 import PasswordHasher, extract_parameters

from docmind_core.accounts.apikeys import ApiKeyStore
from docmind_core.errors import NotFound
from docmind_core.store.db import Database
from docmind_core.accounts.users import (
    ADMIN_PASSWORD_ENV,
    ADMIN_USER_ENV,
    LOCAL_USER,
    User,
    UserError,
    UserStore,
)


@pytest.fixture
def users(db):
    """Argon2id at its cheapest cost (the hashing and verifying code is the same; the production cost is
    checked once, in test_password_is_stored_as_salted_argon2_hash: ~0.1 s of CPU per hash or check)."""
    return UserStore(db, hasher=PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1))


def _stored_hash(db: Database, username: str) -> str:
    return db.db.execute("SELECT password_hash FROM users WHERE username = ?", [username]).fetchone()[0]


def test_password_is_stored_as_salted_argon2_hash(db):
    users = UserStore(db)  # the real argon2 parameters
    users.add("alice", "s3cret-passphrase", department="research")
    users.add("bob", "s3cret-passphrase")
    alice_hash = _stored_hash(db, "alice")
    assert alice_hash.startswith("$argon2id$")
    assert "s3cret-passphrase" not in alice_hash
    assert alice_hash != _stored_hash(db, "bob")  # same password, different salt
    assert extract_parameters(alice_hash) == extract_parameters(PasswordHasher().hash("x"))  # the default cost
    assert users.authenticate("alice", "s3cret-passphrase").username == "alice"
    assert users.authenticate("alice", "wrong-passphrase") is None


def test_authenticate_accepts_right_password_only(users):
    added = users.add("alice", "s3cret-passphrase", department="research")
    signed_in = users.authenticate("alice", "s3cret-passphrase")
    assert signed_in == added
    assert signed_in.department == "research" and signed_in.role == "member"
    assert users.authenticate("alice", "wrong-passphrase") is None
    assert users.authenticate("nobody", "s3cret-passphrase") is None
    assert users.authenticate("alice", "") is None


@pytest.mark.parametrize("password", ["", "   ", "short"])
def test_empty_or_short_password_refused(users, password):
    with pytest.raises(UserError, match="password"):
        users.add("alice", password)
    assert users.count() == 0


def test_bad_names_roles_and_duplicates_refused(users):
    with pytest.raises(UserError, match="not allowed"):
        users.add("al ice", "long enough password")
    with pytest.raises(UserError, match="role"):
        users.add("alice", "long enough password", role="superuser")
    users.add("alice", "long enough password")
    with pytest.raises(UserError, match="already exists"):
        users.add("alice", "another long password")


def test_set_password_replaces_old_one(users):
    alice = users.add("alice", "first passphrase")
    users.set_password(alice.id, "second passphrase")
    assert users.authenticate("alice", "first passphrase") is None
    assert users.authenticate("alice", "second passphrase") == alice
    with pytest.raises(UserError):
        users.set_password(alice.id, "tiny")
    with pytest.raises(NotFound):
        users.set_password(999, "long enough password")


def test_remove_and_last_admin_protection(users):
    root = users.add("root", "admin passphrase", role="admin")
    alice = users.add("alice", "member passphrase")
    with pytest.raises(UserError, match="last admin"):
        users.remove(root.id)
    users.remove(alice.id)
    assert [u.username for u in users.list()] == ["root"]
    with pytest.raises(NotFound):
        users.get(alice.id)


def test_no_default_admin_without_env(users, monkeypatch):
    monkeypatch.delenv(ADMIN_USER_ENV, raising=False)
    monkeypatch.delenv(ADMIN_PASSWORD_ENV, raising=False)
    assert users.ensure_admin_from_env() is None
    assert users.count() == 0
    monkeypatch.setenv(ADMIN_USER_ENV, "root")  # a name without a password is not enough
    assert users.ensure_admin_from_env() is None
    assert users.count() == 0


def test_admin_created_from_env_once(users, monkeypatch):
    monkeypatch.setenv(ADMIN_USER_ENV, "root")
    monkeypatch.setenv(ADMIN_PASSWORD_ENV, "from-the-environment")
    admin = users.ensure_admin_from_env()
    assert admin is not None and admin.is_admin and admin.username == "root"
    assert users.authenticate("root", "from-the-environment") == admin
    monkeypatch.setenv(ADMIN_PASSWORD_ENV, "changed-in-the-environment")
    assert users.ensure_admin_from_env() is None  # an admin exists: nothing is reset
    assert users.authenticate("root", "from-the-environment") == admin


def test_admin_from_env_refuses_short_password(users, monkeypatch):
    monkeypatch.setenv(ADMIN_USER_ENV, "root")
    monkeypatch.setenv(ADMIN_PASSWORD_ENV, "admin")
    with pytest.raises(UserError, match="too short"):
        users.ensure_admin_from_env()


def test_local_user_is_admin_with_id_zero():
    assert LOCAL_USER.id == 0 and LOCAL_USER.is_admin
    assert isinstance(LOCAL_USER, User)


def test_api_key_shown_once_stored_as_hash_and_revocable(users, db):
    alice = users.add("alice", "member passphrase")
    keys = ApiKeyStore(db)
    key = keys.create(alice.id, label="laptop agent")
    assert key.startswith("dm_") and len(key) > 40
    stored = db.db.execute("SELECT key_hash, prefix FROM api_keys").fetchone()
    assert key not in stored and stored[1] == key[:10]
    assert keys.resolve(key) == alice
    assert keys.resolve(key + "x") is None and keys.resolve("") is None and keys.resolve("not-a-key") is None
    [listed] = keys.list(alice.id)
    assert listed.label == "laptop agent" and listed.active and listed.username == "alice"
    keys.revoke(listed.id)
    assert keys.resolve(key) is None
    assert not keys.list(alice.id)[0].active
    assert keys.list(alice.id, include_revoked=False) == []


def test_api_keys_go_with_their_user(users, db):
    users.add("root", "admin passphrase", role="admin")
    alice = users.add("alice", "member passphrase")
    keys = ApiKeyStore(db)
    key = keys.create(alice.id)
    users.remove(alice.id)
    assert keys.resolve(key) is None
    assert keys.list() == []
    with pytest.raises(NotFound):
        keys.create(alice.id)


# -- the CLI -----------------------------------------------------------------------


@pytest.fixture
def engine(tmp_path):
    from docmind_core.engine import Engine

    return Engine.open(tmp_path / "home", env={})


@pytest.fixture
def cli(engine):
    import click

    from docmind_core.commands import Invocation
    from docmind_core.commands.user_cmds import apikey_group, mcp_group, user_group

    @click.group(commands=[user_group, apikey_group, mcp_group])
    @click.pass_context
    def group(ctx: click.Context) -> None:
        ctx.obj = Invocation(engine.home, engine)

    return group


def _invoke(cli, args, input=None):
    from click.testing import CliRunner

    return CliRunner().invoke(cli, args, input=input, catch_exceptions=False)


@pytest.mark.slow  # the docmind CLI on a real engine
def test_cli_user_add_prompts_without_echo_and_lists(cli, engine):
    db = engine.db
    added = _invoke(cli, ["user", "add", "alice", "--department", "research"],
                    input="typed-secret-1\ntyped-secret-1\n")
    assert added.exit_code == 0, added.output
    assert "typed-secret-1" not in added.output
    piped = _invoke(cli, ["user", "add", "root", "--role", "admin", "--password-stdin"], input="piped-secret-2\n")
    assert piped.exit_code == 0 and "piped-secret-2" not in piped.output
    listed = json.loads(_invoke(cli, ["user", "list", "--json"]).output)
    assert [(u["username"], u["role"], u["department"]) for u in listed] == [
        ("alice", "member", "research"), ("root", "admin", "")]
    assert UserStore(db).authenticate("root", "piped-secret-2") is not None


@pytest.mark.slow  # the docmind CLI on a real engine
def test_cli_refuses_short_password_with_clear_message(cli):
    from docmind_core.errors import DocMindError

    with pytest.raises(DocMindError, match="too short"):
        _invoke(cli, ["user", "add", "alice", "--password-stdin"], input="abc\n")


@pytest.mark.slow  # the docmind CLI on a real engine
def test_cli_passwd_remove_and_api_keys(cli, engine):
    db = engine.db
    _invoke(cli, ["user", "add", "root", "--role", "admin", "--password-stdin"], input="admin-secret\n")
    _invoke(cli, ["user", "add", "alice", "--password-stdin"], input="first-secret\n")
    _invoke(cli, ["user", "passwd", "alice", "--password-stdin"], input="second-secret\n")
    assert UserStore(db).authenticate("alice", "second-secret") is not None
    created = _invoke(cli, ["apikey", "create", "alice", "--label", "agent"])
    key = created.output.splitlines()[0]
    assert key.startswith("dm_") and ApiKeyStore(db).resolve(key).username == "alice"
    listing = _invoke(cli, ["apikey", "list"]).output
    assert key not in listing and key[:10] in listing and "active" in listing
    key_id = ApiKeyStore(db).list()[0].id
    assert "revoked" in _invoke(cli, ["apikey", "revoke", str(key_id)]).output
    assert ApiKeyStore(db).resolve(key) is None
    assert _invoke(cli, ["user", "remove", "alice", "--yes"]).exit_code == 0
    assert [u.username for u in UserStore(db).list()] == ["root"]


@pytest.mark.slow  # the docmind CLI on a real engine
def test_cli_init_admin_from_env(cli, engine, monkeypatch):
    monkeypatch.setenv(ADMIN_USER_ENV, "boss")
    monkeypatch.setenv(ADMIN_PASSWORD_ENV, "boss-password-from-env")
    assert "created admin 'boss'" in _invoke(cli, ["user", "init-admin"]).output
    assert "already exists" in _invoke(cli, ["user", "init-admin"]).output


@pytest.mark.slow  # the docmind CLI on a real engine
def test_cli_acting_user_option(engine):
    import click

    from docmind_core.commands import acting_user, as_user_option
    from docmind_core.errors import DocMindError

    UserStore(engine.db).add("alice", "member passphrase", department="research")

    @click.command()
    @as_user_option
    def whoami(as_user):
        click.echo(acting_user(engine, as_user).username)

    assert _invoke(whoami, []).output.strip() == LOCAL_USER.username
    assert _invoke(whoami, ["--as", "alice"]).output.strip() == "alice"
    with pytest.raises(DocMindError, match="no user named 'mallory'"):
        _invoke(whoami, ["--as", "mallory"])
