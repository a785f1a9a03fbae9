"""Sweep fusion settings on one BEIR folder, building the throw-away index once.

    python bench/fusion_sweep.py DATASET_DIR [--limit N] [--rerank] [--answers]
        [--grid "convex:0.1,convex:0.2,convex:0.3,rrf:0.5"] [--depths 40,100]

Each grid entry is ``fusion:vector_weight`` (keyword weight = 1 - vector weight).
Prints nDCG@10 / Recall@10 / MRR@10 (and answer recall@5 with --answers) of
``hybrid`` (and ``hybrid_rerank`` with --rerank) per entry, after the bm25 and
vector baselines.  This is how the defaults in settings.RetrievalSettings were
chosen; see bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["ANONYMIZED_TELEMETRY"] = "False"

from docmind_core.backends.factory import build_embedder  # noqa: E402
from docmind_core.eval.beir import EmbeddingCache, load_beir  # noqa: E402
from docmind_core.eval.retrieval_eval import build_index, evaluate  # noqa: E402
from docmind_core.settings import Settings  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset", type=Path)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--rerank", action="store_true")
    ap.add_argument("--answers", action="store_true")
    ap.add_argument("--grid", default="convex:0.1,convex:0.2,convex:0.3,convex:0.4,rrf:0.5,rrf:0.3")
    ap.add_argument("--depths", default="40")
    ap.add_argument("--cache", type=Path, default=Path("data/cache"))
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args()
    from docmind_core.settings import coerce

    base = Settings().with_overrides({k: coerce(k, v) for k, v in (o.split("=", 1) for o in args.overrides)})
    embedder, note = build_embedder(base.embedding)
    if note:
        print("note:", note)
    dataset = load_beir(args.dataset, limit=args.limit)
    cols = ["ndcg@10", "recall@10", "recall@100", "mrr@10"] + (["answer_recall@5"] if args.answers else [])
    print(f"{dataset.name}: {len(dataset.queries)} queries; embedder {embedder.id}")
    print(f"{'system':<34}" + "".join(f"{c:>16}" for c in cols))

    def show(label, values):
        print(f"{label:<34}" + "".join(f"{values.get(c, float('nan')):>16.4f}" for c in cols), flush=True)

    with tempfile.TemporaryDirectory(prefix="docmind-sweep-") as tmp:
        index = build_index(dataset, Path(tmp), embedder, base, EmbeddingCache(args.cache))
        for name, values in evaluate(index, ["bm25", "vector"], base, answers=args.answers).items():
            show(name, values)
        for depth in [int(d) for d in args.depths.split(",")]:
            for entry in args.grid.split(","):
                fusion, weight = entry.split(":")
                w = float(weight)
                settings = base.with_overrides({
                    "retrieval.fusion": fusion, "retrieval.vector_weight": w, "retrieval.keyword_weight": 1 - w,
                    "retrieval.vector_top_k": depth, "retrieval.keyword_top_k": depth})
                systems = ["hybrid"] + (["hybrid_rerank"] if args.rerank else [])
                # depth=... keeps the candidate depth of this entry instead of evaluate()'s deep default
                results = evaluate(index, systems, settings, answers=args.answers, depth=depth)
                for name, values in results.items():
                    show(f"{name} {fusion} w={w:.2f} d={depth}", values)


if __name__ == "__main__":
    main()
