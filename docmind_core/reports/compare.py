"""Comparing two stored runs, without any model call.

``compare_runs`` lines two traces up step by step (by event kind) and measures
how they differ: the evidence they ended with (Jaccard of source chunk ids),
their tool calls, score distributions, tiers, confidence, latency per stage,
tokens and configuration, plus a diff of the two answers (word by word, CJK
character by character, citation numbers left out since each run numbers its
own sources) and of their sources (which chunk each side used and cited).  The answer diff is aligned by
sentence (a word diff inside each changed sentence); two answers that share little are shown in two columns
instead, since a word diff of them interleaves two texts into neither.  Which run did better, and the names
of the two sides, come from ``pair_verdict``.  Re-grading stored runs lives in ``regrade``.
"""

from __future__ import annotations

import difflib
import json
import re
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Sequence

from docmind_core.text.excerpt import clip_words
from docmind_core.text.reasons import describe_reason
from docmind_core.values import CitationResult, RetrievedChunk
from docmind_core.settings import flat_snapshot
from docmind_core.reports.pair_verdict import (
    NOT_RECORDED, GoldLabel, PairVerdict, latency_ms, pair_verdict, seconds, side_labels, token_total, tokens_words,
)
from docmind_core.text.tokens import CITATION_MARKER_RE, sentences
from docmind_core.reports.timeline import RunDigest, TimelineRow, as_events, timeline, tool_call_item

# --------------------------------------------------------------------------
# Reading a trace record (duck-typed: the trace store's TraceRecord or a dict of its JSON form)
# --------------------------------------------------------------------------


def record_part(record: Any, name: str, default: Any = None) -> Any:
    if isinstance(record, dict):
        return record.get(name, default)
    return getattr(record, name, default)


def record_events(record: Any) -> list:
    return as_events(record_part(record, "events", []) or [])


# --------------------------------------------------------------------------
# Comparison
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class AlignedStep:
    kind: str
    a: TimelineRow | None
    b: TimelineRow | None


@dataclass(frozen=True)
class ChunkOverlap:
    jaccard: float  # |A ∩ B| / |A ∪ B| over source chunk ids; 1.0 when both are empty
    shared: list[str]
    only_a: list[str]
    only_b: list[str]


@dataclass(frozen=True)
class ScoreDistribution:
    scores: list[float]  # rerank score of every candidate, best first
    kept: int
    web: int
    top: float | None
    mean: float | None
    median: float | None


@dataclass(frozen=True)
class StageLatency:
    stage: str
    a_ms: float | None
    b_ms: float | None


@dataclass(frozen=True)
class ConfigDifference:
    key: str
    a: Any
    b: Any


@dataclass
class RunSide:
    """The headline facts of one side of a comparison."""

    run_id: str
    question: str
    mode: str
    tier: str
    top_score: float | None
    confidence: float | None
    band: str
    verdict: str  # the answer's one verdict, its label and number ("Partly supported 0.59"); "" before done
    coverage: float | None
    stop_reason: str
    tool_calls: list[dict[str, Any]]
    tokens: dict[str, int]
    sources: int
    label: str = ""  # the path asked for and run, and settings when both sides read the same
    latency_ms: float | None = None  # the run's total; None when it never finished
    token_total: int | None = None  # prompt + completion; None when calls were made but not counted


DiffOp = Literal["equal", "delete", "insert"]


@dataclass(frozen=True)
class DiffPiece:
    op: DiffOp  # delete: only in A's answer; insert: only in B's
    text: str


SentenceOp = Literal["equal", "changed", "only_a", "only_b"]
DiffLayout = Literal["same", "sentences", "columns"]
SHARE_LITTLE = 0.4  # below this word similarity the answers are shown in two columns, not diffed
PAIR_SENTENCES = 0.5  # two sentences this similar are one sentence changed, not one removed and one added


@dataclass(frozen=True)
class SentenceRow:
    """One line of the sentence-aligned diff; ``pieces`` is the word diff of a changed pair."""

    op: SentenceOp
    a: str = ""
    b: str = ""
    pieces: list[DiffPiece] = field(default_factory=list)


@dataclass(frozen=True)
class AnswerDiff:
    pieces: list[DiffPiece]  # A's answer is equal+delete pieces in order, B's is equal+insert
    similarity: float  # difflib ratio over the tokens, 1.0 for the same text
    rows: list[SentenceRow] = field(default_factory=list)  # the answers aligned by sentence
    layout: DiffLayout = "sentences"  # "columns": they share too little to diff; "same": identical
    answer_a: str = ""  # both answers without their [n] markers, for the two-column layout
    answer_b: str = ""

    @property
    def identical(self) -> bool:
        return self.similarity == 1.0


@dataclass(frozen=True)
class SourceDiffRow:
    chunk_id: str
    document: str
    preview: str
    a_index: int | None  # its [n] in A's answer, None when A did not use it
    b_index: int | None
    cited_a: bool
    cited_b: bool

    @property
    def side(self) -> str:
        return "both" if self.a_index and self.b_index else ("only A" if self.a_index else "only B")


@dataclass
class RunComparison:
    a: RunSide
    b: RunSide
    steps: list[AlignedStep]
    chunk_overlap: ChunkOverlap
    scores_a: ScoreDistribution
    scores_b: ScoreDistribution
    latency: list[StageLatency]
    config_differences: list[ConfigDifference] = field(default_factory=list)
    answer_diff: AnswerDiff = field(default_factory=lambda: AnswerDiff([], 1.0))
    source_diff: list[SourceDiffRow] = field(default_factory=list)

    label_a: str = "A"
    label_b: str = "B"
    verdict: PairVerdict | None = None  # which side did better and why

    def summary_rows(self) -> list[dict[str, Any]]:
        """Metric / A / B rows for a table, every cell in words: a value a run did not record reads "not
        recorded", never a blank, "None" or a 0 that was never counted."""
        def fmt(v: Any) -> str:
            if v is None or v == "":
                return NOT_RECORDED
            return str(round(v, 3) if isinstance(v, float) else v)
        a, b = self.a, self.b
        rows = [
            # one verdict per answer; confidence and band stay in the JSON, not beside it on screen
            ("path", a.label, b.label), ("verdict", a.verdict, b.verdict), ("evidence grade", a.tier, b.tier),
            ("top rerank score", a.top_score, b.top_score),
            ("citation coverage", a.coverage, b.coverage),
            ("stop reason", describe_reason(a.stop_reason), describe_reason(b.stop_reason)),
            ("tool calls", len(a.tool_calls), len(b.tool_calls)), ("sources", a.sources, b.sources),
            ("latency", seconds(a.latency_ms), seconds(b.latency_ms)),
            ("tokens", tokens_words(a.token_total, a.tokens.get("calls", 0)),
             tokens_words(b.token_total, b.tokens.get("calls", 0))),
            ("prompt tokens", _counted(a, "prompt"), _counted(b, "prompt")),
            ("completion tokens", _counted(a, "completion"), _counted(b, "completion")),
            ("model calls", a.tokens.get("calls", 0), b.tokens.get("calls", 0)),
            ("chunk overlap (Jaccard)", self.chunk_overlap.jaccard, self.chunk_overlap.jaccard),
        ]
        return [{"metric": m, "A": fmt(x), "B": fmt(y)} for m, x, y in rows]

    def to_dict(self) -> dict[str, Any]:
        data = {"type": "docmind.comparison", **asdict(self)}
        data["source_diff"] = [{**row, "side": r.side} for row, r in zip(data["source_diff"], self.source_diff)]
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=2, default=str)


def _counted(side: RunSide, part: str) -> int | None:
    """A token count, None (not recorded) when the run's model calls did not report it."""
    counted = side.tokens.get(part, 0)
    return None if side.token_total is None or (side.tokens.get("calls") and not counted) else counted


def _side(digest: RunDigest, label: str = "") -> RunSide:
    done, grade = digest.done, digest.grade
    return RunSide(
        run_id=digest.run_id, question=digest.question, mode=digest.mode, tier=digest.tier,
        top_score=grade.top_score if grade else None,
        confidence=done.confidence.score if done and done.confidence else None,
        band=done.confidence.band if done and done.confidence else "",
        verdict=_verdict_words(digest),
        coverage=done.citations.coverage if done else None, stop_reason=digest.stop_reason,
        tool_calls=[tool_call_item(c) for c in digest.tool_calls], tokens=digest.tokens,
        sources=len(digest.sources), label=label, latency_ms=latency_ms(digest), token_total=token_total(digest))


def _verdict_words(digest: RunDigest) -> str:
    verdict = digest.verdict
    if verdict is None:
        return ""
    return verdict.label + (f" {verdict.score:.2f}" if verdict.score is not None else "")


def align_steps(rows_a: Sequence[TimelineRow], rows_b: Sequence[TimelineRow]) -> list[AlignedStep]:
    """Pair the two timelines step by step by event kind; a step one run lacks gets a gap."""
    kinds_a, kinds_b = [r.kind for r in rows_a], [r.kind for r in rows_b]
    steps: list[AlignedStep] = []
    matcher = difflib.SequenceMatcher(a=kinds_a, b=kinds_b, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            steps += [AlignedStep(kinds_a[i], rows_a[i], rows_b[j]) for i, j in zip(range(i1, i2), range(j1, j2))]
            continue
        for i in range(i1, i2):
            steps.append(AlignedStep(kinds_a[i], rows_a[i], None))
        for j in range(j1, j2):
            steps.append(AlignedStep(kinds_b[j], None, rows_b[j]))
    return steps


def chunk_overlap(sources_a: Sequence[RetrievedChunk], sources_b: Sequence[RetrievedChunk]) -> ChunkOverlap:
    ids_a = list(dict.fromkeys(s.chunk_id for s in sources_a))
    ids_b = list(dict.fromkeys(s.chunk_id for s in sources_b))
    set_a, set_b = set(ids_a), set(ids_b)
    union = set_a | set_b
    return ChunkOverlap(
        jaccard=len(set_a & set_b) / len(union) if union else 1.0,
        shared=[i for i in ids_a if i in set_b], only_a=[i for i in ids_a if i not in set_b],
        only_b=[i for i in ids_b if i not in set_a])


def score_distribution(candidates: Sequence[RetrievedChunk]) -> ScoreDistribution:
    """Over the candidates the reranker scored (those drawn): counts and statistics describe the same set."""
    scored = [c for c in candidates if c.scores.rerank is not None]
    scores = sorted((c.scores.rerank for c in scored), reverse=True)
    return ScoreDistribution(
        scores=scores, kept=sum(1 for c in scored if c.kept), web=sum(1 for c in scored if c.origin == "web"),
        top=scores[0] if scores else None, mean=statistics.fmean(scores) if scores else None,
        median=statistics.median(scores) if scores else None)


def stage_latencies(timings_a: dict[str, float], timings_b: dict[str, float]) -> list[StageLatency]:
    stages = list(dict.fromkeys([*timings_a, *timings_b]))
    return [StageLatency(s, timings_a.get(s), timings_b.get(s)) for s in stages]


def config_differences(config_a: Any, config_b: Any) -> list[ConfigDifference]:
    flat_a, flat_b = flat_snapshot(config_a), flat_snapshot(config_b)
    keys = sorted(set(flat_a) | set(flat_b))
    return [ConfigDifference(k, flat_a.get(k), flat_b.get(k)) for k in keys if flat_a.get(k) != flat_b.get(k)]


_CJK_CHARS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
# numbers with separators stay whole ("1,490", "3.2.1"); each CJK character is a token; words keep inner - ' .
_DIFF_TOKEN_RE = re.compile(rf"\d+(?:[.,]\d+)+|[{_CJK_CHARS}]|[^\W{_CJK_CHARS}]+(?:[-'’.][^\W{_CJK_CHARS}]+)*|\s+|.",
                            re.UNICODE)
_MARKER_WITH_SPACE_RE = re.compile(rf"\s*{CITATION_MARKER_RE.pattern}")


def _diff_tokens(answer: str) -> list[str]:
    return _DIFF_TOKEN_RE.findall(_MARKER_WITH_SPACE_RE.sub("", answer).strip())


def answer_diff(answer_a: str, answer_b: str) -> AnswerDiff:
    """Two answers, their [n] markers left out, aligned by sentence with a word diff (CJK per character) inside
    each changed sentence; shown in two columns when they share little."""
    pieces, similarity = word_diff(answer_a, answer_b)
    plain_a = _MARKER_WITH_SPACE_RE.sub("", answer_a).strip()
    plain_b = _MARKER_WITH_SPACE_RE.sub("", answer_b).strip()
    rows = sentence_rows(sentences(plain_a), sentences(plain_b))
    if similarity == 1.0:
        layout: DiffLayout = "same"
    elif similarity < SHARE_LITTLE or _aligned_share(rows) < SHARE_LITTLE:
        layout = "columns"
    else:
        layout = "sentences"
    return AnswerDiff(pieces, similarity, rows, layout, plain_a, plain_b)


def _aligned_share(rows: Sequence[SentenceRow]) -> float:
    """The share of both answers' sentences that have a counterpart on the other side (same or changed)."""
    paired = sum(2 for r in rows if r.op in ("equal", "changed"))
    return paired / max(1, paired + sum(1 for r in rows if r.op in ("only_a", "only_b")))


def sentence_rows(sentences_a: Sequence[str], sentences_b: Sequence[str]) -> list[SentenceRow]:
    """The two sentence lists aligned (difflib over whole sentences); inside a replaced block, a sentence of A
    is paired with the next sentence of B at least PAIR_SENTENCES alike, the rest stand alone."""
    matcher = difflib.SequenceMatcher(a=list(sentences_a), b=list(sentences_b), autojunk=False)
    rows: list[SentenceRow] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            rows += [SentenceRow("equal", s, s) for s in sentences_a[i1:i2]]
            continue
        next_b = j1
        for sentence_a in sentences_a[i1:i2]:
            match = next((j for j in range(next_b, j2) if _alike(sentence_a, sentences_b[j])), None)
            if match is None:
                rows.append(SentenceRow("only_a", a=sentence_a))
                continue
            rows += [SentenceRow("only_b", b=s) for s in sentences_b[next_b:match]]
            rows.append(SentenceRow("changed", sentence_a, sentences_b[match], word_diff(sentence_a,
                                                                                       sentences_b[match])[0]))
            next_b = match + 1
        rows += [SentenceRow("only_b", b=s) for s in sentences_b[next_b:j2]]
    return rows


def _alike(sentence_a: str, sentence_b: str) -> bool:
    return word_diff(sentence_a, sentence_b)[1] >= PAIR_SENTENCES


def word_diff(answer_a: str, answer_b: str) -> tuple[list[DiffPiece], float]:
    """Word-level diff pieces of two texts (CJK per character), their [n] markers left out, and similarity."""
    ta, tb = _diff_tokens(answer_a), _diff_tokens(answer_b)
    matcher = difflib.SequenceMatcher(a=ta, b=tb, autojunk=False)
    pieces: list[DiffPiece] = []

    def add(op: DiffOp, tokens: list[str]) -> None:
        text = "".join(tokens)
        if not text:
            return
        if pieces and pieces[-1].op == op:
            pieces[-1] = DiffPiece(op, pieces[-1].text + text)
        else:
            pieces.append(DiffPiece(op, text))

    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            add("equal", ta[i1:i2])
        else:
            add("delete", ta[i1:i2])
            add("insert", tb[j1:j2])
    similarity = 1.0 if ta == tb else round(matcher.ratio(), 4)
    return pieces, similarity


def source_diff(sources_a: Sequence[RetrievedChunk], sources_b: Sequence[RetrievedChunk],
                citations_a: CitationResult | None = None,
                citations_b: CitationResult | None = None) -> list[SourceDiffRow]:
    """Every source chunk of either answer: its number on each side and whether that side cited it."""
    index_a = {s.chunk_id: i for i, s in reversed(list(enumerate(sources_a, start=1)))}
    index_b = {s.chunk_id: i for i, s in reversed(list(enumerate(sources_b, start=1)))}
    cited_a = {u.chunk_id for u in (citations_a.used_sources if citations_a else [])}
    cited_b = {u.chunk_id for u in (citations_b.used_sources if citations_b else [])}
    chunks = {c.chunk_id: c for c in [*sources_b, *sources_a]}
    order = list(dict.fromkeys([*(s.chunk_id for s in sources_a), *(s.chunk_id for s in sources_b)]))
    return [SourceDiffRow(chunk_id=cid, document=chunks[cid].document,
                          preview=clip_words(chunks[cid].text, 160, flatten=True), a_index=index_a.get(cid),
                          b_index=index_b.get(cid), cited_a=cid in cited_a, cited_b=cid in cited_b)
            for cid in order]


def compare_runs(a: Any, b: Any, gold: GoldLabel | None = None) -> RunComparison:
    """Step-aligned comparison of two stored runs (``TraceRecord`` or its JSON dict form), with which did better
    (``gold``: the question's labelled sources, when it has them)."""
    digest_a, digest_b = RunDigest.from_events(record_events(a)), RunDigest.from_events(record_events(b))
    differences = config_differences(record_part(a, "config"), record_part(b, "config"))
    label_a, label_b = side_labels(digest_a, digest_b, differences)
    return RunComparison(
        a=_side(digest_a, label_a), b=_side(digest_b, label_b), label_a=label_a, label_b=label_b,
        verdict=pair_verdict(digest_a, digest_b, label_a, label_b, gold),
        steps=align_steps(timeline(digest_a.events), timeline(digest_b.events)),
        chunk_overlap=chunk_overlap(digest_a.sources, digest_b.sources),
        scores_a=score_distribution(digest_a.candidates), scores_b=score_distribution(digest_b.candidates),
        latency=stage_latencies(digest_a.timings_ms, digest_b.timings_ms),
        config_differences=differences,
        answer_diff=answer_diff(digest_a.answer, digest_b.answer),
        source_diff=source_diff(digest_a.sources, digest_b.sources,
                                digest_a.done.citations if digest_a.done else None,
                                digest_b.done.citations if digest_b.done else None))
