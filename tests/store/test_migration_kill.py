"""A start killed (SIGKILL) inside a migration: the database is as it was before that migration, and the next
start applies the migration whole."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from docmind_core.store import migrations as migrations_module
from docmind_core.store.db import Database
from tests.paths import ROOT

pytestmark = pytest.mark.slow  # a subprocess

# The child starts DocMind on the database and stops for good just before its connection runs the statement
# named in argv[2], after writing argv[3]: the parent then kills it there, inside the migration.
START_AND_HOLD = textwrap.dedent("""
    import sqlite3, sys, time
    from pathlib import Path

    path, held_statement, inside = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    open_connection = sqlite3.connect

    def connect(*args, **kwargs):
        conn = open_connection(*args, **kwargs)

        def before_each_statement(sql):
            if held_statement in sql:
                inside.write_text(sql)
                time.sleep(600)

        conn.set_trace_callback(before_each_statement)
        return conn

    sqlite3.connect = connect
    from docmind_core.store.db import Database
    Database(path)
""")


def _snapshot(path: Path) -> dict[str, object]:
    """The schema and every row of the database file, as a new reader sees it."""
    conn = sqlite3.connect(path)
    try:
        schema = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY type, name").fetchall()
        tables = [name for kind, name, _ in schema if kind == "table" and name != "sqlite_sequence"]
        rows = {name: conn.execute(f'SELECT * FROM "{name}" ORDER BY rowid').fetchall() for name in tables}
        return {"schema": schema, "rows": rows}
    finally:
        conn.close()


def _database_before(path: Path, migration_name: str, monkeypatch) -> None:
    """A database with every migration before ``migration_name`` applied, holding a KB and a document."""
    names = [fn.__name__ for fn in migrations_module.MIGRATIONS]
    with monkeypatch.context() as patch:
        patch.setattr(migrations_module, "MIGRATIONS", migrations_module.MIGRATIONS[:names.index(migration_name)])
        conn = Database(path).db.conn
    conn.execute("INSERT INTO users (id, username, password_hash, created_at) VALUES (1, 'ann', 'x', 'then')")
    conn.execute("INSERT INTO knowledge_bases (id, name, embedder_id, embedding_dim, owner_id, created_at) "
                 "VALUES (1, 'manuals', 'e', 4, 1, 'then')")
    conn.execute("INSERT INTO documents (id, kb_id, name, content_hash, mime, size, status, created_at, updated_at) "
                 "VALUES (1, 1, 'a.txt', 'h', 'text/plain', 3, 'complete', 'then', 'then')")
    conn.commit()


def _start_killed_at(path: Path, statement: str, tmp_path: Path) -> None:
    inside = tmp_path / "inside-the-migration"
    child = subprocess.Popen([sys.executable, "-c", START_AND_HOLD, str(path), statement, str(inside)], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not inside.exists():
            assert child.poll() is None, f"the start ended before reaching {statement!r}: {child.stderr.read()}"
            assert time.monotonic() < deadline, f"the start never reached {statement!r}"
            time.sleep(0.02)
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL


@pytest.mark.parametrize(("migration_name", "statement"), [
    ("m009_ingest_leases", "CREATE INDEX documents_status"),  # after a table and a column were added
    ("m012_ids_never_reused", 'DROP TABLE "knowledge_bases"'),  # a table rebuild, foreign keys off
])
def test_a_start_killed_inside_a_migration_leaves_the_database_as_before_it(tmp_path, monkeypatch,
                                                                            migration_name, statement):
    path = tmp_path / "docmind.db"
    _database_before(path, migration_name, monkeypatch)
    before = _snapshot(path)

    _start_killed_at(path, statement, tmp_path)

    after = _snapshot(path)
    assert set(after["schema"]) - set(before["schema"]) == set()  # nothing the migration made is left
    assert after == before
    conn = Database(path).db.conn  # the next start
    applied = {row[0] for row in conn.execute("SELECT name FROM _migrations").fetchall()}
    assert applied == {fn.__name__ for fn in migrations_module.MIGRATIONS}
    assert conn.execute("SELECT id, name FROM documents").fetchall() == [(1, "a.txt")]
    assert conn.execute("SELECT name FROM knowledge_bases").fetchall() == [("manuals",)]
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
