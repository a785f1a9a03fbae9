"""Small, controllable stand-ins for the retrieval backends used by the tools / one-shot / agentic tests.

The retriever is a real (if tiny) lexical search over an in-memory corpus so
results depend on the query; it can be told to be slow or to fail, which the
timeout and fallback tests need.  The reranker implements the Reranker
protocol with term overlap, so "the reranker's order" is predictable.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import Sequence

from docmind_core.backends.protocols import AgentTranscript, AgentTurn, ToolCallRequest, ToolSpec, UsageMeter
from docmind_core.values import BackendStatus, RetrievedChunk, StageScores
from docmind_core.retrieval.refine import EvidenceRefiner
from docmind_core.settings import Settings
from docmind_core.text.tokens import keyword_tokens


def chunk(cid: str, text: str, kb_id: int = 1, document: str = "", origin: str = "kb") -> RetrievedChunk:
    return RetrievedChunk(chunk_id=cid, kb_id=kb_id if origin == "kb" else None, doc_id=1 if origin == "kb" else None,
                          document=document or f"{cid}.txt", text=text, origin=origin)


class FixtureRetriever:
    """candidates / keyword_candidates / vector_candidates over an in-memory corpus, kb-filtered."""

    def __init__(self, corpus: Sequence[RetrievedChunk]):
        self.corpus = list(corpus)
        self.delay_s: dict[str, float] = {}  # method name -> sleep before answering
        # every search waits here for the others before answering: searches run one after the other never meet
        # (the barrier breaks), so a test sees parallel workers from their state, not from a stopwatch
        self.meet: threading.Barrier | None = None
        self.fail: set[str] = set()  # method names that raise
        self.seen_kb_ids: list[list[int]] = []
        self.queries: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        docs = [set(keyword_tokens(f"{c.document} {c.text}")) for c in self.corpus]
        vocab = {t for d in docs for t in d}
        self._idf = {t: math.log(1 + len(docs) / (1 + sum(t in d for d in docs))) for t in vocab}
        self._tokens = docs

    def _search(self, method: str, query: str, kb_ids: Sequence[int], top_k: int) -> list[RetrievedChunk]:
        with self._lock:
            self.seen_kb_ids.append(list(kb_ids))
            self.queries.append((method, query))
        if self.delay_s.get(method):
            time.sleep(self.delay_s[method])
        if self.meet is not None:
            self.meet.wait()  # raises BrokenBarrierError (the search fails) when the others never came
        if method in self.fail:
            raise RuntimeError(f"{method} backend is down")
        q = set(keyword_tokens(query))
        scored = []
        for c, toks in zip(self.corpus, self._tokens):
            if c.kb_id not in kb_ids:
                continue
            s = sum(self._idf.get(t, 0.0) for t in q & toks)
            if s > 0:
                scored.append((s, c))
        scored.sort(key=lambda x: -x[0])
        out = []
        for rank, (s, c) in enumerate(scored[:top_k], 1):
            field_name = "keyword" if method == "keyword_candidates" else "fused"
            out.append(c.model_copy(update={"scores": StageScores(**{field_name: s}, keyword_rank=rank)}))
        return out

    def candidates(self, query: str, kb_ids: Sequence[int], settings: Settings, doc_ids=None) -> list[RetrievedChunk]:
        return self._search("candidates", query, kb_ids, settings.retrieval.rerank_top_n)

    def keyword_candidates(self, query: str, kb_ids: Sequence[int], top_k: int, doc_ids=None) -> list[RetrievedChunk]:
        return self._search("keyword_candidates", query, kb_ids, top_k)

    def vector_candidates(self, query: str, kb_ids: Sequence[int], top_k: int, doc_ids=None) -> list[RetrievedChunk]:
        return self._search("vector_candidates", query, kb_ids, top_k)


class OverlapReranker:
    """Reranker protocol: share of the query's terms found in the chunk (0..1), blind to raw scores."""

    name = "overlap"

    def score(self, query: str, chunks: Sequence[RetrievedChunk]) -> list[float]:
        q = set(keyword_tokens(query))
        return [len(q & set(keyword_tokens(c.text))) / len(q) if q else 0.0 for c in chunks]

    def status(self) -> BackendStatus:
        return BackendStatus(role="reranker", name=self.name, live=True)


def make_refiner(reranker: OverlapReranker | None = None) -> EvidenceRefiner:
    """The real EvidenceRefiner (no store: no parent expansion) over the predictable reranker."""
    return EvidenceRefiner(None, reranker or OverlapReranker())


@dataclass
class ScriptedModel:
    """LanguageModel.agent_turn in-process: plays scripted rounds of tool calls, then stops."""

    rounds: list[list[tuple[str, dict]]] = field(default_factory=list)
    repeat_last: bool = False  # keep calling the last round's tools forever
    delay_s: float = 0.0
    raise_on_round: int | None = None
    name: str = "scripted"
    seen_tools: list[list[str]] = field(default_factory=list)
    transcripts: list[int] = field(default_factory=list)  # message count at each call

    def agent_turn(self, transcript: AgentTranscript, tools: Sequence[ToolSpec], meter: UsageMeter,
                   timeout_s: float) -> AgentTurn:
        n = len(transcript.rounds)
        self.seen_tools.append([t.name for t in tools])
        self.transcripts.append(len(transcript.messages))
        if self.delay_s:
            # like an HTTP client: give up when the caller's timeout passes
            time.sleep(min(self.delay_s, timeout_s))
            if self.delay_s > timeout_s:
                raise TimeoutError("model call timed out")
        if self.raise_on_round is not None and n + 1 == self.raise_on_round:
            raise RuntimeError("model endpoint exploded")
        if n < len(self.rounds):
            plan = self.rounds[n]
        elif self.repeat_last and self.rounds:
            plan = [(name, {**args, "query": f"{args.get('query', '')} {n}"}) for name, args in self.rounds[-1]]
        else:
            plan = []
        calls = [ToolCallRequest(id=f"c{n}_{i}", name=name, arguments=args) for i, (name, args) in enumerate(plan)]
        return AgentTurn(tool_calls=calls)


# A small two-KB corpus: KB 1 is the session's, KB 2 belongs to someone else.
CORPUS = [
    chunk("a1", "The DM-3000 pump runs at 40 litres per minute and needs firmware v2.4.1.", 1, "pumps.md"),
    chunk("a2", "The DM-4000 pump runs at 65 litres per minute and replaced the DM-3000 in 2024.", 1, "pumps.md"),
    chunk("a3", "Maintenance: clean the DM-3000 filter every 200 hours of operation.", 1, "maintenance.md"),
    chunk("a4", "Kiss and Tell is a 1945 comedy film starring Shirley Temple as Corliss Archer.", 1, "Kiss and Tell"),
    chunk("a5", "Shirley Temple later served as United States ambassador and Chief of Protocol, a government "
                "position.", 1, "Shirley Temple"),
    chunk("a6", "Warranty claims for pumps must be filed within two years.", 1, "warranty.md"),
    chunk("b1", "SECRET zephyr roadmap: the DM-5000 pump is planned for 2027.", 2, "secret.md"),
]


def settings(**overrides) -> Settings:
    return Settings().with_overrides(overrides)


def drain(gen):
    """All events of a retrieval path's generator, and the outcome it returns."""
    events = []
    while True:
        try:
            events.append(next(gen))
        except StopIteration as stop:
            return events, stop.value
