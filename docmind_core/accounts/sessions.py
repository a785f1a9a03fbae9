"""Signed, server-side sign-in sessions for the web app.

A browser holds one opaque token, ``<session id>.<signature>``: the id is 32
random bytes, the signature an HMAC-SHA256 of the id under a per-installation
key kept in the database.  Neither the password nor the user id ever reaches
the browser.  The server keeps only a SHA-256 of the token with its user and
expiry, so a token is valid only while its row exists: signing out deletes
every row of that user (every browser is signed out), and removing a user or
letting the lifetime pass ends the session too.  The signature lets a forged
or truncated token be refused before any lookup.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from datetime import datetime, timedelta, timezone

from docmind_core.errors import NotFound
from docmind_core.store.db import Database, utcnow
from docmind_core.accounts.users import User, UserStore

_KEY_NAME = "session_signing_key"


class SessionStore:
    def __init__(self, db: Database, users: UserStore):
        self._db = db
        self._users = users
        self._key = self._signing_key()

    def create(self, user: User, lifetime_hours: float) -> str:
        """A new session for ``user``; returns the token for the browser."""
        session_id = _b64(secrets.token_bytes(32))
        token = f"{session_id}.{self._sign(session_id)}"
        now = datetime.now(timezone.utc)
        expires = now + timedelta(hours=lifetime_hours)
        with self._db.transaction() as db:
            db.execute("DELETE FROM auth_sessions WHERE expires_at < ?", [now.isoformat(timespec="milliseconds")])
            db.execute("INSERT INTO auth_sessions (token_hash, user_id, created_at, expires_at) VALUES (?, ?, ?, ?)",
                       [_digest(token), user.id, utcnow(), expires.isoformat(timespec="milliseconds")])
        return token

    def resolve(self, token: str | None) -> User | None:
        """The signed-in user for this token, or None (bad signature, unknown, expired, user removed)."""
        # A real token is URL-safe base64 (ASCII only): anything else is refused before it is signed or hashed.
        if not token or not token.isascii() or token.count(".") != 1 or len(token) > 200:
            return None
        session_id, signature = token.split(".")
        if not hmac.compare_digest(signature, self._sign(session_id)):
            return None
        row = self._db.db.execute("SELECT user_id, expires_at FROM auth_sessions WHERE token_hash = ?",
                                  [_digest(token)]).fetchone()
        if row is None or row[1] < datetime.now(timezone.utc).isoformat(timespec="milliseconds"):
            return None
        try:
            return self._users.get(row[0])
        except NotFound:
            return None

    def end_all(self, user_id: int) -> int:
        """Sign this user out everywhere; returns how many sessions ended."""
        with self._db.transaction() as db:
            return db.execute("DELETE FROM auth_sessions WHERE user_id = ?", [user_id]).rowcount

    # -- helpers -----------------------------------------------------------
    def _sign(self, session_id: str) -> str:
        return _b64(hmac.new(self._key, session_id.encode("ascii"), hashlib.sha256).digest())

    def _signing_key(self) -> bytes:
        read = "SELECT value FROM app_secrets WHERE name = ?"
        row = self._db.db.execute(read, [_KEY_NAME]).fetchone()  # every start after the first: a read, no lock
        if row is None:
            with self._db.transaction() as db:  # two processes starting at once agree on one key
                db.execute("INSERT OR IGNORE INTO app_secrets (name, value) VALUES (?, ?)",
                           [_KEY_NAME, _b64(secrets.token_bytes(32))])
                row = db.execute(read, [_KEY_NAME]).fetchone()
        value = row[0]
        return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()
