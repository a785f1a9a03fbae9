"""Experiments: one dataset x N variants, each run through the normal pipeline and stored as a trace.

With ``leave_gold_out`` every item with gold documents is asked a second time with those documents
excluded from retrieval: an unanswerable question with strong distractors.

State lives in SQLite (``experiment_store.py``), so a runner that dies (crash, restart, Ctrl-C)
leaves rows that the next ``run`` picks up: rows left ``running`` by a runner whose heartbeat stopped
are asked again.  Cancelling sets the experiment to ``cancelling``; the runner stops starting rows,
cancels the runs in flight (they go back to pending) and ends ``cancelled``.  At most
``max_parallel`` runs are in flight at once.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol, Sequence

from docmind_core.errors import ConfigError, DocMindError
from docmind_core.events import Done, Event
from docmind_core.experiments.datasets import DatasetItem, DatasetStore, gold_document_ids
from docmind_core.experiments.experiment_store import ExperimentStore, runner_identity
from docmind_core.experiments.records import (
    Experiment, ExperimentError, ExperimentRun, ExperimentState, Progress, Variant,
)

if TYPE_CHECKING:
    from docmind_core.values import DocumentRecord, KnowledgeBase


class ExperimentAsker(Protocol):
    """What a runner needs of the access facade (``Workbench``): it asks as the acting user."""

    def ask(self, question: str, kb_ids: Sequence[int], *, mode: str, cancel: threading.Event | None,
            pair_id: str | None, overrides: dict[str, Any] | None, exclude_doc_ids: Sequence[int] | None,
            label: str) -> Iterator[Event]: ...

    def kb_by_name(self, name: str) -> "KnowledgeBase": ...

    def list_documents(self, kb_id: int) -> "list[DocumentRecord]": ...


HEARTBEAT_EVERY_S = 5.0

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
