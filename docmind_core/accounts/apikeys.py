"""API keys that let another program act as a DocMind user (the MCP server).

A key is ``dm_`` followed by 32 random bytes (URL-safe base64).  It is shown
once, when it is created; the database keeps only its SHA-256 and a short
prefix so listings can tell keys apart.  A plain hash is enough here (unlike
passwords) because the key is long and random: there is nothing to guess.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from pydantic import BaseModel, ConfigDict

from docmind_core.errors import NotFound
from docmind_core.store.db import Database, utcnow
from docmind_core.accounts.users import User, UserStore

KEY_PREFIX = "dm_"
_SHOWN_PREFIX_LENGTH = 10  # "dm_" and 7 random characters: enough to recognise a key in a list


class ApiKey(BaseModel):
    """What is stored about a key (never the key itself)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: int
    user_id: int
    username: str = ""
    prefix: str
    label: str = ""
    created_at: str
    revoked_at: str | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


class ResolvedKey(BaseModel):
    """A valid key and the user it acts as."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key_id: int
    user: User


class ApiKeyStore:
    """Keys in the ``api_keys`` table (schema: store/db.py m005)."""

    def __init__(self, db: Database):
        self.db = db
        self.users = UserStore(db)

    def create(self, user_id: int, label: str = "") -> str:
        """Issue a key for the user and return it in plain text; it cannot be shown again."""
        self.users.get(user_id)  # NotFound when the user does not exist
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        with self.db.transaction() as db:
            db.execute(
                "INSERT INTO api_keys (user_id, prefix, key_hash, label, created_at) VALUES (?, ?, ?, ?, ?)",
                [user_id, key[:_SHOWN_PREFIX_LENGTH], _digest(key), label.strip(), utcnow()])
        return key

    def list(self, user_id: int | None = None, include_revoked: bool = True) -> list[ApiKey]:
        where, params = [], []
        if user_id is not None:
            where.append("k.user_id = ?")
            params.append(user_id)
        if not include_revoked:
            where.append("k.revoked_at IS NULL")
        sql = ("SELECT k.id, k.user_id, u.username, k.prefix, k.label, k.created_at, k.revoked_at "
               "FROM api_keys k JOIN users u ON u.id = k.user_id"
               + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY k.id")
        rows = self.db.db.execute(sql, params).fetchall()
        return [ApiKey(id=r[0], user_id=r[1], username=r[2], prefix=r[3], label=r[4], created_at=r[5],
                       revoked_at=r[6]) for r in rows]

    def get(self, key_id: int) -> ApiKey:
        for key in self.list():
            if key.id == key_id:
                return key
        raise NotFound(f"no API key with id {key_id}")

    def revoke(self, key_id: int) -> ApiKey:
        """Mark the key revoked; it stops working at the next request. Revoking twice is harmless."""
        self.get(key_id)
        with self.db.transaction() as db:
            db.execute("UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", [utcnow(), key_id])
        return self.get(key_id)

    def resolve_key(self, key: str) -> ResolvedKey | None:
        """The key's id and user, or None for an unknown, malformed or revoked key."""
        if not key or not key.startswith(KEY_PREFIX):
            return None
        digest = _digest(key)
        row = self.db.db.execute(
            "SELECT id, user_id, key_hash FROM api_keys WHERE key_hash = ? AND revoked_at IS NULL",
            [digest]).fetchone()
        # The lookup is by hash already; compare_digest documents that the match is exact.
        if row is None or not hmac.compare_digest(row[2], digest):
            return None
        try:
            user = self.users.get(row[1])
        except NotFound:
            return None
        return ResolvedKey(key_id=row[0], user=user)

    def resolve(self, key: str) -> User | None:
        """The user a key acts as, or None."""
        found = self.resolve_key(key)
        return found.user if found else None


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()
