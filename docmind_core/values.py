"""Value types that cross module boundaries.

Pydantic models so they validate on the way in, serialise for the trace store
and the CLI's ``--json`` for free, and round-trip exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from docmind_core.errors import ConfigError


class _Value(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --------------------------------------------------------------------------
# Knowledge bases, documents, chunks
# --------------------------------------------------------------------------

Visibility = Literal["private", "department", "public"]


class KnowledgeBase(_Value):
    id: int
    name: str
    description: str = ""
    embedder_id: str
    embedding_dim: int
    owner_id: int | None = None
    department: str = ""
    visibility: Visibility = "private"
    created_at: str = ""
    document_count: int = 0
    chunk_count: int = 0


# embedding: chunk rows and keyword entries written, vectors on their way (searched by keyword meanwhile)
DocumentStatus = Literal["pending", "embedding", "complete", "failed"]


class DocumentRecord(_Value):
    id: int
    kb_id: int
    name: str
    source_path: str = ""
    content_hash: str
    mime: str
    size: int
    status: DocumentStatus
    error: str = ""
    chunk_count: int = 0
    created_at: str = ""


class ChunkPlace(_Value):
    """Where a chunk sits in its file, as a reader finds it again: PDF pages, a heading path (DOCX, HTML,
    Markdown) or spreadsheet rows (CSV, numbered as a spreadsheet shows them: the header is row 1)."""

    page_first: int | None = None  # 1-based
    page_last: int | None = None  # > page_first when the chunk crosses a page break
    section: str = ""  # the headings it sits under, outermost first, joined by " › "
    row_first: int | None = None
    row_last: int | None = None

    @property
    def label(self) -> str:
        """"p. 2", "pp. 2–3", "rows 2–14", "Budget › Costs" (empty when nothing is known)."""
        if self.page_first is not None:
            last = self.page_last or self.page_first
            return f"p. {self.page_first}" if last == self.page_first else f"pp. {self.page_first}–{last}"
        if self.row_first is not None:
            last = self.row_last or self.row_first
            return f"row {self.row_first}" if last == self.row_first else f"rows {self.row_first}–{last}"
        return self.section


def cited_place(document: str, location: str) -> str:
    """A source as a citation names it: "memo.pdf, p. 2" (the document alone when its place is unknown)."""
    return f"{document}, {location}" if location else document


class ChunkRecord(_Value):
    """A stored child chunk (retrieval unit) or parent block (context unit)."""

    id: str  # stable: hash of kb, document name and text position
    kb_id: int
    doc_id: int
    index: int  # position within the document (children and parents numbered separately)
    is_parent: bool = False
    parent_id: str | None = None
    text: str
    token_count: int
    start: int  # character offsets into the document's extracted text
    end: int
    # Keyword tokens of a child chunk (``text.keyword_tokens(stem=False)``, space-separated), stored at
    # ingest so query-time scoring never re-tokenises; None for parents and rows older than migration m006.
    terms: str | None = None
    place: ChunkPlace = Field(default_factory=ChunkPlace)  # empty for rows older than migration m017


class IngestOutcome(_Value):
    """What happened to one file of a batch."""

    path: str
    name: str
    status: Literal["added", "replaced", "unchanged", "failed"]
    doc_id: int | None = None
    chunks: int = 0
    error: str = ""
    seconds: float = 0.0


class IngestProgress(_Value):
    """Reported through the ingest progress callback."""

    file_index: int
    file_count: int
    name: str
    stage: Literal["parsing", "chunking", "embedding", "indexing", "done", "failed", "skipped"]
    fraction: float = 0.0  # within this file, 0..1
    message: str = ""
    outcome: IngestOutcome | None = None  # with "done": what landed, as soon as it landed
    # The run's vector backfill (all its files): chunks embedded so far and in all, from its start (0 of N)
    # on; None outside it.  What a job's ETA is measured from.
    run_embedded: int | None = None
    run_to_embed: int | None = None


# --------------------------------------------------------------------------
# Retrieval
# --------------------------------------------------------------------------

Origin = Literal["kb", "web", "memory"]


class StageScores(_Value):
    vector: float | None = None  # cosine similarity from the vector store
    keyword: float | None = None  # bm25 score from the keyword index
    vector_rank: int | None = None
    keyword_rank: int | None = None
    fused: float | None = None
    rerank: float | None = None  # 0..1
    # scored by the reranker's cross-language fit: the question crosses languages and this chunk is in the other
    rerank_across: bool = False
    mmr: float | None = None


class RetrievedChunk(_Value):
    chunk_id: str
    kb_id: int | None = None
    doc_id: int | None = None
    document: str  # the name the file had when it was ingested, or the web page title
    text: str
    start: int | None = None
    end: int | None = None
    chunk_index: int | None = None
    parent_id: str | None = None
    expanded: bool = False  # text replaced by the parent block
    origin: Origin = "kb"
    url: str = ""
    scores: StageScores = Field(default_factory=StageScores)
    kept: bool = True
    cut_by: str | None = None  # a CutBy value, None when kept
    found_by: list[str] = Field(default_factory=list)  # retrievers/tools that returned it
    location: str = ""  # where in the document: "p. 2", "rows 2–14", "Budget › Costs" (ChunkPlace.label)
    page: int | None = None  # a PDF chunk's first page
    page_last: int | None = None  # ... and its last (a passage across a page break)
    # The stored keyword tokens (see ChunkRecord.terms), for the reranker and MMR; not serialised.
    terms: str | None = Field(default=None, exclude=True, repr=False)

    @property
    def cited_as(self) -> str:
        """"memo.pdf, p. 2": the document and the place in it."""
        return cited_place(self.document, self.location)

    @classmethod
    def from_record(cls, record: ChunkRecord, document: str, **fields) -> "RetrievedChunk":
        """A stored chunk as retrieval evidence; its stored tokens travel with its text."""
        return cls(chunk_id=record.id, kb_id=record.kb_id, doc_id=record.doc_id, document=document,
                   text=record.text, terms=record.terms, start=record.start, end=record.end,
                   chunk_index=record.index, parent_id=record.parent_id, location=record.place.label,
                   page=record.place.page_first, page_last=record.place.page_last, **fields)


class IndexGap(_Value):
    """A KB whose vector store holds fewer vectors than it has ready chunks: its search is partly keyword-only."""

    kb_id: int
    kb_name: str = ""
    missing_vectors: int
    total: int
    built_with: str = ""  # set when the KB was built by another encoder than the live one (no vector side)
    live_encoder: str = ""

    def message(self) -> str:
        name = f"'{self.kb_name}'" if self.kb_name else str(self.kb_id)
        if self.built_with:
            return (f"knowledge base {name} was indexed with {self.built_with}, not the live encoder "
                    f"{self.live_encoder}: it is searched by keyword only until you run "
                    f"`docmind kb reindex {self.kb_name or 'NAME'}`")
        return (f"knowledge base {name}: {self.missing_vectors} of {self.total} chunks have no vector, so vector "
                f"search misses them (keyword search still finds them); repair with `docmind kb check "
                f"{self.kb_name or 'NAME'} --repair`")


class PendingIngest(_Value):
    """A KB that is not fully searchable yet: files of queued or running ingest jobs that have not landed and
    documents whose chunks are still being written (status pending) are not searched; chunks of documents
    whose vectors are still being written (status embedding) are searched by keyword only."""

    kb_id: int
    kb_name: str = ""
    pending_documents: int
    searched_documents: int  # its complete and embedding documents: what a search of it reads now
    embedding_chunks: int = 0  # chunks searched by keyword only: their vectors are still being written

    def message(self) -> str:
        name = f"'{self.kb_name}'" if self.kb_name else str(self.kb_id)
        embedding = embedding_note(self.embedding_chunks)
        if not self.pending_documents:
            return f"knowledge base {name}: {embedding}"
        return (f"knowledge base {name} is still being ingested: {self.pending_documents} document(s) pending "
                f"(not searched yet); {self.searched_documents} indexed document(s) were searched"
                + (f"; {embedding}" if self.embedding_chunks else ""))


def embedding_note(chunks: int) -> str:
    """What a reader is told about chunks whose vectors are still being written."""
    return (f"{chunks} chunk(s) still embedding (found by keyword search only until their vectors are "
            f"written)")


class SearchResult(_Value):
    """Output of the hybrid retrieval engine: kept chunks plus every candidate with its provenance."""

    query: str
    chunks: list[RetrievedChunk]
    candidates: list[RetrievedChunk]
    timings_ms: dict[str, float] = Field(default_factory=dict)
    used_tokens: int = 0
    index_gaps: list[IndexGap] = Field(default_factory=list)  # searched KBs with missing vectors
    pending: list[PendingIngest] = Field(default_factory=list)  # searched KBs still being ingested

    @property
    def pending_documents(self) -> int:
        return sum(p.pending_documents for p in self.pending)


# --------------------------------------------------------------------------
# Understanding, routing, planning
# --------------------------------------------------------------------------


class Scope(str, Enum):
    KNOWLEDGE_QUERY = "knowledge_query"
    META_DIALOGUE = "meta_dialogue"
    CHITCHAT = "chitchat"
    MEMORY_COMMAND = "memory_command"
    CAPABILITY = "capability"
    OUT_OF_SCOPE = "out_of_scope"


class Intent(str, Enum):
    FACTOID = "factoid"
    PROCEDURAL = "procedural"
    COMPARISON = "comparison"
    OPINION = "opinion"
    CHITCHAT = "chitchat"


class Complexity(str, Enum):
    SIMPLE = "SIMPLE"
    MEDIUM = "MEDIUM"
    COMPLEX = "COMPLEX"


class Specificity(str, Enum):
    PRECISE = "PRECISE"
    BROAD = "BROAD"


class Understanding(_Value):
    rewritten_query: str
    intent: Intent = Intent.FACTOID
    complexity: Complexity = Complexity.SIMPLE
    specificity: Specificity = Specificity.BROAD
    time_aware: bool = False
    memory_aware: bool = False
    is_ambiguous: bool = False
    scope: Scope = Scope.KNOWLEDGE_QUERY
    scope_confidence: float = 0.5
    memory_write_hints: list[str] = Field(default_factory=list)
    is_fallback: bool = False  # produced by the fallback classification
    upgraded_complexity: bool = False  # raised by the deterministic multi-focus rule

    @classmethod
    def fallback(cls, question: str) -> "Understanding":
        return cls(rewritten_query=question, is_ambiguous=True, is_fallback=True, scope_confidence=0.0)


class Mode(str, Enum):
    SELECTED_DOC = "SELECTED_DOC"
    RULE_PLANNER = "RULE_PLANNER"
    AGENTIC = "AGENTIC"


# Done.mode (and the trace's mode) of a run that retrieved nothing: a greeting, a capability question, ...
NO_RETRIEVAL_MODE = "NONE"


class StopReason(StrEnum):
    """Why retrieval stopped (Retrieved / Done ``stop_reason``; "" for one-shot retrieval)."""

    MODEL_DONE = "model_done"  # the agentic loop's model stopped calling tools
    MAX_ITERATIONS = "max_iterations"
    MAX_TOOL_CALLS = "max_tool_calls"
    ITERATION_TIMEOUT = "iteration_timeout"
    TOTAL_TIMEOUT = "total_timeout"
    CANCELLED = "cancelled"
    ERROR = "error"  # the loop failed and one-shot retrieval ran instead
    INCOMPLETE = "incomplete"  # set by the trace store: the event stream ended without done


class CutBy(StrEnum):
    """The stage that left a candidate out of the evidence (``RetrievedChunk.cut_by``)."""

    FUSION = "fusion"
    RERANK = "rerank"
    MMR = "mmr"
    MERGED = "merged"  # a sibling folded into the parent block of a better-ranked chunk
    BUDGET = "budget"
    COVERAGE = "coverage"  # displaced by another search's best chunk (answer.finish.keep_group_best)


class RequestedMode(str, Enum):
    """The path a user asks for; the path names (RULE_PLANNER, AGENTIC) are accepted too, in any case."""

    AUTO = "auto"
    RULE_PLANNER = "rule"  # the stored and typed spelling; RULE_PLANNER is accepted too
    AGENTIC = "agentic"

    @classmethod
    def _missing_(cls, value: object) -> "RequestedMode | None":
        name = str(value).strip().lower()
        return {"auto": cls.AUTO, "rule": cls.RULE_PLANNER, "rule_planner": cls.RULE_PLANNER, "agentic": cls.AGENTIC}.get(name)

    @classmethod
    def from_str(cls, text: "str | RequestedMode") -> "RequestedMode":
        """The mode ``text`` names; ConfigError listing the valid spellings when it names none."""
        try:
            return cls(text)
        except ValueError:
            raise ConfigError(f"mode {str(text)!r} is not one of {REQUESTED_MODE_CHOICES}") from None


REQUESTED_MODE_CHOICES = "auto, rule or agentic (RULE_PLANNER and AGENTIC too, in any case)"


class PathDecision(_Value):
    mode: Mode
    reason: str  # machine-readable: selected_docs / rule_planner / agentic / agentic_disabled / forced_rule ...
    forced: bool = False
    explanation: str = ""  # the same decision in plain words, naming its signals (route.explain_route)


ToolName = Literal["doc_search", "keyword_search", "web_search", "recall_memory"]


class RetrievalPlan(_Value):
    tools: list[ToolName]
    conservative: bool = False
    reasons: dict[str, str] = Field(default_factory=dict)  # tool -> why it was planned


# --------------------------------------------------------------------------
# Grading, citations
# --------------------------------------------------------------------------


class Tier(str, Enum):
    HIGH = "HIGH"
    AMBIGUOUS = "AMBIGUOUS"
    LOW = "LOW"


class GradeResult(_Value):
    tier: Tier
    top_score: float
    lex_coverage: float
    kb_entity_weak: bool
    web_compensation_needed: bool
    reason: str
    gray_zone_mode: str = ""
    # kinds of value the question asks for that no top chunk states (grade.unstated_kinds); the judge may not
    # lift such evidence to HIGH
    unstated_kinds: list[str] = []
    # what of the question's target (entity, qualifier, compared side) no top statement holds where it states
    # a value of the asked kind (answer/target_match.py): such evidence is never HIGH, and the judge may not lift it
    unmatched_target: list[str] = []


class CitationOccurrence(_Value):
    index: int
    char_start: int
    char_end: int
    valid: bool
    # Not written by the model: the parser attributed an uncited sentence to this source because the source
    # supports it. Such an occurrence is empty (char_start == char_end) and sits where a marker would go.
    inferred: bool = False


class UsedSource(_Value):
    index: int
    chunk_id: str
    document: str
    location: str = ""  # "p. 2" (RetrievedChunk.location)
    origin: Origin = "kb"
    inferred: bool = False  # used only by inferred citations, never cited by the model


# supported: one sentence, table row or small window of one source states the claim's entity, attribute and
# every value; contradicted: that source states the entity and attribute with another value of the same kind;
# unsupported: neither (or the claim states nothing checkable); not_checkable: a claim about the sources
# themselves ("the sources do not mention ...").
ClaimStatus = Literal["supported", "unsupported", "contradicted", "not_checkable"]
ClaimVia = Literal["offline", "llm"]


class ClaimCheck(_Value):
    """One claim of an answer (a sentence, list item or table row) checked against its sources."""

    text: str  # the claim as written, markers included
    char_start: int
    char_end: int  # answer[char_start:char_end] == text
    cited: list[int] = Field(default_factory=list)  # valid source numbers its own [n] markers cite
    status: ClaimStatus
    source_index: int | None = None  # the source that supports or contradicts it (1-based)
    inferred: bool = False  # source_index was found by search: the model cited no source for it
    evidence: str = ""  # the sentence, table row or window of that source
    reason: str = ""  # why, in a few words
    via: ClaimVia = "offline"  # "llm": the model judge set this status


class CitationResult(_Value):
    used_sources: list[UsedSource] = Field(default_factory=list)
    occurrences: list[CitationOccurrence] = Field(default_factory=list)
    coverage: float | None = None  # share of substantive claims that are supported; None when not computed
    invalid_refs: int = 0
    substantive_sentences: int = 0
    cited_sentences: int = 0  # claims with a valid marker or an inferred citation
    inferred_sentences: int = 0  # cited only by inferred citations
    claims: list[ClaimCheck] = Field(default_factory=list)
    supported_claims: int = 0
    unsupported_claims: int = 0
    contradicted_claims: int = 0


Band = Literal["HIGH", "MEDIUM", "LOW"]


class Confidence(_Value):
    score: float
    band: Band
    ungrounded: bool = False  # a substantive claim is unsupported or contradicted (or nothing is cited)
    reason: str = ""  # the score in words: supported claims, contradictions, evidence grade
    asks_for: list[str] = Field(default_factory=list)  # kinds of value the question asks for (answer_type.py)
    answers_question: bool | None = None  # False: an asked value no supported claim states; None: none asked
    unanswered: list[str] = Field(default_factory=list)  # the asked kinds no supported claim states
    # issue 34: the answered values read where their sources state them (answer/target_match.py).  False: some
    # answered value is stated of another entity, under another qualifier, or a compared side is missing
    # (band at most MEDIUM; LOW when no answered value is on target); None: no target or nothing answered
    target_matched: bool | None = None
    target_misses: list[str] = Field(default_factory=list)  # "entity Nimbus N1", "qualifier idle", "side N2"
    target_note: str = ""  # what the sources state instead, in the question's language


# --------------------------------------------------------------------------
# Tools and model calls
# --------------------------------------------------------------------------


# How a tool call the model printed as text (not as ``tool_calls``) was recovered; "" for a real tool call.
# (backends/openai_parsing.py names the dialect it was printed in.)
RepairedFrom = Literal["", "content_json", "fenced_json", "tool_call_tags", "tools_tags", "function_tags",
                       "function_parameters"]


class ToolCallRecord(_Value):
    name: str
    args: dict
    result_count: int = 0
    new_chunks: int = 0
    duplicate_chunks: int = 0
    latency_ms: float = 0.0
    # "timeout": a one-shot worker that did not answer in time, listed as a call of its tool
    status: Literal["ok", "error", "deduplicated", "rejected", "unavailable", "timeout"] = "ok"
    message: str = ""  # error text or the observation summary
    repaired_from: RepairedFrom = ""
    # a model's argument the settings overrode, e.g. "top_k 1 -> 5 (agentic.search_top_k_min)"
    adjusted: list[str] = Field(default_factory=list)


class WorkerReport(_Value):
    """One one-shot retrieval worker's outcome."""

    name: ToolName
    status: Literal["ok", "timeout", "error", "unavailable"]
    hits: int = 0
    latency_ms: float = 0.0
    message: str = ""


class ModelCall(_Value):
    """Usage of one model call, recorded for traces and Langfuse generations."""

    purpose: str  # understanding / agent_round / answer / ...
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    ok: bool = True
    error: str = ""


class BackendStatus(_Value):
    """What is live for one backend role, shown by the UI and the CLI."""

    role: Literal["llm", "embedder", "reranker", "vector_store", "keyword_index", "web_search", "tracing"]
    name: str  # e.g. "offline engine", "openai:qwen-plus"
    live: bool  # the real (configured) implementation is active
    detail: str = ""
    how_to_enable: str = ""


@dataclass
class Turn:
    """One message of a conversation's history, as the stages and models see it."""

    role: str  # "user" | "assistant"
    content: str


# --------------------------------------------------------------------------
# The model judge (docmind_core/answer/judge.py)
# --------------------------------------------------------------------------

EvidenceVerdictName = Literal["answers", "partly", "no"]
ClaimVerdictName = Literal["supported", "contradicted", "not_found"]


class EvidenceVerdict(_Value):
    """The judge's reading of whether the top evidence answers the question."""

    verdict: EvidenceVerdictName
    p_yes: float | None = None  # P("yes") from the reply's logprobs; None when the server gave none
    scored_by: Literal["logprobs", "verbal"] = "verbal"
    reason: str = ""  # the model's one-line reason
    stated: Literal["yes", "no", "partly", ""] = ""  # the verdict word the reply starts with
    quote: str = ""  # the words the reply gives as stating the answer
    quote_source: int | None = None  # the passage it names, 1-based as shown to the judge
    quote_verified: bool = False  # the passage holds the quote in place (answer/quote_check.py)
    quote_note: str = ""  # why it is or is not verified, in words


class ClaimVerdict(_Value):
    """The judge's check of one claim of the answer against the source span it cites."""

    claim: str
    source: int  # the cited source number, 1-based as in the answer
    status: ClaimVerdictName
    reason: str = ""
