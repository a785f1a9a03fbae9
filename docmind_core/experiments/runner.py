"""Experiments: one dataset x N variants, each run through the normal pipeline and stored as a trace.

A variant is a requested mode (AUTO / RULE_PLANNER / AGENTIC: the ``Mode`` names the traces show; the
short spellings auto / rule / agentic are accepted too, in any case) plus config overrides laid over the acting user's
settings for its runs only (``Workbench.ask(overrides=...)``: nothing is written to the config store).
With ``leave_gold_out`` every item with gold documents is asked a second time with those documents
excluded from retrieval: an unanswerable question with strong distractors.

State lives in SQLite (``experiments``, ``experiment_runs``): each (variant, item, gold-left-out) is a
row that goes pending -> running -> done | failed, so a runner that dies (crash, restart, Ctrl-C) leaves
rows that the next ``run`` picks up: rows left ``running`` by a runner whose heartbeat stopped are
asked again.  Cancelling sets the experiment to ``cancelling``; the runner stops starting rows, cancels
the runs in flight (they go back to pending) and ends ``cancelled``.  At most ``max_parallel`` runs are
in flight at once.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any, Callable, Iterator, Literal, Protocol, Sequence

from pydantic import BaseModel, Field, field_validator

from docmind_core.errors import ConfigError, DocMindError, ExperimentError, NotFound
from docmind_core.events import Done, Event
from docmind_core.experiments.datasets import DatasetItem, DatasetStore, gold_document_ids
from docmind_core.ingest.leases import process_start
from docmind_core.models import Mode, RequestedMode
from docmind_core.settings import Settings, is_personal_key
from docmind_core.store.db import Database, utcnow

if TYPE_CHECKING:
    from docmind_core.models import DocumentRecord, KnowledgeBase


class ExperimentAsker(Protocol):
    """What a runner needs of the access facade (``Workbench``): it asks as the acting user."""

    def ask(self, question: str, kb_ids: Sequence[int], *, mode: str, cancel: threading.Event | None,
            pair_id: str | None, overrides: dict[str, Any] | None, exclude_doc_ids: Sequence[int] | None,
            label: str) -> Iterator[Event]: ...

    def kb_by_name(self, name: str) -> "KnowledgeBase": ...

    def list_documents(self, kb_id: int) -> "list[DocumentRecord]": ...

RunMode = Literal["auto", "rule", "agentic"]  # stored and asked as RequestedMode values
# The name a variant's mode is shown with: the Mode the forced path runs (AUTO: the router decides).
MODE_NAMES: dict[str, str] = {RequestedMode.AUTO.value: "AUTO", RequestedMode.RULE.value: Mode.RULE_PLANNER.value,
                              RequestedMode.AGENTIC.value: Mode.AGENTIC.value}
MODE_CHOICES = "AUTO, RULE_PLANNER or AGENTIC"
ExperimentState = Literal["pending", "running", "cancelling", "cancelled", "done"]
STALE_AFTER_S = 30.0  # a runner whose heartbeat is older than this is gone: its rows may be taken over
HEARTBEAT_EVERY_S = 5.0
MAX_VARIANTS = 8


class Variant(BaseModel):
    id: int | None = None
    name: str
    mode: RunMode = "auto"
    overrides: dict[str, Any] = Field(default_factory=dict)

    @field_validator("mode", mode="before")
    @classmethod
    def _one_vocabulary(cls, value: Any) -> Any:
        key = value.value if isinstance(value, (Mode, RequestedMode)) else value
        if isinstance(key, str):
            try:
                return RequestedMode(key).value  # every spelling RequestedMode reads, in any case
            except ValueError:
                raise ValueError(f"mode {key!r} is not one of {MODE_CHOICES} (or auto, rule, agentic)") from None
        return value

    @property
    def mode_name(self) -> str:
        """AUTO, RULE_PLANNER or AGENTIC: the mode as the rest of DocMind names it."""
        return MODE_NAMES[self.mode]

    def describe(self) -> str:
        """``name: MODE`` and its overrides, e.g. ``strict: RULE_PLANNER, grader.high_threshold=0.95``."""
        extra = "".join(f", {k}={v}" for k, v in self.overrides.items())
        return f"{self.name}: {self.mode_name}{extra}"

    @field_validator("overrides")
    @classmethod
    def _tunable(cls, value: dict[str, Any]) -> dict[str, Any]:
        shared = [k for k in value if not is_personal_key(k)]
        if shared:
            raise ValueError(f"a variant may only override grader.*, agentic.*, retrieval.* and rag.* keys, "
                             f"not {', '.join(shared)}")
        try:
            Settings().with_overrides(value)
        except ConfigError as exc:  # names the bad key or value
            raise ValueError(str(exc)) from None
        return value


class Experiment(BaseModel):
    id: int
    name: str
    description: str = ""  # generated at creation: variants, thresholds, questions (describe_experiment)
    dataset_id: int
    owner_id: int | None = None
    leave_gold_out: bool = False
    item_limit: int | None = None
    state: ExperimentState = "pending"
    runner: str = ""
    heartbeat_at: float = 0.0
    created_at: str = ""
    updated_at: str = ""
    variants: list[Variant] = Field(default_factory=list)

    @property
    def trace_label(self) -> str:
        return f"experiment:{self.id}"


class ExperimentRun(BaseModel):
    """One (variant, item, gold-left-out) row."""

    id: int
    variant_id: int
    item_id: int
    gold_left_out: bool = False
    state: Literal["pending", "running", "done", "failed"] = "pending"
    run_id: str | None = None
    error: str = ""
    started_at: float | None = None
    finished_at: float | None = None


class Progress(BaseModel):
    state: ExperimentState
    total: int
    done: int
    failed: int
    running: int
    pending: int
    elapsed_s: float  # sum over finished rows of their wall time, divided by the parallelism used
    eta_s: float | None  # None until one row finished

    @property
    def fraction(self) -> float:
        return (self.done + self.failed) / self.total if self.total else 1.0


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


def parse_variant(text: str) -> Variant:
    """``NAME:MODE[:key=value,key=value]``, e.g. ``strict:rule:grader.high_threshold=0.75``."""
    from docmind_core.settings import coerce

    parts = text.split(":", 2)
    if len(parts) < 2 or not parts[0].strip():
        raise ExperimentError(f"variant {text!r}: expected NAME:MODE[:key=value,...] (MODE {MODE_CHOICES})")
    overrides: dict[str, Any] = {}
    if len(parts) == 3 and parts[2].strip():
        for pair in parts[2].split(","):
            key, sep, value = pair.partition("=")
            if not sep:
                raise ExperimentError(f"variant {text!r}: override {pair!r} is not key=value")
            overrides[key.strip()] = coerce(key.strip(), value.strip())
    try:
        return Variant(name=parts[0].strip(), mode=parts[1].strip(), overrides=overrides)  # type: ignore[arg-type]
    except ValueError as exc:
        raise ExperimentError(f"variant {text!r}: {_first_error(exc)}") from None


def describe_experiment(variants: Sequence[Variant], grader: Any, leave_gold_out: bool, limit: int | None,
                        dataset_name: str) -> str:
    """One paragraph on what an experiment compares: each variant's mode and overrides, the grader
    thresholds its runs start from (``grader``: the creator's settings; a variant's overrides win), and
    the questions asked."""
    questions = f"the first {limit} questions of {dataset_name}" if limit else f"every question of {dataset_name}"
    if leave_gold_out:
        questions += ", each answerable one asked again with its gold documents left out"
    thresholds = (f"grader.high_threshold={grader.high_threshold}, grader.low_threshold={grader.low_threshold}, "
                  f"grader.gray_zone_mode={grader.gray_zone_mode}")
    return (f"Variants: {'; '.join(v.describe() for v in variants)}. Thresholds: {thresholds}. "
            f"Questions: {questions}.")


def _first_error(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        return str(first.get("msg", exc)).removeprefix("Value error, ")
    return str(exc)


# --------------------------------------------------------------------------
# The store
# --------------------------------------------------------------------------

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


# --------------------------------------------------------------------------
# The runner
# --------------------------------------------------------------------------

ProgressCallback = Callable[[Progress], None]


class ExperimentRunner:
    """Runs an experiment's pending rows through ``bench.ask`` (the acting user's access applies)."""

    def __init__(self, bench: ExperimentAsker, store: ExperimentStore, datasets: DatasetStore, max_parallel: int):
        self.bench = bench
        self.store = store
        self.datasets = datasets
        self.max_parallel = max(1, int(max_parallel))
        self.runner_id = runner_identity()
        self._kb_cache: dict[str, tuple[int, dict[str, int]]] = {}
        self._lock = threading.Lock()

    def run(self, experiment_id: int, progress: ProgressCallback | None = None,
            cancel: threading.Event | None = None, retry_failed: bool = True,
            max_runs: int | None = None) -> Progress:
        """Run every pending row (resuming where a previous runner stopped); returns the final progress.

        ``cancel`` (or the experiment's state turning ``cancelling``) stops it: rows in flight are
        cancelled and go back to pending.  ``max_runs`` stops after that many rows (tests of resume).
        """
        experiment = self.store.get(experiment_id)
        dataset = self.datasets.get(experiment.dataset_id)
        self.store.take_over(experiment_id, self.runner_id, retry_failed)
        stop = cancel or threading.Event()
        variants = {v.id: v for v in experiment.variants}
        items = {i.id: i for i in self.datasets.items(experiment.dataset_id)}
        pending = self.store.runs(experiment_id, ["pending"])
        if max_runs is not None:
            pending = pending[:max_runs]
        in_flight: dict[Future, tuple[ExperimentRun, threading.Event]] = {}
        last_beat = time.monotonic()
        cancelled = False
        with ThreadPoolExecutor(max_workers=self.max_parallel, thread_name_prefix="docmind-experiment") as pool:
            queue = list(pending)
            while queue or in_flight:
                if stop.is_set() and not cancelled:
                    cancelled = True
                while queue and len(in_flight) < self.max_parallel and not cancelled:
                    row = queue.pop(0)
                    run_cancel = threading.Event()
                    self.store.mark_running(row.id)
                    future = pool.submit(self._run_one, experiment, dataset.kb_name, row,
                                         variants[row.variant_id], items.get(row.item_id), run_cancel)
                    in_flight[future] = (row, run_cancel)
                if not in_flight:
                    break
                finished, _ = wait(list(in_flight), timeout=1.0, return_when=FIRST_COMPLETED)
                for future in finished:
                    row, _flag = in_flight.pop(future)
                    state, run_id, error = future.result()
                    self.store.mark_finished(row.id, state, run_id, error)
                if time.monotonic() - last_beat >= HEARTBEAT_EVERY_S or finished:
                    last_beat = time.monotonic()
                    if self.store.heartbeat(experiment_id) == "cancelling":
                        stop.set()
                if stop.is_set():
                    cancelled = True
                    for _row, flag in in_flight.values():
                        flag.set()
                if progress is not None and finished:
                    progress(self.store.progress(experiment_id, self.max_parallel))
        left = self.store.runs(experiment_id, ["pending", "running"])
        final: ExperimentState = "cancelled" if cancelled else ("done" if not left else "pending")
        self.store.set_state(experiment_id, final)
        result = self.store.progress(experiment_id, self.max_parallel)
        if progress is not None:
            progress(result)
        return result

    # -- one row -------------------------------------------------------------------
    def _run_one(self, experiment: Experiment, default_kb: str, row: ExperimentRun, variant: Variant,
                 item: DatasetItem | None, cancel: threading.Event) -> tuple[str, str | None, str]:
        """(state, run id, error) of one row; a run cancelled by a stop goes back to pending."""
        if item is None:
            return "failed", None, f"dataset item #{row.item_id} no longer exists"
        run_id: str | None = None
        try:
            kb_id, documents = self._kb(item.kb or default_kb)
            excluded = sorted(gold_document_ids(item.gold_doc_ids, documents)) if row.gold_left_out else []
            if row.gold_left_out and not excluded:
                return "failed", None, "none of the gold documents is in the knowledge base: nothing to leave out"
            done: Done | None = None
            for event in self.bench.ask(item.question, [kb_id], mode=variant.mode, cancel=cancel,
                                        pair_id=f"experiment-{experiment.id}-item-{row.item_id}-{int(row.gold_left_out)}",
                                        overrides=variant.overrides or None, exclude_doc_ids=excluded,
                                        label=experiment.trace_label):
                if event.kind == "run":
                    run_id = event.run_id
                elif isinstance(event, Done):
                    done = event
            if cancel.is_set() or (done is not None and done.cancelled):
                return "pending", run_id, "cancelled; asked again on resume"
            if done is None:
                return "failed", run_id, "the run ended without a done event"
            return "done", run_id, ""
        except (DocMindError, ConfigError) as exc:
            return "failed", run_id, str(exc)
        except Exception as exc:  # noqa: BLE001 - one broken row never stops the experiment
            return "failed", run_id, f"{type(exc).__name__}: {exc}"

    def _kb(self, name: str) -> tuple[int, dict[str, int]]:
        if not name:
            raise ExperimentError("the item names no knowledge base and the dataset has no default one")
        with self._lock:
            cached = self._kb_cache.get(name)
        if cached is None:
            kb = self.bench.kb_by_name(name)  # AccessDenied when this user may not read it
            cached = (kb.id, {d.name: d.id for d in self.bench.list_documents(kb.id)})
            with self._lock:
                self._kb_cache[name] = cached
        return cached
