"""Which of two compared runs did better, and what each one is called.

A comparison showed two columns of facts and left the reader to weigh them; two runs of one question were both
labelled by the path they ended on ("A: AGENTIC · B: AGENTIC").  Here each side is named by the path it was
asked for, the path it ran and, when both read the same, the settings that differ; and one line says which did
better.  Quality decides first, in this order, the first aspect that differs settling it: gold sources found
(only when the question is labelled), the answer's verdict, its supported claims, the evidence grade.  When the
answers are equally good, cost decides: total latency, then tokens.  Pure data: no Streamlit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal, Sequence

from docmind_core.reports.timeline import RunDigest
from docmind_core.values import RetrievedChunk

NOT_RECORDED = "not recorded"
Side = Literal["A", "B", "tie", "unknown"]

# an abstention ("No answer in the sources") beats an answer the sources contradict or do not back
_VERDICT_RANK = {"supported": 3, "partly_supported": 2, "no_answer": 1, "not_supported": 0}
_GRADE_RANK = {"HIGH": 2, "AMBIGUOUS": 1, "LOW": 0}
_MODE_WORDS = {"RULE_PLANNER": "rule planner", "RULE": "rule planner", "AGENTIC": "agentic",
               "SELECTED_DOC": "selected documents", "NONE": "no retrieval", "AUTO": "auto"}  # "rule": as requested
COST_TIE_SHARE = 0.10  # latencies or token counts within 10% of each other are a tie (load noise)
COST_TIE_MS = 100.0  # and so are latencies within 100 ms
SCORE_TIE = 0.05  # verdict numbers of the same label closer than this are a tie


@dataclass(frozen=True)
class GoldLabel:
    """The labelled answer sources of the question both runs answered (a dataset item's gold)."""

    chunk_ids: Sequence[str] = ()
    doc_refs: Sequence[str] = ()  # document names or ids, matched against a source's document

    @property
    def size(self) -> int:
        return len(set(self.doc_refs)) if self.doc_refs else len(set(self.chunk_ids))

    def hits(self, sources: Sequence[RetrievedChunk]) -> int:
        if self.doc_refs:
            return len({ref for ref in self.doc_refs for s in sources if s.origin == "kb" and _same_doc(ref, s)})
        return len(set(self.chunk_ids) & {s.chunk_id for s in sources})


def _same_doc(ref: str, chunk: RetrievedChunk) -> bool:
    ref = ref.strip().lower()
    return ref in (chunk.document.strip().lower(), str(chunk.doc_id))


@dataclass(frozen=True)
class Aspect:
    """One line of the verdict's table: the two values in words and which side it favours."""

    name: str
    a: str
    b: str
    better: Side  # "unknown": a side has no value for it, so it decides nothing
    quality: bool  # quality aspects decide before cost ones


@dataclass(frozen=True)
class PairVerdict:
    winner: Literal["A", "B", "tie"]
    line: str  # "B (agentic) did better: ..." — the sentence the pages show
    aspects: list[Aspect]


# --------------------------------------------------------------------------
# Names of the two sides
# --------------------------------------------------------------------------


def mode_words(mode: str) -> str:
    return _MODE_WORDS.get((mode or "").upper(), (mode or "").replace("_", " ").lower())


def path_label(digest: RunDigest) -> str:
    """The path a run was asked for and the one it ran: "rule planner (ran agentic)", "agentic", "auto → agentic"."""
    requested = digest.started.requested_mode if digest.started is not None else ""
    ran = digest.mode
    if not ran:
        return mode_words(requested) or "run"
    if not requested or mode_words(requested) == mode_words(ran):
        return mode_words(ran)
    if requested.upper() == "AUTO":
        return f"auto → {mode_words(ran)}"
    return f"{mode_words(requested)} (ran {mode_words(ran)})"


def side_labels(digest_a: RunDigest, digest_b: RunDigest,
                config_differences: Sequence[Any] = ()) -> tuple[str, str]:
    """A name for each side that tells them apart: the paths, and when these read the same, up to two settings
    that differ (``ConfigDifference`` rows), or else the run ids."""
    label_a, label_b = path_label(digest_a), path_label(digest_b)
    if label_a != label_b:
        return label_a, label_b
    if not config_differences:  # the same path and settings: two runs, told apart by their ids
        return f"{label_a} · run {digest_a.run_id[:8]}", f"{label_b} · run {digest_b.run_id[:8]}"
    shown = list(config_differences)[:2]
    more = " …" if len(config_differences) > 2 else ""
    return (label_a + " · " + ", ".join(f"{d.key} {_value(d.a)}" for d in shown) + more,
            label_b + " · " + ", ".join(f"{d.key} {_value(d.b)}" for d in shown) + more)


def _value(value: Any) -> str:
    return NOT_RECORDED if value is None else str(value)


# --------------------------------------------------------------------------
# The facts compared
# --------------------------------------------------------------------------


def latency_ms(digest: RunDigest) -> float | None:
    """The run's total time: its recorded total, else when its done event came; None when it never finished."""
    if digest.done is None:
        return None
    total = digest.timings_ms.get("total")
    return total if total else (digest.done.t_ms or None)


def token_total(digest: RunDigest) -> int | None:
    """Prompt + completion tokens; 0 when no model was called; None when calls were made but their prompts were
    not counted (an engine that does not report usage: a prompt is never empty)."""
    tokens = digest.tokens
    if digest.done is None:
        return None
    if tokens["calls"] and not tokens["prompt"]:
        return None
    return tokens["prompt"] + tokens["completion"]


def seconds(ms: float | None) -> str:
    return NOT_RECORDED if ms is None else f"{ms / 1000:.2f} s" if ms < 10_000 else f"{ms / 1000:.1f} s"


def tokens_words(total: int | None, calls: int) -> str:
    if total is None:
        return NOT_RECORDED
    return "no model call" if not calls else f"{total:,} tokens"


def _rank_aspect(name: str, a: str, b: str, rank_a: float | None, rank_b: float | None, quality: bool,
                 higher_is_better: bool = True, tie: Callable[[float, float], bool] | None = None) -> Aspect:
    if rank_a is None or rank_b is None:
        return Aspect(name, a, b, "unknown", quality)
    if (tie or (lambda x, y: x == y))(rank_a, rank_b):
        return Aspect(name, a, b, "tie", quality)
    a_better = rank_a > rank_b if higher_is_better else rank_a < rank_b
    return Aspect(name, a, b, "A" if a_better else "B", quality)


def _cost_tie(min_abs: float) -> Callable[[float, float], bool]:
    return lambda x, y: abs(x - y) <= max(min_abs, COST_TIE_SHARE * max(x, y))


def _verdict_aspect(a: RunDigest, b: RunDigest) -> Aspect:
    va, vb = a.verdict, b.verdict

    def words(v) -> str:
        if v is None:
            return NOT_RECORDED
        return v.label + (f" {v.score:.2f}" if v.score is not None else "")

    def rank(v) -> float | None:
        if v is None or v.level not in _VERDICT_RANK:
            return None  # stopped, or not checked: nothing to weigh
        return _VERDICT_RANK[v.level] + (min(v.score, 0.999) if v.score is not None else 0.0)

    same_level = va is not None and vb is not None and va.level == vb.level
    return _rank_aspect("verdict", words(va), words(vb), rank(va), rank(vb), True,
                        tie=(lambda x, y: abs(x - y) < SCORE_TIE) if same_level else None)


def _claims_aspect(a: RunDigest, b: RunDigest) -> Aspect:
    def facts(d: RunDigest) -> tuple[str, float | None]:
        v = d.verdict
        if v is None or not v.checked_claims:
            return (NOT_RECORDED if v is None else "no claim to check"), None
        return f"{v.supported_claims} of {v.checked_claims}", v.supported_claims / v.checked_claims

    (wa, ra), (wb, rb) = facts(a), facts(b)
    return _rank_aspect("supported claims", wa, wb, ra, rb, True)


def _grade_aspect(a: RunDigest, b: RunDigest) -> Aspect:
    return _rank_aspect("evidence grade", a.tier or NOT_RECORDED, b.tier or NOT_RECORDED,
                        _GRADE_RANK.get(a.tier), _GRADE_RANK.get(b.tier), True)


def _finished(digest: RunDigest) -> bool:
    return digest.done is not None and not digest.cancelled


def _ended_aspect(a: RunDigest, b: RunDigest) -> Aspect:
    """A run stopped (by the user) or never finished has no answer to weigh against a finished one."""
    def words(d: RunDigest) -> str:
        return "finished" if _finished(d) else "stopped by you" if d.cancelled else "not finished"
    return _rank_aspect("run", words(a), words(b), float(_finished(a)), float(_finished(b)), True)


def _gold_aspect(a: RunDigest, b: RunDigest, gold: GoldLabel) -> Aspect:
    ha, hb = gold.hits(a.sources), gold.hits(b.sources)
    return _rank_aspect("gold sources found", f"{ha} of {gold.size}", f"{hb} of {gold.size}", ha, hb, True)


def aspects(a: RunDigest, b: RunDigest, gold: GoldLabel | None = None) -> list[Aspect]:
    """Every aspect compared, quality ones first in the order they decide."""
    found = [_ended_aspect(a, b)] if not (_finished(a) and _finished(b)) else []
    found += [_gold_aspect(a, b, gold)] if gold is not None and gold.size else []
    found += [_verdict_aspect(a, b), _claims_aspect(a, b), _grade_aspect(a, b)]
    la, lb = latency_ms(a), latency_ms(b)
    found.append(_rank_aspect("latency", seconds(la), seconds(lb), la, lb, False, higher_is_better=False,
                              tie=_cost_tie(COST_TIE_MS)))
    ta, tb = token_total(a), token_total(b)
    found.append(_rank_aspect("tokens", tokens_words(ta, a.tokens["calls"]), tokens_words(tb, b.tokens["calls"]),
                              ta, tb, False, higher_is_better=False, tie=_cost_tie(0)))
    return found


def pair_verdict(a: RunDigest, b: RunDigest, label_a: str = "A", label_b: str = "B",
                 gold: GoldLabel | None = None) -> PairVerdict:
    """Which run did better and why: the first quality aspect that differs decides; equal quality, then cost."""
    found = aspects(a, b, gold)
    names = {"A": f"A ({label_a})", "B": f"B ({label_b})"}
    quality = [x for x in found if x.quality and x.better in ("A", "B")]
    cost = [x for x in found if not x.quality and x.better in ("A", "B")]
    if quality:
        decider = quality[0]
        winner = decider.better
        because = [_reason(decider)]
        cheaper = [x for x in cost if x.better != winner]
        if cheaper:
            loser = "B" if winner == "A" else "A"
            because.append(f"but {loser} " + " and ".join(_cost_words(x) for x in cheaper))
        return PairVerdict(winner, f"{names[winner]} did better: " + "; ".join(because) + ".", found)
    compared = [x.name for x in found if x.quality and x.better == "tie"]
    same = ("equally good answers (same " + ", ".join(compared) + ")") if compared else \
        "no quality aspect could be compared"
    if cost:
        winner = cost[0].better
        others = [x for x in cost if x.better != winner]
        line = (f"{names[winner]} did better on cost: {same}; it "
                + " and ".join(_cost_words(x) for x in cost if x.better == winner))
        if others:
            line += ", though the other " + " and ".join(_cost_words(x) for x in others)
        return PairVerdict(winner, line + ".", found)
    unknown = [x.name for x in found if x.better == "unknown"]
    tail = f" ({', '.join(unknown)} not recorded for both)" if unknown else ""
    return PairVerdict("tie", f"Tie: {same}, and the same cost{tail}.", found)


def _reason(aspect: Aspect) -> str:
    winner_value, loser_value = (aspect.a, aspect.b) if aspect.better == "A" else (aspect.b, aspect.a)
    return f"{aspect.name} {winner_value} against {loser_value}"


def _cost_words(aspect: Aspect) -> str:
    fewer = "took less time" if aspect.name == "latency" else "used fewer tokens"
    winner_value, loser_value = (aspect.a, aspect.b) if aspect.better == "A" else (aspect.b, aspect.a)
    return f"{fewer} ({winner_value} against {loser_value})"
