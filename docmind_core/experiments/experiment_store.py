"""Experiments and their rows in SQLite (``experiments``, ``experiment_runs``; schema: store/db.py m010).

Each (variant, item, gold-left-out) is a row that goes pending -> running -> done | failed.  An
experiment records the runner that works on it (``runner_identity``) and that runner's heartbeat:
a runner whose heartbeat is older than ``STALE_AFTER_S``, or whose process on this host is gone, no
longer holds it, and its rows may be taken over.  Unchecked: the experiments service decides access.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from typing import Any, Literal, Sequence

from docmind_core.errors import NotFound
from docmind_core.experiments.datasets import DatasetItem
from docmind_core.experiments.records import (
    MAX_VARIANTS, Experiment, ExperimentError, ExperimentRun, ExperimentState, Progress, Variant,
)
from docmind_core.ingest.leases import process_start
from docmind_core.store.db import Database, utcnow

STALE_AFTER_S = 30.0  # a runner whose heartbeat is older than this is gone: its rows may be taken over


def runner_identity() -> str:
    """``host:pid:thread:start`` of the calling thread; ``start`` (``process_start``) tells this process from a
    later one given the same pid."""
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}:{process_start(os.getpid()) or ''}"


def runner_exited(runner: str) -> bool:
    """The runner named ``runner`` ran on this host and its process is gone (killed, crashed): its heartbeat
    may still look fresh, but nobody is at work.  A runner on another host, or a name in another form,
    is judged by its heartbeat only."""
    host, _, rest = runner.partition(":")
    pid_text, _, rest = rest.partition(":")
    _thread, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    now = process_start(int(pid_text))
    return now is None or bool(start and now and now != start)


_EXP_COLUMNS = ("id, name, dataset_id, owner_id, leave_gold_out, item_limit, state, runner, heartbeat_at, "
                "created_at, updated_at, description")
_RUN_COLUMNS = "id, variant_id, item_id, gold_left_out, state, run_id, error, started_at, finished_at"


class ExperimentStore:
    """Experiments and their rows (schema: store/db.py m010).  Unchecked: the facade decides access."""

    def __init__(self, db: Database):
        self._db = db

    def create(self, name: str, dataset_id: int, variants: Sequence[Variant], items: Sequence[DatasetItem],
               owner_id: int | None, leave_gold_out: bool = False, item_limit: int | None = None,
               description: str = "") -> Experiment:
        if not variants:
            raise ExperimentError("an experiment needs at least one variant")
        if len(variants) > MAX_VARIANTS:
            raise ExperimentError(f"at most {MAX_VARIANTS} variants per experiment")
        names = [v.name for v in variants]
        if len(set(names)) != len(names):
            raise ExperimentError("variant names must differ")
        if not items:
            raise ExperimentError("the dataset has no question")
        now = utcnow()
        with self._db.transaction() as db:
            cursor = db.execute(
                "INSERT INTO experiments (name, dataset_id, owner_id, leave_gold_out, item_limit, state, created_at, "
                "updated_at, description) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, ?)",
                [name.strip() or f"experiment on dataset #{dataset_id}", int(dataset_id), owner_id,
                 int(leave_gold_out), item_limit, now, now, description])
            exp_id = int(cursor.lastrowid)
            rows: list[tuple] = []
            for position, variant in enumerate(variants):
                vid = int(db.execute(
                    "INSERT INTO experiment_variants (experiment_id, position, name, mode, overrides) "
                    "VALUES (?, ?, ?, ?, ?)",
                    [exp_id, position, variant.name, variant.mode, json.dumps(variant.overrides)]).lastrowid)
                for item in items:
                    rows.append((exp_id, vid, item.id, 0))
                    if leave_gold_out and item.answerable and item.gold_doc_ids:
                        rows.append((exp_id, vid, item.id, 1))
            db.conn.executemany("INSERT INTO experiment_runs (experiment_id, variant_id, item_id, gold_left_out) "
                                "VALUES (?, ?, ?, ?)", rows)
        return self.get(exp_id)

    def get(self, experiment_id: int) -> Experiment:
        row = self._db.db.execute(f"SELECT {_EXP_COLUMNS} FROM experiments WHERE id = ?",
                                  [int(experiment_id)]).fetchone()
        if row is None:
            raise NotFound(f"experiment #{experiment_id} does not exist")
        return _experiment(row, self._variants([row[0]]).get(row[0], []))

    def list(self) -> list[Experiment]:
        """Every experiment, newest first: two queries however many there are."""
        rows = self._db.db.execute(f"SELECT {_EXP_COLUMNS} FROM experiments ORDER BY id DESC").fetchall()
        variants = self._variants([r[0] for r in rows]) if rows else {}
        return [_experiment(r, variants.get(r[0], [])) for r in rows]

    def _variants(self, experiment_ids: Sequence[int]) -> dict[int, list[Variant]]:
        """Experiment id -> its variants in order, from one query."""
        marks = ", ".join("?" for _ in experiment_ids)
        out: dict[int, list[Variant]] = {}
        for exp_id, vid, name, mode, overrides in self._db.db.execute(
                f"SELECT experiment_id, id, name, mode, overrides FROM experiment_variants "
                f"WHERE experiment_id IN ({marks}) ORDER BY experiment_id, position",
                [int(i) for i in experiment_ids]).fetchall():
            out.setdefault(exp_id, []).append(Variant(id=vid, name=name, mode=mode,
                                                      overrides=json.loads(overrides or "{}")))
        return out

    def delete(self, experiment_id: int) -> None:
        with self._db.transaction() as db:
            if db.execute("DELETE FROM experiments WHERE id = ?", [int(experiment_id)]).rowcount == 0:
                raise NotFound(f"experiment #{experiment_id} does not exist")

    def runs(self, experiment_id: int, states: Sequence[str] | None = None) -> list[ExperimentRun]:
        sql = f"SELECT {_RUN_COLUMNS} FROM experiment_runs WHERE experiment_id = ?"
        params: list[Any] = [int(experiment_id)]
        if states:
            sql += f" AND state IN ({', '.join('?' for _ in states)})"
            params += list(states)
        rows = self._db.db.execute(sql + " ORDER BY item_id, gold_left_out, variant_id", params).fetchall()
        return [ExperimentRun(id=r[0], variant_id=r[1], item_id=r[2], gold_left_out=bool(r[3]), state=r[4],
                              run_id=r[5], error=r[6], started_at=r[7], finished_at=r[8]) for r in rows]

    def progress(self, experiment_id: int, parallel: int = 1, state: ExperimentState | None = None) -> Progress:
        """The rows' counts and timing in one query; ``state``: the experiment's state when the caller has
        just read it (else it is read here)."""
        if state is None:
            row = self._db.db.execute("SELECT state FROM experiments WHERE id = ?", [int(experiment_id)]).fetchone()
            if row is None:
                raise NotFound(f"experiment #{experiment_id} does not exist")
            state = row[0]
        # per row state: rows, rows with both times, their summed wall time (a reset row may keep old times,
        # so only finished states count)
        by_state = {r[0]: r[1:] for r in self._db.db.execute(
            "SELECT state, COUNT(*), COUNT(finished_at - started_at), TOTAL(finished_at - started_at) "
            "FROM experiment_runs WHERE experiment_id = ? GROUP BY state", [int(experiment_id)]).fetchall()}
        counts = {k: v[0] for k, v in by_state.items()}
        timed = sum(by_state[k][1] for k in ("done", "failed") if k in by_state)
        spent = sum(by_state[k][2] for k in ("done", "failed") if k in by_state)
        total = sum(counts.values())
        finished = counts.get("done", 0) + counts.get("failed", 0)
        remaining = total - finished
        parallel = max(1, parallel)
        per_run = spent / timed if timed else None
        return Progress(state=state, total=total, done=counts.get("done", 0), failed=counts.get("failed", 0),
                        running=counts.get("running", 0), pending=counts.get("pending", 0),
                        elapsed_s=round(spent / parallel, 2),
                        eta_s=round(per_run * remaining / parallel, 1) if per_run is not None else None)

    # -- state changes ------------------------------------------------------------
    def set_state(self, experiment_id: int, state: ExperimentState, runner: str | None = None) -> None:
        with self._db.transaction() as db:
            if runner is None:
                db.execute("UPDATE experiments SET state = ?, updated_at = ? WHERE id = ?",
                           [state, utcnow(), int(experiment_id)])
            else:
                db.execute("UPDATE experiments SET state = ?, runner = ?, heartbeat_at = ?, updated_at = ? "
                           "WHERE id = ?", [state, runner, time.time(), utcnow(), int(experiment_id)])

    @staticmethod
    def runner_alive(state: str, heartbeat_at: float | None, runner: str = "") -> bool:
        """A runner is at work: the experiment is running or being cancelled, with a fresh heartbeat, and
        ``runner``'s process has not exited (when it ran on this host)."""
        return (state in ("running", "cancelling") and time.time() - float(heartbeat_at or 0) < STALE_AFTER_S
                and not runner_exited(runner))

    def take_over(self, experiment_id: int, runner: str, retry_failed: bool) -> None:
        """Become the experiment's runner (refused while another one is alive); interrupted rows go back
        to pending, and so do failed ones when ``retry_failed``."""
        with self._db.transaction() as db:
            row = db.execute("SELECT state, runner, heartbeat_at FROM experiments WHERE id = ?",
                             [int(experiment_id)]).fetchone()
            if row is None:
                raise NotFound(f"experiment #{experiment_id} does not exist")
            state, other, beat = row
            if other and other != runner and self.runner_alive(state, beat, other):
                raise ExperimentError(f"experiment #{experiment_id} is already being run by {other}; cancel it "
                                      f"first or wait until it stops")
            db.execute("UPDATE experiment_runs SET state = 'pending', started_at = NULL WHERE experiment_id = ? "
                       "AND state = 'running'", [int(experiment_id)])
            if retry_failed:
                db.execute("UPDATE experiment_runs SET state = 'pending', error = '' WHERE experiment_id = ? "
                           "AND state = 'failed'", [int(experiment_id)])
            db.execute("UPDATE experiments SET state = 'running', runner = ?, heartbeat_at = ?, updated_at = ? "
                       "WHERE id = ?", [runner, time.time(), utcnow(), int(experiment_id)])

    def heartbeat(self, experiment_id: int) -> ExperimentState:
        """Refresh the runner's heartbeat; returns the state (``cancelling`` tells the runner to stop)."""
        with self._db.transaction() as db:
            db.execute("UPDATE experiments SET heartbeat_at = ? WHERE id = ?", [time.time(), int(experiment_id)])
            return db.execute("SELECT state FROM experiments WHERE id = ?", [int(experiment_id)]).fetchone()[0]

    def request_cancel(self, experiment_id: int) -> ExperimentState:
        with self._db.transaction() as db:
            row = db.execute("SELECT state, heartbeat_at, runner FROM experiments WHERE id = ?",
                             [int(experiment_id)]).fetchone()
            if row is None:
                raise NotFound(f"experiment #{experiment_id} does not exist")
            # A live runner must see "cancelling" and stop by itself, however often cancel is pressed.
            new = "cancelling" if self.runner_alive(row[0], row[1], row[2] or "") else ("cancelled" if row[0] in ("running", "cancelling", "pending")
                                              else row[0])
            db.execute("UPDATE experiments SET state = ?, updated_at = ? WHERE id = ?",
                       [new, utcnow(), int(experiment_id)])
            return new

    def mark_running(self, row_id: int) -> None:
        with self._db.transaction() as db:
            db.execute("UPDATE experiment_runs SET state = 'running', started_at = ? WHERE id = ?",
                       [time.time(), int(row_id)])

    def mark_finished(self, row_id: int, state: Literal["done", "failed", "pending"], run_id: str | None,
                      error: str = "") -> None:
        with self._db.transaction() as db:
            db.execute("UPDATE experiment_runs SET state = ?, run_id = COALESCE(?, run_id), error = ?, "
                       "finished_at = ? WHERE id = ?",
                       [state, run_id, error[:2000], time.time() if state != "pending" else None, int(row_id)])


def _experiment(row: Sequence[Any], variants: list[Variant]) -> Experiment:
    state = row[6]
    if state in ("running", "cancelling") and not ExperimentStore.runner_alive(state, row[8], row[7] or ""):
        # its runner was killed or stopped without a word: what is left waits for a resume (or was cancelled),
        # and saying "running" would have the page poll and the list promise progress that never comes
        state = "pending" if state == "running" else "cancelled"
    return Experiment(id=row[0], name=row[1], dataset_id=row[2], owner_id=row[3], leave_gold_out=bool(row[4]),
                      item_limit=row[5], state=state, runner=row[7], heartbeat_at=row[8], created_at=row[9],
                      updated_at=row[10], description=row[11] or "", variants=variants)
