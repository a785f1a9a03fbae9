"""What the stores and the migrations share below ``Database``: the time rows carry and one write transaction."""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Iterator


def utcnow() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


@contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction on ``conn``, committed at the end and rolled back on any exception.

    ``BEGIN IMMEDIATE`` takes the write lock at the start, so a second writer waits (``timeout``) instead of
    failing when its read would turn into a write.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:  # SQLite ends the transaction itself on some errors (a full disk)
            conn.execute("ROLLBACK")
        raise
    else:
        conn.execute("COMMIT")
