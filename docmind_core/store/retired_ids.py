"""Ids that are never handed out twice, and the accounts whose ids are retired.

SQLite gives a ``INTEGER PRIMARY KEY`` without ``AUTOINCREMENT`` the highest
id plus one, so removing the newest account and adding another hands the
same id out again, and every row still carrying it (knowledge bases,
conversations, traces, memories, personal config) belongs to the newcomer.
Migration m012 rebuilds the tables whose ids other rows point at with
``AUTOINCREMENT``: SQLite then keeps the highest id ever used in
``sqlite_sequence`` and never goes below it, for every insert, whoever writes
it.  (An allocation table would do the same only for the inserts that
remember to ask it.)

The migration also repairs a database where reuse already happened.  A row
whose owner id names no account, or an account created after the row, belongs
to an earlier holder of that id.  Such rows are moved to a *retired* id: a
fresh id taken from the users' sequence, which no account will ever get, so
no live account sees them (admins still reach knowledge bases and traces, as
they reach everything).  Session and API-key rows of an earlier holder are
deleted: they are credentials.  Each retired id is a row of
``retired_user_ids`` (``docmind user retired`` lists them with what they
still hold).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import sqlite_utils

from docmind_core.store.sql import utcnow

log = logging.getLogger(__name__)

# Tables whose ids other rows (or other stores: Chroma collections, keyword-index generations) point at.
NEVER_REUSED_TABLES: tuple[str, ...] = ("users", "knowledge_bases", "datasets", "experiments", "api_keys")

# (table, owner column, when the row was made): rows that belong to a user by id.
OWNED_ROWS: tuple[tuple[str, str, str], ...] = (
    ("knowledge_bases", "owner_id", "created_at"),
    ("datasets", "owner_id", "created_at"),
    ("experiments", "owner_id", "created_at"),
    ("conversations", "user_id", "created_at"),
    ("traces", "user_id", "started_at"),
    ("memories", "user_id", "created_at"),
    ("user_config", "user_id", "updated_at"),
    ("config_history", "user_id", "changed_at"),
    ("run_labels", "labelled_by", "labelled_at"),
    ("ingest_jobs", "user_id", "created_at"),  # unix seconds
)
# Rows that let someone act as the user: an earlier holder's are deleted, never moved.
CREDENTIAL_ROWS: tuple[tuple[str, str, str], ...] = (
    ("auth_sessions", "user_id", "created_at"),
    ("api_keys", "user_id", "created_at"),
)

# Other places a table's ids are referenced: the sequence starts above the highest one found.
_ID_REFERENCES: dict[str, tuple[str, ...]] = {
    "users": tuple(f"SELECT MAX({col}) FROM {table}" for table, col, _ in OWNED_ROWS + CREDENTIAL_ROWS),
    "knowledge_bases": (
        "SELECT MAX(kb_id) FROM documents", "SELECT MAX(kb_id) FROM ingest_jobs",
        "SELECT MAX(kb_id) FROM kb_reindex_runs",
        "SELECT MAX(CAST(j.value AS INTEGER)) FROM traces t, json_each(t.kb_ids) j WHERE json_valid(t.kb_ids)",
    ),
    "datasets": ("SELECT MAX(dataset_id) FROM dataset_items", "SELECT MAX(dataset_id) FROM experiments"),
    "experiments": (
        "SELECT MAX(experiment_id) FROM experiment_variants",
        "SELECT MAX(CAST(substr(label, 12) AS INTEGER)) FROM traces WHERE label LIKE 'experiment:%'",
    ),
    "api_keys": (),
}

RETIRED_TABLE_SQL = """
CREATE TABLE IF NOT EXISTS retired_user_ids (
    id INTEGER PRIMARY KEY,                 -- taken from the users' sequence: no account ever gets it
    username TEXT NOT NULL DEFAULT '',      -- the account it was ('' when a repair could not tell)
    retired_at TEXT NOT NULL,
    reason TEXT NOT NULL
)
"""

_PRIMARY_KEY = re.compile(r"\bid\s+INTEGER\s+PRIMARY\s+KEY\b", re.IGNORECASE)


@dataclass(frozen=True)
class RetiredId:
    """A user id no account will get again, and what still carries it (by table)."""

    id: int
    username: str
    retired_at: str
    reason: str
    rows: dict[str, int]


def list_retired(db: sqlite_utils.Database) -> list[RetiredId]:
    if not _table_exists(db, "retired_user_ids"):
        return []
    rows = db.execute("SELECT id, username, retired_at, reason FROM retired_user_ids ORDER BY id").fetchall()
    return [RetiredId(r[0], r[1], r[2], r[3], retired_counts(db, r[0])) for r in rows]


def _table_exists(db: sqlite_utils.Database, table: str) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", [table]).fetchone() is not None


def rebuild_with_autoincrement(db: sqlite_utils.Database, table: str) -> bool:
    """Recreate ``table`` with ``id INTEGER PRIMARY KEY AUTOINCREMENT``, rows, indexes and triggers kept.

    The caller holds a transaction with foreign keys off (a DROP of a parent table would otherwise cascade
    into its children).  Returns False when the table already has AUTOINCREMENT.
    """
    sql = db.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", [table]).fetchone()[0]
    if "AUTOINCREMENT" in sql.upper():
        return False
    head = re.match(r"\s*CREATE\s+TABLE\s+(\"?)" + re.escape(table) + r"\1", sql, re.IGNORECASE)
    if head is None or not _PRIMARY_KEY.search(sql):
        raise RuntimeError(f"m012: the schema of {table} is not the one expected: {sql[:80]}")
    temporary = f"_m012_{table}"
    new_sql = f'CREATE TABLE "{temporary}"' + _PRIMARY_KEY.sub("id INTEGER PRIMARY KEY AUTOINCREMENT",
                                                              sql[head.end():], count=1)
    extras = [r[0] for r in db.execute(
        "SELECT sql FROM sqlite_master WHERE tbl_name = ? AND type IN ('index', 'trigger') AND sql IS NOT NULL",
        [table]).fetchall()]
    columns = ", ".join(f'"{r[1]}"' for r in db.execute(f'PRAGMA table_info("{table}")').fetchall())
    db.execute(new_sql)
    db.execute(f'INSERT INTO "{temporary}" ({columns}) SELECT {columns} FROM "{table}"')
    db.execute(f'DROP TABLE "{table}"')
    db.execute(f'ALTER TABLE "{temporary}" RENAME TO "{table}"')
    for statement in extras:
        db.execute(statement)
    return True


def raise_sequence(db: sqlite_utils.Database, table: str, at_least: int) -> None:
    """Make the next id of ``table`` (an AUTOINCREMENT table) greater than ``at_least``."""
    row = db.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", [table]).fetchone()
    if row is None:
        db.execute("INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)", [table, at_least])
    elif row[0] < at_least:
        db.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = ?", [at_least, table])


def allocate_user_id(db: sqlite_utils.Database) -> int:
    """A fresh id from the users' sequence that no account will get: for rows of an account that is gone."""
    current = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'users'").fetchone()
    new_id = (current[0] if current else 0) + 1
    raise_sequence(db, "users", new_id)
    return new_id


def retire(db: sqlite_utils.Database, user_id: int, username: str, reason: str) -> None:
    db.execute("INSERT OR IGNORE INTO retired_user_ids (id, username, retired_at, reason) VALUES (?, ?, ?, ?)",
               [user_id, username, utcnow(), reason])


def retired_counts(db: sqlite_utils.Database, user_id: int) -> dict[str, int]:
    """What still carries a retired id, by table (tables with no row left out)."""
    counts = {}
    for table, column, _ in OWNED_ROWS:
        if _table_exists(db, table):
            n = db.execute(f"SELECT COUNT(*) FROM {table} WHERE {column} = ?", [user_id]).fetchone()[0]
            if n:
                counts[table] = n
    return counts


def _moment(value: Any) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(float(value), timezone.utc)
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def _plural(n: int, table: str) -> str:
    return f"{table.replace('_', ' ')}: {n}"


def make_ids_never_reused(db: sqlite_utils.Database) -> list[str]:
    """The body of migration m012; returns what it did, one line each (also logged)."""
    report: list[str] = []
    db.execute(RETIRED_TABLE_SQL)
    rebuilt = [t for t in NEVER_REUSED_TABLES if _table_exists(db, t) and rebuild_with_autoincrement(db, t)]
    holding = [t for t in rebuilt if db.execute(f"SELECT EXISTS (SELECT 1 FROM {t})").fetchone()[0]]
    if holding:  # a new database has nothing to say
        report.append(f"ids of {', '.join(holding)} are never handed out again (AUTOINCREMENT)")
    for table in NEVER_REUSED_TABLES:
        if not _table_exists(db, table):
            continue
        highest = db.execute(f"SELECT MAX(id) FROM {table}").fetchone()[0] or 0
        for query in _ID_REFERENCES[table]:
            try:
                found = db.execute(query).fetchone()[0]
            except Exception:  # noqa: BLE001 - a referencing table this database does not have
                continue
            highest = max(highest, int(found or 0))
        raise_sequence(db, table, highest)
    report += _repair_reused_user_ids(db)
    stale_keys = db.execute("DELETE FROM api_keys WHERE user_id NOT IN (SELECT id FROM users)").rowcount
    if stale_keys:
        report.append(f"deleted {stale_keys} API key(s) of accounts that no longer exist")
    for line in report:
        log.warning("m012: %s", line)
    return report


def _repair_reused_user_ids(db: sqlite_utils.Database) -> list[str]:
    accounts = {row[0]: (row[1], _moment(row[2]))
                for row in db.execute("SELECT id, username, created_at FROM users").fetchall()}
    moved: dict[int, dict[str, int]] = {}  # an id handed out again -> rows of its earlier holder, by table
    gone: dict[int, dict[str, int]] = {}  # an id with no account -> rows still carrying it, by table
    retired_for: dict[int, int] = {}
    for table, column, when in OWNED_ROWS + CREDENTIAL_ROWS:
        if not _table_exists(db, table):
            continue
        credential = (table, column, when) in CREDENTIAL_ROWS
        rows = db.execute(f"SELECT rowid, {column}, {when} FROM {table} WHERE {column} > 0").fetchall()
        earlier: dict[int, list[int]] = {}
        for rowid, owner, made in rows:
            account = accounts.get(owner)
            if account is None:
                gone.setdefault(owner, {}).setdefault(table, 0)
                gone[owner][table] += 1
                if credential:
                    earlier.setdefault(owner, []).append(rowid)
                continue
            made_at, account_created = _moment(made), account[1]
            if made_at is not None and account_created is not None and made_at < account_created:
                earlier.setdefault(owner, []).append(rowid)
        for owner, rowids in earlier.items():
            marks = ", ".join("?" * len(rowids))
            if credential:
                db.execute(f"DELETE FROM {table} WHERE rowid IN ({marks})", rowids)
                if owner in accounts:
                    moved.setdefault(owner, {}).setdefault(f"{table} (deleted)", len(rowids))
                else:
                    gone[owner][table] -= len(rowids)
                    gone[owner][f"{table} (deleted)"] = len(rowids)
                continue
            if owner not in retired_for:
                retired_for[owner] = allocate_user_id(db)
            db.execute(f"UPDATE {table} SET {column} = ? WHERE rowid IN ({marks})", [retired_for[owner], *rowids])
            moved.setdefault(owner, {})[table] = len(rowids)
    report = []
    for owner, tables in sorted(moved.items()):
        what = ", ".join(_plural(n, t) for t, n in tables.items() if n)
        new_id = retired_for.get(owner)
        username = accounts[owner][0]
        if new_id is not None:
            retire(db, new_id, "", f"an earlier account with id {owner} (the id was handed out again, "
                                   f"to '{username}'); repaired by m012")
            report.append(f"user id {owner} was handed out again (to '{username}'): {what} of the earlier account "
                          f"moved to retired id {new_id}, which no account will get")
        else:
            report.append(f"user id {owner} was handed out again (to '{username}'): {what} of the earlier account")
    for owner, tables in sorted(gone.items()):
        kept = {t: n for t, n in tables.items() if n}
        retire(db, owner, "", "an account removed before m012; its rows keep this id")
        if kept:
            what = ", ".join(_plural(n, t) for t, n in kept.items())
            report.append(f"user id {owner} names no account: {what}; the id is retired, no account will get it")
    return report
