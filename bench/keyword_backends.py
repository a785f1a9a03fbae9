"""Keyword backend benchmark: SQLite FTS5 vs rank-bm25 (vs bm25s as a reference point).

Builds a synthetic mixed Chinese/English corpus (100k chunks by default) in a
temp folder, indexes it with each backend through the same code path the app
uses, and times keyword queries.  Prints a table; ``--json`` prints one object.

    python bench/keyword_backends.py [--chunks 100000] [--queries 200] [--top-k 40] [--json]

What is timed:
* ``build_s``: from chunk texts to a queryable index, including tokenisation
  (jieba + English words).  For rank-bm25 that is the lazy rebuild that the
  first query after a change pays; for FTS5 it is ``add()`` (incremental,
  persisted); for bm25s it is tokenisation plus ``index()`` (in memory only).
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

from docmind_core.backends.keyword_index import Fts5KeywordIndex, RankBM25KeywordIndex, index_terms  # noqa: E402
from docmind_core.backends.protocols import IndexedChunk  # noqa: E402
from docmind_core.store.db import Database  # noqa: E402
from docmind_core.store.kb_store import KnowledgeStore  # noqa: E402

ZH_WORDS = """系统 数据 设备 用户 管理 服务 文档 检索 索引 配置 安全 网络 存储 性能 版本 固件 升级 错误 故障 日志
权限 角色 租户 许可证 订阅 价格 套餐 功耗 温度 风扇 电源 接口 端口 协议 加密 证书 审计 备份 恢复 迁移
部署 集群 节点 容器 镜像 监控 告警 指标 延迟 吞吐 带宽 缓存 队列 任务 调度 模型 向量 嵌入 分词 召回
排序 重排 融合 阈值 置信度 引用 来源 段落 句子 标题 摘要 报告 合同 发票 客户 订单 产品 工厂 医院 实验室
云端 本地 离线 在线 同步 异步 导入 导出 上传 下载 删除 更新 查询 搜索 问答 知识库 平台 控制台 仪表盘 设置
区域 上海 杭州 北京 法兰克福 弗吉尼亚 工程师 管理员 支持 响应 时间 天数 保留 期限 策略 规则 流程 步骤 手册""".split()

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

    Half the chunks are Chinese (jieba words from a 200-word domain list),
    half English (pseudo-words over a 20k vocabulary, Zipf frequencies with
    the 100 most frequent ranks dropped as stop words); 10% carry an error code.
    Each query takes 3-6 words of one random chunk, like a question about a
    passage, plus a few words from the whole vocabulary.
    """
    rng = random.Random(seed)
    en = zipf_sampler(rng, english_vocabulary(rng, 20000), skip=100)
    zh = zipf_sampler(rng, ZH_WORDS, skip=5)
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


def bench_fts5(folder: Path, texts, queries, top_k) -> dict:
    db = Database(folder / "fts5.db")
    kb_id, chunks = seed_database(db, texts)
    index = Fts5KeywordIndex(db)
    start = time.perf_counter()
    for i in range(0, len(chunks), 5000):  # ingestion adds one document's chunks at a time
        index.add(chunks[i:i + 5000])
    build = time.perf_counter() - start
    index.search([kb_id], queries[0], top_k)  # warm the page cache like a running app
    result = time_queries(lambda q: index.search([kb_id], q, top_k), queries)
    start = time.perf_counter()
    reopened = Fts5KeywordIndex(Database(folder / "fts5.db"))
    reopened.search([kb_id], queries[1], top_k)
    return {"build_s": round(build, 2), "reopen_s": round(time.perf_counter() - start, 3), **result}


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

    start = time.perf_counter()
    corpus = [index_terms(t, True) or [""] for t in texts]
    retriever = bm25s.BM25()
    retriever.index(corpus, show_progress=False)
    build = time.perf_counter() - start

    def search(query: str):
        terms = [t for t in index_terms(query, True) if t in retriever.vocab_dict]
        if terms:
            retriever.retrieve([terms], k=top_k, show_progress=False)

    result = time_queries(search, queries)
    return {"build_s": round(build, 2), "reopen_s": None, **result}


def main() -> None:
    parser = argparse.ArgumentParser(description="Keyword backend benchmark (FTS5, rank-bm25, bm25s)")
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--top-k", type=int, default=40)
    parser.add_argument("--backends", default="fts5,rank_bm25,bm25s")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    texts, queries = make_corpus(args.chunks, args.queries)
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="docmind-kwbench-") as tmp:
        folder = Path(tmp)
        for name in args.backends.split(","):
            if not args.json:
                print(f"... {name}", file=sys.stderr, flush=True)
            if name == "fts5":
                results[name] = bench_fts5(folder, texts, queries, args.top_k)
            elif name == "rank_bm25":
                results[name] = bench_rank_bm25(folder, texts, queries, args.top_k)
            elif name == "bm25s":
                results[name] = bench_bm25s(texts, queries, args.top_k)
            else:
                raise SystemExit(f"unknown backend {name!r}")
    report = {"chunks": args.chunks, "queries": len(queries), "top_k": args.top_k, "cpus": os.cpu_count(),
              "load_average": [round(x, 1) for x in os.getloadavg()], "backends": results}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"\n{args.chunks} chunks (mixed zh/en), {len(queries)} queries, top-{args.top_k}, {os.cpu_count()} CPUs, "
          f"load average {report['load_average'][0]}")
    print(f"{'backend':<10} {'build s':>8} {'p50 ms':>8} {'p95 ms':>8} {'cpu p50':>8} {'cpu p95':>8} "
          f"{'restart s':>10}")
    for name, r in results.items():
        reopen = "-" if r["reopen_s"] is None else f"{r['reopen_s']:.3f}"
        print(f"{name:<10} {r['build_s']:>8.2f} {r['p50_ms']:>8.2f} {r['p95_ms']:>8.2f} {r['cpu_p50_ms']:>8.2f} "
              f"{r['cpu_p95_ms']:>8.2f} {reopen:>10}")


if __name__ == "__main__":
    main()
