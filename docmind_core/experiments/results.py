"""What an experiment's stored runs give, computed once: each run's scores and its sweep input, the
report, the sweeps and the export, from one batched load of the runs' traces.

A page reruns its script on every click.  ``ExperimentResults`` carries a ``revision``: the experiment's
progress, which of its done rows have a trace, and the dataset items they are scored against.  A caller
that keeps the object hands it back (``Workbench.experiment_results(reuse=...)``): when the revision is
unchanged it is returned as it is, else only the runs it has not scored yet are loaded (a finished run
never changes; a relabelled dataset scores every run again).  Sweeps are kept per (variant, live grader
settings), the export once.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Sequence

from docmind_core.experiments.datasets import DatasetItem
from docmind_core.experiments.metrics import ExperimentReport, RunScore, build_report, score_run
from docmind_core.experiments.records import Experiment, ExperimentRun, Progress
from docmind_core.experiments.sweep import SweepInput, SweepResult, sweep, sweep_input
from docmind_core.settings import GraderSettings
from docmind_core.store.db import Database
from docmind_core.store.traces import TraceStore

RunKey = tuple[int, str]  # (experiment row id, run id): a resumed row asked again is another run


@dataclass
class ScoredRun:
    score: RunScore
    sweep: SweepInput | None  # None: no retrieval was graded in the run


@dataclass
class ExperimentResults:
    experiment: Experiment
    progress: Progress
    revision: str
    items_digest: str
    runs: dict[RunKey, ScoredRun]  # the done rows whose trace exists, in row order
    report: ExperimentReport
    _sweeps: dict[tuple[str | None, str], SweepResult] = field(default_factory=dict, repr=False)
    _export: str | None = field(default=None, repr=False)

    @property
    def scores(self) -> list[RunScore]:
        return [r.score for r in self.runs.values()]

    def sweep(self, live: GraderSettings, variant: str | None = None) -> SweepResult:
        """Tiers of the runs (of ``variant``, or all) re-computed over the threshold grid; ``live`` marks the
        user's thresholds and fills grader keys a run's snapshot lacks."""
        key = (variant, live.model_dump_json())
        if key not in self._sweeps:
            chosen = [r for r in self.runs.values() if not variant or r.score.variant == variant]
            inputs = [r.sweep for r in chosen if r.sweep is not None]
            self._sweeps[key] = sweep(inputs, live, skipped=len(chosen) - len(inputs))
        return self._sweeps[key]

    def export_json(self) -> str:
        """The experiment, its progress, its report and every run's scores as one JSON document."""
        if self._export is None:
            document = {"format": "docmind-experiment", "version": 1,
                        "experiment": self.experiment.model_dump(mode="json"),
                        "progress": self.progress.model_dump(mode="json"),
                        "report": self.report.to_dict(), "runs": [asdict(s) for s in self.scores]}
            self._export = json.dumps(document, ensure_ascii=False, indent=1, default=str)
        return self._export


def items_digest(items: Sequence[DatasetItem]) -> str:
    return hashlib.sha1("\n".join(i.model_dump_json() for i in items).encode("utf-8")).hexdigest()


def revision_of(db: Database, experiment: Experiment, progress: Progress, digest: str) -> str:
    """Changes whenever the results could: a row finished (or was asked again), a run's trace was deleted,
    the experiment's state moved, or the dataset items were changed."""
    rows = db.db.execute(
        "SELECT COUNT(*), TOTAL(r.id), TOTAL(r.finished_at), COUNT(t.run_id) "
        "FROM experiment_runs r LEFT JOIN traces t ON t.run_id = r.run_id "
        "WHERE r.experiment_id = ? AND r.state = 'done'", [int(experiment.id)]).fetchone()
    return json.dumps([progress.model_dump(mode="json"), list(rows), digest], default=str)


def stored_run_ids(db: Database, experiment_id: int) -> set[str]:
    """The run ids of the experiment's done rows whose trace is still stored."""
    return {r[0] for r in db.db.execute(
        "SELECT r.run_id FROM experiment_runs r JOIN traces t ON t.run_id = r.run_id "
        "WHERE r.experiment_id = ? AND r.state = 'done'", [int(experiment_id)]).fetchall()}


def compute_results(traces: TraceStore, experiment: Experiment, progress: Progress, revision: str,
                    items: Sequence[DatasetItem], rows: Sequence[ExperimentRun], stored: set[str],
                    reuse: ExperimentResults | None = None) -> ExperimentResults:
    """Score the done ``rows`` whose trace is ``stored`` (a deleted run no longer counts): runs ``reuse``
    already scored against the same items are taken from it, the rest are loaded from the trace store in
    batches (each trace once)."""
    digest = items_digest(items)
    known = reuse.runs if reuse is not None and reuse.experiment.id == experiment.id \
        and reuse.items_digest == digest else {}
    by_id = {i.id: i for i in items}
    names = {v.id: v.name for v in experiment.variants}
    wanted = [r for r in rows if r.run_id in stored and r.item_id in by_id]
    missing = {r.run_id: r for r in wanted if (r.id, r.run_id) not in known}
    loaded: dict[RunKey, ScoredRun] = {}
    for record in traces.iter_many(list(missing)):
        row = missing[record.run_id]
        score = score_run(record, by_id[row.item_id], names[row.variant_id], row.gold_left_out)
        loaded[(row.id, record.run_id)] = ScoredRun(score, sweep_input(
            record, score.variant, positive=bool(score.answerable and score.gold_in_context),
            unanswerable=not score.answerable))
    runs: dict[RunKey, ScoredRun] = {}
    for r in wanted:
        key = (r.id, str(r.run_id))
        found = known.get(key) or loaded.get(key)
        if found is not None:  # else the trace was deleted since: the row no longer counts
            runs[key] = found
    variants = [(v.name, v.mode, v.overrides) for v in experiment.variants]
    report = build_report(experiment.id, experiment.name, variants, [s.score for s in runs.values()])
    return ExperimentResults(experiment=experiment, progress=progress, revision=revision, items_digest=digest,
                             runs=runs, report=report)
