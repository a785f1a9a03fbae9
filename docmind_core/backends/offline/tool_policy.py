"""The offline engine's tool policy: deterministic, but it really acts on what it reads.

Round 1 plans from the question alone: one ``searchDocs`` per focus of a
comparison (or one for the whole question), ``keywordSearch`` for exact codes,
versions and quoted names, ``webSearch`` for time-aware questions when offered.
Later rounds read the observations: for a chain question it searches again
with entities the best passages introduced (titles, proper nouns, 《》 titles)
that the question did not name; it reformulates once when the question's
salient terms stay poorly covered; it stops when coverage is adequate or a
round brought nothing new.  All state comes from the transcript, so one
policy object serves every run and thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from docmind_core.backends.protocols import AgentTranscript, AgentTurn, ToolCallRequest, ToolSpec
from docmind_core.values import RetrievedChunk
from docmind_core.text.query_signals import (
    attribute_terms, bridge_entities, coverage_of, exact_terms, hop_tail, question_entities, split_foci,
)
from docmind_core.text.tokens import TIME_KEYWORD_PATTERN, keyword_tokens, salient_terms

ADEQUATE_COVERAGE = 0.75
_MAX_HOP_ENTITIES = 2
_BEST_CHUNKS = 2



@dataclass(frozen=True)
class _Plan:
    tool: str
    query: str


class OfflineToolPolicy:
    """Which tools to call next, decided by rules over the transcript (no model)."""

    def next_turn(self, transcript: AgentTranscript, tools: Sequence[ToolSpec]) -> AgentTurn:
        offered = {t.name for t in tools}
        done_round = len(transcript.rounds)
        question = transcript.rewritten_query or transcript.question
        if done_round == 0:
            plans = self._first_round(question, transcript.question, offered)
        else:
            plans = self._later_round(transcript, question, offered)
        ran = _queries_run(transcript)
        plans = [p for p in plans if p.tool in offered and (p.tool, _norm(p.query)) not in ran]
        plans = list(dict.fromkeys(plans))
        if not plans:
            return AgentTurn(tool_calls=[], text="The evidence gathered is enough; stopping.")
        calls = [ToolCallRequest(id=f"offline_{done_round + 1}_{i}", name=p.tool, arguments={"query": p.query})
                 for i, p in enumerate(plans, 1)]
        return AgentTurn(tool_calls=calls, text=_explain(done_round, plans))

    # -- round 1 -----------------------------------------------------------------
    def _first_round(self, question: str, original: str, offered: set[str]) -> list[_Plan]:
        foci = split_foci(question)
        plans = [_Plan("searchDocs", q) for q in foci] if len(foci) >= 2 else [_Plan("searchDocs", question)]
        for exact in exact_terms(original if original else question):
            plans.append(_Plan("keywordSearch", exact))
        if "webSearch" in offered and (TIME_KEYWORD_PATTERN.search(original) or TIME_KEYWORD_PATTERN.search(question)):
            plans.append(_Plan("webSearch", question))
        return plans

    # -- later rounds ------------------------------------------------------------
    def _later_round(self, transcript: AgentTranscript, question: str, offered: set[str]) -> list[_Plan]:
        last = transcript.rounds[-1]
        if not any(obs.new_chunk_ids for obs in last):
            return []  # nothing new came back: more of the same will not help
        seen = _all_chunks(transcript)
        coverage, missing = coverage_of(question, seen)
        hops_done = any(obs.call.arguments.get("_hop") or _is_hop(obs.call.arguments.get("query", ""), question)
                        for rnd in transcript.rounds[1:] for obs in rnd)
        comparison = len(split_foci(question)) >= 2
        subjects = question_entities(question)
        # a later query names a subject and asks for an attribute, never one without the other
        tail = hop_tail(question, subjects, missing)
        if not comparison and not hops_done and tail:
            best = _best_chunks(question, [c for obs in last for c in obs.chunks])
            entities = bridge_entities(question, best)[:_MAX_HOP_ENTITIES]
            if entities:
                return [_Plan("searchDocs", f"{e} {' '.join(tail)}") for e in entities]
        wanted = attribute_terms(question, subjects, missing, limit=6, missing_only=True)
        if coverage < ADEQUATE_COVERAGE and not _reformulated(transcript) and wanted:
            subject = " ".join(subjects[:2])
            if subject or len(wanted) >= 2:
                return [_Plan("keywordSearch", f"{subject} {' '.join(wanted)}".strip())]
        return []


# --------------------------------------------------------------------------
# Transcript reading
# --------------------------------------------------------------------------

def _norm(query: str) -> str:
    return " ".join(sorted(set(keyword_tokens(query)))) or query.strip().lower()


def _queries_run(transcript: AgentTranscript) -> set[tuple[str, str]]:
    return {(obs.call.name, _norm(str(obs.call.arguments.get("query", ""))))
            for rnd in transcript.rounds for obs in rnd}


def _all_chunks(transcript: AgentTranscript) -> list[RetrievedChunk]:
    seen: dict[str, RetrievedChunk] = {}
    for rnd in transcript.rounds:
        for obs in rnd:
            for chunk in obs.chunks:
                seen.setdefault(chunk.chunk_id, chunk)
    return list(seen.values())


def _best_chunks(question: str, chunks: Sequence[RetrievedChunk]) -> list[RetrievedChunk]:
    """The chunks that cover the question best (lexically), ties broken by retrieval order."""
    terms = salient_terms(question)
    unique = list({c.chunk_id: c for c in chunks}.values())

    def score(item: tuple[int, RetrievedChunk]) -> tuple[float, int]:
        rank, chunk = item
        toks = set(keyword_tokens(f"{chunk.document} {chunk.text}", stem=False))
        return (-sum(w for t, w in terms.items() if t in toks), rank)

    return [c for _, c in sorted(enumerate(unique), key=score)][:_BEST_CHUNKS]


def _is_hop(query: str, question: str) -> bool:
    """A later-round searchDocs query that names something the question does not."""
    own = set(keyword_tokens(question, stem=False))
    return bool(set(keyword_tokens(query, stem=False)) - own)


def _reformulated(transcript: AgentTranscript) -> bool:
    return any(obs.call.name == "keywordSearch" for rnd in transcript.rounds[1:] for obs in rnd)


def _explain(done_round: int, plans: Sequence[_Plan]) -> str:
    what = "; ".join(f"{p.tool}({p.query})" for p in plans)
    return f"Round {done_round + 1}: {what}"
