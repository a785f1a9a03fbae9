"""store/db.py helpers, and the migration runner's refusals."""

from __future__ import annotations

import pytest

from docmind_core.store import migrations
from docmind_core.store.db import Database, where_sql


def test_where_sql_leaves_out_the_filters_without_a_value():
    assert where_sql({}) == ("", [])
    assert where_sql({"kb_id = ?": None, "state = ?": None}) == ("", [])
    assert where_sql({"kb_id = ?": 3, "state = ?": None}) == (" WHERE kb_id = ?", [3])
    assert where_sql({"kb_id = ?": 0, "state = ?": "running"}) == (" WHERE kb_id = ? AND state = ?", [0, "running"])


def test_where_sql_filters_rows(tmp_path):
    db = Database(tmp_path / "docmind.db")
    conn = db.db.conn
    conn.execute("CREATE TABLE t (kb_id INTEGER, state TEXT)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(1, "done"), (1, "running"), (2, "running")])
    for filters, expected in (({"kb_id = ?": 1, "state = ?": None}, 2), ({"kb_id = ?": None, "state = ?": "running"}, 2),
                              ({"kb_id = ?": 2, "state = ?": "running"}, 1), ({"kb_id = ?": None}, 3)):
        where, params = where_sql(filters)
        assert conn.execute("SELECT count(*) FROM t" + where, params).fetchone()[0] == expected


def test_a_migration_that_ends_its_transaction_is_refused(tmp_path, monkeypatch):
    """A migration runs inside the transaction that records it; one that commits on its own is a mistake."""
    def m900_commits_halfway(db):
        db.execute("CREATE TABLE halfway (id INTEGER)")
        db.conn.commit()

    monkeypatch.setattr(migrations, "MIGRATIONS", [*migrations.MIGRATIONS, m900_commits_halfway])
    with pytest.raises(RuntimeError, match="m900_commits_halfway ended its transaction"):
        Database(tmp_path / "docmind.db")
