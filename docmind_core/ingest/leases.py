"""Ownership of work in progress: leases held by the process running an ingest, delete, re-index or repair.

Why: every process that opens an Engine repairs what interrupted work left
behind (``Ingestor.reconcile``).  Without an owner on record it cannot tell a
document another live process is writing right now from one a dead process
left half-written, and it removed both.  Now every operation that makes a
document pending holds a lease: a row of ``ingest_leases`` with the process's
pid, host and start time, and a heartbeat a background thread refreshes while
the operation runs; the pending document names its lease.  Work is taken over
only when its owner is provably gone (:meth:`LeaseBook.owner_gone`):

* the lease row is gone (the operation ended, or another process declared it stale);
* the owner ran on this host and its pid is no longer alive, or the pid now belongs to a process
  started at another time (pid reuse);
* or its heartbeat is older than ``stale_after_s`` (any host; generous, so that a busy machine never
  loses live work).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from contextlib import contextmanager

from docmind_core.store.db import Database

log = logging.getLogger(__name__)

HEARTBEAT_INTERVAL_S = 5.0
# A live process refreshes its heartbeat every few seconds; fifteen minutes without one means it is
# hung or on a host we cannot see, never merely busy.
STALE_AFTER_S = 900.0


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


_BOOT_ID = _boot_id()


def process_start(pid: int) -> str | None:
    """An identifier of when ``pid`` started ('' when this platform cannot tell; None when no such process).

    Linux: the boot id and the start tick from /proc/<pid>/stat, which together tell a process from a
    later one that was given the same pid.
    """
    stat = Path(f"/proc/{int(pid)}/stat")
    if Path("/proc/self/stat").exists():
        try:
            text = stat.read_text()
        except OSError:
            return None
        # the command name (field 2) may hold spaces and parentheses: split after its closing parenthesis
        fields = text[text.rfind(")") + 2:].split()
        if fields[0] in ("Z", "X"):  # exited, only not yet reaped by its parent
            return None
        return f"{_BOOT_ID}:{fields[19]}"  # field 22 overall: starttime in clock ticks since boot
    return "" if pid_alive(pid) else None


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    if os.name != "posix":  # signal 0 is not a probe on Windows; there only the heartbeat decides
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


@dataclass(frozen=True)
class ProcessIdentity:
    pid: int
    host: str
    start: str

    @classmethod
    def current(cls) -> "ProcessIdentity":
        pid = os.getpid()
        return cls(pid=pid, host=socket.gethostname(), start=process_start(pid) or "")


@dataclass(frozen=True)
class LeaseRecord:
    id: int
    operation: str
    pid: int
    host: str
    process_start: str
    acquired_at: float
    heartbeat_at: float


class Lease:
    """One held lease; a daemon thread refreshes its heartbeat until it is released."""

    def __init__(self, book: "LeaseBook", lease_id: int, operation: str):
        self.book = book
        self.id = lease_id
        self.operation = operation
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"docmind-lease-{lease_id}", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(self.book.heartbeat_s):
            try:
                if not self.book.heartbeat(self.id):
                    if self._stop.is_set():  # released while this beat waited for the database
                        return
                    log.error("the %s lease %s was taken over by another process (no heartbeat for %.0f s?)",
                              self.operation, self.id, self.book.stale_after_s)
                    return
            except Exception:  # a locked or busy database: try again at the next beat
                log.warning("could not refresh the heartbeat of lease %s", self.id, exc_info=True)

    def release(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.book.heartbeat_s + 1.0)
        self.book.remove(self.id)


class LeaseOnDemand:
    """A lease for work that often finds nothing to do (the start-up repairs): taking a lease is a write, and a
    start that only looks must not wait behind another process's write transaction."""

    def __init__(self, book: "LeaseBook", operation: str):
        self.book = book
        self.operation = operation
        self.lease: Lease | None = None

    @property
    def held_id(self) -> int | None:
        """The lease's id once taken; None before (nothing this work owns yet)."""
        return self.lease.id if self.lease is not None else None

    def take(self) -> Lease:
        if self.lease is None:
            self.lease = self.book.acquire(self.operation)
        return self.lease


def _release(lease: Lease) -> None:
    try:
        lease.release()
    except Exception:  # the row is then judged by its heartbeat and pid at the next start
        log.exception("could not release lease %s", lease.id)


class LeaseBook:
    """The ``ingest_leases`` table: take, refresh, judge and remove leases."""

    def __init__(self, db: Database, heartbeat_s: float = HEARTBEAT_INTERVAL_S,
                 stale_after_s: float = STALE_AFTER_S, identity: ProcessIdentity | None = None):
        if heartbeat_s <= 0 or stale_after_s <= heartbeat_s:
            raise ValueError("a lease needs heartbeat_s > 0 and stale_after_s > heartbeat_s")
        self.db = db
        self.heartbeat_s = heartbeat_s
        self.stale_after_s = stale_after_s
        self.identity = identity or ProcessIdentity.current()

    @contextmanager
    def hold(self, operation: str) -> Iterator[Lease]:
        lease = self.acquire(operation)
        try:
            yield lease
        finally:
            _release(lease)

    @contextmanager
    def on_demand(self, operation: str) -> Iterator["LeaseOnDemand"]:
        """A lease taken only when the work first needs one (``take()``), released at the end if it was."""
        pending = LeaseOnDemand(self, operation)
        try:
            yield pending
        finally:
            if pending.lease is not None:
                _release(pending.lease)

    def acquire(self, operation: str) -> Lease:
        now = time.time()
        me = self.identity
        with self.db.transaction() as db:
            lease_id = db["ingest_leases"].insert({
                "operation": operation, "pid": me.pid, "host": me.host, "process_start": me.start,
                "acquired_at": now, "heartbeat_at": now}).last_pk
        return Lease(self, int(lease_id), operation)

    def heartbeat(self, lease_id: int) -> bool:
        """Refresh one lease; False when its row is gone."""
        with self.db.transaction() as db:
            cursor = db.execute("UPDATE ingest_leases SET heartbeat_at = ? WHERE id = ?", [time.time(), lease_id])
            return cursor.rowcount == 1

    def remove(self, lease_id: int) -> None:
        with self.db.transaction() as db:
            db.execute("DELETE FROM ingest_leases WHERE id = ?", [lease_id])

    def get(self, lease_id: int | None) -> LeaseRecord | None:
        if lease_id is None:
            return None
        row = self.db.db.execute(
            "SELECT id, operation, pid, host, process_start, acquired_at, heartbeat_at FROM ingest_leases "
            "WHERE id = ?", [lease_id]).fetchone()
        return LeaseRecord(*row) if row else None

    def records(self) -> list[LeaseRecord]:
        rows = self.db.db.execute(
            "SELECT id, operation, pid, host, process_start, acquired_at, heartbeat_at FROM ingest_leases "
            "ORDER BY id").fetchall()
        return [LeaseRecord(*r) for r in rows]

    def owner_gone(self, lease_id: int | None) -> str | None:
        """Why the owner of this lease is provably gone, or None while it may still be working."""
        if lease_id is None:
            return "it has no owner on record"
        record = self.get(lease_id)
        if record is None:
            return "its operation ended without finishing it"
        return self.judge(record)

    def judge(self, record: LeaseRecord) -> str | None:
        silent = time.time() - record.heartbeat_at
        if silent > self.stale_after_s:
            return f"its owner (pid {record.pid} on {record.host}) sent no heartbeat for {silent:.0f} s"
        if record.host != self.identity.host:
            return None  # another machine's processes cannot be probed: only the heartbeat tells
        started = process_start(record.pid)
        if started is None or not pid_alive(record.pid):
            return f"its owner, process {record.pid}, has exited"
        if record.process_start and started and started != record.process_start:
            return f"its owner, process {record.pid}, has exited (the pid now belongs to another process)"
        return None

    def alive(self, lease_id: int | None) -> bool:
        return self.owner_gone(lease_id) is None

    def sweep(self) -> int:
        """Remove the rows of leases whose owner is gone; returns how many went."""
        gone = [r.id for r in self.records() if self.judge(r) is not None]
        if gone:
            with self.db.transaction() as db:
                db.conn.executemany("DELETE FROM ingest_leases WHERE id = ?", [(i,) for i in gone])
        return len(gone)
