"""People who sign in to DocMind: accounts, password hashes, roles.

Passwords are hashed with argon2id (argon2-cffi), each with its own salt; the
plaintext never reaches the database or a log.  There is no default password
anywhere: the first admin comes from ``DOCMIND_ADMIN_USER`` /
``DOCMIND_ADMIN_PASSWORD`` or from someone typing one at the CLI.

Single-user mode (``auth.enabled = false``) does not touch the users table at
all; every call runs as :data:`LOCAL_USER`, an admin with id 0 that no stored
account can collide with (SQLite row ids start at 1).  Account ids are never
handed out twice (``AUTOINCREMENT``, migration m012): a new account never
inherits a removed one's rows.
"""

from __future__ import annotations

import os
import re
import secrets
from typing import Literal

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from pydantic import BaseModel, ConfigDict

from docmind_core.errors import NotFound, UserError
from docmind_core.store.db import Database, utcnow

Role = Literal["admin", "member", "guest"]
ROLES: tuple[str, ...] = ("admin", "member")  # roles an account can have; "guest" is only SIGNED_OUT

MIN_PASSWORD_LENGTH = 8
ADMIN_USER_ENV = "DOCMIND_ADMIN_USER"
ADMIN_PASSWORD_ENV = "DOCMIND_ADMIN_PASSWORD"

_USERNAME = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")


class User(BaseModel):
    """Who is making a request; what the access rules look at."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: int
    username: str
    department: str = ""
    role: Role = "member"
    created_at: str = ""

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    @property
    def is_signed_in(self) -> bool:
        return self.role != "guest"

    @property
    def owner_key(self) -> int | None:
        """How rows this user owns are stored: NULL for the local operator (rows from single-user mode)."""
        return None if self.id == LOCAL_USER_ID else self.id


LOCAL_USER_ID = 0
LOCAL_USER = User(id=LOCAL_USER_ID, username="local", department="", role="admin")
"""The only user in single-user mode (``auth.enabled = false``): sees everything, owns id 0."""

SIGNED_OUT = User(id=-1, username="signed-out visitor", department="", role="guest")
"""A browser that has not signed in while sign-in is on: the access facade refuses it everything."""


class UserStore:
    """Accounts in the ``users`` table (schema: store/db.py m005)."""

    def __init__(self, db: Database, hasher: PasswordHasher | None = None):
        self.db = db
        self.hasher = hasher or PasswordHasher()
        self._decoy: str | None = None

    # -- reading -----------------------------------------------------------
    def get(self, user_id: int) -> User:
        row = self._row("id = ?", [user_id])
        if row is None:
            raise NotFound(f"no user with id {user_id}")
        return _to_user(row)

    def find(self, username: str) -> User | None:
        row = self._row("username = ?", [username.strip()])
        return _to_user(row) if row else None

    def list(self) -> list[User]:
        rows = self.db.db.execute(
            "SELECT id, username, department, role, created_at FROM users ORDER BY username").fetchall()
        return [User(id=r[0], username=r[1], department=r[2], role=r[3], created_at=r[4]) for r in rows]

    def count(self, role: Role | None = None) -> int:
        if role is None:
            return self.db.db.execute("SELECT COUNT(*) FROM users").fetchone()[0]
        return self.db.db.execute("SELECT COUNT(*) FROM users WHERE role = ?", [role]).fetchone()[0]

    # -- changing ----------------------------------------------------------
    def add(self, username: str, password: str, department: str = "", role: Role = "member") -> User:
        username = username.strip()
        if not _USERNAME.match(username):
            raise UserError(
                f"user name {username!r} is not allowed: use 1-64 letters, digits, '.', '_', '-' or '@'")
        if role not in ROLES:
            raise UserError(f"role must be one of {', '.join(ROLES)}, got {role!r}")
        _check_password(password)
        password_hash = self.hasher.hash(password)
        with self.db.transaction() as db:
            if db.execute("SELECT 1 FROM users WHERE username = ?", [username]).fetchone():
                raise UserError(f"a user named {username!r} already exists")
            cursor = db.execute(
                "INSERT INTO users (username, password_hash, department, role, created_at) VALUES (?, ?, ?, ?, ?)",
                [username, password_hash, department.strip(), role, utcnow()])
            user_id = cursor.lastrowid
        return self.get(user_id)

    def set_password(self, user_id: int, password: str) -> None:
        _check_password(password)
        self.get(user_id)  # NotFound with a clear message
        with self.db.transaction() as db:
            db.execute("UPDATE users SET password_hash = ? WHERE id = ?", [self.hasher.hash(password), user_id])

    def update(self, user_id: int, *, department: str | None = None, role: Role | None = None) -> User:
        user = self.get(user_id)
        if role is not None and role not in ROLES:
            raise UserError(f"role must be one of {', '.join(ROLES)}, got {role!r}")
        if role == "member" and user.is_admin and self.count("admin") == 1:
            raise UserError(f"{user.username} is the last admin; make another user admin first")
        with self.db.transaction() as db:
            db.execute("UPDATE users SET department = ?, role = ? WHERE id = ?",
                       [user.department if department is None else department.strip(), role or user.role, user_id])
        return self.get(user_id)

    def check_removable(self, user_id: int) -> User:
        """The account, when it may be removed (it is not the last admin while other accounts exist)."""
        user = self.get(user_id)
        if user.is_admin and self.count("admin") == 1 and self.count() > 1:
            raise UserError(f"{user.username} is the last admin; make another user admin before removing it")
        return user

    def remove(self, user_id: int) -> None:
        """Delete the account row alone (its API keys go with it by foreign key cascade).  Entry points remove
        accounts with ``accounts.remove_account``, which also deletes or transfers what the account owned."""
        self.check_removable(user_id)
        with self.db.transaction() as db:
            db.execute("DELETE FROM users WHERE id = ?", [user_id])

    def first_admin(self) -> User | None:
        """The earliest admin account (ids are never reused, so the lowest id is the earliest)."""
        row = self._row("role = 'admin' ORDER BY id LIMIT 1", [])
        return _to_user(row) if row else None

    # -- signing in --------------------------------------------------------
    def authenticate(self, username: str, password: str) -> User | None:
        """The user when the password matches, else None (unknown name and wrong password look the same)."""
        row = self._row("username = ?", [username.strip()], with_hash=True)
        stored_hash = row["password_hash"] if row else self._decoy_hash()
        try:
            self.hasher.verify(stored_hash, password)
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return None
        if row is None:
            return None
        if self.hasher.check_needs_rehash(stored_hash):  # parameters were raised since this hash was made
            with self.db.transaction() as db:
                db.execute("UPDATE users SET password_hash = ? WHERE id = ?", [self.hasher.hash(password), row["id"]])
        return _to_user(row)

    def ensure_admin_from_env(self) -> User | None:
        """Create the admin named by DOCMIND_ADMIN_USER / DOCMIND_ADMIN_PASSWORD when no admin exists yet.

        Returns the admin created, or None when an admin already exists or the
        variables are not both set (the CLI then asks someone to create one).
        """
        if self.count("admin") > 0:
            return None
        username = os.environ.get(ADMIN_USER_ENV, "").strip()
        password = os.environ.get(ADMIN_PASSWORD_ENV, "")
        if not username or not password:
            return None
        existing = self.find(username)
        if existing is not None:  # promote rather than silently reset someone's password
            return self.update(existing.id, role="admin")
        return self.add(username, password, role="admin")

    # -- helpers -----------------------------------------------------------
    def _decoy_hash(self) -> str:
        # Verifying against a throwaway hash when the name is unknown keeps the
        # time of a failed sign-in independent of whether the account exists.
        if self._decoy is None:
            self._decoy = self.hasher.hash(secrets.token_urlsafe(16))
        return self._decoy

    def _row(self, where: str, params: list, with_hash: bool = False) -> dict | None:
        columns = "id, username, department, role, created_at" + (", password_hash" if with_hash else "")
        cursor = self.db.db.execute(f"SELECT {columns} FROM users WHERE {where}", params)
        found = cursor.fetchone()
        if found is None:
            return None
        return dict(zip([c[0] for c in cursor.description], found))


def _check_password(password: str) -> None:
    if not password or not password.strip():
        raise UserError("a password is required")
    if len(password) < MIN_PASSWORD_LENGTH:
        raise UserError(f"the password is too short: use at least {MIN_PASSWORD_LENGTH} characters")


def _to_user(row: dict) -> User:
    return User(id=row["id"], username=row["username"], department=row["department"], role=row["role"],
                created_at=row["created_at"])
