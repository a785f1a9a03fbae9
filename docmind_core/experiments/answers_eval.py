"""``docmind eval answers``: how right a language model's answers are, per mode, against labelled gold facts.

Each labelled question runs once per mode (rule, agentic, auto) through the whole pipeline of the
configured model (any OpenAI-compatible endpoint) or of the offline engine, the baseline.  An answer is
*right* when it holds a gold fact of its question: a labelled answer is a string, or a list whose strings
must all appear (``"answers": [["28 W", "45 W"]]``), case and spaces ignored; an unanswerable question
is answered right by an abstention.  Beside it each run reports its confidence band (a wrong answer in
the HIGH band is the failure that matters most), citations, tool calls and how each printed call was
repaired, the arguments the settings overrode, and the time of each stage.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Sequence

from docmind_core.events import Event
from docmind_core.experiments.datasets import DatasetItem
from docmind_core.experiments.metrics import abstained, contains_answer
from docmind_core.reports.timeline import RunDigest

MODES = ("rule", "agentic", "auto")
STAGES = ("understanding", "retrieval", "generation", "total")


@dataclass
class AnswerRow:
    """One question in one mode."""

    item: str  # the item's external id (q01) or its number
    question: str
    mode: str
    route: str = ""  # the path the run took (RULE_PLANNER / AGENTIC / ...)
    right: bool | None = None  # None: the item has no gold facts to check
    abstained: bool = False
    band: str = "-"
    tier: str = "-"
    citations: int = 0  # sources the answer cites
    tool_calls: int = 0
    repairs: dict[str, int] = field(default_factory=dict)  # printed calls by dialect (repaired_from)
    adjusted: int = 0  # calls whose arguments the settings moved (top_k floor / ceiling)
    model_calls: int = 0
    fallbacks: int = 0
    errors: int = 0
    stop_reason: str = ""
    timings_ms: dict[str, float] = field(default_factory=dict)
    answer: str = ""
    failed: str = ""  # the run raised or ended without a Done event

    @property
    def wrong_in_high(self) -> bool:
        return self.right is False and self.band == "HIGH"


def score_answer(events: Sequence[Event], item: DatasetItem, mode: str) -> AnswerRow:
    """One run's events against its item's gold facts."""
    digest = RunDigest.from_events(events)
    row = AnswerRow(item=item.external_id or str(item.id or ""), question=item.question, mode=mode)
    done = digest.done
    if done is None:
        row.failed = "the run ended without an answer"
        return row
    row.route = done.mode
    row.answer = done.answer
    row.abstained = abstained(digest)
    if not item.answerable:
        row.right = row.abstained
    elif item.answers:
        row.right = contains_answer(done.answer, item.answers)
    row.band = done.confidence.band if done.confidence is not None else "-"
    row.tier = digest.tier or "-"
    row.citations = len(done.citations.used_sources)
    calls = digest.tool_calls
    row.tool_calls = len(calls)
    row.repairs = dict(Counter(c.repaired_from for c in calls if c.repaired_from))
    row.adjusted = sum(1 for c in calls if c.adjusted)
    row.model_calls = len(done.model_calls)
    row.fallbacks = len(digest.fallbacks)
    row.errors = len(digest.errors)
    row.stop_reason = digest.stop_reason
    row.timings_ms = {k: round(v, 1) for k, v in done.timings_ms.items() if k in STAGES}
    return row


def summarise(rows: Sequence[AnswerRow]) -> dict[str, Any]:
    """One mode's totals: right / judged, wrong answers in HIGH, bands, means and time percentiles."""
    judged = [r for r in rows if r.right is not None]
    repairs: Counter[str] = Counter()
    for r in rows:
        repairs.update(r.repairs)
    stages = {}
    for stage in STAGES:
        values = [r.timings_ms[stage] for r in rows if stage in r.timings_ms]
        if values:
            stages[stage] = {"p50_ms": round(statistics.median(values), 1), "max_ms": round(max(values), 1)}
    return {
        "questions": len(rows),
        "right": sum(1 for r in judged if r.right),
        "judged": len(judged),
        "wrong_in_high": sum(1 for r in rows if r.wrong_in_high),
        "failed": sum(1 for r in rows if r.failed),
        "bands": dict(Counter(r.band for r in rows)),
        "mean_citations": _mean([r.citations for r in rows]),
        "mean_tool_calls": _mean([r.tool_calls for r in rows]),
        "repairs": dict(repairs),
        "adjusted_calls": sum(r.adjusted for r in rows),
        "fallbacks": sum(r.fallbacks for r in rows),
        "errors": sum(r.errors for r in rows),
        "stages": stages,
    }


def _mean(values: Sequence[float]) -> float:
    return round(sum(values) / len(values), 2) if values else 0.0


def run_answers_eval(ask: Callable[[DatasetItem, str], Iterable[Event]], items: Sequence[DatasetItem],
                     modes: Sequence[str], backend: str = "",
                     progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Every item in every mode through ``ask(item, mode)`` (the run's events); a run that raises is a failed
    row, and the others still run."""
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise ValueError(f"unknown mode(s) {', '.join(unknown)}: choose from {', '.join(MODES)}")
    if not items:
        raise ValueError("the dataset has no questions")
    rows: list[AnswerRow] = []
    for mode in modes:
        for n, item in enumerate(items, start=1):
            try:
                row = score_answer(list(ask(item, mode)), item, mode)
            except Exception as exc:  # noqa: BLE001 - one failed run is a row of the table, not the end of it
                row = AnswerRow(item=item.external_id or str(item.id or ""), question=item.question, mode=mode,
                                failed=f"{type(exc).__name__}: {exc}")
            rows.append(row)
            if progress is not None:
                verdict = {True: "right", False: "WRONG", None: "not judged"}[row.right]
                progress(f"[{mode} {n}/{len(items)}] {row.item}: {row.failed or verdict}, band {row.band}, "
                         f"{row.timings_ms.get('total', 0) / 1000:.1f} s")
    return {"backend": backend, "modes": {m: summarise([r for r in rows if r.mode == m]) for m in modes},
            "rows": [asdict(r) | {"wrong_in_high": r.wrong_in_high} for r in rows]}


def format_report(report: dict[str, Any]) -> str:
    """The per-question table and the per-mode summary, as plain text."""
    lines = [f"backend: {report['backend'] or '-'}", ""]
    header = f"{'item':<6} {'mode':<8} {'route':<13} {'right':<6} {'band':<7} {'cites':>5} {'calls':>5} " \
             f"{'repairs':<22} {'underst.':>9} {'retrieval':>10} {'answer':>9} {'total':>9}"
    lines.append(header)
    for row in report["rows"]:
        verdict = {True: "yes", False: "NO", None: "-"}[row["right"]] if not row["failed"] else "FAIL"
        repairs = ",".join(f"{k}:{v}" for k, v in sorted(row["repairs"].items())) or "-"
        t = row["timings_ms"]
        lines.append(f"{row['item']:<6} {row['mode']:<8} {row['route'] or '-':<13} {verdict:<6} {row['band']:<7} "
                     f"{row['citations']:>5} {row['tool_calls']:>5} {repairs[:22]:<22} "
                     + " ".join(f"{_seconds(t.get(s)):>{w}}" for s, w in
                                (("understanding", 9), ("retrieval", 10), ("generation", 9), ("total", 9))))
    lines += ["", f"{'mode':<8} {'right':>7} {'wrong in HIGH':>14} {'failed':>7} {'bands':<28} {'calls':>6} "
                  f"{'cites':>6} {'adjusted':>8} {'p50 total':>10} {'max total':>10}"]
    for mode, s in report["modes"].items():
        bands = " ".join(f"{k}:{v}" for k, v in sorted(s["bands"].items()))
        total = s["stages"].get("total", {})
        lines.append(f"{mode:<8} {s['right']:>3}/{s['judged']:<3} {s['wrong_in_high']:>14} {s['failed']:>7} "
                     f"{bands:<28} {s['mean_tool_calls']:>6} {s['mean_citations']:>6} {s['adjusted_calls']:>8} "
                     f"{_seconds(total.get('p50_ms')):>10} {_seconds(total.get('max_ms')):>10}")
    return "\n".join(lines)


def _seconds(ms: float | None) -> str:
    return "-" if ms is None else f"{ms / 1000:.1f} s"
