"""One user's datasets, run labels and experiments behind the access facade; every call decides access first.

| object      | read                                             | change                              |
|-------------|--------------------------------------------------|-------------------------------------|
| dataset     | as a KB: admin, owner, its department, or every  | admin or owner (share, delete);     |
|             | signed-in user when public                       | anyone signed in imports (owns it)  |
| run label   | who may read the run (the owner and admins);     | who may read the run, into a dataset|
|             | its question as an item of its dataset           | they manage                         |
| KB badge    | who may read every KB of the group (counts only) | (follows from the labels)           |
| experiment  | the owner and admins (like traces)               | the owner and admins                |

Experiment runs go through ``Workbench.ask`` of the acting user: their KB access applies to every
question and the runs are their traces.  Applying swept thresholds goes through ``set_config``: a
member's personal values, an admin's global ones.

:class:`UserExperiments` is held by ``Workbench``, whose methods of the same names call it.  It gets
what it works with passed in: the acting user, that user's own access-checked calls on the facade
(:class:`UserCalls`), the dataset and experiment stores, the dataset guard and the trace store.
"""

from __future__ import annotations

import logging
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Sequence

from docmind_core.accounts.access import KbAccessGuard, can_read_trace, require_signed_in
from docmind_core.reports.compare import RunComparison, compare_runs
from docmind_core.reports.pair_verdict import GoldLabel
from docmind_core.errors import AccessDenied, NotFound
from docmind_core.experiments.datasets import (
    VERDICT_ALIASES, VERDICTS, Dataset, DatasetError, DatasetItem, DatasetStore, RunLabel, beir_corpus_files, read_beir,
    read_jsonl_file,
)
from docmind_core.answer.verdict import verdict_of
from docmind_core.experiments.badge import KbBadge, in_scope, kb_badge
from docmind_core.experiments.label_export import LabelRow, LangfuseKeys, label_rows_jsonl, push_to_langfuse
from docmind_core.experiments.experiment_store import ExperimentStore
from docmind_core.experiments.metrics import ExperimentReport
from docmind_core.experiments.records import Experiment, ExperimentError, Progress, Variant, describe_experiment
from docmind_core.experiments.results import (
    ExperimentResults, compute_results, items_digest, revision_of, stored_run_ids,
)
from docmind_core.experiments.runner import ExperimentAsker, ExperimentRunner
from docmind_core.experiments.sweep import SWEPT_KEYS, SweepPoint, SweepResult
from docmind_core.settings import GraderPatch, Settings
from docmind_core.store.db import Database
from docmind_core.store.traces import TraceRecord, TraceStore

if TYPE_CHECKING:
    from docmind_core.values import DocumentRecord, IngestOutcome, KnowledgeBase
    from docmind_core.accounts.users import User

log = logging.getLogger(__name__)

LABELLED_FROM_TRACES = "labelled runs of {user}"  # a run that asked no KB
LABELS_OF_KB = "labels of {kbs} by {user}"  # the per-KB labelled dataset of one labeller


class DatasetsAsKbs:
    """The guard's store protocol over datasets: a dataset is owned and shared like a KB."""

    def __init__(self, store: DatasetStore):
        self.store = store

    def get_kb(self, dataset_id: int) -> Dataset:
        return self.store.get(dataset_id)

    def list_kbs(self) -> list[Dataset]:
        return self.store.list()

    def update_kb(self, dataset_id: int, **fields: Any) -> None:
        self.store.update(dataset_id, **fields)


class UserCalls(ExperimentAsker, Protocol):
    """The acting user's own calls on the access facade (``Workbench``) that experiments build on; each
    decides access itself."""

    def settings(self) -> Settings: ...

    def get_kb(self, kb_id: int) -> "KnowledgeBase": ...

    def list_documents(self, kb_id: int) -> "list[DocumentRecord]": ...

    def get_trace(self, run_id: str) -> TraceRecord: ...

    def ingest(self, kb_id: int, paths: Sequence[Path | str]) -> "list[IngestOutcome]": ...

    def set_config(self, changes: dict[str, Any]) -> Settings: ...


class UserExperiments:
    """One acting user's datasets, run labels and experiments; every method decides access first."""

    def __init__(self, user: "User", calls: UserCalls, datasets: DatasetStore, experiments: ExperimentStore,
                 dataset_guard: KbAccessGuard, traces: TraceStore, db: Database):
        self.user = user
        self._calls = calls
        self._datasets = datasets
        self._experiments = experiments
        self._dataset_guard = dataset_guard  # over datasets (DatasetsAsKbs): owned and shared like KBs
        self._traces = traces
        self._db = db

    def _signed_in(self) -> "User":
        return require_signed_in(self.user)

    def _readable_dataset(self, dataset_id: int) -> Dataset:
        user = self._signed_in()
        try:
            dataset = self._datasets.get(dataset_id)
        except NotFound:
            dataset = None
        if dataset is None or not self._dataset_guard.can_read(user, dataset):  # type: ignore[arg-type]
            raise AccessDenied(f"{user.username} may not read dataset #{dataset_id} (or it does not exist)")
        return dataset

    def _managed_dataset(self, dataset_id: int) -> Dataset:
        dataset = self._readable_dataset(dataset_id)
        if not self._dataset_guard.can_manage(self.user, dataset):  # type: ignore[arg-type]
            raise AccessDenied(f"only the owner of dataset #{dataset_id} or an admin may change it")
        return dataset

    def _own_experiment(self, experiment_id: int) -> Experiment:
        user = self._signed_in()
        try:
            experiment = self._experiments.get(experiment_id)
        except NotFound:
            experiment = None
        if experiment is None or not can_read_trace(user, experiment.owner_id):
            raise AccessDenied(f"experiment #{experiment_id} is not one {user.username} may read "
                               "(or it does not exist)")
        return experiment

    # -- datasets -------------------------------------------------------------------
    def list_datasets(self) -> list[Dataset]:
        user = self._signed_in()
        guard = self._dataset_guard
        return [d for d in self._datasets.list() if guard.can_read(user, d)]  # type: ignore[arg-type]

    def get_dataset(self, name_or_id: str | int) -> Dataset:
        """A readable dataset by id or name; an unknown and an unreadable one get the same answer."""
        user = self._signed_in()
        if isinstance(name_or_id, int) or str(name_or_id).isdigit():
            return self._readable_dataset(int(name_or_id))
        found = self._datasets.find(str(name_or_id))
        if found is None or not self._dataset_guard.can_read(user, found):  # type: ignore[arg-type]
            raise AccessDenied(f"no dataset named '{name_or_id}' that {user.username} may read")
        return found

    def dataset_items(self, dataset_id: int, limit: int | None = None) -> list[DatasetItem]:
        self._readable_dataset(dataset_id)
        return self._datasets.items(dataset_id, limit)

    def import_dataset(self, name: str, path: Path | str, kb: str = "", description: str = "",
                       visibility: str = "private", limit: int | None = None, ingest_corpus: bool = False,
                       if_missing: bool = False) -> Dataset:
        """A new dataset owned by this user from a JSONL file or a BEIR folder.

        ``kb`` is the default KB of items that name none (required for BEIR).  ``ingest_corpus`` (BEIR)
        adds the corpus documents the dataset's questions are judged on, plus the rest of the corpus, to
        that KB (the user must manage it), as ``<corpus id>.txt``.  ``if_missing``: an existing dataset of
        that name that this user may read is returned as it is.
        """
        user = self._signed_in()
        if if_missing:
            existing = self._datasets.find(name)
            if existing is not None and self._dataset_guard.can_read(user, existing):  # type: ignore[arg-type]
                return existing
        path = Path(path)
        if kb:
            self._calls.kb_by_name(kb)  # refused when this user may not read it
        if path.is_dir():
            if not kb:
                raise DatasetError("a BEIR folder needs --kb: the knowledge base its corpus is (or goes) in")
            items = read_beir(path, limit=limit)
            source = "beir"
            if ingest_corpus:
                target = self._calls.kb_by_name(kb)
                with tempfile.TemporaryDirectory(prefix="docmind-beir-") as tmp:
                    files = beir_corpus_files(path, Path(tmp))
                    self._calls.ingest(target.id, files)  # the KB's owner or an admin
        elif path.is_file():
            items = read_jsonl_file(path)
            if limit:
                items = items[:limit]
            source = "jsonl"
        else:
            raise DatasetError(f"{path.name}: no such file or folder")
        if visibility not in ("private", "department", "public"):
            raise DatasetError(f"visibility must be private, department or public, got {visibility!r}")
        return self._datasets.create(name, items, description=description, owner_id=user.owner_key,
                                     department=user.department, visibility=visibility, source=source, kb_name=kb)

    def share_dataset(self, dataset_id: int, visibility: str) -> Dataset:
        self._managed_dataset(dataset_id)
        return self._dataset_guard.set_visibility(self.user, dataset_id, visibility)  # type: ignore[arg-type,return-value]

    def delete_dataset(self, dataset_id: int) -> None:
        self._managed_dataset(dataset_id)
        self._datasets.delete(dataset_id)

    # -- labels from traces -------------------------------------------------------------
    def label_run(self, run_id: str, verdict: str, gold_chunk_ids: Sequence[str] = (),
                  dataset: str | None = None, gold_doc_ids: Sequence[str] = ()) -> RunLabel:
        """Mark a run's answer right (``correct``) / ``partly`` / ``wrong`` / ``should_abstain``, and the right
        source: chunks the run found (``gold_chunk_ids``) or documents of its KBs by name (``gold_doc_ids``).

        Labelling a run again corrects its label.  The label keeps the verdict the answer was shown with and
        the run's KBs (the KB badge counts them); the run keeps its question, config snapshot and evidence.
        The question is added (or updated) as an item of ``dataset`` (default: this user's labelled dataset of
        the run's KBs, "labels of KB by NAME", created when missing; "labelled runs of NAME" for a run that
        asked none), with the run's KB, the gold and ``answerable = verdict != should_abstain``.
        """
        verdict = VERDICT_ALIASES.get(verdict, verdict)
        if verdict not in VERDICTS:
            raise DatasetError(f"verdict must be one of right, {', '.join(VERDICTS)}, got {verdict!r}")
        record = self._calls.get_trace(run_id)  # the owner or an admin
        user = self._signed_in()
        sources = {c.chunk_id for c in (record.done.sources if record.done else [])}
        unknown = [c for c in gold_chunk_ids if c not in sources]
        if unknown:
            raise DatasetError(f"gold chunks must be sources of the run; not: {', '.join(unknown[:3])}")
        kb_names = self._readable_kb_names(record.meta.kb_ids)
        self._check_gold_documents(record.meta.kb_ids, gold_doc_ids)
        name = dataset or (LABELS_OF_KB.format(kbs=" + ".join(kb_names), user=user.username) if kb_names
                           else LABELLED_FROM_TRACES.format(user=user.username))
        target = self._datasets.find(name)
        item = DatasetItem(question=record.meta.question, kb=kb_names[0] if kb_names else "",
                           gold_doc_ids=list(gold_doc_ids), gold_chunk_ids=list(gold_chunk_ids),
                           answerable=verdict != "should_abstain",
                           answers=[record.done.answer] if verdict == "correct" and record.done else [],
                           type="from_trace", source_run_id=run_id)
        previous = self._datasets.label(run_id)
        if target is None:
            target = self._datasets.create(name, [item], owner_id=user.owner_key, department=user.department,
                                           source="traces", kb_name=kb_names[0] if len(kb_names) == 1 else "")
            item_id = self._datasets.items(target.id)[-1].id
        else:
            self._managed_dataset(target.id)
            if previous is not None and previous.dataset_item_id is not None and any(
                    i.id == previous.dataset_item_id for i in self._datasets.items(target.id)):
                item_id = previous.dataset_item_id
                self._datasets.replace_item(item_id, item)
            else:
                item_id = self._datasets.add_items(target.id, [item])[0]
        answer_verdict = verdict_of(record.done).level if record.done else ""
        return self._datasets.set_label(RunLabel(run_id=run_id, verdict=verdict,  # type: ignore[arg-type]
                                                 gold_chunk_ids=list(gold_chunk_ids),
                                                 gold_doc_ids=list(gold_doc_ids), labelled_by=user.owner_key,
                                                 dataset_item_id=item_id, answer_verdict=answer_verdict,
                                                 kb_ids=list(record.meta.kb_ids)))

    def _check_gold_documents(self, kb_ids: Sequence[int], names: Sequence[str]) -> None:
        """A named right source must be a document of one of the run's KBs that this user may read."""
        if not names:
            return
        known: set[str] = set()
        for kb_id in kb_ids:
            try:
                known.update(d.name for d in self._calls.list_documents(kb_id))
            except (AccessDenied, NotFound):
                continue
        unknown = [n for n in names if n not in known]
        if unknown:
            raise DatasetError(f"the right source must be a document of the run's knowledge bases; not: "
                               f"{', '.join(unknown[:3])}")

    def run_label(self, run_id: str) -> RunLabel | None:
        """The label of a run this user may read; None when it has none."""
        self._calls.get_trace(run_id)
        return self._datasets.label(run_id)

    def run_labels(self, run_ids: Sequence[str]) -> dict[str, RunLabel]:
        """The labels of those of these runs that this user may read (one read; for a page of answers)."""
        readable = self._readable_run_owners(run_ids)
        return {label.run_id: label for label in self._datasets.labels(readable)}

    def list_labels(self, kb_ids: Sequence[int] | None = None) -> list[LabelRow]:
        """Labels of the runs this user may read (of the group ``kb_ids`` when given), oldest first, for review."""
        user = self._signed_in()
        labels = self._datasets.labels()
        if kb_ids is not None:
            labels = [label for label in labels if in_scope(label.kb_ids, kb_ids)]
        rows = self._run_rows([label.run_id for label in labels])
        names: dict[int, str] = {}
        out = []
        for label in labels:
            row = rows.get(label.run_id)
            if row is None or not can_read_trace(user, row[0]):
                continue
            for kb_id in label.kb_ids:
                if kb_id not in names:
                    found = self._readable_kb_names([kb_id])
                    names[kb_id] = found[0] if found else f"#{kb_id}"
            out.append(LabelRow(label=label, question=row[1], kb_names=[names[k] for k in label.kb_ids]))
        return out

    def remove_label(self, run_id: str) -> RunLabel:
        """Take back a run's label (and the dataset item it added)."""
        self._calls.get_trace(run_id)
        return self._datasets.delete_label(run_id)

    def export_labels(self, kb_ids: Sequence[int] | None = None) -> str:
        """The labels :meth:`list_labels` returns as JSONL, each line with its run's question, KBs, answer,
        verdict, evidence (sources) and config snapshot."""
        rows = self.list_labels(kb_ids)
        records = {r.run_id: r for r in self._traces.iter_many([row.label.run_id for row in rows])}
        return label_rows_jsonl(rows, records)

    def export_labels_to_langfuse(self, kb_ids: Sequence[int], env: Mapping[str, str],
                                  dataset_name: str = "") -> tuple[str, int]:
        """The labels of a KB group as a Langfuse dataset (created when missing); (its name, items sent).
        Refused when Langfuse is not configured (the keys in ``env``, as for tracing)."""
        names = [self._calls.get_kb(kb_id).name for kb_id in kb_ids]  # refused for a KB this user may not read
        keys = LangfuseKeys.from_env(env, self._calls.settings().tracing.langfuse_host)
        rows = self.list_labels(kb_ids)
        records = {r.run_id: r for r in self._traces.iter_many([row.label.run_id for row in rows])}
        name = dataset_name or f"docmind labels: {' + '.join(names)}"
        return name, push_to_langfuse(keys, name, rows, records)

    def kb_badge(self, kb_ids: Sequence[int]) -> KbBadge:
        """What the "Supported by the sources" verdict has earned in these KBs, from every label of their runs
        (counts only: the labels' questions stay with their runs).  Each KB must be one this user may read."""
        self._signed_in()
        if not kb_ids:
            raise DatasetError("a badge needs at least one knowledge base")
        names = [self._calls.get_kb(kb_id).name for kb_id in kb_ids]  # refused for a KB this user may not read
        return kb_badge(self._datasets.label_tallies(), kb_ids, names)

    def _run_rows(self, run_ids: Sequence[str]) -> dict[str, tuple[int | None, str]]:
        """run id -> (owner, question) of the stored runs among these, from the runs' rows only."""
        found: dict[str, tuple[int | None, str]] = {}
        wanted = list(dict.fromkeys(run_ids))
        for start in range(0, len(wanted), 500):  # SQLite's limit on bound parameters
            batch = wanted[start:start + 500]
            for run_id, owner, question in self._db.db.execute(
                    f"SELECT run_id, user_id, question FROM traces WHERE run_id IN ({', '.join('?' * len(batch))})",
                    batch).fetchall():
                found[run_id] = (owner, question)
        return found

    def _readable_run_owners(self, run_ids: Sequence[str]) -> list[str]:
        user = self._signed_in()
        return [run_id for run_id, (owner, _q) in self._run_rows(run_ids).items() if can_read_trace(user, owner)]

    def _readable_kb_names(self, kb_ids: Sequence[int]) -> list[str]:
        names = []
        for kb_id in kb_ids:
            try:
                names.append(self._calls.get_kb(kb_id).name)
            except (AccessDenied, NotFound):
                continue
        return names

    # -- experiments --------------------------------------------------------------------
    def create_experiment(self, name: str, dataset_id: int, variants: Sequence[Variant],
                          leave_gold_out: bool = False, limit: int | None = None) -> Experiment:
        """One readable dataset x these variants; owned by this user.  Nothing runs yet.

        ``name`` "" is made from the dataset and the variants ("orion-set: rule vs agentic"); the
        description is generated from the variants, this user's grader thresholds and the questions."""
        user = self._signed_in()
        dataset = self._readable_dataset(dataset_id)
        items = self._datasets.items(dataset_id, limit)
        variants = list(variants)
        name = name.strip() or f"{dataset.name}: {' vs '.join(v.name for v in variants)}"
        description = describe_experiment(variants, self._calls.settings().grader, leave_gold_out, limit,
                                          dataset.name)
        return self._experiments.create(name, dataset_id, variants, items, owner_id=user.owner_key,
                                        leave_gold_out=leave_gold_out, item_limit=limit, description=description)

    def list_experiments(self) -> list[Experiment]:
        user = self._signed_in()
        return [e for e in self._experiments.list() if can_read_trace(user, e.owner_id)]

    def get_experiment(self, experiment_id: int) -> Experiment:
        return self._own_experiment(experiment_id)

    def run_experiment(self, experiment_id: int, progress: Callable[[Progress], None] | None = None,
                       cancel: threading.Event | None = None, max_runs: int | None = None,
                       parallel: int | None = None) -> Progress:
        """Run (or resume) the experiment in this thread; returns its progress when it stops."""
        experiment = self._own_experiment(experiment_id)
        self._readable_dataset(experiment.dataset_id)
        limit = self._calls.settings().experiments.max_parallel
        runner = ExperimentRunner(self._calls, self._experiments, self._datasets,
                                  min(limit, parallel) if parallel else limit)
        return runner.run(experiment_id, progress=progress, cancel=cancel, max_runs=max_runs)

    def start_experiment(self, experiment_id: int) -> threading.Thread:
        """``run_experiment`` in a daemon thread (the page polls ``experiment_progress``)."""
        experiment = self._own_experiment(experiment_id)
        if ExperimentStore.runner_alive(experiment.state, experiment.heartbeat_at, experiment.runner):
            raise ExperimentError(f"experiment #{experiment_id} is already running")
        thread = threading.Thread(target=self._run_quietly, args=(experiment_id,), daemon=True,
                                  name=f"docmind-experiment-{experiment_id}")
        thread.start()
        return thread

    def _run_quietly(self, experiment_id: int) -> None:
        try:
            self.run_experiment(experiment_id)
        except Exception:  # noqa: BLE001 - the state row says where it stopped; a resume continues from there
            log.exception("experiment #%s stopped", experiment_id)

    def cancel_experiment(self, experiment_id: int) -> str:
        self._own_experiment(experiment_id)
        return self._experiments.request_cancel(experiment_id)

    def experiment_progress(self, experiment_id: int) -> Progress:
        experiment = self._own_experiment(experiment_id)
        return self._progress(experiment)

    def _progress(self, experiment: Experiment) -> Progress:
        """Of an experiment this call has just read (and decided access to)."""
        return self._experiments.progress(experiment.id, self._calls.settings().experiments.max_parallel,
                                          state=experiment.state)

    def experiment_results(self, experiment_id: int, reuse: ExperimentResults | None = None) -> ExperimentResults:
        """The experiment's scored runs, report, sweeps and export, from one batched load of its traces.

        ``reuse``: results this caller got before (a page keeps them across reruns); returned as they are
        when nothing changed since, else only the runs they lack are loaded.  Access is decided every time.
        """
        experiment = self._own_experiment(experiment_id)
        items = self._datasets.items(experiment.dataset_id)
        progress = self._progress(experiment)
        revision = revision_of(self._db, experiment, progress, items_digest(items))
        if reuse is not None and reuse.experiment.id == experiment.id and reuse.revision == revision:
            return reuse
        return compute_results(self._traces, experiment, progress, revision, items,
                               self._experiments.runs(experiment_id, ["done"]),
                               stored_run_ids(self._db, experiment_id), reuse)

    def experiment_report(self, experiment_id: int) -> ExperimentReport:
        """Metrics per variant with 95% bootstrap intervals and paired differences against the first variant."""
        return self.experiment_results(experiment_id).report

    def compare_experiment_runs(self, experiment_id: int, item_id: int, variant_a: str, variant_b: str,
                                gold_left_out: bool = False) -> RunComparison:
        """The step-aligned comparison of two variants' runs of one question (the drill-down)."""
        experiment = self._own_experiment(experiment_id)
        names = {v.id: v.name for v in experiment.variants}
        runs = {names[r.variant_id]: r.run_id for r in self._experiments.runs(experiment_id)
                if r.item_id == item_id and r.gold_left_out == gold_left_out and r.run_id}
        if variant_a not in runs or variant_b not in runs:
            raise NotFound(f"experiment #{experiment_id} has no runs of item #{item_id} for both variants")
        item = next((i for i in self._datasets.items(experiment.dataset_id) if i.id == item_id), None)
        # A labelled question lets the pair verdict count gold sources found; with its gold left out there is
        # nothing in the index to find, so the count would only say "0 of N" for both sides.
        gold = (GoldLabel(chunk_ids=item.gold_chunk_ids, doc_refs=item.gold_doc_ids)
                if item is not None and item.has_gold and not gold_left_out else None)
        return compare_runs(self._traces.get(runs[variant_a]), self._traces.get(runs[variant_b]), gold=gold)

    def sweep_experiment(self, experiment_id: int, variant: str | None = None) -> SweepResult:
        """Tiers of the experiment's stored runs re-computed over the threshold grid; no model call.  Each
        run keeps its recorded grader settings for the keys the grid does not set."""
        return self.experiment_results(experiment_id).sweep(self._calls.settings().grader, variant)

    def apply_thresholds(self, point: SweepPoint | GraderPatch | dict[str, Any]) -> Settings:
        """Make a sweep point this user's thresholds: personal values for a member, global for an admin.  A
        dict is read as a grader patch (``grader.`` optional before each name)."""
        patch = point.patch if isinstance(point, SweepPoint) else \
            point if isinstance(point, GraderPatch) else GraderPatch.of(point)
        if set(patch.changes()) - set(SWEPT_KEYS):
            raise ExperimentError(f"only {', '.join(f'grader.{k}' for k in SWEPT_KEYS)} are applied from a sweep")
        return self._calls.set_config(patch.dotted())

    def export_experiment(self, experiment_id: int) -> str:
        """The experiment, its report and every run's scores as one JSON document."""
        return self.experiment_results(experiment_id).export_json()
