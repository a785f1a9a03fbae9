"""The in-memory postings copy answers exactly as FTS5 does, and is only used while it is current.

The oracle is FTS5 itself: the same database searched with the copy turned
off must give the same hits, in the same order, with bit-identical scores.
"""

from __future__ import annotations

import logging
import math
import random
import time

import pytest

from docmind_core.backends import keyword_memory
from docmind_core.backends.keyword_index import Fts5KeywordIndex, index_terms
from docmind_core.backends.keyword_memory import PostingsCache, PostingsCopy
from docmind_core.backends.protocols import IndexedChunk
from docmind_core.store.db import Database

EN = ("aurora gateway token limit quota release rollback cluster shard replica latency throughput index "
      "vector keyword rerank budget citation parser encoder batch window").split()
ZH = "网关 令牌 限额 版本 回滚 集群 分片 副本 延迟 吞吐 索引 向量 关键词 重排 预算 引用 解析 编码 批次 窗口".split()
CODES = ["aur-4012", "v3.2.1", "gw_77", "x.9"]


def _corpus(n: int, seed: int = 3) -> list[str]:
    """Chunk texts with skewed term frequencies, repeated terms (tf > 1), exact duplicates (score ties),
    a row with no keyword at all, Chinese, English and codes."""
    rng = random.Random(seed)
    vocab = EN + ZH + CODES
    weights = [1.0 / (i + 1) for i in range(len(vocab))]
    texts = []
    for i in range(n):
        if i % 37 == 5:
            texts.append(texts[-1])  # an exact duplicate: same score, the lower rowid must win
            continue
        if i == 11:
            texts.append("the and of")  # stop words only: an empty terms row
            continue
        words = rng.choices(vocab, weights=weights, k=rng.randint(3, 30))
        texts.append(" ".join(words) + (" 。" if any(w in ZH for w in words) else " ."))
    return texts


def _fill(index: Fts5KeywordIndex, kb_id: int, texts: list[str], first_doc: int = 1, per_doc: int = 25) -> None:
    chunks = [IndexedChunk(f"k{kb_id}-c{i}", kb_id, first_doc + i // per_doc, t) for i, t in enumerate(texts)]
    for start in range(0, len(chunks), per_doc):  # one write per document, as the Ingestor does
        index.add(chunks[start:start + per_doc])


QUERIES = ["aurora gateway", "令牌 限额", "aur-4012 rollback", "window window batch", "encoder", "索引 vector 重排",
           "nothing-matches-this", "gateway 网关 token 令牌 quota latency", "v3.2.1 release", "citation 引用 预算"]


@pytest.fixture
def pair(tmp_path):
    """One database, two views: FTS5 alone, and FTS5 with in-memory copies for every KB."""
    db = Database(tmp_path / "kw.db")
    fts = Fts5KeywordIndex(db, memory_min_rows=None)
    mem = Fts5KeywordIndex(db, memory_min_rows=0)
    _fill(fts, 1, _corpus(400))
    assert mem.warm([1]) == 1
    return db, fts, mem


def _used_copy(monkeypatch) -> list[int]:
    """Record every search the in-memory copy answers."""
    calls: list[int] = []
    original = PostingsCopy.search

    def spy(self, *args, **kwargs):
        calls.append(self.generation)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(PostingsCopy, "search", spy)
    return calls


def _copies_built(monkeypatch) -> list[int]:
    """Record the generation of every postings copy built."""
    built: list[int] = []
    original = PostingsCopy.build

    def spy(generation, *args, **kwargs):
        built.append(generation)
        return original(generation, *args, **kwargs)

    monkeypatch.setattr(PostingsCopy, "build", spy)
    return built


def _background_builds_held(monkeypatch) -> list[str]:
    """Keep every background thread from starting (a copy is then built only by ``warm``); returns the names of
    the threads held back."""
    held: list[str] = []

    class Held:
        def __init__(self, *args, name: str = "", **kwargs):
            held.append(name)

        def start(self) -> None:
            pass

    monkeypatch.setattr(keyword_memory.threading, "Thread", Held)
    return held


@pytest.mark.parametrize("top_k", [1, 5, 40, 1000])
def test_copy_returns_exactly_what_fts5_returns(pair, monkeypatch, top_k):
    _db, fts, mem = pair
    used = _used_copy(monkeypatch)
    for query in QUERIES:
        for docs in (None, [2], [1, 3, 9], [999]):
            expected = fts.search([1], query, top_k, doc_ids=docs)
            assert mem.search([1], query, top_k, doc_ids=docs) == expected, (query, docs)
    assert len(used) == len(QUERIES) * 4  # every one of them came from the copy
    assert fts.search([1], "aurora", top_k)  # and the comparison was not between empty lists


def test_ties_go_to_the_lower_rowid_in_both_paths(pair):
    _db, fts, mem = pair
    texts = _corpus(400)
    dup = next(i for i in range(1, len(texts)) if i % 37 == 5)
    query = " ".join(dict.fromkeys(index_terms(texts[dup], stem=True)))
    hits = fts.search([1], query, 1000)
    scores = dict(hits)
    a, b = f"k1-c{dup - 1}", f"k1-c{dup}"
    assert scores[a] == scores[b]
    order = [cid for cid, _ in hits]
    assert order.index(a) < order.index(b)
    assert mem.search([1], query, 1000) == hits


def test_scores_follow_the_bm25_formula_by_hand():
    # rows: "a a b" (+1 doc token), "b c" (+1), "c" (+1): N = 3, total tokens 9, avgdl 3
    copy = PostingsCopy.build(7, ["a a b", "b c", "c"], ["r0", "r1", "r2"], [1, 1, 2])
    k1, b = 1.2, 0.75

    def term(tf, hits, size):
        idf = max(math.log((3 - hits + 0.5) / (hits + 0.5)), 1e-6)
        return idf * (tf * (k1 + 1) / (tf + k1 * (1 - b + b * size / 3.0)))

    hits = dict(copy.search(["a", "b"], 10))
    assert hits["r0"] == pytest.approx(term(2, 1, 4) + term(1, 2, 4))
    assert hits["r1"] == pytest.approx(term(1, 2, 3))
    assert "r2" not in hits
    assert copy.search(["c"], 10, doc_ids=[2]) == [("r2", pytest.approx(term(1, 2, 2)))]
    assert copy.search(["zzz"], 10) == [] and copy.search(["a"], 0) == []
    empty = PostingsCopy.build(1, ["", ""], ["e0", "e1"], [1, 1])  # rows without a single keyword
    assert empty.n_rows == 2 and empty.search(["a"], 10) == []
    assert PostingsCopy.build(1, [], [], []).search(["a"], 10) == []


def test_a_write_makes_the_copy_stale_and_fts5_answers_until_it_is_rebuilt(pair, monkeypatch):
    _db, fts, mem = pair
    used = _used_copy(monkeypatch)
    old_generation = mem.postings_copies()[1].generation
    fts.add([IndexedChunk("k1-new", 1, 77, "quasar quasar gateway")])  # another instance, same database
    assert mem.postings_copies()[1].generation == old_generation  # not rebuilt yet ...
    scheduled = _background_builds_held(monkeypatch)  # ... and kept from rebuilding in the background
    hits = mem.search([1], "quasar", 5)
    assert hits == fts.search([1], "quasar", 5) and hits[0][0] == "k1-new"
    assert used == [] and scheduled  # the stale copy was not asked; a rebuild was due
    assert mem.warm([1]) == 1
    assert mem.search([1], "quasar gateway", 40) == fts.search([1], "quasar gateway", 40)
    assert used and used[-1] > old_generation


def test_deleting_a_document_or_the_kb_never_leaves_stale_hits(pair):
    _db, fts, mem = pair
    before = mem.search([1], "aurora", 1000)
    doomed = {cid for cid, _ in before if int(cid.split("-c")[1]) // 25 + 1 == 2}
    assert doomed
    fts.delete_document(1, 2)
    after = mem.search([1], "aurora", 1000)
    assert not doomed & {cid for cid, _ in after}
    assert after == fts.search([1], "aurora", 1000)
    mem.warm([1])
    assert mem.search([1], "aurora", 1000) == after

    mem.delete_kb(1)
    assert mem.postings_copies() == {}
    _fill(fts, 1, ["aurora only here"])  # a new KB reusing the id starts from a new generation
    assert mem.search([1], "aurora", 10) == fts.search([1], "aurora", 10) == [("k1-c0", pytest.approx(
        fts.search([1], "aurora", 10)[0][1]))]


def test_a_kb_dropped_by_another_process_loses_its_copy(pair):
    _db, fts, mem = pair
    assert 1 in mem.postings_copies()
    fts.delete_kb(1)  # another instance (another process, for all this one knows)
    assert mem.search([1], "aurora", 5) == []
    assert mem.postings_copies() == {}


def test_several_kbs_merge_like_fts5(pair):
    _db, fts, mem = pair
    _fill(fts, 2, _corpus(120, seed=9), first_doc=100)
    assert mem.warm([1, 2]) == 2
    for query in QUERIES:
        assert mem.search([1, 2], query, 30) == fts.search([1, 2], query, 30)


def test_small_kbs_are_left_to_fts5_without_a_background_thread(tmp_path, monkeypatch):
    db = Database(tmp_path / "kw.db")
    index = Fts5KeywordIndex(db, memory_min_rows=500)
    _fill(index, 1, _corpus(60))
    started = []
    monkeypatch.setattr(keyword_memory.threading, "Thread", lambda *a, **k: started.append(k) or pytest.fail())
    built = _copies_built(monkeypatch)
    assert index.search([1], "aurora", 5)
    assert index.search([1], "gateway", 5)
    assert started == [] and index.postings_copies() == {} and built == []
    assert index.warm([1]) == 0  # below the threshold even when asked
    assert "500+ chunks (0 loaded)" in index.status().detail


def test_a_large_kb_gets_its_copy_in_the_background(tmp_path, monkeypatch):
    db = Database(tmp_path / "kw.db")
    index = Fts5KeywordIndex(db, memory_min_rows=100)
    _fill(index, 1, _corpus(300))
    used = _used_copy(monkeypatch)
    first = index.search([1], "aurora gateway", 10)  # FTS5 answers and a build starts
    deadline = time.monotonic() + 30
    while not index.postings_copies() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert 1 in index.postings_copies()
    assert index.search([1], "aurora gateway", 10) == first
    assert used  # the second search came from the copy
    assert "(1 loaded)" in index.status().detail


def test_a_failing_build_leaves_fts5_answering(tmp_path, caplog, monkeypatch):
    db = Database(tmp_path / "kw.db")
    index = Fts5KeywordIndex(db, memory_min_rows=0)
    _fill(index, 1, _corpus(50))
    fts5 = Fts5KeywordIndex(db, memory_min_rows=None).search([1], "aurora", 3)

    def broken(*args, **kwargs):
        raise OSError("disk went away")

    monkeypatch.setattr(PostingsCopy, "build", broken)
    with caplog.at_level(logging.ERROR):
        assert index.search([1], "aurora", 3) == fts5  # FTS5 answers; the copy is built in the background
        deadline = time.monotonic() + 30
        while "in-memory keyword postings of KB 1 failed" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.02)
    assert "in-memory keyword postings of KB 1 failed" in caplog.text
    assert index.postings_copies() == {}
    assert index.search([1], "aurora", 3) == fts5
    monkeypatch.undo()  # the disk is back: the failed build left nothing that keeps the next one from running
    deadline = time.monotonic() + 30
    while not index.postings_copies() and time.monotonic() < deadline:
        index.search([1], "aurora", 3)
        time.sleep(0.05)
    assert 1 in index.postings_copies()


def test_cache_never_installs_an_older_generation_over_a_newer_one():
    rows = {"generation": 5}

    def read(kb_id):
        return rows["generation"], ["a b"], ["c0"], [1]

    cache = PostingsCache(read, count_rows=lambda kb: 1, min_rows=0)
    cache.build(1)
    rows["generation"] = 3  # a slow build that started before a newer one finished
    cache.build(1)
    assert cache.copies()[1].generation == 5
    assert cache.current(1, 5) is cache.copies()[1]
