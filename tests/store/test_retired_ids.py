"""Migration m012 on a database built in the old layout (m001..m011), where a user id was already handed out
again: the earlier holder's rows stop belonging to the newcomer, the ids are never reused from then on, and the
migration says what it did."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta, timezone

import pytest

from docmind_core.store import migrations
from docmind_core.store.db import Database
from docmind_core.store.retired_ids import list_retired
from docmind_core.accounts.users import User
from docmind_core.accounts.access import can_read_conversation, can_read_trace


def _at(minutes: int) -> str:
    start = datetime(2026, 11, 1, tzinfo=timezone.utc)
    return (start + timedelta(minutes=minutes)).isoformat(timespec="milliseconds")


@pytest.fixture
def old_database(tmp_path, monkeypatch):
    """A database in the layout before m012, with dave (id 2) removed and mallory given id 2 afterwards."""
    path = tmp_path / "docmind.db"
    before = migrations.MIGRATIONS[:migrations.MIGRATIONS.index(migrations.m012_ids_never_reused)]
    with monkeypatch.context() as patch:
        patch.setattr(migrations, "MIGRATIONS", before)
        old = Database(path)
    conn = old.db.conn
    conn.execute("INSERT INTO users (id, username, password_hash, role, created_at) VALUES (1, 'boss', 'x', "
                 "'admin', ?)", [_at(0)])
    conn.execute("INSERT INTO users (id, username, password_hash, created_at) VALUES (2, 'dave', 'x', ?)", [_at(1)])
    conn.execute("INSERT INTO knowledge_bases (id, name, embedder_id, embedding_dim, owner_id, created_at) "
                 "VALUES (1, 'dave_private', 'e', 4, 2, ?)", [_at(2)])
    conn.execute("INSERT INTO conversations (id, user_id, title, created_at, updated_at) VALUES "
                 "('c-dave', 2, 'pay review', ?, ?)", [_at(3), _at(3)])
    conn.execute("INSERT INTO traces (run_id, user_id, question, requested_mode, config, started_at) VALUES "
                 "('r-dave', 2, 'REDFOX salary?', 'auto', '{}', ?)", [_at(4)])
    conn.execute("INSERT INTO user_config (user_id, key, value, updated_at) VALUES "
                 "(2, 'grader.high_threshold', '0.55', ?)", [_at(5)])
    conn.execute("INSERT INTO memories (user_id, text, embedding, embedder_id, created_at) VALUES "
                 "(2, 'bonus in March', x'00', 'e', ?)", [_at(5)])
    conn.execute("INSERT INTO auth_sessions (token_hash, user_id, created_at, expires_at) VALUES "
                 "('h-dave', 2, ?, ?)", [_at(6), _at(9999)])
    # the old `user remove`: only the users row went; then a new account got the same id
    conn.execute("DELETE FROM users WHERE id = 2")
    conn.execute("INSERT INTO users (username, password_hash, created_at) VALUES ('mallory', 'x', ?)", [_at(10)])
    assert conn.execute("SELECT id FROM users WHERE username = 'mallory'").fetchone()[0] == 2  # reused
    conn.execute("INSERT INTO conversations (id, user_id, title, created_at, updated_at) VALUES "
                 "('c-mallory', 2, 'mine', ?, ?)", [_at(11), _at(11)])
    # an account removed without its id being reused yet: carol (id 3, the highest)
    conn.execute("INSERT INTO users (id, username, password_hash, created_at) VALUES (3, 'carol', 'x', ?)", [_at(12)])
    conn.execute("INSERT INTO traces (run_id, user_id, question, requested_mode, config, started_at) VALUES "
                 "('r-carol', 3, 'carol question', 'auto', '{}', ?)", [_at(13)])
    conn.execute("DELETE FROM users WHERE id = 3")
    conn.commit()
    conn.close()
    return path


def test_m012_repairs_reuse_and_stops_it(old_database, caplog):
    caplog.set_level("WARNING")
    db = Database(old_database)  # applies m012
    conn = db.db.conn
    mallory = User(id=2, username="mallory")
    owner = dict(conn.execute("SELECT id, user_id FROM conversations").fetchall())
    assert can_read_conversation(mallory, owner["c-mallory"])  # hers stays hers
    assert not can_read_conversation(mallory, owner["c-dave"])
    retired = owner["c-dave"]
    assert retired > 3  # a fresh id above every one ever used
    trace_owner = conn.execute("SELECT user_id FROM traces WHERE run_id = 'r-dave'").fetchone()[0]
    assert trace_owner == retired and not can_read_trace(mallory, trace_owner)
    assert conn.execute("SELECT owner_id FROM knowledge_bases WHERE name = 'dave_private'").fetchone()[0] == retired
    assert conn.execute("SELECT COUNT(*) FROM user_config WHERE user_id = 2").fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM memories WHERE user_id = 2").fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM auth_sessions WHERE user_id = 2").fetchone()[0] == 0  # deleted
    # carol's id names no account: kept on her rows, retired, never handed out
    assert conn.execute("SELECT user_id FROM traces WHERE run_id = 'r-carol'").fetchone()[0] == 3

    # what it did: a log line, the migration's stored report, and the retired ids with what they hold
    report = conn.execute("SELECT report FROM _migrations WHERE name = 'm012_ids_never_reused'").fetchone()[0]
    report = report.split("\n")
    assert any("user id 2 was handed out again (to 'mallory')" in line and f"retired id {retired}" in line
               for line in report), report
    assert any("user id 3 names no account" in line for line in report)
    assert any("handed out again" in r.message for r in caplog.records)
    by_id = {r.id: r for r in list_retired(db.db)}
    assert by_id[retired].rows == {"knowledge_bases": 1, "conversations": 1, "traces": 1, "memories": 1,
                                   "user_config": 1}
    assert by_id[3].rows == {"traces": 1}

    # from now on ids are never handed out again, even after the newest row is deleted
    for table in ("users", "knowledge_bases", "datasets", "experiments", "api_keys"):
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", [table]).fetchone()[0]
        assert "AUTOINCREMENT" in sql, table
    conn.execute("DELETE FROM users WHERE id = 2")
    conn.execute("INSERT INTO users (username, password_hash, created_at) VALUES ('eve', 'x', ?)", [_at(20)])
    eve = conn.execute("SELECT id FROM users WHERE username = 'eve'").fetchone()[0]
    assert eve > retired
    conn.execute("DELETE FROM knowledge_bases")
    conn.execute("INSERT INTO knowledge_bases (name, embedder_id, embedding_dim, created_at) VALUES "
                 "('new', 'e', 4, ?)", [_at(21)])
    assert conn.execute("SELECT id FROM knowledge_bases WHERE name = 'new'").fetchone()[0] == 2
    conn.commit()


def test_m012_keeps_rows_indexes_and_foreign_keys(old_database):
    db = Database(old_database)
    conn = db.db.conn
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1  # back on after the rebuild
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    conn.execute("INSERT INTO documents (kb_id, name, content_hash, mime, size, status, created_at, updated_at) "
                 "VALUES (1, 'a.md', 'h', 'text/markdown', 1, 'complete', 'now', 'now')")
    conn.commit()
    conn.execute("DELETE FROM knowledge_bases WHERE id = 1")  # still cascades into documents
    conn.commit()
    assert conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0] == 0
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("INSERT INTO users (username, password_hash, created_at) VALUES ('boss', 'x', 'now')")
    Database(old_database)  # a second open applies nothing again


def test_processes_starting_at_once_apply_m012_once(old_database):
    """Every start runs the migrations: the ones that waited for the first one's lock find m012 applied."""
    import threading

    errors: list[BaseException] = []

    def start() -> None:
        try:
            Database(old_database)
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    starts = [threading.Thread(target=start) for _ in range(4)]
    for thread in starts:
        thread.start()
    for thread in starts:
        thread.join()
    assert errors == []
    conn = Database(old_database).db.conn
    assert conn.execute("SELECT COUNT(*) FROM _migrations WHERE name = 'm012_ids_never_reused'").fetchone()[0] == 1
    assert conn.execute("SELECT COUNT(*) FROM retired_user_ids WHERE reason LIKE 'an earlier account%'"
                        ).fetchone()[0] == 1  # dave's rows were moved once, to one retired id
