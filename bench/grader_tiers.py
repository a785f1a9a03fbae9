"""CRAG grader tiers on answerable and leave-gold-out questions: a fit split and a report split.

Each question is asked twice, offline, at the settings given (the defaults unless --set):

* as is: "answerable"; it counts as "gold in context" when every gold document is among the graded chunks;
* with its gold documents excluded from retrieval (leave-gold-out): "unanswerable", with the strongest
  distractors the corpus holds.

Targets (issue 14, item 5): unanswerable -> not HIGH in >= 90% of runs; answerable with gold in context ->
HIGH in >= 70%; a run whose evidence holds none of the question's salient terms is never HIGH.

How a run is made.  The shared BEIR sets (cmrc2018, hotpotqa, scifact) go through the product's retriever and
grader directly: a throw-away KB built with ``docmind_core.eval.retrieval_eval.build_index`` (the app's stores,
fusion, reranker and refiner), ``HybridRetriever.search`` (candidates -> rerank -> MMR -> compression, with
``exclude_doc_ids`` for leave-gold-out) and ``CragGrader.grade`` on the refined chunks.  That is the evidence
a RULE_PLANNER one-shot run grades (a tier depends only on the graded evidence and the question), without the
understanding and answer steps, so thousands of runs take minutes.  The demo set (data/demo_labelled.jsonl,
16 questions) goes through the whole pipeline instead: the data/demo files ingested into a temp home and each
question asked with ``Engine.ask`` (mode auto, as a user asks it), the tier read from the initial Graded event.

Splits (fixed here; tune on ``fit``, report on ``report``, never both on the same questions):

* hotpotqa: questions 1-400 alternate (odd positions fit, even positions report), so both splits hold bridge
  and comparison questions; 401-500 are left out (they fitted the earlier reranker calibration);
* cmrc2018: by passage (gold passage DEV_n, n even -> fit, n odd -> report), so no passage is asked about
  in both splits; questions 2920-3219 are left out (earlier reranker calibration);
* scifact: claims 1-150 fit, 151-300 report;
* demo: report only (16 questions, too few to split).

``--limit N`` takes the first N questions of each split of each set (each question gives two runs).

The committed reranker weights and grader defaults were fitted (bench/fit_grader.py --refit) on the dumps of

    python bench/grader_tiers.py EVAL --sets cmrc2018 --split fit --limit 400 --previous-weights --dump R1 --dump-candidates C1
    python bench/grader_tiers.py EVAL --sets hotpotqa --split fit --limit 200 --previous-weights --dump R2 --dump-candidates C2

Usage: python bench/grader_tiers.py EVAL_DIR [--sets cmrc2018,hotpotqa,scifact,demo] [--split fit|report|both]
       [--limit N] [--cache DIR] [--set key=value ...] [--dump FILE.jsonl] [--dump-candidates FILE.jsonl]
       [--previous-weights]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from docmind_core.backends.rerankers import DISTRACTOR_FIT_WEIGHTS, WEIGHTS  # noqa: E402
from docmind_core.answer.grade import CragGrader, coverage_report  # noqa: E402
from docmind_core.answer.grade import found_terms  # noqa: E402
from docmind_core.text.tokens import salient_terms  # noqa: E402
from docmind_core.values import GradeResult, Tier  # noqa: E402
from docmind_core.settings import Settings  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PREVIOUS_WEIGHTS = False  # --previous-weights: score with the distractor-setting fit the committed refit started from
BEIR_SETS = ("cmrc2018", "hotpotqa", "scifact")
HOTPOT_USED = 400
CMRC_CALIBRATION = range(2919, 3219)
SCIFACT_HALF = 150


@dataclass
class RunRow:
    dataset: str
    split: str
    qid: str
    answerable: bool
    gold_in_context: bool
    tier: str
    reason: str
    top_score: float
    coverage: float
    has_terms: bool
    top_features: list[float]  # the reranker features of the best-scored graded chunk
    runner_up: float  # the second-best graded score (0 when one chunk)
    answer_in_evidence: bool | None  # a gold answer string is in the graded chunks (None: the set has no answers)


def split_indices(name: str, dataset) -> dict[str, list[int]]:
    """Query positions of each split of one BEIR set (see the module docstring)."""
    n = len(dataset.queries)
    if name == "hotpotqa":
        used = range(min(n, HOTPOT_USED))
        return {"fit": [i for i in used if i % 2 == 0], "report": [i for i in used if i % 2 == 1]}
    if name == "cmrc2018":
        out: dict[str, list[int]] = {"fit": [], "report": []}
        for i, q in enumerate(dataset.queries):
            if i in CMRC_CALIBRATION:
                continue
            gold = next(iter(dataset.qrels.get(q.id, {})), "")
            passage = int(gold.split("_")[1]) if gold.startswith("DEV_") else i
            out["fit" if passage % 2 == 0 else "report"].append(i)
        return out
    if name == "scifact":
        return {"fit": list(range(min(n, SCIFACT_HALF))), "report": list(range(SCIFACT_HALF, n))}
    raise ValueError(f"no split defined for {name!r}")


def _row(dataset: str, split: str, qid: str, question: str, chunks, grade, answerable: bool,
         gold_in_context: bool, features: list[float], answers) -> RunRow:
    from docmind_core.experiments.metrics import contains_answer

    scores = sorted((c.scores.rerank if c.scores.rerank is not None else (c.scores.fused or 0.0)) for c in chunks)
    report = coverage_report(question, chunks)
    return RunRow(dataset, split, qid, answerable, gold_in_context, grade.tier.value, grade.reason,
                  grade.top_score, report.coverage, report.has_terms, features,
                  round(scores[-2], 4) if len(scores) > 1 else 0.0,
                  contains_answer("\n".join(c.text for c in chunks), answers) if answers else None)


Regrade = Callable[[str, list, GradeResult], GradeResult]
"""A second look at each graded run (question, graded chunks, grade) -> grade; bench/judge_tiers.py's model judge."""


def beir_runs(eval_dir: Path, name: str, splits: list[str], limit: int | None, settings: Settings,
              cache_dir: Path, candidates_out=None, regrade: Regrade | None = None) -> list[RunRow]:
    from docmind_core.backends.embedders import Usem3Embedder
    from docmind_core.eval.beir import EmbeddingCache, load_beir
    from docmind_core.eval.retrieval_eval import build_index

    dataset = load_beir(eval_dir / name)
    grader = CragGrader()
    rows: list[RunRow] = []
    with tempfile.TemporaryDirectory(prefix="docmind-tiers-") as tmp:
        start = time.perf_counter()
        index = build_index(dataset, Path(tmp), Usem3Embedder(), settings, EmbeddingCache(cache_dir))
        print(f"[{name}] index built in {time.perf_counter() - start:.0f} s", file=sys.stderr)
        our_doc = {beir: ours for ours, beir in index.beir_of_doc.items()}
        reranker = index.reranker
        if PREVIOUS_WEIGHTS and hasattr(reranker, "weights"):
            reranker.weights = {**DISTRACTOR_FIT_WEIGHTS, "code": WEIGHTS["code"]}
        for split in splits:
            picked = split_indices(name, dataset)[split][:limit]
            start = time.perf_counter()
            for qi in picked:
                q = dataset.queries[qi]
                gold = {our_doc[d] for d in dataset.qrels.get(q.id, {}) if d in our_doc}
                for answerable in (True, False):
                    result = index.retriever.search(q.text, [index.kb_id], settings,
                                                    exclude_doc_ids=None if answerable else sorted(gold))
                    grade = grader.grade(q.text, result.chunks, settings.grader,
                                         settings.retrieval.web_compensation_on_low)
                    if regrade is not None:
                        grade = regrade(q.text, result.chunks, grade)
                    found = {c.doc_id for c in result.chunks}
                    features = _best_features(reranker, q.text, result)
                    if candidates_out is not None:
                        _dump_candidates(candidates_out, reranker, name, split, q, answerable, result, gold)
                    rows.append(_row(name, split, q.id, q.text, result.chunks, grade, answerable,
                                     answerable and bool(gold) and gold <= found, [round(f, 4) for f in features],
                                     q.answers))
            print(f"[{name}] {split}: {len(picked)} questions, {2 * len(picked)} runs in "
                  f"{time.perf_counter() - start:.0f} s", file=sys.stderr)
        del index
    return rows


def _best_features(reranker, question: str, result) -> list[float]:
    """The reranker features of the best-scored chunk, computed in its reranked batch (the keyword signal is
    relative to the batch)."""
    pool = [c for c in result.candidates if c.scores.rerank is not None]
    if not pool or not hasattr(reranker, "features"):
        return []
    best = max(range(len(pool)), key=lambda i: pool[i].scores.rerank)
    return reranker.features(question, pool)[best]


def _dump_candidates(out, reranker, name: str, split: str, q, answerable: bool, result, gold: set[int]) -> None:
    """Every reranked candidate of a run with its reranker features and label, for fitting (fit split only)."""
    pool = [c for c in result.candidates if c.scores.rerank is not None]
    if not pool or split != "fit" or not hasattr(reranker, "features"):
        return
    features = reranker.features(q.text, pool)
    terms = salient_terms(q.text)
    answers = [a for a in q.answers if a.strip()]
    for c, f in zip(pool, features):
        relevant = c.doc_id in gold and (name != "cmrc2018" or any(a in c.text for a in answers))
        report = coverage_report(q.text, [c])
        out.write(json.dumps({"dataset": name, "qid": q.id, "answerable": answerable, "relevant": relevant,
                              "terms": list(terms.values()), "hits": _hits(terms, c.text),
                              "title_hits": _hits(terms, c.document),
                              "kept": c.kept, "features": [round(v, 4) for v in f], "coverage": report.coverage,
                              "rare_hit": report.rare_entity_hit, "has_terms": report.has_terms,
                              "answer": any(a in c.text for a in answers),
                              # the texts, so fit_grader.py can compute signals that read the passage against
                              # the question without searching again
                              "question": q.text, "document": c.document, "text": c.text},
                             ensure_ascii=False) + "\n")


def _hits(terms: dict[str, float], text: str) -> list[int]:
    """Positions (in ``terms`` order) of the salient terms found in ``text``, as the grader's coverage finds them."""
    found = found_terms(terms, text)
    return [i for i, term in enumerate(terms) if term in found]


def demo_runs(settings: Settings, limit: int | None, regrade: Regrade | None = None) -> list[RunRow]:
    from docmind_core.engine import Engine
    from docmind_core.events import Graded, Reranked

    items = [json.loads(line) for line in (ROOT / "data" / "demo_labelled.jsonl").read_text("utf-8").splitlines()
             if line.strip()][:limit]
    rows: list[RunRow] = []
    with tempfile.TemporaryDirectory(prefix="docmind-tiers-demo-") as tmp:
        engine = Engine.open(Path(tmp), env={})
        kb = engine.create_kb("demo", description="Halcyon Data product documents: Aurora and Nimbus")
        engine.ingest(kb.id, [ROOT / "data" / "demo"])
        by_name = {d.name: d.id for d in engine.store.list_documents(kb.id)}
        for item in items:
            gold = {by_name[g] for g in item["gold_doc_ids"]}
            for answerable in ((True, False) if item["answerable"] else (False,)):
                kept, graded = [], None
                for event in engine.ask(item["question"], [kb.id], settings=settings,
                                        exclude_doc_ids=None if answerable else sorted(gold)):
                    if isinstance(event, Reranked) and graded is None:
                        kept = [c for c in event.candidates if c.kept]  # the chunks the next grading sees
                    elif isinstance(event, Graded) and graded is None:
                        graded = event.grade
                if graded is None:
                    continue
                in_context = answerable and {c.doc_id for c in kept} >= gold
                if regrade is not None:
                    graded = regrade(item["question"], kept, graded)
                rows.append(_row("demo", "report", item["id"], item["question"], kept, graded, answerable,
                                 in_context, [], item["answers"]))
    return rows


def table(rows: list[RunRow]) -> list[dict]:
    out = []
    for key in sorted({(r.dataset, r.split) for r in rows}):
        sel = [r for r in rows if (r.dataset, r.split) == key]
        left_out = [r for r in sel if not r.answerable]
        # a leave-gold-out run whose evidence still holds a gold answer (another document states it) is answerable
        unans = [r for r in left_out if not r.answer_in_evidence]
        gic = [r for r in sel if r.answerable and r.gold_in_context]
        no_term = [r for r in sel if r.coverage <= 0.0]
        out.append({
            "set": key[0], "split": key[1], "questions": len({r.qid for r in sel}),
            "left_out_runs": len(left_out),
            "left_out_not_high": _share(sum(r.tier != Tier.HIGH.value for r in left_out), len(left_out)),
            "unanswerable_runs": len(unans),
            "unanswerable_not_high": _share(sum(r.tier != Tier.HIGH.value for r in unans), len(unans)),
            "answerable_gold_in_context": len(gic),
            "gold_in_context_high": _share(sum(r.tier == Tier.HIGH.value for r in gic), len(gic)),
            "no_salient_term_runs": len(no_term),
            "no_salient_term_high": sum(r.tier == Tier.HIGH.value for r in no_term),
        })
    return out


def _share(k: int, n: int) -> float | None:
    return round(k / n, 3) if n else None


def print_table(title: str, lines: list[dict]) -> None:
    print(f"\n{title}")
    print("| set | split | questions | unanswerable -> not HIGH (>= 0.90) | all leave-gold-out -> not HIGH "
          "| gold in context -> HIGH (>= 0.70) | no salient term in evidence -> HIGH (0) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for t in lines:
        print(f"| {t['set']} | {t['split']} | {t['questions']} | {t['unanswerable_not_high']} "
              f"(n={t['unanswerable_runs']}) | {t['left_out_not_high']} (n={t['left_out_runs']}) "
              f"| {t['gold_in_context_high']} (n={t['answerable_gold_in_context']}) "
              f"| {t['no_salient_term_high']} of {t['no_salient_term_runs']} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("eval_dir", type=Path)
    ap.add_argument("--sets", default="cmrc2018,hotpotqa,scifact,demo")
    ap.add_argument("--split", choices=("fit", "report", "both"), default="both")
    ap.add_argument("--limit", type=int, default=None, help="questions per split per set")
    ap.add_argument("--cache", type=Path, default=Path("data/cache"), help="embedding cache folder")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--dump", type=Path, default=None, help="write every run as JSON lines")
    ap.add_argument("--previous-weights", action="store_true",
                    help="rerank with the previous (distractor-setting) weights, as the dumps of the committed "
                         "refit were made")
    ap.add_argument("--dump-candidates", type=Path, default=None,
                    help="fit split: write every reranked candidate (features, label) as JSON lines")
    args = ap.parse_args()
    global PREVIOUS_WEIGHTS
    PREVIOUS_WEIGHTS = args.previous_weights
    overrides = dict(o.split("=", 1) for o in args.overrides)
    settings = Settings().with_overrides(overrides) if overrides else Settings()
    splits = ["fit", "report"] if args.split == "both" else [args.split]
    rows: list[RunRow] = []
    candidates_out = args.dump_candidates.open("w", encoding="utf-8") if args.dump_candidates else None
    for name in args.sets.split(","):
        if name in BEIR_SETS:
            rows += beir_runs(args.eval_dir, name, splits, args.limit, settings, args.cache, candidates_out)
        elif name == "demo":
            if "report" in splits:
                rows += demo_runs(settings, args.limit)
        else:
            raise SystemExit(f"unknown set {name!r}")
    if args.dump:
        with args.dump.open("w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(asdict(r), ensure_ascii=False) + "\n")
    lines = table(rows)
    for split in splits:
        print_table(f"{split} split", [t for t in lines if t["split"] == split])


if __name__ == "__main__":
    main()
