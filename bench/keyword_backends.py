"""Keyword backend benchmark: SQLite FTS5 (alone and with its in-memory postings copy) vs rank-bm25
(vs bm25s as a reference point).

Builds a synthetic mixed Chinese/English corpus (100k chunks by default) in a
temp folder, indexes it with each backend through the same code path the app
uses, and times keyword queries.  Prints a table; ``--json`` prints one object.

    python bench/keyword_backends.py [--chunks 100000] [--queries 200] [--top-k 40] [--json]

What is timed:
* ``tokenise_s``: ``index_terms`` (jieba + English words, stemmed) over all
  chunks, once; it is the same work for every backend, so the results are
  memoised and ``build_s`` is the index build alone.
* ``build_s``: from tokens to a queryable index.  For rank-bm25 that is the
  lazy rebuild that the first query after a change pays; for FTS5 it is
  ``add()`` (incremental, persisted); for bm25s it is ``index()`` (in memory).
* ``p50_ms`` / ``p95_ms``: one query, tokenisation included, top-k results;
  ``cpu_p50_ms`` / ``cpu_p95_ms``: the same in CPU time of the querying thread
  (SQLite and numpy run in it), which stays meaningful on a busy machine.
* ``reopen_s``: time until the first query answers after a restart.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from docmind_core.backends import keyword_index  # noqa: E402
from docmind_core.backends.keyword_index import Fts5KeywordIndex, RankBM25KeywordIndex, index_terms  # noqa: E402
from docmind_core.backends.protocols import IndexedChunk  # noqa: E402
from docmind_core.store.db import Database  # noqa: E402
from docmind_core.store.kb_store import KnowledgeStore  # noqa: E402

# Common CJK characters; Chinese pseudo-words are pairs of them (jieba then segments the text as it likes).
ZH_CHARS = ("的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面"
            "而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好"
            "应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道"
            "命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长"
            "求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色"
            "光门即保治北造百规热领七海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教"
            "速花带安场身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温传土许步群广石记"
            "需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连断深难近矿千周委素技备半办青省列习响约支般史"
            "感劳便团往酸历市克何除消构府称太准精值号率族维划选标写存候毛亲快效斯院查江型眼王按格养易置派层片始却专状育"
            "厂京识适属圆包火住调满县局照参红细引听该铁价严")


SYLLABLES = "ka ri to na mo lu se vi an or el um ex qu zo pa ti de ne ru ga fo li ma su".split()


def english_vocabulary(rng: random.Random, size: int) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def zipf_sampler(rng: random.Random, vocab: list[str], skip: int = 0):
    """Draw words with Zipf frequencies; the ``skip`` most frequent ranks are left out,
    as stop-word removal leaves them out of real keyword tokens."""
    ranks = np.arange(skip, skip + len(vocab))
    cumulative = np.cumsum(1.0 / (ranks + 1.0))
    total = cumulative[-1]
    order = vocab[:]
    rng.shuffle(order)  # frequency must not follow alphabetical order

    def sample(n: int) -> list[str]:
        picks = np.searchsorted(cumulative, [rng.random() * total for _ in range(n)])
        return [order[min(i, len(order) - 1)] for i in picks]

    return sample


def make_corpus(n_chunks: int, n_queries: int = 400, seed: int = 7) -> tuple[list[str], list[str]]:
    """(chunk texts, query texts).

    Half the chunks are Chinese (two-character pseudo-words from common
    characters, segmented by jieba as it likes), half English (pseudo-words);
    each language has a 20k vocabulary with Zipf frequencies, the 100 most
    frequent ranks dropped as stop-word removal would; 10% carry an error code.
    Each query takes 3-6 words of one random chunk, like a question about a
    passage, plus a few words from the whole vocabulary.
    """
    rng = random.Random(seed)
    en = zipf_sampler(rng, english_vocabulary(rng, 20000), skip=100)
    zh_vocab = sorted({rng.choice(ZH_CHARS) + rng.choice(ZH_CHARS) for _ in range(40000)})[:20000]
    zh = zipf_sampler(rng, zh_vocab, skip=100)
    texts = []
    for i in range(n_chunks):
        length = rng.randint(40, 90)
        if i % 2:
            text = " ".join(en(length)).capitalize() + "."
        else:
            text = "".join(zh(length // 2)) + "。"
        if rng.random() < 0.1:
            text += f" 错误代码 NIM-{rng.randint(1000, 9999)}."
        texts.append(text)
    queries = []
    for i in range(n_queries):
        source = texts[rng.randrange(n_chunks)]
        if source.endswith("。") or "。" in source[:5]:
            words = [w for w in index_terms(source.split(" ")[0], True)]
            picked = rng.sample(words, min(len(words), rng.randint(2, 4))) + zh(1)
            queries.append("".join(picked) + "是什么")
        else:
            words = source.rstrip(".").split(" ")
            picked = rng.sample(words, min(len(words), rng.randint(3, 6))) + en(1)
            queries.append(" ".join(picked))
    return texts, queries


def seed_database(db: Database, texts: list[str]) -> tuple[int, list[IndexedChunk]]:
    store = KnowledgeStore(db)
    kb = store.create_kb("bench", "bench", 1)
    doc_id = store.begin_document(kb.id, "corpus", source_path="", content_hash="x", mime="text/plain", size=0,
                                  text="")
    rows = [(f"c{i}", kb.id, doc_id, i, 0, None, t, 1, 0, len(t)) for i, t in enumerate(texts)]
    with db.transaction() as handle:
        handle.conn.executemany(
            "INSERT INTO chunks (id, kb_id, doc_id, idx, is_parent, parent_id, text, token_count, start, end) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    store.set_document_status(doc_id, "complete")
    return kb.id, [IndexedChunk(f"c{i}", kb.id, doc_id, t) for i, t in enumerate(texts)]


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values), q))


def time_queries(search, queries: list[str]) -> dict[str, float]:
    """Wall-clock and CPU milliseconds per query; CPU time shows the cost when other work shares the cores."""
    wall, cpu = [], []
    for query in queries:
        start, start_cpu = time.perf_counter(), time.thread_time()
        search(query)
        wall.append((time.perf_counter() - start) * 1000)
        cpu.append((time.thread_time() - start_cpu) * 1000)
    return {"p50_ms": round(statistics.median(wall), 2), "p95_ms": round(percentile(wall, 95), 2),
            "cpu_p50_ms": round(statistics.median(cpu), 2), "cpu_p95_ms": round(percentile(cpu, 95), 2)}


def _fts5_table(folder: Path, texts) -> tuple[Database, int, float | None]:
    """The FTS5 database both FTS5 rows share, and its build time (None when an earlier row built it)."""
    path = folder / "fts5.db"
    if path.exists():
        db = Database(path)
        return db, KnowledgeStore(db).list_kbs()[0].id, None
    db = Database(path)
    kb_id, chunks = seed_database(db, texts)
    index = Fts5KeywordIndex(db, memory_min_rows=None)
    start = time.perf_counter()
    for i in range(0, len(chunks), 5000):  # ingestion adds one document's chunks at a time
        index.add(chunks[i:i + 5000])
    return db, kb_id, time.perf_counter() - start


def bench_fts5(folder: Path, texts, queries, top_k) -> dict:
    """FTS5 alone: every query scored by SQLite's bm25()."""
    db, kb_id, build = _fts5_table(folder, texts)
    index = Fts5KeywordIndex(db, memory_min_rows=None)
    index.search([kb_id], queries[0], top_k)  # warm the page cache like a running app
    result = time_queries(lambda q: index.search([kb_id], q, top_k), queries)
    start = time.perf_counter()
    reopened = Fts5KeywordIndex(Database(folder / "fts5.db"), memory_min_rows=None)
    reopened.search([kb_id], queries[1], top_k)
    return {"build_s": None if build is None else round(build, 2),
            "reopen_s": round(time.perf_counter() - start, 3), **result}


def bench_fts5_memory(folder: Path, texts, queries, top_k) -> dict:
    """FTS5 with its in-memory postings copy (the default for KBs of 5,000+ chunks).

    ``build_s`` is the copy's build from the stored table (done in the background in the app,
    while FTS5 answers); ``reopen_s`` is the first answer after a restart, which FTS5 gives.
    """
    db, kb_id, _ = _fts5_table(folder, texts)
    index = Fts5KeywordIndex(db, memory_min_rows=0)
    start = time.perf_counter()
    index.warm([kb_id])
    build = time.perf_counter() - start
    copy = index._memory.copies()[kb_id]
    index.search([kb_id], queries[0], top_k)
    result = time_queries(lambda q: index.search([kb_id], q, top_k), queries)
    return {"build_s": round(build, 2), "reopen_s": 0.0, "copy_mb": round(copy.nbytes / 1e6, 1), **result}


def bench_rank_bm25(folder: Path, texts, queries, top_k) -> dict:
    db = Database(folder / "rank.db")
    kb_id, _ = seed_database(db, texts)
    index = RankBM25KeywordIndex(db)
    start = time.perf_counter()
    index.search([kb_id], queries[0], top_k)  # the lazy rebuild happens on this first query
    build = time.perf_counter() - start
    result = time_queries(lambda q: index.search([kb_id], q, top_k), queries)
    return {"build_s": round(build, 2), "reopen_s": round(build, 3), **result}


def bench_bm25s(texts, queries, top_k) -> dict:
    import bm25s

    corpus = [keyword_index.index_terms(t, True) or [""] for t in texts]
    start = time.perf_counter()
    retriever = bm25s.BM25()
    retriever.index(corpus, show_progress=False)
    build = time.perf_counter() - start

    def search(query: str):
        terms = [t for t in keyword_index.index_terms(query, True) if t in retriever.vocab_dict]
        if terms:
            retriever.retrieve([terms], k=top_k, show_progress=False)

    result = time_queries(search, queries)
    return {"build_s": round(build, 2), "reopen_s": None, **result}


def main() -> None:
    parser = argparse.ArgumentParser(description="Keyword backend benchmark (FTS5, rank-bm25, bm25s)")
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--top-k", type=int, default=40)
    parser.add_argument("--backends", default="fts5,fts5_memory,rank_bm25,bm25s")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    texts, queries = make_corpus(args.chunks, args.queries)
    start = time.perf_counter()
    memo = {(t, True): index_terms(t, True) for t in texts}
    tokenise_s = time.perf_counter() - start
    # Every backend calls keyword_index.index_terms; serve the chunk texts from the memo.
    keyword_index.index_terms = lambda text, stem, stored=None: (
        memo.get((text, stem)) if stored is None and (text, stem) in memo else index_terms(text, stem, stored))
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="docmind-kwbench-") as tmp:
        folder = Path(tmp)
        for name in args.backends.split(","):
            if not args.json:
                print(f"... {name}", file=sys.stderr, flush=True)
            if name == "fts5":
                results[name] = bench_fts5(folder, texts, queries, args.top_k)
            elif name == "fts5_memory":
                results[name] = bench_fts5_memory(folder, texts, queries, args.top_k)
            elif name == "rank_bm25":
                results[name] = bench_rank_bm25(folder, texts, queries, args.top_k)
            elif name == "bm25s":
                results[name] = bench_bm25s(texts, queries, args.top_k)
            else:
                raise SystemExit(f"unknown backend {name!r}")
    report = {"chunks": args.chunks, "queries": len(queries), "top_k": args.top_k, "cpus": os.cpu_count(),
              "load_average": [round(x, 1) for x in os.getloadavg()], "tokenise_s": round(tokenise_s, 1),
              "backends": results}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"\n{args.chunks} chunks (mixed zh/en), {len(queries)} queries, top-{args.top_k}, {os.cpu_count()} CPUs, "
          f"load average {report['load_average'][0]}; tokenising all chunks took {tokenise_s:.0f} s")
    print(f"{'backend':<12} {'build s':>8} {'p50 ms':>8} {'p95 ms':>8} {'cpu p50':>8} {'cpu p95':>8} "
          f"{'restart s':>10}")
    for name, r in results.items():
        reopen = "-" if r["reopen_s"] is None else f"{r['reopen_s']:.3f}"
        build = "-" if r["build_s"] is None else f"{r['build_s']:.2f}"
        print(f"{name:<12} {build:>8} {r['p50_ms']:>8.2f} {r['p95_ms']:>8.2f} {r['cpu_p50_ms']:>8.2f} "
              f"{r['cpu_p95_ms']:>8.2f} {reopen:>10}")


if __name__ == "__main__":
    main()
