"""What a sign-in screen needs, without the engine: the home's settings, its accounts and browser sessions.

The web app draws its sign-in form from a :class:`SignInGate` while the engine (its imports, the encoder, the
stores of every stage) still loads in the background, so a visitor never waits for the answer machinery to see
the form.  The engine is then built on the gate's ``db`` and ``config`` and signs people in through a gate of
its own: both read and write the same tables the same way.  This module imports the stores only.
"""

from __future__ import annotations

import os
from pathlib import Path

from docmind_core.accounts.sessions import SessionStore
from docmind_core.accounts.users import User, UserStore
from docmind_core.settings import Settings
from docmind_core.store.config_store import ConfigStore
from docmind_core.store.db import Database


def default_home() -> Path:
    """DOCMIND_HOME, else ./data (the repository's data folder when run from a checkout)."""
    env = os.environ.get("DOCMIND_HOME")
    return Path(env) if env else Path.cwd() / "data"


class SignInGate:
    """Sign-in, session tokens and the settings that decide whether sign-in is on, over one database."""

    def __init__(self, db: Database, config: ConfigStore | None = None, users: UserStore | None = None):
        self.db = db
        self.config = config if config is not None else ConfigStore(db)
        self.users = users if users is not None else UserStore(db)
        self.sessions = SessionStore(db, self.users)

    @classmethod
    def open(cls, home: Path | str) -> SignInGate:
        home = Path(home)
        home.mkdir(parents=True, exist_ok=True)
        return cls(Database(home / "docmind.db"))

    @property
    def settings(self) -> Settings:
        """The stored settings, read anew at every call (the same as an engine without overrides reads)."""
        return self.config.load()

    def sign_in(self, username: str, password: str, session_hours: float | None = None) -> tuple[User, str] | None:
        """(user, session token) when the password matches; the token keeps a browser signed in for
        ``session_hours`` (default: ``auth.session_hours``)."""
        user = self.users.authenticate(username, password)
        if user is None:
            return None
        hours = session_hours if session_hours is not None else self.settings.auth.session_hours
        return user, self.sessions.create(user, hours)

    def user_for_session(self, token: str | None) -> User | None:
        """The user a browser's session token stands for, or None (expired, signed out, forged)."""
        return self.sessions.resolve(token)

    def ensure_admin_from_env(self) -> User | None:
        """Create the admin named by DOCMIND_ADMIN_USER / DOCMIND_ADMIN_PASSWORD when none exists."""
        return self.users.ensure_admin_from_env()

    def has_accounts(self) -> bool:
        return self.users.count() > 0

    def end_sessions(self, user: User) -> int:
        """Sign ``user`` out in every browser; returns how many sessions ended."""
        return self.sessions.end_all(user.id) if user.owner_key else 0
