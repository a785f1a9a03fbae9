"""What an experiment measured: per-run scores, per-variant metrics with 95% bootstrap intervals, paired
differences between variants on the same questions, and the tier confusion matrix.

Scores read only the stored trace and the item's labels; nothing is re-run.

* gold-in-context recall: share of the gold documents (or gold chunks) among the answer's sources;
  "gold in context" means all gold documents are there (any gold chunk, when only chunks are labelled);
* nDCG@10: the last rerank's candidates, best first, a document at the rank of its best chunk;
* answer containment: a gold answer (each string of an all-of answer) appears in the answer, compared
  without case or white space;
* abstention: the answer cites nothing and says the sources do not hold the answer (or no evidence
  was found); abstention accuracy is measured on unanswerable questions (labelled so, or asked with
  their gold documents left out);
* per-citation support: each sentence the model cited checked against the chunk it cites with
  ``citations.sentence_support`` (sentences with fewer salient terms than that check needs are not
  counted);
* tier confusion: the run's tier against answerable + gold in context / answerable, gold not in
  context / unanswerable.

Intervals are percentile bootstraps over questions (fixed seed, so a report is reproducible); a paired
difference resamples the per-question differences of the two variants on the questions both ran.
"""

from __future__ import annotations

import math
import re
import statistics
import unicodedata
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np

from docmind_core.answer.citations import ABSENCE_RE, cited_sentences, sentence_support
from docmind_core.eval.retrieval_eval import ndcg_at_k
from docmind_core.experiments.datasets import DatasetItem, matches_gold
from docmind_core.values import RetrievedChunk
from docmind_core.reports.timeline import RunDigest

BOOTSTRAP_SAMPLES = 2000
CONFIDENCE = 0.95
ABSTAIN_TEMPLATES = ("fallback", "retrieval_incomplete")
TIERS = ("HIGH", "AMBIGUOUS", "LOW", "none")
ANSWERABILITY = ("answerable, gold in context", "answerable, gold not in context", "answerable, no gold label",
                 "unanswerable")

# metric name -> (label, which runs it is measured on)
METRICS: dict[str, tuple[str, str]] = {
    "gold_recall": ("gold-in-context recall", "answerable questions with gold labels"),
    "ndcg10": ("nDCG@10", "answerable questions with gold labels"),
    "answer_containment": ("answer containment", "answerable questions with gold answers"),
    "abstention_accuracy": ("abstention accuracy", "unanswerable questions"),
    "abstained_on_answerable": ("abstained on answerable", "answerable questions"),
    "citation_support": ("cited sentences supported", "runs with checkable citations"),
    "high_on_unanswerable": ("HIGH on unanswerable", "unanswerable questions"),
}


# --------------------------------------------------------------------------
# One run
# --------------------------------------------------------------------------

@dataclass
class RunScore:
    """What one stored run scored against its item's labels; None: not measured on this run."""

    item_id: int
    variant: str
    gold_left_out: bool
    answerable: bool
    question: str
    type: str = ""
    run_id: str = ""
    failed: bool = False
    errors: int = 0  # error events in the run (a stage failed; the answer may say so instead of answering)
    gold_recall: float | None = None
    gold_in_context: bool | None = None
    ndcg10: float | None = None
    answer_containment: float | None = None
    abstained: bool = False
    abstention_accuracy: float | None = None
    abstained_on_answerable: float | None = None
    citations_checked: int = 0
    citations_supported: int = 0
    citation_support: float | None = None
    high_on_unanswerable: float | None = None
    tier: str = "none"
    top_score: float | None = None
    mode: str = ""
    stop_reason: str = ""
    tool_calls: int = 0
    rounds: int = 0
    latency_ms: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def key(self) -> tuple[int, bool]:
        """The question this run answered: the same item asked with and without its gold is two questions."""
        return self.item_id, self.gold_left_out

    @property
    def answerability(self) -> str:
        if not self.answerable:
            return "unanswerable"
        if self.gold_in_context is None:
            return "answerable, no gold label"
        return "answerable, gold in context" if self.gold_in_context else "answerable, gold not in context"


def normalise_answer(text: str) -> str:
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text).lower())


def contains_answer(answer: str, answers: Sequence[str | Sequence[str]]) -> bool:
    """A gold answer is in ``answer``: a string, or every string of a list (case and spaces ignored)."""
    body = normalise_answer(answer)
    for gold in answers:
        parts = [gold] if isinstance(gold, str) else list(gold)
        parts = [normalise_answer(p) for p in parts if p and p.strip()]
        if parts and all(p in body for p in parts):
            return True
    return False


def _gold_refs_of(chunk: RetrievedChunk, gold_docs: Sequence[str]) -> list[str]:
    return [ref for ref in gold_docs if matches_gold(ref, chunk.document)]


def gold_recall(sources: Sequence[RetrievedChunk], item: DatasetItem) -> float | None:
    if item.gold_doc_ids:
        found = {ref for c in sources if c.origin == "kb" for ref in _gold_refs_of(c, item.gold_doc_ids)}
        return len(found) / len(set(item.gold_doc_ids))
    if item.gold_chunk_ids:
        ids = {c.chunk_id for c in sources} | {c.parent_id for c in sources if c.parent_id}
        return len(ids & set(item.gold_chunk_ids)) / len(set(item.gold_chunk_ids))
    return None


def gold_ndcg10(candidates: Sequence[RetrievedChunk], item: DatasetItem) -> float | None:
    ranked = sorted((c for c in candidates if c.origin == "kb"),
                    key=lambda c: (c.scores.rerank if c.scores.rerank is not None else -1.0, c.scores.fused or 0.0),
                    reverse=True)
    if item.gold_doc_ids:
        names = []
        for c in ranked:
            refs = _gold_refs_of(c, item.gold_doc_ids)
            names.append(refs[0] if refs else f"\0{c.document}")
        return ndcg_at_k(list(dict.fromkeys(names)), {ref: 1 for ref in item.gold_doc_ids}, 10)
    if item.gold_chunk_ids:
        return ndcg_at_k(list(dict.fromkeys(c.chunk_id for c in ranked)), {c: 1 for c in item.gold_chunk_ids}, 10)
    return None


def abstained(digest: RunDigest) -> bool:
    """The answer asserts nothing cited and says the sources lack the answer (or no evidence was found)."""
    template = digest.answer_started.prompt if digest.answer_started is not None else ""
    if template in ABSTAIN_TEMPLATES:
        return True
    done = digest.done
    cited = done.citations.cited_sentences if done is not None else 0
    return cited == 0 and bool(ABSENCE_RE.search(digest.answer) or re.search(
        r"cannot answer|can't answer|无法(?:根据|回答)|不能回答", digest.answer, re.IGNORECASE))


def citation_support(digest: RunDigest) -> tuple[int, int]:
    """(checked, supported) over the sentences the model itself cited (inferred citations excluded); each
    marker's sentence is the one ``citations.cited_sentences`` gives it (the rule coverage counts with)."""
    done = digest.done
    if done is None or not done.sources:
        return 0, 0
    checked = supported = 0
    seen: set[tuple[int, int]] = set()
    for cited in cited_sentences(done.answer):
        if not (1 <= cited.index <= len(done.sources)) or not cited.text.strip():
            continue
        key = (cited.start, cited.index)
        if key in seen:
            continue
        seen.add(key)
        support = sentence_support(cited.text, [done.sources[cited.index - 1]])
        if not support.checkable:
            continue  # too little to check, or it says the sources lack something: neither way
        checked += 1
        supported += bool(support.sources)
    return checked, supported


def score_run(record: Any, item: DatasetItem, variant: str, gold_left_out: bool) -> RunScore:
    """Score one stored run (a ``TraceRecord``) against its item's labels."""
    events = record.events if hasattr(record, "events") else record["events"]
    digest = RunDigest.from_events(events)
    answerable = item.answerable and not gold_left_out
    score = RunScore(item_id=int(item.id or 0), variant=variant, gold_left_out=gold_left_out, answerable=answerable,
                     question=item.question, type=item.type, run_id=digest.run_id, failed=digest.done is None)
    if digest.done is None:
        return score
    done = digest.done
    score.errors = len(digest.errors)
    sources = list(done.sources)
    if answerable and item.has_gold:
        score.gold_recall = gold_recall(sources, item)
        score.gold_in_context = (score.gold_recall or 0.0) >= 1.0 if item.gold_doc_ids else (score.gold_recall or 0) > 0
        score.ndcg10 = gold_ndcg10(digest.candidates, item)
    score.abstained = abstained(digest)
    if answerable:
        if item.answers:
            score.answer_containment = 1.0 if contains_answer(done.answer, item.answers) else 0.0
        score.abstained_on_answerable = 1.0 if score.abstained else 0.0
    else:
        score.abstention_accuracy = 1.0 if score.abstained else 0.0
    score.citations_checked, score.citations_supported = citation_support(digest)
    if score.citations_checked:
        score.citation_support = score.citations_supported / score.citations_checked
    grade = digest.grade
    score.tier = grade.tier.value if grade is not None else "none"
    score.top_score = grade.top_score if grade is not None else None
    if not answerable:
        score.high_on_unanswerable = 1.0 if score.tier == "HIGH" else 0.0
    score.mode = done.mode
    score.stop_reason = digest.stop_reason or "-"
    score.tool_calls = len(digest.tool_calls)
    score.rounds = digest.retrieved.rounds if digest.retrieved is not None else 0
    score.latency_ms = float(done.timings_ms.get("total", done.t_ms))
    tokens = digest.tokens
    score.prompt_tokens, score.completion_tokens = tokens["prompt"], tokens["completion"]
    return score


# --------------------------------------------------------------------------
# Intervals
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class Interval:
    mean: float | None
    low: float | None
    high: float | None
    n: int

    def text(self, digits: int = 3) -> str:
        if self.mean is None:
            return "n/a"
        if self.low is None or self.high is None:
            return f"{self.mean:.{digits}f} (n={self.n}, no interval)"
        return f"{self.mean:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}] (n={self.n})"


def bootstrap_interval(values: Sequence[float], samples: int = BOOTSTRAP_SAMPLES, confidence: float = CONFIDENCE,
                       seed: int = 0) -> Interval:
    """Mean and percentile-bootstrap interval of the mean; resamples the values with replacement."""
    data = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=np.float64)
    if data.size == 0:
        return Interval(None, None, None, 0)
    mean = float(data.mean())
    if data.size == 1:  # one value says nothing of the spread: no interval rather than a zero-width one
        return Interval(round(mean, 6), None, None, 1)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(samples, data.size))].mean(axis=1)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return Interval(round(mean, 6), round(float(low), 6), round(float(high), 6), int(data.size))


@dataclass(frozen=True)
class PairedDifference:
    metric: str
    a: str
    b: str
    difference: Interval  # mean of (b - a) over the questions both variants were measured on

    @property
    def significant(self) -> bool:
        """The interval excludes zero."""
        d = self.difference
        return d.mean is not None and d.low is not None and d.high is not None and d.n > 1 \
            and (d.low > 0 or d.high < 0)


def paired_difference(metric: str, a: Sequence[RunScore], b: Sequence[RunScore], name_a: str, name_b: str,
                      seed: int = 0) -> PairedDifference:
    values_a = {s.key: getattr(s, metric) for s in a if getattr(s, metric) is not None}
    values_b = {s.key: getattr(s, metric) for s in b if getattr(s, metric) is not None}
    shared = sorted(set(values_a) & set(values_b))
    diffs = [float(values_b[k]) - float(values_a[k]) for k in shared]
    return PairedDifference(metric, name_a, name_b, bootstrap_interval(diffs, seed=seed))


# --------------------------------------------------------------------------
# Per variant
# --------------------------------------------------------------------------

def confusion_matrix(scores: Sequence[RunScore]) -> dict[str, dict[str, int]]:
    """answerability -> tier -> run count (failed runs left out)."""
    matrix = {row: {tier: 0 for tier in TIERS} for row in ANSWERABILITY}
    for s in scores:
        if not s.failed:
            matrix[s.answerability][s.tier if s.tier in TIERS else "none"] += 1
    return matrix


def percentile(values: Sequence[float], q: float) -> float | None:
    data = sorted(values)
    if not data:
        return None
    return round(float(np.percentile(np.asarray(data), q)), 2)


@dataclass
class VariantMetrics:
    name: str
    mode: str
    overrides: dict[str, Any]
    runs: int
    failed: int
    metrics: dict[str, Interval] = field(default_factory=dict)
    cited_unsupported: int = 0
    citations_checked: int = 0
    runs_with_errors: int = 0
    confusion: dict[str, dict[str, int]] = field(default_factory=dict)
    routes: dict[str, int] = field(default_factory=dict)
    stop_reasons: dict[str, int] = field(default_factory=dict)
    tool_calls_mean: float | None = None
    rounds_mean: float | None = None
    latency_p50_ms: float | None = None
    latency_p95_ms: float | None = None
    prompt_tokens_mean: float | None = None
    completion_tokens_mean: float | None = None


def _counts(values: Sequence[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def variant_metrics(name: str, mode: str, overrides: dict[str, Any], scores: Sequence[RunScore]) -> VariantMetrics:
    ok = [s for s in scores if not s.failed]
    out = VariantMetrics(name=name, mode=mode, overrides=dict(overrides), runs=len(scores),
                         failed=len(scores) - len(ok))
    for metric in METRICS:
        out.metrics[metric] = bootstrap_interval([getattr(s, metric) for s in ok if getattr(s, metric) is not None])
    out.runs_with_errors = sum(1 for s in ok if s.errors)
    out.citations_checked = sum(s.citations_checked for s in ok)
    out.cited_unsupported = sum(s.citations_checked - s.citations_supported for s in ok)
    out.confusion = confusion_matrix(ok)
    out.routes = _counts([s.mode for s in ok])
    out.stop_reasons = _counts([s.stop_reason for s in ok])
    if ok:
        out.tool_calls_mean = round(statistics.fmean(s.tool_calls for s in ok), 3)
        out.rounds_mean = round(statistics.fmean(s.rounds for s in ok), 3)
        out.latency_p50_ms = percentile([s.latency_ms for s in ok], 50)
        out.latency_p95_ms = percentile([s.latency_ms for s in ok], 95)
        out.prompt_tokens_mean = round(statistics.fmean(s.prompt_tokens for s in ok), 1)
        out.completion_tokens_mean = round(statistics.fmean(s.completion_tokens for s in ok), 1)
    return out


@dataclass
class QuestionRow:
    """One question across variants, for the drill-down (each variant's run id opens its trace)."""

    item_id: int
    gold_left_out: bool
    question: str
    answerable: bool
    runs: dict[str, str]  # variant -> run id
    tiers: dict[str, str]
    contains: dict[str, float | None]
    gold_recall: dict[str, float | None]
    abstained: dict[str, bool]


@dataclass
class ExperimentReport:
    experiment_id: int
    name: str
    variants: list[VariantMetrics]
    differences: list[PairedDifference]
    questions: list[QuestionRow]

    def to_dict(self) -> dict[str, Any]:
        return {"type": "docmind.experiment_report", **asdict(self)}


def build_report(experiment_id: int, name: str, variants: Sequence[tuple[str, str, dict[str, Any]]],
                 scores: Sequence[RunScore]) -> ExperimentReport:
    """Metrics of every variant and the paired difference of each later variant against the first."""
    by_variant = {v[0]: [s for s in scores if s.variant == v[0]] for v in variants}
    metrics = [variant_metrics(n, mode, overrides, by_variant[n]) for n, mode, overrides in variants]
    differences: list[PairedDifference] = []
    base = variants[0][0] if variants else ""
    for other, _mode, _overrides in variants[1:]:
        for metric in METRICS:
            differences.append(paired_difference(metric, by_variant[base], by_variant[other], base, other))
    rows: dict[tuple[int, bool], QuestionRow] = {}
    for s in scores:
        row = rows.setdefault(s.key, QuestionRow(s.item_id, s.gold_left_out, s.question, s.answerable, {}, {}, {},
                                                 {}, {}))
        row.runs[s.variant] = s.run_id
        row.tiers[s.variant] = s.tier if not s.failed else "failed"
        row.contains[s.variant] = s.answer_containment
        row.gold_recall[s.variant] = s.gold_recall
        row.abstained[s.variant] = s.abstained
    return ExperimentReport(experiment_id, name, metrics, differences, [rows[k] for k in sorted(rows)])
