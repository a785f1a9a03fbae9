"""Every run, persisted: its metadata, a config snapshot and every event it yielded.

A :class:`TraceRecorder` is handed each event as the pipeline yields it.  Events
are buffered and written with ``executemany`` (on ``done``, every
:data:`FLUSH_EVERY` events, and on :meth:`TraceRecorder.finish`), so hundreds
of token events do not turn into hundreds of commits during a run.  Each event
is stored as the JSON of :func:`events.event_to_dict` with its sequence number
and ``t_ms``, and :meth:`TraceStore.get` rebuilds the exact same event objects
with :func:`events.event_from_dict` — which is what lets the Traces page replay
a run as the chat showed it.

Export/import: :meth:`TraceStore.export_json` writes one run (``kind="trace"``)
or several (``kind="comparison"``) as a self-describing JSON document that
:meth:`TraceStore.import_json` loads back, labelled ``imported``.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from datetime import datetime, timezone
from typing import Any, Iterable, Iterator, Literal, Sequence

from pydantic import BaseModel, Field, ValidationError

from docmind_core.errors import NotFound, TraceFormatError
from docmind_core.events import Done, Event, RunStarted, event_from_dict, event_to_dict
from docmind_core.values import RetrievedChunk, StopReason
from docmind_core.store.db import Database, utcnow

FLUSH_EVERY = 200  # buffered events written in one executemany
EXPORT_FORMAT = "docmind-traces"
EXPORT_VERSION = 1
_RUN_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")  # what an imported run may keep as its id


class TraceMeta(BaseModel):
    """The ``traces`` row: what was asked, with which settings, and how it ended."""

    run_id: str
    question: str
    requested_mode: str = "auto"
    conversation_id: str | None = None
    user_id: int | None = None
    kb_ids: list[int] = Field(default_factory=list)
    started_at: str = ""
    duration_ms: float = 0.0
    mode: str = ""  # SELECTED_DOC / RULE_PLANNER / AGENTIC / NONE, set on done
    tier: str = ""  # HIGH / AMBIGUOUS / LOW, or "" when nothing was graded
    stop_reason: str = ""
    pair_id: str | None = None  # side-by-side runs share one
    label: str = ""  # "imported" for runs loaded from a file


class TraceSummary(TraceMeta):
    """One row of the trace list."""

    event_count: int = 0


class TraceRecord(BaseModel):
    """A stored run in full: metadata, the flat config snapshot and the exact event stream."""

    meta: TraceMeta
    config: dict[str, Any] = Field(default_factory=dict)
    events: list[Event] = Field(default_factory=list)

    @property
    def run_id(self) -> str:
        return self.meta.run_id

    @property
    def done(self) -> Done | None:
        return next((e for e in reversed(self.events) if isinstance(e, Done)), None)


class _ExportedRun(BaseModel):
    meta: TraceMeta
    config: dict[str, Any] = Field(default_factory=dict)
    events: list[dict[str, Any]]


class _ExportDocument(BaseModel):
    format: Literal["docmind-traces"]
    version: int
    kind: Literal["trace", "comparison"]
    exported_at: str = ""
    runs: list[_ExportedRun]


class TraceRecorder:
    """Consumes one run's events; call :meth:`finish` once the stream ends (also on error)."""

    def __init__(self, db: Database, meta: TraceMeta, config: dict[str, Any]):
        self._db = db
        self.meta = meta
        self._lock = threading.Lock()
        self._buffer: list[tuple[str, int, str, float, str]] = []
        self._seq = 0
        self._started = time.perf_counter()
        self._finished = False
        self._done: Done | None = None
        # The row exists from the start, so a run that crashes is still listed; it says "incomplete" until the
        # done event's flush overwrites it, since a killed process never runs finish().
        with db.transaction() as conn:
            conn.execute(
                "INSERT INTO traces (run_id, conversation_id, user_id, question, requested_mode, kb_ids, config, "
                "started_at, pair_id, label, stop_reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [meta.run_id, meta.conversation_id, meta.user_id, meta.question, meta.requested_mode,
                 json.dumps(meta.kb_ids), json.dumps(config, ensure_ascii=False), meta.started_at, meta.pair_id,
                 meta.label, StopReason.INCOMPLETE.value])

    def record(self, event: Event) -> None:
        with self._lock:
            if self._finished:
                return
            payload = json.dumps(event_to_dict(event), ensure_ascii=False)
            self._buffer.append((self.meta.run_id, self._seq, event.kind, float(event.t_ms), payload))
            self._seq += 1
            if isinstance(event, Done):
                self._done = event
                self._flush()
            elif len(self._buffer) >= FLUSH_EVERY:
                self._flush()

    def finish(self) -> None:
        """Write what is buffered and the run's outcome; safe to call twice."""
        with self._lock:
            if self._finished:
                return
            self._finished = True
            self._flush()

    def __enter__(self) -> "TraceRecorder":
        return self

    def __exit__(self, *exc) -> None:
        self.finish()

    def _flush(self) -> None:
        done = self._done
        if not self._buffer and (done is None and not self._finished):
            return
        with self._db.transaction() as conn:
            if self._buffer:
                conn.conn.executemany(
                    "INSERT INTO trace_events (run_id, seq, kind, t_ms, payload) VALUES (?, ?, ?, ?, ?)", self._buffer)
                self._buffer = []
            if done is not None:
                mode, tier, stop_reason = outcome_columns(done)
                duration = done.t_ms or round((time.perf_counter() - self._started) * 1000, 2)
                conn.execute("UPDATE traces SET mode = ?, tier = ?, stop_reason = ?, duration_ms = ? WHERE run_id = ?",
                             [mode, tier, stop_reason, duration, self.meta.run_id])
            elif self._finished:  # the stream ended without done: keep how long it ran
                duration = round((time.perf_counter() - self._started) * 1000, 2)
                conn.execute("UPDATE traces SET duration_ms = ?, stop_reason = CASE WHEN stop_reason = '' "
                             "THEN ? ELSE stop_reason END WHERE run_id = ?",
                             [duration, StopReason.INCOMPLETE.value, self.meta.run_id])


def outcome_columns(done: Done | None) -> tuple[str, str, str]:
    """(mode, tier, stop reason) of a run as its list row shows them: from its done event, the one place they
    are read from (a recorded run and an imported one alike); a run without one is incomplete."""
    if done is None:
        return "", "", StopReason.INCOMPLETE.value
    # a cancelled run has its own state (stop reason "cancelled"), never a tier, whatever was graded before
    tier = done.grade.tier.value if done.grade is not None and not done.cancelled else ""
    return done.mode, tier, done.stop_reason


class TraceStore:
    def __init__(self, db: Database):
        self._db = db

    # -- recording -----------------------------------------------------------
    def recorder(self, run_id: str, question: str, requested_mode: str = "auto", kb_ids: Sequence[int] = (),
                 config: dict[str, Any] | None = None, user_id: int | None = None,
                 conversation_id: str | None = None, pair_id: str | None = None, label: str = "") -> TraceRecorder:
        meta = TraceMeta(run_id=run_id, question=question, requested_mode=requested_mode,
                         conversation_id=conversation_id or None, user_id=user_id, kb_ids=list(kb_ids),
                         started_at=utcnow(), pair_id=pair_id, label=label)
        return TraceRecorder(self._db, meta, dict(config or {}))

    @staticmethod
    def new_pair_id() -> str:
        return "pair-" + uuid.uuid4().hex[:16]

    # -- reading -------------------------------------------------------------
    def get(self, run_id: str) -> TraceRecord:
        row = self._db.db.execute(f"SELECT {_META_COLUMNS}, config FROM traces WHERE run_id = ?", [run_id]).fetchone()
        if row is None:
            raise NotFound(f"trace {run_id} does not exist")
        payloads = self._db.db.execute(
            "SELECT payload FROM trace_events WHERE run_id = ? ORDER BY seq", [run_id]).fetchall()
        events = [event_from_dict(json.loads(p[0])) for p in payloads]
        return TraceRecord(meta=_meta(row), config=json.loads(row[-1] or "{}"), events=events)

    def iter_many(self, run_ids: Iterable[str], batch: int = 100) -> Iterator[TraceRecord]:
        """The stored runs of ``run_ids`` (missing ones skipped), ``batch`` runs per query instead of one
        query pair per run; yielded one by one, so a caller that drops each keeps memory bounded."""
        wanted = list(dict.fromkeys(r for r in run_ids if r))
        for at in range(0, len(wanted), max(1, batch)):
            part = wanted[at:at + max(1, batch)]
            marks = ", ".join("?" * len(part))
            rows = {r[0]: r for r in self._db.db.execute(
                f"SELECT {_META_COLUMNS}, config FROM traces WHERE run_id IN ({marks})", part).fetchall()}
            events: dict[str, list[Event]] = {r: [] for r in rows}
            for run_id, payload in self._db.db.execute(
                    f"SELECT run_id, payload FROM trace_events WHERE run_id IN ({marks}) ORDER BY run_id, seq", part):
                events[run_id].append(event_from_dict(json.loads(payload)))
            for run_id in part:
                if run_id in rows:
                    yield TraceRecord(meta=_meta(rows[run_id]), config=json.loads(rows[run_id][-1] or "{}"),
                                      events=events[run_id])

    def list(self, user_id: int | None = None, mode: str | Sequence[str] | None = None,
             tier: str | Sequence[str] | None = None,
             kb_id: int | None = None, stop_reason: str | None = None, since: datetime | str | None = None,
             limit: int = 200, pair_id: str | None = None, label: str | None = None,
             conversation_id: str | None = None, question_contains: str | None = None) -> list[TraceSummary]:
        """Runs newest first; every given filter must match (``user_id=None`` means any user).

        ``mode`` and ``tier`` take one value or several (any of them matches; an empty sequence filters
        nothing), so a page filters in SQL rather than among the rows a limit left it.
        """
        where: list[str] = []
        params: list[Any] = []
        for column, choice in (("mode", mode), ("tier", tier)):
            values = [choice] if isinstance(choice, str) else list(choice or ())
            if values:
                where.append(f"{column} IN ({', '.join('?' * len(values))})")
                params.extend(str(getattr(v, "value", v)) for v in values)
        for column, value in (("user_id", user_id), ("stop_reason", stop_reason),
                              ("pair_id", pair_id), ("label", label), ("conversation_id", conversation_id)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if kb_id is not None:
            where.append("EXISTS (SELECT 1 FROM json_each(traces.kb_ids) WHERE json_each.value = ?)")
            params.append(int(kb_id))
        if question_contains:
            where.append("instr(lower(question), lower(?)) > 0")
            params.append(question_contains)
        if since is not None:
            where.append("started_at >= ?")
            params.append(_iso(since))
        sql = (f"SELECT {_META_COLUMNS}, (SELECT COUNT(*) FROM trace_events e WHERE e.run_id = traces.run_id) "
               "FROM traces")
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY started_at DESC, rowid DESC LIMIT ?"
        params.append(int(limit))
        return [TraceSummary(**_meta(row[:-1]).model_dump(), event_count=row[-1])
                for row in self._db.db.execute(sql, params).fetchall()]

    def sources_by_run(self, run_ids: Iterable[str]) -> dict[str, list[RetrievedChunk]]:
        """Each run's numbered answer sources (from its done event)."""
        return {run_id: list(done.sources) for run_id, done in self.done_by_run(run_ids).items()}

    def done_by_run(self, run_ids: Iterable[str]) -> dict[str, Done]:
        """Each run's done event (its answer, sources, notices and verdict), for the Markdown export."""
        out: dict[str, Done] = {}
        for run_id in {r for r in run_ids if r}:
            row = self._db.db.execute(
                "SELECT payload FROM trace_events WHERE run_id = ? AND kind = 'done' ORDER BY seq DESC LIMIT 1",
                [run_id]).fetchone()
            if row is not None:
                done = event_from_dict(json.loads(row[0]))
                assert isinstance(done, Done)  # the query reads kind 'done' only
                out[run_id] = done
        return out

    # -- deleting ------------------------------------------------------------
    def delete(self, run_id: str) -> None:
        with self._db.transaction() as conn:
            conn.execute("DELETE FROM trace_events WHERE run_id = ?", [run_id])
            if conn.execute("DELETE FROM traces WHERE run_id = ?", [run_id]).rowcount == 0:
                raise NotFound(f"trace {run_id} does not exist")

    # -- export / import -----------------------------------------------------
    def export_json(self, run_ids: Sequence[str]) -> str:
        """One run as a trace, or several as a comparison, in a form :meth:`import_json` reads back."""
        if not run_ids:
            raise ValueError("export_json needs at least one run id")
        found = {r.run_id: r for r in self.iter_many(run_ids)}
        missing = next((r for r in run_ids if r not in found), None)
        if missing is not None:
            raise NotFound(f"trace {missing} does not exist")
        return self.export_records([found[r] for r in run_ids])

    @staticmethod
    def export_records(records: Sequence[TraceRecord]) -> str:
        """:meth:`export_json` of runs already read."""
        if not records:
            raise ValueError("an export needs at least one run")
        runs = [{"meta": record.meta.model_dump(mode="json"), "config": record.config,
                 "events": [event_to_dict(e) for e in record.events]} for record in records]
        document = {"format": EXPORT_FORMAT, "version": EXPORT_VERSION,
                    "kind": "trace" if len(runs) == 1 else "comparison", "exported_at": utcnow(), "runs": runs}
        return json.dumps(document, ensure_ascii=False, indent=1)

    def import_json(self, text: str, user_id: int | None = None) -> list[str]:
        """Load an export; returns the new runs' ids (in file order), each labelled ``imported``.

        A run id already present gets a fresh one (its run and done events are updated to
        match); the runs of a comparison are stored as one pair under a fresh pair id.  The
        runs belong to the importing ``user_id`` and to no local conversation.
        """
        document = _parse_export(text)
        pair_id = self.new_pair_id() if document.kind == "comparison" else None
        imported: list[str] = []
        with self._db.transaction() as conn:
            for run in document.runs:
                run_id = run.meta.run_id
                if not run.events:
                    raise TraceFormatError(f"run {run_id[:80]} has no events: there is nothing to replay")
                exists = conn.execute("SELECT 1 FROM traces WHERE run_id = ?", [run_id]).fetchone()
                if exists or run_id in imported or not _RUN_ID_RE.fullmatch(run_id):
                    run_id = uuid.uuid4().hex  # taken, or not an id a page, link or command can name
                events = [_with_run_id(e, run_id) for e in run.events]
                try:
                    rebuilt = [event_from_dict(e) for e in events]
                except ValidationError as exc:
                    raise TraceFormatError(f"run {run.meta.run_id[:80]} has an event DocMind cannot read: "
                                           f"{exc.errors()[0]['msg']}") from None
                # what the list shows is read from the events, never taken from the file's own claims
                done = next((e for e in reversed(rebuilt) if isinstance(e, Done)), None)
                started = next((e for e in rebuilt if isinstance(e, RunStarted)), None)
                mode, tier, stop_reason = outcome_columns(done)
                meta = run.meta.model_copy(update={
                    "run_id": run_id, "label": "imported", "pair_id": pair_id, "user_id": user_id,
                    "conversation_id": None, "mode": mode, "tier": tier, "stop_reason": stop_reason,
                    "duration_ms": done.t_ms if done is not None else rebuilt[-1].t_ms,
                    **({"question": started.question, "requested_mode": started.requested_mode,
                        "kb_ids": list(started.kb_ids)} if started is not None else {})})
                conn.execute(
                    "INSERT INTO traces (run_id, conversation_id, user_id, question, requested_mode, mode, tier, "
                    "stop_reason, kb_ids, config, started_at, duration_ms, pair_id, label) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [run_id, meta.conversation_id, meta.user_id, meta.question, meta.requested_mode, meta.mode, meta.tier,
                     meta.stop_reason, json.dumps(meta.kb_ids), json.dumps(run.config, ensure_ascii=False),
                     meta.started_at or utcnow(), meta.duration_ms, meta.pair_id, meta.label])
                conn.conn.executemany(
                    "INSERT INTO trace_events (run_id, seq, kind, t_ms, payload) VALUES (?, ?, ?, ?, ?)",
                    [(run_id, seq, e.kind, float(e.t_ms), json.dumps(event_to_dict(e), ensure_ascii=False))
                     for seq, e in enumerate(rebuilt)])
                imported.append(run_id)
        return imported


_META_COLUMNS = ("run_id, question, requested_mode, conversation_id, user_id, kb_ids, started_at, duration_ms, "
                 "mode, tier, stop_reason, pair_id, label")


def _meta(row: Sequence[Any]) -> TraceMeta:
    return TraceMeta(run_id=row[0], question=row[1], requested_mode=row[2], conversation_id=row[3], user_id=row[4],
                     kb_ids=json.loads(row[5] or "[]"), started_at=row[6], duration_ms=row[7], mode=row[8],
                     tier=row[9], stop_reason=row[10], pair_id=row[11], label=row[12])


def _iso(since: datetime | str) -> str:
    if isinstance(since, str):
        return since
    if since.tzinfo is None:
        since = since.replace(tzinfo=timezone.utc)
    return since.astimezone(timezone.utc).isoformat(timespec="milliseconds")


def _with_run_id(event: dict[str, Any], run_id: str) -> dict[str, Any]:
    if event.get("kind") in ("run", "done") and "run_id" in event:
        return {**event, "run_id": run_id}
    return event


def _parse_export(text: str) -> _ExportDocument:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply to read
        raise TraceFormatError(f"not a JSON file: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != EXPORT_FORMAT:
        raise TraceFormatError("not a DocMind trace export (expected \"format\": \"docmind-traces\")")
    if data.get("version") != EXPORT_VERSION:
        raise TraceFormatError(f"unsupported trace export version {data.get('version')!r} "
                               f"(this DocMind reads version {EXPORT_VERSION})")
    try:
        document = _ExportDocument.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise TraceFormatError(f"trace export is malformed at {'.'.join(map(str, first['loc']))}: "
                               f"{first['msg']}") from None
    if not document.runs:
        raise TraceFormatError("the trace export contains no runs")
    return document
