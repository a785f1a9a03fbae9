"""One-shot retrieval latency, ingest throughput and memory on synthetic corpora.

    python bench/retrieval_latency.py [--sizes 10000,100000] [--queries 40] [--ingest-chunks 400] [--json]

What is measured (2 cores on the reference machine):

* ``ingest_ratio``: chunks/s through the real ``Ingestor`` (read, chunk, embed,
  write SQLite, Chroma and FTS5) divided by the bundled encoder's raw chunks/s
  on the same kind of chunk texts, measured in the same run (raw before and
  after the ingest, averaged, so a busy machine biases neither side).  One tiny
  file is ingested first so one-time set-up is not counted as throughput.
* per corpus size: the synthetic mixed Chinese/English chunks of
  ``bench/keyword_backends.py`` go into SQLite (children + one parent per four
  children), FTS5 and embedded Chroma.  To finish in minutes the *stored*
  vectors are synthetic (a fixed random 512-d vector per word, summed and
  normalised, so similar chunks get similar vectors); the *query* is encoded
  with the real bundled encoder inside the timed ``vector`` stage, each query
  string distinct so the query cache never answers.
* ``HybridRetriever.search`` end to end (vector + keyword in parallel, fusion,
  offline rerank, MMR, parent expansion, compression): p50/p95 per stage from
  ``SearchResult.timings_ms``; ``retrieval`` is the total.
* ``query_encode_p50_ms``: the bundled encoder alone on one query, timed in the
  same process just before; ``retrieval_over_encode`` = retrieval p50 over it,
  a figure that moves much less than milliseconds when the host's speed drifts.
* ``keyword_p50_ms`` is with the keyword index's in-memory postings copy built
  (the steady state of a running app; ``keyword_copy_build_s`` is its build);
  ``keyword_fts5_only_p50_ms`` is the same queries on FTS5 alone, which is what
  answers after a restart or a change until the copy is rebuilt.
* ``rss_mb``: peak resident set of the process that built and searched that
  size; each size runs in a fresh child process, so sizes do not add up.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["ANONYMIZED_TELEMETRY"] = "False"

from keyword_backends import make_corpus  # noqa: E402

from docmind_core.backends.embedders import Usem3Embedder  # noqa: E402
from docmind_core.backends.keyword_index import Fts5KeywordIndex  # noqa: E402
from docmind_core.backends.protocols import IndexedChunk  # noqa: E402
from docmind_core.backends.vector_store import ChromaVectorStore  # noqa: E402
from docmind_core.values import ChunkRecord  # noqa: E402
from docmind_core.backends.rerankers import OfflineReranker  # noqa: E402
from docmind_core.retrieval.hybrid import HybridRetriever
from docmind_core.retrieval.refine import EvidenceRefiner  # noqa: E402
from docmind_core.settings import Settings  # noqa: E402
from docmind_core.store.db import Database  # noqa: E402
from docmind_core.store.kb_store import KnowledgeStore  # noqa: E402
from docmind_core.text.tokens import count_tokens, split_terms, stored_terms  # noqa: E402

STAGES = ("vector", "keyword", "fusion", "rerank", "mmr", "expand", "compress", "total")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux reports KiB


def pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


# --------------------------------------------------------------------------
# Ingest throughput against the raw encoder
# --------------------------------------------------------------------------

def measure_ingest(embedder, n_chunks: int, workdir: Path) -> dict:
    from docmind_core.ingest.chunking import chunk_document
    from docmind_core.ingest.leases import LeaseBook
    from docmind_core.ingest.pipeline import Ingestor

    settings = Settings()
    texts, _ = make_corpus(n_chunks * 2, n_queries=1, seed=11)
    docs_dir = workdir / "docs"
    docs_dir.mkdir()
    # 16 synthetic passages per file: real files, so reading and chunking are part of the timing
    per_doc = 16
    for d in range(0, len(texts), per_doc):
        (docs_dir / f"doc{d // per_doc:04d}.txt").write_text("\n\n".join(texts[d:d + per_doc]), encoding="utf-8")
    db = Database(workdir / "ingest.db")
    store = KnowledgeStore(db)
    kb = store.create_kb("ingest-bench", embedder.id, embedder.dim)
    ingestor = Ingestor(store, embedder, ChromaVectorStore(path=workdir / "ingest-chroma"), Fts5KeywordIndex(db),
                        LeaseBook(db))
    embedder.embed(["warm up the encoder", "预热编码器"])

    def raw(chunk_texts: list[str]) -> float:
        batch = settings.embedding.batch_size
        start = time.perf_counter()
        for i in range(0, len(chunk_texts), batch):
            embedder.embed(chunk_texts[i:i + batch])
        return len(chunk_texts) / (time.perf_counter() - start)

    # one-time costs (Chroma collection creation, jieba's dictionary) are not throughput: pay them first
    warm = workdir / "warm.txt"
    warm.write_text("warm up. 预热。", encoding="utf-8")
    ingestor.ingest(kb.id, [warm], settings)
    paths = sorted(docs_dir.iterdir())
    sample = [c.text for p in paths[:2] for c in chunk_document(
        kb.id, p.name, p.read_text(encoding="utf-8"), settings.rag.chunk_tokens,
        settings.rag.chunk_overlap_tokens, settings.rag.parent_tokens)[1]]
    raw_before = raw(sample)
    start = time.perf_counter()
    outcomes = ingestor.ingest(kb.id, paths, settings)
    seconds = time.perf_counter() - start
    chunks = sum(o.chunks for o in outcomes)
    chunk_texts = [c.text for d in store.list_documents(kb.id) if d.name != "warm.txt"
                   for c in store.chunks_for_document(d.id)]
    raw_rate = (raw_before + raw(chunk_texts)) / 2
    ingest_rate = chunks / seconds
    return {"chunks": chunks, "ingest_chunks_per_s": round(ingest_rate, 2), "raw_chunks_per_s": round(raw_rate, 2),
            "ingest_ratio": round(ingest_rate / raw_rate, 3)}


# --------------------------------------------------------------------------
# Synthetic indexes and retrieval latency
# --------------------------------------------------------------------------

class WordVectors:
    """Synthetic stored vectors: each keyword token picks one of a fixed bank of random vectors (by
    crc32); a text's vector is their normalised sum, so chunks sharing words get similar vectors.  A
    fixed bank keeps the generator's own memory (16 MB) out of the peak RSS being measured."""

    def __init__(self, dim: int, bank: int = 8192, seed: int = 5):
        self.bank = np.random.default_rng(seed).standard_normal((bank, dim)).astype(np.float32)

    def __call__(self, terms: str) -> np.ndarray:
        rows = [zlib.crc32(tok.encode("utf-8")) % len(self.bank) for tok in split_terms(terms)[:64]]
        vec = self.bank[rows].sum(axis=0) if rows else np.zeros(self.bank.shape[1], dtype=np.float32)
        norm = np.linalg.norm(vec)
        return vec / norm if norm else vec


def build_index(n_chunks: int, embedder, workdir: Path, say) -> tuple[HybridRetriever, list[str], dict]:
    texts, queries = make_corpus(n_chunks, n_queries=400, seed=7)
    db = Database(workdir / f"bench{n_chunks}.db")
    store = KnowledgeStore(db)
    kb = store.create_kb(f"bench-{n_chunks}", embedder.id, embedder.dim)
    vector_store = ChromaVectorStore(path=workdir / f"chroma{n_chunks}")
    keyword_index = Fts5KeywordIndex(db)
    words = WordVectors(embedder.dim)
    timings = {}
    per_doc, group = 200, 4
    start = time.perf_counter()
    for d0 in range(0, n_chunks, per_doc):
        part = texts[d0:d0 + per_doc]
        body = "\n".join(part)
        doc_id = store.begin_document(kb.id, f"doc{d0 // per_doc:05d}.txt", source_path="", content_hash=str(d0),
                                      mime="text/plain", size=len(body), text=body)
        records, indexed, offset = [], [], 0
        spans = []
        for text in part:
            spans.append((offset, offset + len(text)))
            offset += len(text) + 1
        for g in range(0, len(part), group):
            pid = f"p{d0 + g}"
            records.append(ChunkRecord(id=pid, kb_id=kb.id, doc_id=doc_id, index=g // group, is_parent=True,
                                       text="\n".join(part[g:g + group]),
                                       token_count=sum(count_tokens(t) for t in part[g:g + group]),
                                       start=spans[g][0], end=spans[min(g + group, len(part)) - 1][1]))
            for j in range(g, min(g + group, len(part))):
                cid, terms = f"c{d0 + j}", stored_terms(part[j])  # tokenised once, as the Ingestor does
                records.append(ChunkRecord(id=cid, kb_id=kb.id, doc_id=doc_id, index=j, parent_id=pid,
                                           text=part[j], token_count=count_tokens(part[j]),
                                           start=spans[j][0], end=spans[j][1], terms=terms))
                indexed.append(IndexedChunk(cid, kb.id, doc_id, part[j], terms))
        store.add_chunks(records)
        keyword_index.add(indexed)
        vectors = np.stack([words(c.terms) for c in indexed])
        vector_store.add(indexed, vectors)
        store.set_chunk_vectors([c.chunk_id for c in indexed], vectors)  # as the Ingestor keeps them
        store.set_document_status(doc_id, "complete")
        if (d0 // per_doc) % 50 == 0:
            say(f"  {n_chunks}: indexed {d0 + len(part)} chunks")
    timings["build_s"] = round(time.perf_counter() - start, 1)
    retriever = HybridRetriever(store, embedder, vector_store, keyword_index,
                                EvidenceRefiner(store, OfflineReranker(embedder)))
    return retriever, queries, {"kb_id": kb.id, **timings}


def measure_retrieval(retriever: HybridRetriever, kb_id: int, queries: list[str], n: int, tag: str) -> dict:
    settings = Settings()
    per_stage: dict[str, list[float]] = {s: [] for s in STAGES}
    for i, query in enumerate(queries[:n + 3]):
        result = retriever.search(f"{query} {tag}{i}", [kb_id], settings)  # distinct: no query-cache hits
        if i < 3:
            continue  # warm-up: first SQLite pages, Chroma segment load
        for stage in STAGES:
            per_stage[stage].append(result.timings_ms.get(stage, 0.0))
    return {stage: (round(pct(v, 0.5), 2), round(pct(v, 0.95), 2)) for stage, v in per_stage.items()}


def measure_size(size: int, n_queries: int, say) -> dict:
    """Build one synthetic index and time queries on it (run in a fresh process: RSS is per size)."""
    embedder = Usem3Embedder()
    with tempfile.TemporaryDirectory(prefix="docmind-latency-") as tmp:
        say(f"building the {size}-chunk index ...")
        retriever, queries, info = build_index(size, embedder, Path(tmp), say)
        say(f"timing {n_queries} queries ...")
        # The host's speed drifts between runs on shared machines: time the encoder alone on the same
        # queries right before, so a run can also be read as "retrieval costs N query encodings".
        encode_ms = []
        for i, query in enumerate(queries[:n_queries]):
            start = time.perf_counter()
            embedder.embed([f"{query} e{size}{i}"])
            encode_ms.append((time.perf_counter() - start) * 1000)
        # A running app builds the keyword index's in-memory postings copy in the background after start-up
        # or a change (FTS5 answers meanwhile); build it here so the timings are of the steady state.
        start = time.perf_counter()
        copies = retriever.keyword_index.warm([info["kb_id"]])
        copy_build_s = time.perf_counter() - start
        stages = measure_retrieval(retriever, info["kb_id"], queries, n_queries, f"q{size}")
        # The same keyword queries on FTS5 alone: what answers before the copy is built.
        fts5_only = Fts5KeywordIndex(retriever.keyword_index.db, memory_min_rows=None)
        fts5_ms = []
        for i, query in enumerate(queries[:n_queries]):
            start = time.perf_counter()
            fts5_only.search([info["kb_id"]], f"{query} f{size}{i}", Settings().retrieval.keyword_top_k)
            fts5_ms.append((time.perf_counter() - start) * 1000)
        retriever._pool.shutdown(wait=False)
    encode_p50 = pct(encode_ms, 0.5)
    return {
        "retrieval_p50_ms": stages["total"][0], "retrieval_p95_ms": stages["total"][1],
        "query_encode_p50_ms": round(encode_p50, 2),
        "retrieval_over_encode": round(stages["total"][0] / encode_p50, 2) if encode_p50 else None,
        "keyword_p50_ms": stages["keyword"][0], "vector_p50_ms": stages["vector"][0],
        "keyword_fts5_only_p50_ms": round(pct(fts5_ms, 0.5), 2), "keyword_copy": bool(copies),
        "keyword_copy_build_s": round(copy_build_s, 2),
        "rss_mb": round(peak_rss_mb(), 1), "build_s": info["build_s"],
        "stages_ms": {s: {"p50": v[0], "p95": v[1]} for s, v in stages.items()},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description="retrieval latency, ingest ratio and memory")
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--ingest-chunks", type=int, default=400)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--one-size", type=int, help=argparse.SUPPRESS)  # internal: one size, in a child process
    args = ap.parse_args()
    say = (lambda msg: print(msg, file=sys.stderr, flush=True))
    if args.one_size:
        print(json.dumps(measure_size(args.one_size, args.queries, say)))
        return
    out: dict = {"sizes": {}}
    with tempfile.TemporaryDirectory(prefix="docmind-latency-") as tmp:
        say("ingest throughput ...")
        ingest_dir = Path(tmp) / "ingest"
        ingest_dir.mkdir()
        ingest = measure_ingest(Usem3Embedder(), args.ingest_chunks, ingest_dir)
        out["ingest_ratio"] = ingest["ingest_ratio"]
        out["ingest"] = ingest
    for size in [int(s) for s in args.sizes.split(",") if s.strip()]:
        # Each size in its own process, so its peak RSS is that of a process serving that index alone.
        child = subprocess.run([sys.executable, __file__, "--one-size", str(size), "--queries", str(args.queries)],
                               stdout=subprocess.PIPE, check=True, text=True)
        out["sizes"][str(size)] = json.loads(child.stdout.strip().splitlines()[-1])
    out["cpu_count"] = os.cpu_count()
    out["load_avg_1m"] = round(os.getloadavg()[0], 2)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"ingest: {ingest['ingest_chunks_per_s']} chunks/s vs raw encoder {ingest['raw_chunks_per_s']} chunks/s "
          f"-> ingest_ratio {out['ingest_ratio']}")
    print(f"{'size':>8} " + " ".join(f"{s + ' p50/p95':>20}" for s in STAGES) + f" {'rss_mb':>8} {'encode':>7}")
    for size, row in out["sizes"].items():
        cells = " ".join(f"{row['stages_ms'][s]['p50']:>9.1f}/{row['stages_ms'][s]['p95']:<10.1f}" for s in STAGES)
        print(f"{size:>8} {cells} {row['rss_mb']:>8} {row['query_encode_p50_ms']:>7}")
    for size, row in out["sizes"].items():
        print(f"{size:>8} keyword on FTS5 alone p50 {row['keyword_fts5_only_p50_ms']} ms; in-memory postings copy "
              f"{'built in ' + str(row['keyword_copy_build_s']) + ' s' if row['keyword_copy'] else 'not used'}")
    print(f"(load average {out['load_avg_1m']} on {out['cpu_count']} cores)")


if __name__ == "__main__":
    main()
