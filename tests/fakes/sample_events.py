"""A synthetic but realistic event stream covering every event kind, for trace tests."""

from __future__ import annotations

from docmind_core.events import (
    EVENT_KINDS,
    AgenticStep,
    AnswerStarted,
    Done,
    Notice,
    ErrorRaised,
    Fallback,
    Graded,
    IndexIncomplete,
    Judged,
    IngestPending,
    Reranked,
    Retrieved,
    Routed,
    RunStarted,
    ScopeDecided,
    Token,
    Understood,
    WebCompensated,
)
from docmind_core.values import (
    BackendStatus,
    CitationOccurrence,
    CitationResult,
    Complexity,
    Confidence,
    EvidenceVerdict,
    GradeResult,
    Intent,
    Mode,
    ModelCall,
    PathDecision,
    RetrievalPlan,
    RetrievedChunk,
    Scope,
    StageScores,
    Tier,
    ToolCallRecord,
    Understanding,
    UsedSource,
    WorkerReport,
)


def sample_chunks() -> list[RetrievedChunk]:
    kb = RetrievedChunk(chunk_id="c-1", kb_id=1, doc_id=3, document="手册.pdf", text="DM-3000 的保修期为两年。",
                        start=10, end=26, chunk_index=0, parent_id="p-1", expanded=True,
                        scores=StageScores(vector=0.61, keyword=7.25, vector_rank=1, keyword_rank=2, fused=0.83,
                                           rerank=0.7134, mmr=0.55),
                        found_by=["doc_search", "keyword_search"])
    cut = RetrievedChunk(chunk_id="c-2", kb_id=1, doc_id=4, document="faq.md", text="Unrelated text.",
                         scores=StageScores(vector=0.2, fused=0.1, rerank=0.05), kept=False, cut_by="rerank",
                         found_by=["doc_search"])
    web = RetrievedChunk(chunk_id="web:abc", document="Vendor news", text="Extended warranty launched in 2026.",
                         origin="web", url="https://example.org/news", scores=StageScores(rerank=0.41),
                         found_by=["web_search"])
    return [kb, cut, web]


def sample_events(run_id: str = "run-1", tokens: int = 12, mode: str = "AGENTIC",
                  tier: Tier = Tier.AMBIGUOUS) -> list:
    """Every event kind once (tokens many times), with nested models and non-ASCII text."""
    kb, cut, web = sample_chunks()
    understanding = Understanding(rewritten_query="DM-3000 保修期", intent=Intent.FACTOID,
                                  complexity=Complexity.MEDIUM, time_aware=True, memory_write_hints=["likes short answers"])
    grade = GradeResult(tier=tier, top_score=0.7134, lex_coverage=0.5, kb_entity_weak=False,
                        web_compensation_needed=False, reason="gray zone, coverage 0.50", gray_zone_mode="coverage_first")
    calls = [ToolCallRecord(name="searchDocs", args={"query": "DM-3000 保修", "top_k": 5}, result_count=5, new_chunks=4,
                            duplicate_chunks=1, latency_ms=12.5, repaired_from="tools_tags",
                            adjusted=["top_k 1 -> 5 (agentic.search_top_k_min)"]),
             ToolCallRecord(name="webSearch", args={"query": "DM-3000 warranty 2026"}, status="unavailable",
                            message="web search unavailable: set TAVILY_API_KEY")]
    answer_parts = ["DM-3000 ", "的保修期", "为两年", " [1]。"] + [" 更多"] * max(0, tokens - 4)
    events = [
        RunStarted(run_id=run_id, question="DM-3000 的保修期是多久？", kb_ids=[1, 2], requested_mode="auto",
                   backends=[BackendStatus(role="llm", name="offline engine", live=False, how_to_enable="set OPENAI_API_KEY")],
                   conversation_id="conv-1", t_ms=0.0),
        IndexIncomplete(kb_id=2, missing_vectors=673, total=801, t_ms=0.5),
        IngestPending(kb_id=2, kb_name="手册", pending_documents=297, searched_documents=3, t_ms=0.75),
        ScopeDecided(scope=Scope.KNOWLEDGE_QUERY, confidence=0.9, via="model", reason="question", t_ms=1.25),
        Understood(understanding=understanding, via="model", duration_ms=210.5, t_ms=212.0,
                   note="the rewrite switched from Chinese to English: discarded, the question is searched"),
        Routed(decision=PathDecision(mode=Mode.AGENTIC, reason="agentic"),
               plan=RetrievalPlan(tools=["doc_search", "keyword_search"], reasons={"doc_search": "always"}),
               t_ms=213.0),
        AgenticStep(iteration=1, max_iterations=4, tool_calls=calls, new_chunks=4, duplicate_chunks=1,
                    duration_ms=180.0, thought="search the manual first", t_ms=395.0,
                    offered_tools=["searchDocs", "keywordSearch", "webSearch"],
                    withheld_tools={"recall_memory": "the user has no memories"}, requested_calls=5,
                    repeated_calls=2, over_cap_calls=1),
        Retrieved(mode="AGENTIC", workers=[WorkerReport(name="doc_search", status="ok", hits=5, latency_ms=11.0)],
                  tool_calls=calls, candidate_count=3, kb_chunks=2, web_chunks=1, stop_reason="model_done", rounds=1,
                  duration_ms=190.0, t_ms=405.0),
        Reranked(candidates=[kb, cut, web], reranker="offline", duration_ms=35.0, t_ms=441.0),
        Graded(grade=grade, t_ms=442.0),
        WebCompensated(ran=False, reason="tier AMBIGUOUS and the KB is not entity-weak", t_ms=442.5),
        Judged(target="evidence", via="llm", reason="the manual states the warranty period",
               evidence=EvidenceVerdict(verdict="partly", p_yes=0.42, scored_by="logprobs",
                                        reason="the manual states the warranty period"),
               tier_before="AMBIGUOUS", tier_after="AMBIGUOUS", duration_ms=0.2, t_ms=442.8),
        Fallback(stage="understanding", reason="invalid JSON", to="fallback classification", t_ms=443.0),
        ErrorRaised(stage="web_search", message="web search unavailable: set TAVILY_API_KEY", t_ms=443.5),
        AnswerStarted(prompt="low_confidence", sources=[kb, web], memories=["likes short answers"], t_ms=450.0),
        Notice(code="retrieval_incomplete", text="Note: retrieval was incomplete (web_search failed); the answer "
                                                 "below uses only the evidence that was found.", t_ms=450.5),
    ]
    t = 450.0
    for part in answer_parts[:tokens]:
        t += 3.5
        events.append(Token(text=part, t_ms=t))
    answer = "".join(answer_parts[:tokens])
    events.append(Done(
        run_id=run_id, answer=answer, mode=mode, route_reason="agentic", scope=Scope.KNOWLEDGE_QUERY,
        sources=[kb, web],
        citations=CitationResult(used_sources=[UsedSource(index=1, chunk_id="c-1", document="手册.pdf")],
                                 occurrences=[CitationOccurrence(index=1, char_start=16, char_end=19, valid=True)],
                                 coverage=1.0, substantive_sentences=1, cited_sentences=1),
        confidence=Confidence(score=0.7134, band="HIGH"), grade=grade, stop_reason="model_done", pending_documents=297,
        timings_ms={"understanding": 210.5, "retrieval": 190.0, "rerank": 35.0, "generation": 60.0},
        model_calls=[ModelCall(purpose="understanding", model="qwen-plus", prompt_tokens=320, completion_tokens=80,
                               latency_ms=210.0),
                     ModelCall(purpose="agent_round", model="qwen-turbo", prompt_tokens=900, completion_tokens=40,
                               latency_ms=170.0),
                     ModelCall(purpose="answer", model="qwen-plus", prompt_tokens=1500, completion_tokens=120,
                               latency_ms=58.0)],
        backend="openai:qwen-plus", t_ms=t + 5.0))
    assert {e.kind for e in events} == set(EVENT_KINDS)
    return events
