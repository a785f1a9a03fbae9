"""The schema's history: named migrations applied in order, each recorded in ``_migrations``.

A migration is a function named ``mNNN_what`` (the name is its key in every existing database, so it never
changes), registered with :func:`migration`.  :func:`apply_pending` runs the ones a database lacks when a
``Database`` opens it, one process at a time.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any, Callable, Iterator

import sqlite_utils

from docmind_core.store.retired_ids import make_ids_never_reused
from docmind_core.store.sql import utcnow, write_transaction

try:
    import fcntl
except ImportError:  # not on POSIX: migrations are not serialised between processes there
    fcntl = None  # type: ignore[assignment]


MIGRATIONS: list[Callable[[sqlite_utils.Database], Any]] = []


def migration(fn: Callable[[sqlite_utils.Database], Any]) -> Callable[[sqlite_utils.Database], Any]:
    MIGRATIONS.append(fn)
    return fn


def rebuilds_tables(fn: Callable[[sqlite_utils.Database], Any]) -> Callable[[sqlite_utils.Database], Any]:
    """Mark a migration that drops and recreates tables: it runs with foreign keys off (a DROP of a parent
    table would cascade), switched off before its transaction begins (SQLite ignores the pragma inside one)."""
    fn.rebuilds_tables = True  # type: ignore[attr-defined]
    return fn


def pending_migrations(db: sqlite_utils.Database) -> list[str]:
    """Names of the migrations not applied yet (a read: a start with nothing to migrate writes nothing)."""
    has_table = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_migrations'").fetchone()
    done = {row[0] for row in db.execute("SELECT name FROM _migrations").fetchall()} if has_table else set()
    return [fn.__name__ for fn in MIGRATIONS if fn.__name__ not in done]


@contextlib.contextmanager
def _migration_lock(path: Path | None) -> Iterator[None]:
    """An exclusive lock beside the database file while migrating, so processes starting at once migrate one
    after the other: a second one waits here as long as the first one migrates, where its transaction would
    give up after the connection's busy timeout (a rebuild of a large table can take longer)."""
    if path is None or fcntl is None:  # in-memory (one process), or a platform without flock
        yield
        return
    with open(path.with_name(path.name + ".migrate-lock"), "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def apply_pending(db: sqlite_utils.Database, path: Path | None) -> list[str]:
    """Apply the migrations ``db`` lacks, holding the lock beside ``path``; returns the names applied.

    A database with nothing pending is only read: no lock, no write.
    """
    if not pending_migrations(db):
        return []
    with _migration_lock(path):  # processes starting at once migrate one after the other
        return migrate(db)


def migrate(db: sqlite_utils.Database) -> list[str]:
    """Apply pending migrations in order; returns the names applied.

    Each migration and its ``_migrations`` row are one transaction: a process killed inside a migration
    leaves the database as it was before it, and the next start applies it whole.  A migration may return
    lines saying what it repaired; they are logged by the migration and kept in ``_migrations.report`` (one
    line each) for whoever inspects the database later.
    """
    db.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    done = {row[0] for row in db.execute("SELECT name FROM _migrations").fetchall()}
    return [fn.__name__ for fn in MIGRATIONS if fn.__name__ not in done and _apply(db, fn)]


def _apply(db: sqlite_utils.Database, fn: Callable[[sqlite_utils.Database], Any]) -> bool:
    """Run one migration and record it in one transaction; False when another process applied it first."""
    rebuilding = getattr(fn, "rebuilds_tables", False)
    if rebuilding:
        db.execute("PRAGMA foreign_keys=OFF")  # before the transaction: SQLite ignores it inside one
    try:
        with write_transaction(db.conn):
            if db.execute("SELECT 1 FROM _migrations WHERE name = ?", [fn.__name__]).fetchone():
                return False  # a process without the file lock (not POSIX) applied it while this one waited
            report = fn(db)
            if not db.conn.in_transaction:
                raise RuntimeError(f"migration {fn.__name__} ended its transaction (a commit, or executescript, "
                                   "inside it): it must run its statements one by one (_run_script)")
            db.execute("INSERT INTO _migrations (name, applied_at) VALUES (?, ?)", [fn.__name__, utcnow()])
            if report:
                _keep_report(db, fn.__name__, report)
    finally:
        if rebuilding:
            db.execute("PRAGMA foreign_keys=ON")
    return True


def _run_script(db: sqlite_utils.Database, script: str) -> None:
    """Execute the statements of ``script`` one by one, inside the caller's transaction (``executescript``
    would commit first)."""
    statement = ""
    for line in script.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            db.execute(statement)
            statement = ""
    if statement.strip():
        raise ValueError(f"a migration script ends inside a statement: {statement.strip()[:80]}")


def _keep_report(db: sqlite_utils.Database, name: str, report: list[str]) -> None:
    if "report" not in {row[1] for row in db.execute("PRAGMA table_info(_migrations)").fetchall()}:
        db.execute("ALTER TABLE _migrations ADD COLUMN report TEXT NOT NULL DEFAULT ''")
    db.execute("UPDATE _migrations SET report = ? WHERE name = ?", ["\n".join(report), name])


@migration
def m001_knowledge(db: sqlite_utils.Database) -> None:
    _run_script(
        db,
        """
        CREATE TABLE knowledge_bases (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            description TEXT NOT NULL DEFAULT '',
            embedder_id TEXT NOT NULL,
            embedding_dim INTEGER NOT NULL,
            owner_id INTEGER,
            department TEXT NOT NULL DEFAULT '',
            visibility TEXT NOT NULL DEFAULT 'private',
            created_at TEXT NOT NULL
        );
        CREATE TABLE documents (
            id INTEGER PRIMARY KEY,
            kb_id INTEGER NOT NULL REFERENCES knowledge_bases(id) ON DELETE CASCADE,
            name TEXT NOT NULL,
            source_path TEXT NOT NULL DEFAULT '',
            content_hash TEXT NOT NULL,
            mime TEXT NOT NULL,
            size INTEGER NOT NULL,
            status TEXT NOT NULL,            -- pending | complete | failed
            error TEXT NOT NULL DEFAULT '',
            text TEXT NOT NULL DEFAULT '',   -- extracted text; chunk offsets point into it
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            UNIQUE (kb_id, name)
        );
        CREATE TABLE chunks (
            id TEXT PRIMARY KEY,
            kb_id INTEGER NOT NULL REFERENCES knowledge_bases(id) ON DELETE CASCADE,
            doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            idx INTEGER NOT NULL,
            is_parent INTEGER NOT NULL DEFAULT 0,
            parent_id TEXT,
            text TEXT NOT NULL,
            token_count INTEGER NOT NULL,
            start INTEGER NOT NULL,
            end INTEGER NOT NULL
        );
        CREATE INDEX chunks_doc ON chunks (doc_id, is_parent, idx);
        CREATE INDEX chunks_kb ON chunks (kb_id);
        """
    )


@migration
def m002_config(db: sqlite_utils.Database) -> None:
    _run_script(
        db,
        """
        CREATE TABLE config (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL,             -- JSON
            updated_at TEXT NOT NULL
        );
        CREATE TABLE config_history (
            id INTEGER PRIMARY KEY,
            key TEXT NOT NULL,
            old_value TEXT,                  -- JSON, NULL = default
            new_value TEXT,                  -- JSON, NULL = reset to default
            changed_by TEXT NOT NULL DEFAULT '',
            changed_at TEXT NOT NULL
        );
        """
    )


@migration
def m003_conversations(db: sqlite_utils.Database) -> None:
    _run_script(
        db,
        """
        CREATE TABLE conversations (
            id TEXT PRIMARY KEY,
            user_id INTEGER,
            title TEXT NOT NULL DEFAULT '',
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE TABLE messages (
            id INTEGER PRIMARY KEY,
            conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            role TEXT NOT NULL,              -- user | assistant
            content TEXT NOT NULL,           -- never includes retrieved context
            run_id TEXT,
            created_at TEXT NOT NULL
        );
        CREATE INDEX messages_conv ON messages (conversation_id, id);
        CREATE TABLE traces (
            run_id TEXT PRIMARY KEY,
            conversation_id TEXT,
            user_id INTEGER,
            question TEXT NOT NULL,
            requested_mode TEXT NOT NULL,
            mode TEXT NOT NULL DEFAULT '',
            tier TEXT NOT NULL DEFAULT '',
            stop_reason TEXT NOT NULL DEFAULT '',
            kb_ids TEXT NOT NULL DEFAULT '[]',  -- JSON
            config TEXT NOT NULL,                -- JSON snapshot of every key
            started_at TEXT NOT NULL,
            duration_ms REAL NOT NULL DEFAULT 0,
            pair_id TEXT,                        -- side-by-side runs share one
            label TEXT NOT NULL DEFAULT ''
        );
        CREATE INDEX traces_started ON traces (started_at);
        CREATE TABLE trace_events (
            run_id TEXT NOT NULL REFERENCES traces(run_id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            kind TEXT NOT NULL,
            t_ms REAL NOT NULL,
            payload TEXT NOT NULL,               -- JSON of the event
            PRIMARY KEY (run_id, seq)
        );
        """
    )


@migration
def m004_memories(db: sqlite_utils.Database) -> None:
    _run_script(
        db,
        """
        CREATE TABLE memories (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL,
            text TEXT NOT NULL,
            embedding BLOB NOT NULL,             -- float32, L2-normalised
            embedder_id TEXT NOT NULL,
            source TEXT NOT NULL DEFAULT '',     -- memory_command | hint | mcp
            created_at TEXT NOT NULL
        );
        CREATE INDEX memories_user ON memories (user_id);
        """
    )


@migration
def m005_users(db: sqlite_utils.Database) -> None:
    _run_script(
        db,
        """
        CREATE TABLE users (
            id INTEGER PRIMARY KEY,
            username TEXT NOT NULL UNIQUE,
            password_hash TEXT NOT NULL,
            department TEXT NOT NULL DEFAULT '',
            role TEXT NOT NULL DEFAULT 'member', -- admin | member
            created_at TEXT NOT NULL
        );
        CREATE TABLE api_keys (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            prefix TEXT NOT NULL,                -- first characters, shown in listings
            key_hash TEXT NOT NULL UNIQUE,       -- sha256 of the key
            label TEXT NOT NULL DEFAULT '',
            created_at TEXT NOT NULL,
            revoked_at TEXT
        );
        """
    )


@migration
def m006_chunk_terms(db: sqlite_utils.Database) -> None:
    # A child chunk's keyword tokens (space-separated, unstemmed), computed once at ingest so that
    # reranking and redundancy checks never run jieba at query time.  NULL for chunks stored before.
    db.execute("ALTER TABLE chunks ADD COLUMN terms TEXT")


@migration
def m007_chunk_vectors(db: sqlite_utils.Database) -> None:
    # A copy of each child chunk's embedding (float32, the very vector Chroma holds, 2 KB at 512-d),
    # written with the vectors at ingest: the reranker needs the cosine of keyword-only candidates, and
    # reading ~15 of these by id costs ~0.2 ms where asking Chroma costs ~2.5 ms.  NULL for chunks stored
    # before (Chroma is asked then).
    db.execute("ALTER TABLE chunks ADD COLUMN vector BLOB")


@migration
def m008_access(db: sqlite_utils.Database) -> None:
    # Personal config overrides (a member's grader/agentic/retrieval/rag tuning applies to their runs only),
    # who changed a key in the history, and server-side sign-in sessions (only a hash of the token is kept).
    _run_script(
        db,
        """
        CREATE TABLE user_config (
            user_id INTEGER NOT NULL,
            key TEXT NOT NULL,
            value TEXT NOT NULL,                 -- JSON
            updated_at TEXT NOT NULL,
            PRIMARY KEY (user_id, key)
        );
        ALTER TABLE config_history ADD COLUMN user_id INTEGER;
        ALTER TABLE config_history ADD COLUMN scope TEXT NOT NULL DEFAULT 'global';  -- global | personal
        CREATE TABLE auth_sessions (
            token_hash TEXT PRIMARY KEY,         -- sha256 of the token the browser holds
            user_id INTEGER NOT NULL,
            created_at TEXT NOT NULL,
            expires_at TEXT NOT NULL
        );
        CREATE INDEX auth_sessions_user ON auth_sessions (user_id);
        CREATE TABLE app_secrets (name TEXT PRIMARY KEY, value TEXT NOT NULL);  -- e.g. the session signing key
        """
    )


@migration
def m009_ingest_leases(db: sqlite_utils.Database) -> None:
    # Who owns work in progress.  A lease is one running ingest, delete, re-index or repair, with its
    # process's identity and a heartbeat; a pending document names its lease, so a starting process removes
    # only documents whose owner is provably gone (see docmind_core/ingest/leases.py).  Every re-index is
    # a row of kb_reindex_runs, so an interrupted one is finished at the next start instead of leaving a KB
    # with part of its vectors.
    _run_script(
        db,
        """
        CREATE TABLE ingest_leases (
            id INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: a pending row's lease id names one owner
            operation TEXT NOT NULL,             -- ingest | delete | reindex | repair | reconcile
            pid INTEGER NOT NULL,
            host TEXT NOT NULL,
            process_start TEXT NOT NULL DEFAULT '',  -- boot id and start tick of the process; '' when unknown
            acquired_at REAL NOT NULL,           -- unix seconds
            heartbeat_at REAL NOT NULL           -- unix seconds, refreshed while the operation runs
        );
        ALTER TABLE documents ADD COLUMN lease_id INTEGER;  -- the owner while pending; NULL otherwise
        CREATE INDEX documents_status ON documents (status);
        CREATE TABLE kb_reindex_runs (
            id INTEGER PRIMARY KEY,
            kb_id INTEGER NOT NULL REFERENCES knowledge_bases(id) ON DELETE CASCADE,
            lease_id INTEGER,                    -- the owner while running
            state TEXT NOT NULL,                 -- running | done | failed
            embedder_id TEXT NOT NULL,           -- the embedder the KB is being re-embedded with
            embedding_dim INTEGER NOT NULL,
            previous_embedder_id TEXT NOT NULL,
            total_chunks INTEGER NOT NULL DEFAULT 0,
            embedded_chunks INTEGER NOT NULL DEFAULT 0,
            started_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            finished_at TEXT,
            note TEXT NOT NULL DEFAULT ''        -- how it ended (resumed by which start, failure reason)
        );
        CREATE INDEX kb_reindex_runs_state ON kb_reindex_runs (state, kb_id);
        """
    )


@migration
def m010_experiments(db: sqlite_utils.Database) -> None:
    # Labelled datasets (owned and shared like knowledge bases), labels given to runs from the Traces page,
    # and experiments: one dataset x N variants, each (item, variant, leave-gold-out?) one row whose state
    # survives a crash, so a restarted experiment resumes where it stopped.  Runs are ordinary traces
    # (label "experiment:<id>", one pair id per question so the variants compare step by step).
    _run_script(
        db,
        """
        CREATE TABLE datasets (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            description TEXT NOT NULL DEFAULT '',
            owner_id INTEGER,
            department TEXT NOT NULL DEFAULT '',
            visibility TEXT NOT NULL DEFAULT 'private',  -- private | department | public, as for KBs
            source TEXT NOT NULL DEFAULT '',             -- jsonl | beir | traces
            kb_name TEXT NOT NULL DEFAULT '',            -- default KB of items that name none
            created_at TEXT NOT NULL
        );
        CREATE TABLE dataset_items (
            id INTEGER PRIMARY KEY,
            dataset_id INTEGER NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            external_id TEXT NOT NULL DEFAULT '',
            question TEXT NOT NULL,
            kb_name TEXT NOT NULL DEFAULT '',
            gold_doc_ids TEXT NOT NULL DEFAULT '[]',     -- JSON: document names (or corpus ids)
            gold_chunk_ids TEXT NOT NULL DEFAULT '[]',   -- JSON: chunk ids
            answers TEXT NOT NULL DEFAULT '[]',          -- JSON: each a string, or a list of strings all needed
            answerable INTEGER NOT NULL DEFAULT 1,
            type TEXT NOT NULL DEFAULT '',
            source_run_id TEXT                           -- the run it was labelled from, if any
        );
        CREATE INDEX dataset_items_dataset ON dataset_items (dataset_id, position);
        CREATE TABLE run_labels (
            run_id TEXT PRIMARY KEY,
            verdict TEXT NOT NULL,                       -- correct | wrong | should_abstain
            gold_chunk_ids TEXT NOT NULL DEFAULT '[]',
            labelled_by INTEGER,
            labelled_at TEXT NOT NULL,
            dataset_item_id INTEGER
        );
        CREATE TABLE experiments (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL,
            dataset_id INTEGER NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,
            owner_id INTEGER,
            leave_gold_out INTEGER NOT NULL DEFAULT 0,
            item_limit INTEGER,
            state TEXT NOT NULL DEFAULT 'pending',       -- pending | running | cancelling | cancelled | done
            runner TEXT NOT NULL DEFAULT '',             -- host:pid of the process running it
            heartbeat_at REAL NOT NULL DEFAULT 0,        -- unix seconds, refreshed while it runs
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE TABLE experiment_variants (
            id INTEGER PRIMARY KEY,
            experiment_id INTEGER NOT NULL REFERENCES experiments(id) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            name TEXT NOT NULL,
            mode TEXT NOT NULL,                          -- auto | rule | agentic
            overrides TEXT NOT NULL DEFAULT '{}'         -- JSON {"group.key": value}
        );
        CREATE TABLE experiment_runs (
            id INTEGER PRIMARY KEY,
            experiment_id INTEGER NOT NULL REFERENCES experiments(id) ON DELETE CASCADE,
            variant_id INTEGER NOT NULL REFERENCES experiment_variants(id) ON DELETE CASCADE,
            item_id INTEGER NOT NULL,
            gold_left_out INTEGER NOT NULL DEFAULT 0,    -- asked with its gold documents excluded
            state TEXT NOT NULL DEFAULT 'pending',       -- pending | running | done | failed
            run_id TEXT,
            error TEXT NOT NULL DEFAULT '',
            started_at REAL,
            finished_at REAL,
            UNIQUE (variant_id, item_id, gold_left_out)
        );
        CREATE INDEX experiment_runs_state ON experiment_runs (experiment_id, state);
        """
    )


@migration
def m011_ingest_jobs(db: sqlite_utils.Database) -> None:
    # Ingestion as background jobs owned by the core, not by a page's script run: a job and its files
    # survive navigation and server restarts (docmind_core/ingest/jobs.py).  A running job names the lease
    # of the worker that owns it, so a starting process resumes only jobs whose worker is provably gone.
    _run_script(
        db,
        """
        CREATE TABLE ingest_jobs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            kb_id INTEGER NOT NULL REFERENCES knowledge_bases(id) ON DELETE CASCADE,
            user_id INTEGER,                     -- who enqueued it (NULL: the local operator)
            state TEXT NOT NULL,                 -- queued | running | done | failed | cancelled | interrupted
            cancel_requested INTEGER NOT NULL DEFAULT 0,
            lease_id INTEGER,                    -- the worker's lease while running
            created_at REAL NOT NULL,            -- unix seconds
            started_at REAL,
            finished_at REAL,
            note TEXT NOT NULL DEFAULT ''        -- how it ended, or what resumed it
        );
        CREATE INDEX ingest_jobs_state ON ingest_jobs (state, id);
        CREATE INDEX ingest_jobs_kb ON ingest_jobs (kb_id, id);
        CREATE TABLE ingest_job_files (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            job_id INTEGER NOT NULL REFERENCES ingest_jobs(id) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            name TEXT NOT NULL,                  -- the document name inside the KB
            path TEXT NOT NULL,                  -- where its bytes are read from
            owned_copy INTEGER NOT NULL DEFAULT 0,  -- 1: a copy the job made (removed once ingested)
            size INTEGER NOT NULL DEFAULT 0,
            state TEXT NOT NULL,                 -- queued | running | done | failed | cancelled | interrupted
            stage TEXT NOT NULL DEFAULT '',      -- the ingest stage last reported
            fraction REAL NOT NULL DEFAULT 0,
            outcome TEXT NOT NULL DEFAULT '',    -- added | replaced | unchanged | failed
            doc_id INTEGER,
            chunks INTEGER NOT NULL DEFAULT 0,
            error TEXT NOT NULL DEFAULT '',
            started_at REAL,
            finished_at REAL
        );
        CREATE INDEX ingest_job_files_job ON ingest_job_files (job_id, position);
        """
    )


@migration
@rebuilds_tables
def m012_ids_never_reused(db: sqlite_utils.Database) -> list[str]:
    # Without AUTOINCREMENT SQLite hands out the highest id plus one, so after a delete a new account gets a
    # removed one's id and its rows.  User, KB, dataset, experiment and API-key ids get AUTOINCREMENT, and
    # the rows an earlier holder of a reused id left are repaired: see docmind_core/store/retired_ids.py.
    return make_ids_never_reused(db)


@migration
def m013_config_versions(db: sqlite_utils.Database) -> None:
    # One version per stored key and scope, for compare-and-set from a form: a write names the version its
    # form was drawn from and is refused when the key changed since.  Rows stay when a value is reset to
    # its default, so a version never repeats (a reset and a new value cannot look like the old one).
    _run_script(
        db,
        """
        CREATE TABLE config_versions (
            owner_id INTEGER NOT NULL,           -- 0: the global value; else the user whose personal value
            key TEXT NOT NULL,
            version INTEGER NOT NULL,
            changed_by TEXT NOT NULL DEFAULT '', -- who made the change that gave this version
            PRIMARY KEY (owner_id, key)
        );
        """
    )


@migration
def m015_experiment_description(db: sqlite_utils.Database) -> None:
    # An experiment's description, generated when it is created: its variants (mode and overrides), the
    # grader thresholds it runs with and its question set, so two experiments read apart before and after
    # a sweep is applied.
    db.execute("ALTER TABLE experiments ADD COLUMN description TEXT NOT NULL DEFAULT ''")


@migration
def m016_ingest_embedding_pace(db: sqlite_utils.Database) -> None:
    # Keyword-first ingestion: a job's vectors are written after its files are searchable by keyword.  The
    # job keeps how many chunks its run has to embed, how many it has embedded and when that began and last
    # moved, so its ETA is the measured pace over the chunks left (job_types.IngestJob.eta_s).
    for column in ("embed_total INTEGER NOT NULL DEFAULT 0", "embed_done INTEGER NOT NULL DEFAULT 0",
                   "embed_started_at REAL", "embed_updated_at REAL"):
        db.execute(f"ALTER TABLE ingest_jobs ADD COLUMN {column}")


@migration
def m017_chunk_places(db: sqlite_utils.Database) -> None:
    # Where each chunk sits in its file (values.ChunkPlace), so a citation says "memo.pdf, p. 2": its PDF
    # pages (first and last: a chunk may cross a page break), its heading path, or its CSV rows.  NULL and
    # '' for chunks stored before (a re-ingest of the file fills them).
    for column in ("page_first INTEGER", "page_last INTEGER", "section TEXT NOT NULL DEFAULT ''",
                   "row_first INTEGER", "row_last INTEGER"):
        db.execute(f"ALTER TABLE chunks ADD COLUMN {column}")


@migration
def m018_document_files(db: sqlite_utils.Database) -> None:
    # The bytes of each ingested PDF, so a source card can show the cited page as an image (an uploaded
    # file's copy is removed once it is ingested).  Removed with the document's chunks and with the document.
    _run_script(
        db,
        """
        CREATE TABLE document_files (
            doc_id INTEGER PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,
            data BLOB NOT NULL
        );
        """,
    )


@migration
def m019_label_feedback(db: sqlite_utils.Database) -> None:
    # Feedback where answers are read: a label may name the right source as a document (not only a chunk the
    # run found), and keeps the verdict the answer was shown with and the KBs the run asked, so a KB's
    # statement of how often its "Supported" answers were right is counted without reading every trace.
    for column in ("gold_doc_ids TEXT NOT NULL DEFAULT '[]'", "answer_verdict TEXT NOT NULL DEFAULT ''",
                   "kb_ids TEXT NOT NULL DEFAULT '[]'"):
        db.execute(f"ALTER TABLE run_labels ADD COLUMN {column}")
