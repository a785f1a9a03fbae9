"""SQLite through sqlite-utils: one file, WAL mode, migrated when opened.

Each thread gets its own connection (Streamlit serves sessions from several
threads; sqlite3 connections must not be shared across threads).  The schema's
migrations are in ``docmind_core/store/migrations.py``.
"""

from __future__ import annotations

import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import sqlite_utils

from docmind_core.store.migrations import apply_pending
from docmind_core.store.sql import utcnow, write_transaction

__all__ = ["Database", "utcnow", "where_sql"]  # utcnow: the stores import it from here


def where_sql(filters: dict[str, Any]) -> tuple[str, list[Any]]:
    """`` WHERE a AND b`` (or nothing) and its parameters, from ``{"condition with one ?": value}``; a filter
    whose value is None is left out."""
    present = {condition: value for condition, value in filters.items() if value is not None}
    return (" WHERE " + " AND ".join(present) if present else ""), list(present.values())


class Database:
    """Thread-local sqlite-utils handles on one database file."""

    def __init__(self, path: Path | str):
        self.path = Path(path) if str(path) != ":memory:" else None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._memory_uri = f"file:docmind-{id(self)}?mode=memory&cache=shared" if self.path is None else None
        self._local = threading.local()
        self._write_lock = threading.RLock()
        self._keepalive = self._connect() if self.path is None else None  # keeps a shared in-memory db alive
        apply_pending(self.db, self.path)

    def _connect(self) -> sqlite3.Connection:
        if self.path is None:
            conn = sqlite3.connect(self._memory_uri, uri=True, check_same_thread=False, timeout=30)
        else:
            conn = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
            conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    @property
    def db(self) -> sqlite_utils.Database:
        handle = getattr(self._local, "db", None)
        if handle is None:
            handle = sqlite_utils.Database(self._connect())
            self._local.db = handle
        return handle

    @contextmanager
    def transaction(self) -> Iterator[sqlite_utils.Database]:
        """One write transaction; rolled back on any exception."""
        with self._write_lock, write_transaction(self.db.conn):
            yield self.db
