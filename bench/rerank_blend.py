"""Does the offline reranker earn its place over fusion (issue 22 part 3)?  Fit how much of the fused score the
final order keeps, on the fit splits; report on the report splits.

    python bench/rerank_blend.py EVAL_DIR [--sets scifact,hotpotqa,cmrc2018] [--cache data/cache]
        [--betas 0,0.5,1,2,3,4,6,8] [--dump rows.jsonl | --replay rows.jsonl]

For every question of each set (the splits of ``bench/grader_tiers.py``: HotpotQA questions 1-400 alternate,
CMRC 2018 by gold passage number, SciFact by halves) the product's own fused candidates are taken at the depth
``docmind eval retrieval`` uses, and the head (``retrieval.rerank_top_n``) is scored by the offline reranker.
Each head is then ordered as the refining pass orders it (``refine.final_relevance``: the reranker's log-odds
plus ``beta`` times the fused score min-max scaled over the head, minus 1; beta 0 is the reranker alone, a
large beta fusion alone), and nDCG@10 is read per split.  The beta with the
best mean over the three fit splits is the one to ship (``retrieval.rerank_fusion_weight``); the report splits
were not read to choose it.  ``--dump`` keeps the per-question scores, ``--replay`` re-reads them without
searching again.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["ANONYMIZED_TELEMETRY"] = "False"

SETS = ("scifact", "hotpotqa", "cmrc2018", "crosslang")
FUSION_ONLY = math.inf


def _row(index, question, settings, name: str, split: str, qrels: dict) -> dict:
    """One question's head docs with their fused and rerank scores, and its tail's docs."""
    fused = index.retriever.candidates(question.text, [index.kb_id], settings)
    n = settings.retrieval.rerank_top_n
    head, tail = fused[:n], fused[n:]
    doc = lambda c: index.beir_of_doc.get(c.doc_id, "")  # noqa: E731
    return {"set": name, "split": split, "qid": question.id, "qrels": qrels,
            "head": [doc(c) for c in head], "fused": [c.scores.fused or 0.0 for c in head],
            "rerank": index.reranker.score(question.text, head), "tail": [doc(c) for c in tail]}


def collect(eval_dir: Path, name: str, cache: Path) -> list[dict]:
    """One row per question of either split: the head's docs, fused and rerank scores, the tail's docs."""
    from grader_tiers import split_indices

    from docmind_core.backends.factory import build_embedder
    from docmind_core.eval.beir import EmbeddingCache, load_beir
    from docmind_core.eval.retrieval_eval import build_index
    from docmind_core.settings import Settings

    settings = Settings()
    deep = settings.with_overrides({"retrieval.vector_top_k": max(settings.retrieval.vector_top_k, 100),
                                    "retrieval.keyword_top_k": max(settings.retrieval.keyword_top_k, 100)})
    dataset = load_beir(eval_dir / name)
    embedder, _note = build_embedder(settings.embedding)
    split_of = {i: split for split, ids in split_indices(name, dataset).items() for i in ids}
    with tempfile.TemporaryDirectory(prefix="docmind-blend-") as tmp:
        index = build_index(dataset, Path(tmp), embedder, settings, EmbeddingCache(cache))
        rows = [_row(index, q, deep, name, split_of[i], dataset.qrels[q.id])
                for i, q in enumerate(dataset.queries) if i in split_of and q.id in dataset.qrels]
    return rows


def collect_crosslang(eval_dir: Path) -> list[dict]:
    """The same rows for the cross-language questions of ``bench/crosslang.py`` (hard negatives on): the tuning
    questions are a fit split, the held-out questions a report split."""
    import crosslang

    from docmind_core.backends.embedders import Usem3Embedder
    from docmind_core.eval.beir import EmbeddingCache
    from docmind_core.eval.retrieval_eval import build_index
    from docmind_core.settings import Settings

    settings = Settings()
    rows: list[dict] = []
    for split, path in (("fit", crosslang.QUESTIONS), ("report", crosslang.HELD_OUT)):
        questions = crosslang.load_questions(path)
        dataset = crosslang.mixed_dataset(eval_dir, questions, {"hotpotqa": 60, "scifact": 30, "cmrc2018": 60},
                                          22, near=3)
        with tempfile.TemporaryDirectory(prefix="docmind-blend-") as tmp:
            index = build_index(dataset, Path(tmp), Usem3Embedder(threads=1), settings,
                                EmbeddingCache(Path(tmp) / "cache"))
            rows += [_row(index, q, settings, "crosslang", split, dataset.qrels[q.id]) for q in dataset.queries]
    return rows


def ordered(row: dict, beta: float) -> list[str]:
    """The row's docs in the final order ``refine.final_order`` gives with fusion weight ``beta``."""
    from docmind_core.retrieval.refine import final_order

    if beta == FUSION_ONLY:  # the fused order as it came (refine would need an infinite weight)
        return row["head"] + row["tail"]
    order, _relevance = final_order(row["rerank"], row["fused"], beta)
    return [row["head"][i] for i in order] + row["tail"]


def ndcg(rows: list[dict], beta: float) -> float:
    from docmind_core.eval.retrieval_eval import docs_from_chunks, ndcg_at_k

    if not rows:
        return float("nan")
    return sum(ndcg_at_k(docs_from_chunks(ordered(r, beta)), r["qrels"], 10) for r in rows) / len(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("eval_dir", type=Path, nargs="?")
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--cache", type=Path, default=ROOT / "data" / "cache")
    ap.add_argument("--betas", default="0,0.5,1,1.5,2,3,4,6,8")
    ap.add_argument("--dump", type=Path)
    ap.add_argument("--replay", type=Path)
    args = ap.parse_args()
    if args.replay:
        rows = [json.loads(line) for line in args.replay.read_text(encoding="utf-8").splitlines() if line.strip()]
    else:
        if args.eval_dir is None:
            raise SystemExit("give EVAL_DIR, or --replay a dump")
        rows = [r for name in args.sets.split(",")
                for r in (collect_crosslang(args.eval_dir) if name == "crosslang"
                          else collect(args.eval_dir, name, args.cache))]
        if args.dump:
            args.dump.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    betas = [float(b) for b in args.betas.split(",")] + [FUSION_ONLY]
    names = [s for s in SETS if any(r["set"] == s for r in rows)]
    label = lambda b: "fusion alone" if b == FUSION_ONLY else ("rerank alone" if b == 0 else f"beta {b:g}")  # noqa: E731
    print("nDCG@10 of hybrid + rerank, the head ordered by logit(rerank) + beta * (fused min-max over the head - 1)")
    print(f"{'order':<14} " + " ".join(f"{n + ' ' + s:>17}" for n in names for s in ("fit", "report"))
          + f" {'mean fit':>9}")
    best, best_fit = None, -1.0
    for beta in betas:
        cells, fits = [], []
        for n in names:
            for split in ("fit", "report"):
                value = ndcg([r for r in rows if r["set"] == n and r["split"] == split], beta)
                cells.append(value)
                if split == "fit":
                    fits.append(value)
        mean_fit = sum(fits) / len(fits)
        if beta != FUSION_ONLY and mean_fit > best_fit + 1e-9:
            best, best_fit = beta, mean_fit
        print(f"{label(beta):<14} " + " ".join(f"{c:>17.4f}" for c in cells) + f" {mean_fit:>9.4f}")
    print(f"\nbest on the fit splits: beta {best:g} (mean nDCG@10 {best_fit:.4f})")


if __name__ == "__main__":
    main()
