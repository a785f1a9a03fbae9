"""Leave-gold-out retrieval: documents excluded from a run never come back, on any retrieval path.

Every path is checked against the same small KB, once without the filter (the excluded document is
found: the test can fail) and once with it: the vector store (Chroma), the keyword index (FTS5, its
in-memory postings copy, rank-bm25), the hybrid retriever, both search tools under a ToolContext,
whole runs down RULE_PLANNER and AGENTIC, and the SELECTED_DOC direct read.
"""

from __future__ import annotations

import pytest

from docmind_core.backends.keyword_index import Fts5KeywordIndex, RankBM25KeywordIndex
from docmind_core.engine import Engine
from docmind_core.events import AnswerStarted, Done, Reranked
from docmind_core.answer.tools import ToolContext
from docmind_core.accounts.users import LOCAL_USER
from docmind_core.workbench import Workbench
from tests.paths import write_texts

DOCS = {
    "gold.txt": "The zephyr budget is 40k dollars and the zephyr launch is in March.",
    "distractor.txt": "The zephyr project team meets weekly; the zephyr budget review is pending.",
    "other.txt": "Cafeteria opening hours are 8 to 17 on weekdays.",
}
QUESTION = "What is the zephyr budget?"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = tmp_path_factory.mktemp("exclude")
    engine = Engine.open(base / "home", env={}, warm=False)
    kb = engine.create_kb("lgo")
    assert all(o.status == "added" for o in engine.ingest(kb.id, write_texts(base, DOCS)))
    docs = {d.name: d.id for d in engine.store.list_documents(kb.id)}
    return engine, kb.id, docs


def _doc_ids(chunks) -> set[int]:
    return {c.doc_id for c in chunks}


def test_vector_store_leaves_out_excluded_documents(world):
    engine, kb, docs = world
    qvec = engine.embedder.embed([QUESTION])[0]
    store = engine.retriever.vector_store
    both = store.query([kb], qvec, 10)
    records = engine.store.get_chunks([cid for cid, _ in both])
    assert docs["gold.txt"] in {r.doc_id for r in records.values()}
    hits = store.query([kb], qvec, 10, exclude_doc_ids=[docs["gold.txt"]])
    kept = engine.store.get_chunks([cid for cid, _ in hits])
    assert hits and docs["gold.txt"] not in {r.doc_id for r in kept.values()}
    # combined with an include filter
    only = store.query([kb], qvec, 10, doc_ids=[docs["gold.txt"], docs["distractor.txt"]],
                       exclude_doc_ids=[docs["gold.txt"]])
    assert {r.doc_id for r in engine.store.get_chunks([c for c, _ in only]).values()} == {docs["distractor.txt"]}


@pytest.mark.parametrize("index_kind", ["fts5", "fts5_memory", "rank_bm25"])
def test_keyword_indexes_leave_out_excluded_documents(world, index_kind):
    engine, kb, docs = world
    if index_kind == "rank_bm25":
        index = RankBM25KeywordIndex(engine.db)
    else:
        index = Fts5KeywordIndex(engine.db, memory_min_rows=0 if index_kind == "fts5_memory" else None)
        if index_kind == "fts5_memory":
            assert index.warm([kb]) == 1  # the search below is answered by the postings copy
    gold = docs["gold.txt"]
    with_gold = engine.store.get_chunks([c for c, _ in index.search([kb], "zephyr budget", 10)])
    assert gold in {r.doc_id for r in with_gold.values()}
    hits = index.search([kb], "zephyr budget", 10, exclude_doc_ids=[gold])
    kept = engine.store.get_chunks([c for c, _ in hits])
    assert hits and gold not in {r.doc_id for r in kept.values()}
    assert docs["distractor.txt"] in {r.doc_id for r in kept.values()}


def test_postings_copy_and_fts5_agree_under_exclusion(world):
    engine, kb, docs = world
    fts = Fts5KeywordIndex(engine.db, memory_min_rows=None)
    mem = Fts5KeywordIndex(engine.db, memory_min_rows=0)
    assert mem.warm([kb]) == 1
    for excluded in ([docs["gold.txt"]], [docs["distractor.txt"]], [docs["gold.txt"], docs["other.txt"]]):
        assert mem.search([kb], "zephyr budget weekdays", 10, exclude_doc_ids=excluded) == \
            fts.search([kb], "zephyr budget weekdays", 10, exclude_doc_ids=excluded)


def test_hybrid_retriever_and_tools_leave_out_excluded_documents(world):
    engine, kb, docs = world
    gold = docs["gold.txt"]
    settings = engine.settings
    assert gold in _doc_ids(engine.retriever.candidates(QUESTION, [kb], settings))
    assert gold not in _doc_ids(engine.retriever.candidates(QUESTION, [kb], settings, exclude_doc_ids=[gold]))
    assert gold not in _doc_ids(engine.retriever.search(QUESTION, [kb], settings, exclude_doc_ids=[gold]).candidates)
    open_ctx = ToolContext.for_run([kb], None, settings)
    closed = ToolContext.for_run([kb], None, settings, exclude_doc_ids=[gold])
    for tool in ("searchDocs", "keywordSearch"):
        assert gold in _doc_ids(engine.toolbox.call(open_ctx, tool, {"query": "zephyr budget"}).chunks)
        found = engine.toolbox.call(closed, tool, {"query": "zephyr budget"}).chunks
        assert found and gold not in _doc_ids(found), tool
    assert closed.fresh().run.exclude_doc_ids == frozenset({gold})  # the one-shot fallback keeps the filter


def _run_doc_ids(events) -> set[int]:
    seen: set[int] = set()
    for event in events:
        if isinstance(event, Reranked):
            seen |= _doc_ids(event.candidates)
        elif isinstance(event, AnswerStarted):
            seen |= _doc_ids(event.sources)
        elif isinstance(event, Done):
            seen |= _doc_ids(event.sources)
    return seen


@pytest.mark.parametrize("mode", ["rule", "agentic"])
def test_a_whole_run_never_sees_excluded_documents(world, mode):
    engine, kb, docs = world
    bench = Workbench(engine, LOCAL_USER, "cli")
    gold = docs["gold.txt"]
    assert gold in _run_doc_ids(list(bench.ask(QUESTION, [kb], mode=mode)))
    events = list(bench.ask(QUESTION, [kb], mode=mode, exclude_doc_ids=[gold]))
    assert events[-1].kind == "done"
    seen = _run_doc_ids(events)
    assert seen and gold not in seen
    assert "40k" not in events[-1].answer


def test_direct_read_skips_excluded_documents(world):
    engine, kb, docs = world
    bench = Workbench(engine, LOCAL_USER, "cli")
    gold, other = docs["gold.txt"], docs["distractor.txt"]
    read = _run_doc_ids(list(bench.ask("Summarise these documents", [kb], selected_doc_ids=[gold, other])))
    assert gold in read
    events = list(bench.ask("Summarise these documents", [kb], selected_doc_ids=[gold, other],
                            exclude_doc_ids=[gold]))
    assert gold not in _run_doc_ids(events) and other in _run_doc_ids(events)
