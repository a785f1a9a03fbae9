"""Keyword indexes: FTS5 and rank-bm25 pass the same suite (Chinese, English, codes, filters, persistence)."""

from __future__ import annotations

import pytest

from docmind_core.backends.keyword_index import Fts5KeywordIndex, RankBM25KeywordIndex
from docmind_core.backends.protocols import IndexedChunk, KeywordIndex
from docmind_core.values import ChunkRecord
from docmind_core.store.db import Database
from docmind_core.store.kb_store import KnowledgeStore

DOCS = {
    "nimbus.md": [
        "The Nimbus N2 edge appliance draws at most 45 W under full load.",
        "Firmware 3.2.1 fixes the fan controller and improves boot time.",
    ],
    "aurora.md": [
        "Aurora keeps documents for 180 days by default before archiving them.",
        "错误代码 AUR-4012 表示许可证已经过期，请联系管理员续订。",
    ],
    "zh.md": [
        "Nimbus 设备支持双电源冗余，断电时自动切换。",
        "数据保留策略可以在管理控制台中修改。",
    ],
}


class World:
    """A database with two KBs; the chunks table holds the texts, as after a real ingest."""

    def __init__(self, path):
        self.path = path
        self.db = Database(path)
        self.store = KnowledgeStore(self.db)
        self.kb1 = self.store.create_kb("one", "e", 4).id
        self.kb2 = self.store.create_kb("two", "e", 4).id
        self.doc_ids: dict[str, int] = {}
        self.chunks: list[IndexedChunk] = []
        for kb_id, names in ((self.kb1, ["nimbus.md", "aurora.md"]), (self.kb2, ["zh.md"])):
            for name in names:
                self._document(kb_id, name, DOCS[name])

    def _document(self, kb_id, name, texts):
        doc_id = self.store.begin_document(kb_id, name, source_path="", content_hash=name, mime="text/markdown",
                                           size=1, text=" ".join(texts))
        records = [ChunkRecord(id=f"{name}#{i}", kb_id=kb_id, doc_id=doc_id, index=i, text=t, token_count=5,
                               start=0, end=1) for i, t in enumerate(texts)]
        self.store.add_chunks(records)
        self.store.set_document_status(doc_id, "complete")
        self.doc_ids[name] = doc_id
        self.chunks += [IndexedChunk(r.id, kb_id, doc_id, r.text) for r in records]


BACKENDS = {"fts5": Fts5KeywordIndex, "rank_bm25": RankBM25KeywordIndex}


@pytest.fixture(params=sorted(BACKENDS))
def backend(request):
    return BACKENDS[request.param]


@pytest.fixture
def world(tmp_path):
    return World(tmp_path / "docmind.db")


@pytest.fixture
def index(world, backend):
    idx = backend(world.db)
    idx.add(world.chunks)
    return idx


def _ids(hits):
    return [cid for cid, _ in hits]


def test_implements_protocol(index):
    assert isinstance(index, KeywordIndex)
    assert index.status().role == "keyword_index"


@pytest.mark.parametrize("query, expected", [
    ("What is the maximum power draw of the Nimbus N2?", "nimbus.md#0"),
    ("firmware 3.2.1", "nimbus.md#1"),
    ("AUR-4012", "aurora.md#1"),
    ("许可证过期了怎么办", "aurora.md#1"),
    ("how long are documents kept", "aurora.md#0"),  # stemming: kept/keeps don't match, documents/document do
])
def test_finds_the_right_chunk(index, world, query, expected):
    hits = index.search([world.kb1], query, top_k=3)
    assert hits and hits[0][0] == expected
    scores = [s for _, s in hits]
    assert all(s > 0 for s in scores) and scores == sorted(scores, reverse=True)


def test_chinese_search_in_its_kb(index, world):
    assert _ids(index.search([world.kb2], "双电源冗余", top_k=2))[0] == "zh.md#0"


def test_kb_filter_never_returns_another_kbs_chunk(index, world):
    hits = index.search([world.kb1], "Nimbus 电源 数据", top_k=50)
    assert hits and all(not cid.startswith("zh.md") for cid in _ids(hits))
    hits = index.search([world.kb2], "Nimbus", top_k=50)
    assert _ids(hits) == ["zh.md#0"]
    both = index.search([world.kb1, world.kb2], "Nimbus", top_k=50)
    assert set(_ids(both)) == {"nimbus.md#0", "zh.md#0"}


def test_document_filter(index, world):
    only = index.search([world.kb1], "Nimbus Aurora firmware 许可证", top_k=50, doc_ids=[world.doc_ids["aurora.md"]])
    assert only and all(cid.startswith("aurora.md") for cid in _ids(only))
    assert index.search([world.kb1], "Nimbus", top_k=5, doc_ids=[]) == []


def test_no_terms_or_no_match_gives_nothing(index, world):
    assert index.search([world.kb1], "the of and", top_k=5) == []  # stop words only
    assert index.search([world.kb1], "zeppelin", top_k=5) == []
    assert index.search([world.kb1], '"quoted" OR AND NEAR(', top_k=5) == []  # FTS5 syntax is not interpreted


def test_top_k_limits(index, world):
    assert len(index.search([world.kb1], "Nimbus Aurora firmware documents 许可证", top_k=2)) == 2
    assert index.search([world.kb1], "Nimbus", top_k=0) == []


def test_delete_document_and_kb(index, world):
    nimbus = world.doc_ids["nimbus.md"]
    world.store.delete_chunks_of_document(nimbus)
    world.store.delete_document(nimbus)
    index.delete_document(world.kb1, nimbus)
    assert index.search([world.kb1], "Nimbus firmware", top_k=5) == []
    assert _ids(index.search([world.kb1], "AUR-4012", top_k=5)) == ["aurora.md#1"]
    index.delete_kb(world.kb1)
    world.store.delete_kb(world.kb1)
    assert index.search([world.kb1], "AUR-4012", top_k=5) == []
    assert _ids(index.search([world.kb2], "双电源", top_k=5)) == ["zh.md#0"]


def test_incremental_add(index, world):
    world._document(world.kb1, "new.md", ["The Orion gateway ships in 2026."])
    index.add(world.chunks[-1:])
    assert _ids(index.search([world.kb1], "Orion gateway", top_k=5)) == ["new.md#0"]
    assert _ids(index.search([world.kb1], "AUR-4012", top_k=5))[0] == "aurora.md#1"


def test_survives_reopen(world, backend, tmp_path):
    first = backend(world.db)
    first.add(world.chunks)
    expected = first.search([world.kb1], "firmware 3.2.1", top_k=3)
    reopened_db = Database(world.path)
    again = backend(reopened_db)  # FTS5 reads its table; rank-bm25 rebuilds from the chunks table
    got = again.search([world.kb1], "firmware 3.2.1", top_k=3)
    assert _ids(got) == _ids(expected)
    assert [s for _, s in got] == pytest.approx([s for _, s in expected])


def test_fts5_keeps_one_row_per_chunk_and_lists_documents(world):
    index = Fts5KeywordIndex(world.db)
    index.add(world.chunks)
    assert index.count(world.kb1) == 4
    assert index.document_ids(world.kb1) == {world.doc_ids["nimbus.md"], world.doc_ids["aurora.md"]}
    assert index.kb_ids() == {world.kb1, world.kb2}


def test_fts5_rebuilds_when_stemming_setting_changes(world):
    stemmed = Fts5KeywordIndex(world.db, stem=True)
    stemmed.add(world.chunks)
    assert stemmed.search([world.kb1], "archiving", top_k=3)
    plain = Fts5KeywordIndex(world.db, stem=False)  # rebuilt from the chunks table with unstemmed terms
    assert plain.count(world.kb1) == 4
    assert _ids(plain.search([world.kb1], "archiving", top_k=3)) == ["aurora.md#0"]
    assert plain.search([world.kb1], "archive", top_k=3) == []  # no stemming: archive != archiving


def test_both_backends_rank_alike(world):
    fts, ranked = Fts5KeywordIndex(world.db), RankBM25KeywordIndex(world.db)
    fts.add(world.chunks)
    ranked.add(world.chunks)
    for query in ["edge appliance full load", "AUR-4012 许可证", "documents days archiving"]:
        assert _ids(fts.search([world.kb1], query, 3))[:1] == _ids(ranked.search([world.kb1], query, 3))[:1]


def test_opening_an_index_already_laid_out_takes_no_write_lock(tmp_path, sql_writes):
    """Every engine start opens the keyword index; when the layout is already the wanted one it only reads, so a
    start does not wait behind another process's write transaction."""
    Fts5KeywordIndex(Database(tmp_path / "k.db"), stem=True)  # the first start lays it out
    assert sql_writes  # (the harness sees writes)
    sql_writes.clear()
    Fts5KeywordIndex(Database(tmp_path / "k.db"), stem=True)
    assert sql_writes == []


def test_a_database_laid_out_before_the_generations_table_gets_it_at_open(tmp_path):
    """The generations table came later under the same layout number: opening such a database must still create
    it (the read-only open path skipped it, and every ingest then failed with 'no such table')."""
    import sqlite3

    conn = sqlite3.connect(tmp_path / "k.db")
    conn.execute("CREATE TABLE keyword_index_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    index = Fts5KeywordIndex(Database(tmp_path / "k.db"), stem=True)  # lays out meta as it wants it
    conn.execute("DROP TABLE keyword_index_generations")  # as an older version left it
    conn.commit()
    conn.close()
    reopened = Fts5KeywordIndex(Database(tmp_path / "k.db"), stem=True)
    assert reopened.generation(1) == index.generation(1) == 0
