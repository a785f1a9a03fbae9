"""Fit the grader's defaults (and optionally the offline reranker's weights) on the FIT split only.

Input: the run and candidate dumps of ``bench/grader_tiers.py --split fit --dump R --dump-candidates C``
(one pair per set, or concatenated).  Nothing of the report split is read.

For every run the tier is recomputed from its reranked candidates without searching again: the scores
(``rerankers.logistic`` over the dumped features, with the committed or the refitted weights), the graded
chunks taken as the 8 best (``retrieval.final_top_k``; MMR is left out, it keeps the best chunk first and
changes the top three rarely), the coverage of the best of the top three, and ``CragGrader.tier_for``.
With the committed weights this reproduces the dumped tiers (checked and printed as ``replay agreement``).

The search: ``grader.high_threshold`` x ``grader.high_min_coverage`` x ``grader.coverage_high`` on a grid;
the objective is the mean, over the sets, of "answerable with gold in context -> HIGH", subject to
"unanswerable -> not HIGH" >= ``--floor`` (0.92: a margin over the 0.90 target) on every set.

``--refit``: also refit the reranker (logistic over the five features, classes balanced) on the candidates
the grader sees (the kept ones) of the fit split, labelled relevant when their document is gold (CMRC: the
gold passage's chunks holding an answer).

``--ceiling``: instead, the in-sample upper bound of a logistic over run-level signals (see ``ceiling``), with
the committed weights: how far any rule over the offline signals could go on these runs.

Usage: python bench/fit_grader.py --runs R.jsonl... --candidates C.jsonl... [--refit] [--ceiling] [--floor 0.92]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibrate_reranker import fit_logistic  # noqa: E402

from docmind_core.backends.rerankers import FEATURES, WEIGHTS  # noqa: E402
from docmind_core.answer.grade import CoverageReport, CragGrader  # noqa: E402
from docmind_core.settings import GraderSettings  # noqa: E402

GRADED = 8
TOP_FOR_COVERAGE = 3


def load(run_files, candidate_files):
    runs, groups = {}, {}
    for f in run_files:
        for line in Path(f).read_text("utf-8").splitlines():
            r = json.loads(line)
            runs[(r["dataset"], r["qid"], r["answerable"])] = r
    for f in candidate_files:
        for line in Path(f).read_text("utf-8").splitlines():
            c = json.loads(line)
            groups.setdefault((c["dataset"], c["qid"], c["answerable"]), []).append(c)
    return runs, groups


def scores(features: np.ndarray, weights: dict[str, float]) -> np.ndarray:
    z = weights["bias"] + features @ np.array([weights[f] for f in FEATURES])
    return 1.0 / (1.0 + np.exp(-np.clip(z, -60, 60)))


def replay(runs, groups, weights):
    """Per run: (set, top score, coverage report, is unanswerable, is answerable with gold in context, tier then)."""
    out = []
    for key, cands in groups.items():
        run = runs.get(key)
        if run is None:
            continue
        p = scores(np.array([c["features"] for c in cands]), weights)
        order = np.argsort(-p, kind="stable")[:GRADED]
        head = [cands[i] for i in order[:TOP_FOR_COVERAGE]]
        report = CoverageReport(max(c["coverage"] for c in head), any(c["rare_hit"] for c in head),
                                head[0]["has_terms"])
        unanswerable = not run["answerable"] and not run["answer_in_evidence"]
        out.append((key[0], float(p[order[0]]), report, unanswerable, bool(run["gold_in_context"]), run["tier"]))
    return out


def rates(replayed, grader: GraderSettings):
    tiers = CragGrader()
    per_set: dict[str, list[list[bool]]] = {}
    for name, top, report, unanswerable, in_context, _old in replayed:
        tier = tiers.tier_for(round(top, 4), report, grader)[0].value
        slot = per_set.setdefault(name, [[], []])
        if unanswerable:
            slot[0].append(tier != "HIGH")
        if in_context:
            slot[1].append(tier == "HIGH")
    return {name: (float(np.mean(u)) if u else float("nan"), float(np.mean(g)) if g else float("nan"), len(u), len(g))
            for name, (u, g) in sorted(per_set.items())}


def refit(groups, runs) -> dict[str, float]:
    rows = [c for key, cands in groups.items() if key in runs for c in cands if c["kept"]]
    X = np.array([c["features"] for c in rows])
    y = np.array([1.0 if c["relevant"] else 0.0 for c in rows])
    w = fit_logistic(X, y)
    print(f"refit on {len(rows)} kept candidates ({int(y.sum())} relevant)")
    return {"bias": round(float(w[0]), 3), **{f: round(float(v), 3) for f, v in zip(FEATURES, w[1:])}}


RUN_SIGNALS = ("top", "coverage", "top_cosine", "top_coverage", "top_bigrams", "margin", "union_coverage",
               "entity_coverage")
CEILING_SETS = (("top", "coverage"), ("top", "coverage", "top_bigrams"), ("top", "coverage", "margin"),
                ("top", "coverage", "union_coverage", "entity_coverage"), RUN_SIGNALS)


def run_signals(cands, weights) -> dict[str, float]:
    """Run-level signals a grader could use: the top score, best-of-3 coverage, the top chunk's cosine /
    coverage / adjacent-pair share, the margin to the runner-up, and the union coverage and share of rare
    entities (weight >= 1.6) found in the 8 graded chunks."""
    p = scores(np.array([c["features"] for c in cands]), weights)
    order = np.argsort(-p, kind="stable")[:GRADED]
    top = cands[order[0]]
    terms = top["terms"]
    found = set().union(*(set(cands[i]["hits"]) for i in order))
    rare = [i for i, w in enumerate(terms) if w >= 1.6]
    return {"top": float(p[order[0]]), "coverage": max(cands[i]["coverage"] for i in order[:TOP_FOR_COVERAGE]),
            "top_cosine": top["features"][0], "top_coverage": top["features"][1], "top_bigrams": top["features"][3],
            "margin": float(p[order[0]] - (p[order[1]] if len(order) > 1 else 0.0)),
            "union_coverage": sum(terms[i] for i in found) / (sum(terms) or 1.0),
            "entity_coverage": sum(1 for i in rare if i in found) / len(rare) if rare else 1.0}


def ceiling(runs, groups, weights, floor: float) -> None:
    """In-sample upper bound: a logistic over run-level signals fitted on these very runs (gold in context
    vs unanswerable), cut where ``floor`` of the unanswerables are not HIGH; prints the HIGH rate of the
    answerable runs with gold in context.  No grader rule over these signals can do better on these runs."""
    for name in sorted({k[0] for k in groups}):
        rows, labels = [], []
        for key, cands in groups.items():
            run = runs.get(key)
            if key[0] != name or run is None or "hits" not in cands[0]:
                continue
            unanswerable = not run["answerable"] and not run["answer_in_evidence"]
            if run["gold_in_context"] or unanswerable:
                signals = run_signals(cands, weights)
                rows.append([signals[s] for s in RUN_SIGNALS])
                labels.append(1.0 if run["gold_in_context"] else 0.0)
        if not rows:
            continue
        X, y = np.array(rows), np.array(labels)
        for chosen in CEILING_SETS:
            cols = [RUN_SIGNALS.index(c) for c in chosen]
            w = fit_logistic(X[:, cols], y)
            z = w[0] + X[:, cols] @ w[1:]
            negatives = np.sort(z[y == 0])
            cut = negatives[int(np.ceil(floor * len(negatives))) - 1]
            print(f"ceiling {name}: {'+'.join(chosen)} -> gold in context HIGH {np.mean(z[y == 1] > cut):.3f} "
                  f"(n={int(y.sum())}, unanswerable n={int(len(y) - y.sum())})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", nargs="+", required=True)
    ap.add_argument("--candidates", nargs="+", required=True)
    ap.add_argument("--refit", action="store_true")
    ap.add_argument("--floor", type=float, default=0.92)
    ap.add_argument("--ceiling", action="store_true", help="print the in-sample ceiling of run-level signals")
    args = ap.parse_args()
    runs, groups = load(args.runs, args.candidates)
    if args.ceiling:
        ceiling(runs, groups, WEIGHTS, args.floor)
        return
    replayed = replay(runs, groups, WEIGHTS)
    live = GraderSettings()
    agreement = np.mean([CragGrader().tier_for(round(t, 4), r, live)[0].value == old
                         for _n, t, r, _u, _g, old in replayed])
    print(f"replay agreement with the dumped tiers (1.000 when the dumps were made at the current defaults): "
          f"{agreement:.3f}")
    print("current defaults on these runs:", rates(replayed, live))
    weights = refit(groups, runs) if args.refit else WEIGHTS
    if args.refit:
        print("WEIGHTS =", weights)
        replayed = replay(runs, groups, weights)
    best = None
    for high in np.round(np.arange(0.50, 0.99, 0.02), 2):
        for min_cov in np.round(np.arange(0.0, 0.91, 0.05), 2):
            for cov_high in (0.8, 0.85, 0.9, 0.95, 1.0):
                grader = live.model_copy(update={"high_threshold": float(high), "high_min_coverage": float(min_cov),
                                                 "coverage_high": cov_high})
                r = rates(replayed, grader)
                if min(v[0] for v in r.values()) < args.floor:
                    continue
                objective = float(np.mean([v[1] for v in r.values()]))
                if best is None or objective > best[0] + 1e-9:
                    best = (objective, float(high), float(min_cov), cov_high, r)
    if best is None:
        print(f"no grid point keeps unanswerable -> not HIGH >= {args.floor} on every set")
        return
    objective, high, min_cov, cov_high, r = best
    print(f"best: high_threshold={high} high_min_coverage={min_cov} coverage_high={cov_high} "
          f"(mean gold-in-context HIGH {objective:.3f})")
    for name, (u, g, nu, ng) in r.items():
        print(f"  {name}: unanswerable not HIGH {u:.3f} (n={nu}), gold in context HIGH {g:.3f} (n={ng})")


if __name__ == "__main__":
    main()
