"""Agentic vs one-shot retrieval on a multi-hop set (HotpotQA pooled): are *both* gold paragraphs in the context?

The index is the retrieval eval's throw-away index (``retrieval_eval.build_index``:
the product's own stores, cached chunk embeddings).  For every question both
modes run through the product's own code with the same settings, so the same
context budget (``rag.context_max_tokens``, ``retrieval.final_top_k``):

* ``rule_planner``: :class:`RulePlannerPath` with doc_search + keyword_search
  (the conservative plan, the strongest one-shot plan without a web backend);
* ``agentic``:  :class:`AgenticPath` driven by the offline engine's tool
  policy (no model endpoint needed, deterministic).

A question counts for ``both_gold_rate`` when every judged paragraph has a
chunk among the final sources, for ``any_gold_rate`` when at least one does.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from docmind_core.eval.beir import EmbeddingCache, load_beir
from docmind_core.values import RetrievalPlan, Understanding

ONE_SHOT_PLAN = RetrievalPlan(tools=["doc_search", "keyword_search"], conservative=True)
MODES = ("agentic", "one_shot")


@dataclass
class ModeTally:
    both: list[float] = field(default_factory=list)
    any: list[float] = field(default_factory=list)
    rounds: list[int] = field(default_factory=list)
    tool_calls: list[int] = field(default_factory=list)
    ms: list[float] = field(default_factory=list)
    fallbacks: int = 0
    by_type: dict[str, list[float]] = field(default_factory=dict)

    def add(self, gold: set[str], found: set[str], rounds: int, calls: int, ms: float, qtype: str) -> None:
        hit = len(gold & found)
        both = 1.0 if gold and hit == len(gold) else 0.0
        self.both.append(both)
        self.any.append(1.0 if hit else 0.0)
        self.rounds.append(rounds)
        self.tool_calls.append(calls)
        self.ms.append(ms)
        if qtype:
            self.by_type.setdefault(qtype, []).append(both)

    def summary(self) -> dict:
        n = max(1, len(self.both))
        out = {
            "both_gold_rate": round(sum(self.both) / n, 4),
            "any_gold_rate": round(sum(self.any) / n, 4),
            "mean_rounds": round(sum(self.rounds) / n, 3),
            "mean_tool_calls": round(sum(self.tool_calls) / n, 3),
            "p50_ms": round(statistics.median(self.ms), 1) if self.ms else 0.0,
            "questions": len(self.both),
            "fallbacks": self.fallbacks,
        }
        if self.by_type:
            out["both_gold_rate_by_type"] = {t: round(sum(v) / len(v), 4) for t, v in sorted(self.by_type.items())}
        return out


def _drain(gen):
    """Run an event generator to its end and return its value (the events are not needed here)."""
    while True:
        try:
            next(gen)
        except StopIteration as stop:
            return stop.value


def _question_types(dataset_dir: Path) -> dict[str, str]:
    import json

    types: dict[str, str] = {}
    path = Path(dataset_dir) / "queries.jsonl"
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            if row.get("type"):
                types[str(row["id"])] = str(row["type"])
    return types


def run_agentic_eval(dataset_dir: Path, embedder, settings, cache_dir: Path, limit: int | None = None,
                     progress: Callable[[str], None] | None = None) -> dict:
    """Both modes over the dataset; returns ``{"dataset", "modes": {"agentic": {...}, "one_shot": {...}}, ...}``."""
    from docmind_core.answer.agentic import AgenticPath
    from docmind_core.backends.offline.chat import OfflineLanguageModel
    from docmind_core.eval.retrieval_eval import build_index
    from docmind_core.answer.grade import CragGrader
    from docmind_core.answer.rule_planner import RulePlannerPath
    from docmind_core.prompts import PromptLibrary
    from docmind_core.answer.tools import ToolContext, Toolbox

    say = progress or (lambda _msg: None)
    dataset = load_beir(Path(dataset_dir), limit=limit)
    types = _question_types(Path(dataset_dir))
    tallies = {mode: ModeTally() for mode in MODES}
    with tempfile.TemporaryDirectory(prefix="docmind-agentic-eval-") as tmp:
        index = build_index(dataset, Path(tmp), embedder, settings, EmbeddingCache(cache_dir), say)
        retriever = index.retriever
        refiner = retriever.refiner  # the one build_index made around the index's reranker
        toolbox = Toolbox(retriever)  # no web backend, no memory: KB evidence only
        grader = CragGrader()
        prompts = PromptLibrary()
        rule_planner = RulePlannerPath(toolbox, refiner, grader)
        agentic = AgenticPath(OfflineLanguageModel(prompts), toolbox, refiner, grader, prompts, rule_planner)
        kb_brief = f"{dataset.name}: Wikipedia paragraphs"
        started = time.perf_counter()
        for n, q in enumerate(dataset.queries, 1):
            gold = set(dataset.qrels.get(q.id, {}))
            if not gold:  # judged, nothing relevant: no gold paragraph to find
                continue
            understanding = Understanding(rewritten_query=q.text)
            for mode in MODES:
                ctx = ToolContext.for_run([index.kb_id], None, settings)
                t0 = time.perf_counter()
                if mode == "agentic":
                    outcome = _drain(agentic.run(q.text, understanding, kb_brief, ctx))
                else:
                    outcome = _drain(rule_planner.run(q.text, understanding, ONE_SHOT_PLAN, ctx))
                ms = (time.perf_counter() - t0) * 1000
                found = {index.beir_of_doc.get(c.doc_id, "") for c in outcome.result.chunks if c.doc_id is not None}
                calls = len(outcome.tool_calls)
                tallies[mode].add(gold, found, outcome.rounds, calls, ms, types.get(q.id, ""))
                tallies[mode].fallbacks += int(outcome.fell_back)
            if n % 25 == 0:
                say(f"{n}/{len(dataset.queries)} questions, "
                    f"agentic both={tallies['agentic'].summary()['both_gold_rate']:.3f} "
                    f"one_shot both={tallies['one_shot'].summary()['both_gold_rate']:.3f} "
                    f"({time.perf_counter() - started:.0f}s)")
        del index, retriever, toolbox, rule_planner, agentic
    modes = {mode: tallies[mode].summary() for mode in MODES}
    return {
        "dataset": dataset.name,
        "queries": len(dataset.queries),
        "documents": len(dataset.corpus),
        "embedder": embedder.id,
        "context_budget": {"rag.context_max_tokens": settings.rag.context_max_tokens,
                           "retrieval.final_top_k": settings.retrieval.final_top_k},
        "one_shot_plan": list(ONE_SHOT_PLAN.tools),
        "modes": modes,
        "both_gold_gain_points": round(100 * (modes["agentic"]["both_gold_rate"]
                                              - modes["one_shot"]["both_gold_rate"]), 2),
    }
