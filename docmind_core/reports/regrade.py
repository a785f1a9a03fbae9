"""Re-grading stored runs, without any model call.

``regrade`` answers "what if the grader thresholds had been different?" by
running the CRAG grader again on the rerank scores a trace already holds, with
the settings ``regrade_settings`` gives the run.  The threshold sweep
(``experiments/sweep.py``) uses the same rule.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

from docmind_core.answer.selected_doc import QUESTION_GRADED
from docmind_core.answer.grade import CragGrader
from docmind_core.reports.compare import record_events, record_part
from docmind_core.errors import ConfigError
from docmind_core.events import Graded, Reranked
from docmind_core.values import Mode, RetrievedChunk
from docmind_core.settings import GraderPatch, GraderSettings, SettingsSnapshot
from docmind_core.reports.timeline import RunDigest

@dataclass(frozen=True)
class RegradeRow:
    run_id: str
    question: str
    mode: str
    old_tier: str  # the tier of the run's first grading, as recorded
    new_tier: str  # with the overridden grader settings
    top_score: float | None
    lex_coverage: float | None
    reason: str

    @property
    def changed(self) -> bool:
        return bool(self.new_tier) and self.old_tier != self.new_tier

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "changed": self.changed}


def recorded_grader(config: Any, except_keys: tuple[str, ...] = ()) -> GraderPatch:
    """The grader settings a run's config snapshot recorded (read by ``SettingsSnapshot``, which leaves out a
    key that is no longer a setting); ConfigError names a recorded value of the wrong type."""
    return SettingsSnapshot.read(config).grader(except_keys)


def regrade_settings(recorded: GraderPatch, live: GraderSettings, on_top: GraderPatch | None = None) -> GraderSettings:
    """The one rule for the grader settings a stored run is graded again with (the what-if regrade and the
    threshold sweep): the keys it recorded over the live settings (a key it did not record takes the value the
    user runs with now), ``on_top`` (what-if overrides, swept keys) over both.

    Raises ConfigError naming what does not validate.
    """
    return recorded.then(on_top).over(live)


SELECTED_DOC_NOT_REGRADED = ("not regraded: the user selected these documents, so their tier is that choice, "
                             "not the grader's thresholds")


def _selected_documents(digest: RunDigest) -> bool:
    """A selected-documents run whose tier is the user's choice (a summary); a question asked of the selected
    documents is graded by thresholds and regrades like any other run."""
    graded_question = digest.grade is not None and digest.grade.reason.startswith(QUESTION_GRADED)
    return any(r.mode is Mode.SELECTED_DOC for r in digest.retrievals) and not graded_question


def _graded_input(digest: RunDigest) -> list[RetrievedChunk] | None:
    """The chunks the first grading saw: the kept candidates of the rerank just before it, best first.  None
    when nothing was graded by thresholds (a selected-documents run is HIGH by the user's choice)."""
    if _selected_documents(digest):
        return None
    rerank: Reranked | None = None
    for ev in digest.events:
        if isinstance(ev, Reranked):
            rerank = ev
        elif isinstance(ev, Graded):
            break
    if rerank is None:
        return None
    kept = [c for c in rerank.candidates if c.kept] or list(rerank.candidates)
    return sorted(kept, key=lambda c: c.scores.rerank if c.scores.rerank is not None else -1.0, reverse=True)


def graded_input(record: Any) -> tuple[str, list[RetrievedChunk] | None]:
    """(query, the chunks the run's first grading saw) of a stored run; None when nothing was graded."""
    digest = RunDigest.from_events(record_events(record))
    return digest.query, (_graded_input(digest) if digest.grades else None)


def regrade(records: Sequence[Any], grader_overrides: GraderPatch | Mapping[str, Any],
            live: GraderSettings) -> list[RegradeRow]:
    """Recompute the CRAG tier of stored runs with other grader settings; no model is called.

    Each run is graded with ``regrade_settings``: its recorded grader keys over ``live`` (the acting user's
    settings), the overrides on top.  Invalid overrides are refused up front with ConfigError; a run whose
    recorded settings do not validate with them gets a row that says why, and the others are regraded.
    """
    try:  # the user's own values: refused before touching any run
        overrides = grader_overrides if isinstance(grader_overrides, GraderPatch) else GraderPatch.of(grader_overrides)
        regrade_settings(GraderPatch(), live, overrides)
    except ConfigError as exc:
        raise ConfigError(f"the what-if grader settings are invalid: {exc}") from None
    grader = CragGrader()
    rows: list[RegradeRow] = []
    for record in records:
        digest = RunDigest.from_events(record_events(record))
        old = digest.grades[0].grade if digest.grades else None
        chunks = _graded_input(digest)
        if chunks is None or old is None:
            reason = SELECTED_DOC_NOT_REGRADED if _selected_documents(digest) else "no retrieval was graded in this run"
            rows.append(RegradeRow(digest.run_id, digest.question, digest.mode, old.tier.value if old else "", "",
                                   None, None, reason))
            continue
        try:
            settings = regrade_settings(recorded_grader(record_part(record, "config")), live, overrides)
        except ConfigError as exc:
            rows.append(RegradeRow(digest.run_id, digest.question, digest.mode, old.tier.value, "", None, None,
                                   f"not regraded: its recorded grader settings do not validate with these: {exc}"))
            continue
        result = grader.grade(digest.query, chunks, settings)
        rows.append(RegradeRow(digest.run_id, digest.question, digest.mode, old.tier.value, result.tier.value,
                               result.top_score, result.lex_coverage, result.reason))
    return rows
