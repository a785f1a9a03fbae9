"""The retrieval tools and the per-run tool context that enforces the security boundary.

One set of tool functions serves the one-shot workers, the agentic loop and
the MCP server.  Every call runs under a :class:`ToolContext` over the run's
:class:`~docmind_core.answer.run_context.RunContext`, whose scope comes from the
*session*: the knowledge-base ids and the user id never come from the model, so a
prompt-injected ``kbIds=[999]`` is overridden, not obeyed.

``searchDocs`` is the hybrid search (vector + keyword, fused), not the dense
retriever alone: the bundled encoder is weak on rare names and codes, and a
model reading the results gains nothing from a worse list.  ``keywordSearch``
stays separate for exact codes, versions and quoted names.

``executeCode`` (see :mod:`docmind_core.answer.sandbox`) is off by default
(``sandbox.enabled``) and absent from the loop's tool list when off.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Protocol, Sequence

from docmind_core.answer.run_context import RunContext
from docmind_core.backends.protocols import Observation, ToolCallRequest, ToolSpec, WebSearch
from docmind_core.errors import DocMindError, ToolExecutionError
from docmind_core.accounts.limits import check_tool_call, clipped_arguments, tool_arguments_problem
from docmind_core.values import CutBy, RetrievedChunk, ToolCallRecord
from docmind_core.answer.sandbox import run_python
from docmind_core.settings import Settings
from docmind_core.text.tokens import normalise_query, truncate_to_tokens

ToolStatus = Literal["ok", "error", "deduplicated", "rejected", "unavailable"]

# Argument names a model might use to pick knowledge bases or users; the session decides those.
_SESSION_ARGS = ("kb_ids", "kbIds", "kb_id", "kbId", "user_id", "userId")
_SNIPPET_TOKENS = 160  # per chunk in the text the model reads


@dataclass
class RoundDispatch:
    """What :meth:`Toolbox.dispatch_round` did with one round's calls."""

    observations: list[Observation]  # of the calls that were dispatched, in the model's order
    printed: int = 0  # calls the model asked for
    repeated: int = 0  # dropped as the same tool with the same normalised arguments as an earlier call
    over_cap: int = 0  # not run: past agentic.max_tool_calls


@dataclass
class ToolOutput:
    chunks: list[RetrievedChunk] = field(default_factory=list)
    text: str = ""  # what the model reads
    status: ToolStatus = "ok"
    message: str = ""
    memories: list[str] = field(default_factory=list)


@dataclass
class ToolContext:
    """One run's tool state: what the tools found so far, under the run's :class:`RunContext`.

    The run (``run``) holds the session's scope and the settings; this adds only what the tools did.  ``stop``
    is the tools' own flag, apart from the run's cancel: closing the context (the loop is over) or abandoning a
    timed-out round sets it, and in-flight and later calls see it, while the run itself goes on.

    Calls in one agentic round run in parallel threads, so every mutation goes through the lock.
    """

    run: RunContext
    stop: threading.Event = field(default_factory=threading.Event)
    searched: set[tuple[str, str]] = field(default_factory=set)  # (tool, normalised query)
    chunks: dict[str, RetrievedChunk] = field(default_factory=dict)  # first-seen order
    records: list[ToolCallRecord] = field(default_factory=list)
    used_web: bool = False
    memories: list[str] = field(default_factory=list)
    dedupe_hits: int = 0
    call_count: int = 0
    closed: bool = False
    search_groups: list[list[str]] = field(default_factory=list)  # chunk ids each KB search returned, in order
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def for_run(cls, kb_ids: Sequence[int], user_id: int | None, settings: Settings,
                cancel: threading.Event | None = None,
                exclude_doc_ids: Sequence[int] | None = None) -> "ToolContext":
        """The tool context of a run of its own, without a deadline (one MCP tool call, evaluation, tests)."""
        return cls(RunContext.start(settings, kb_ids, user_id, exclude_doc_ids, cancel))

    def fresh(self) -> "ToolContext":
        """Same run, empty state (used when the loop falls back to one-shot)."""
        return ToolContext(self.run)

    # -- state updates (thread-safe) ------------------------------------------
    def claim_query(self, tool: str, query: str) -> bool:
        """False when this tool already ran this (normalised) query in the run."""
        key = (tool, normalise_query(query))
        with self._lock:
            if key in self.searched:
                self.dedupe_hits += 1
                return False
            self.searched.add(key)
            return True

    def reserve_call(self) -> bool:
        """Count one call against the run's cap; False when the cap is reached."""
        with self._lock:
            if self.call_count >= self.run.settings.agentic.max_tool_calls:
                return False
            self.call_count += 1
            return True

    def absorb(self, chunks: Sequence[RetrievedChunk], tool: str) -> tuple[list[str], int]:
        """Add chunks to the union; returns (new chunk ids, duplicate count)."""
        new: list[str] = []
        dup = 0
        with self._lock:
            for chunk in chunks:
                seen = self.chunks.get(chunk.chunk_id)
                if seen is None:
                    self.chunks[chunk.chunk_id] = chunk.model_copy(
                        deep=True, update={"found_by": list(dict.fromkeys([*chunk.found_by, tool]))})
                    new.append(chunk.chunk_id)
                else:
                    dup += 1
                    if tool not in seen.found_by:
                        seen.found_by.append(tool)
        return new, dup

    def add_memories(self, texts: Sequence[str]) -> None:
        with self._lock:
            for text in texts:
                if text not in self.memories:
                    self.memories.append(text)

    def add_search_group(self, chunk_ids: Sequence[str]) -> None:
        with self._lock:
            self.search_groups.append(list(chunk_ids))

    def mark_web_used(self) -> None:
        with self._lock:
            self.used_web = True

    def record(self, record: ToolCallRecord) -> None:
        with self._lock:
            self.records.append(record)

    def union(self) -> list[RetrievedChunk]:
        with self._lock:
            return [c.model_copy(deep=True) for c in self.chunks.values()]

    def close(self) -> None:
        """End of the tools' work: in-flight tools see the stop flag, later calls are refused."""
        with self._lock:
            self.closed = True
        self.stop.set()


# --------------------------------------------------------------------------
# Tool schemas
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class ToolArgument:
    """One argument of one tool: the single definition its JSON schema, the check of a model's call and
    the defaults and clamps of :meth:`Toolbox.dispatch` are all read from."""

    type: type  # str or int
    description: str = ""
    required: bool = False
    bounds: tuple[int, int] | None = None  # an integer is clamped into this range (the schema says so too)
    alias: str = ""  # the camelCase spelling models also write
    default_key: str = ""  # the settings key that fills it when the model leaves it out
    # settings keys of the floor and ceiling a model's value is moved into (recorded in the call's ``adjusted``)
    floor_key: str = ""
    ceiling_key: str = ""

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "integer" if self.type is int else "string"}
        if self.bounds:
            out["minimum"], out["maximum"] = self.bounds
        if self.description:
            out["description"] = self.description
        return out


_QUERY = ToolArgument(str, "What to look for, in the documents' language", required=True)
_TOP_K = ToolArgument(int, "How many passages to return", bounds=(1, 50), alias="topK",
                      default_key="agentic.search_top_k", floor_key="agentic.search_top_k_min",
                      ceiling_key="agentic.search_top_k_max")

TOOL_ARGUMENTS: dict[str, dict[str, ToolArgument]] = {
    "searchDocs": {"query": _QUERY, "top_k": _TOP_K},
    "keywordSearch": {"query": _QUERY, "top_k": _TOP_K},
    "webSearch": {"query": _QUERY, "max_results": ToolArgument(int, bounds=(1, 20), alias="maxResults",
                                                               default_key="agentic.web_max_results")},
    "recall_memory": {"query": _QUERY},
    "executeCode": {"code": ToolArgument(str, required=True)},
    "store_memory": {"text": ToolArgument(str, required=True)},
    "kb_meta": {},
}


def _parameters(tool: str) -> dict[str, Any]:
    arguments = TOOL_ARGUMENTS[tool]
    schema: dict[str, Any] = {"type": "object", "properties": {n: a.schema() for n, a in arguments.items()}}
    required = [n for n, a in arguments.items() if a.required]
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


_DESCRIPTIONS = {
    "searchDocs": "Search the selected knowledge bases (semantic + keyword). Start here; search each focus of a "
                  "comparison separately.",
    "keywordSearch": "Exact keyword search of the selected knowledge bases, for codes, versions, model numbers and "
                     "quoted names.",
    "webSearch": "Search the web. Only for recent events or when the knowledge bases fall short.",
    "recall_memory": "Recall what this user asked DocMind to remember.",
    "executeCode": "Run a short Python program for exact arithmetic or counting; print the result.",
    # Exposed to MCP clients only; never offered to the loop.
    "store_memory": "Remember a fact for this user.",
    "kb_meta": "Names, descriptions and document counts of the selected knowledge bases.",
}
TOOL_SPECS: dict[str, ToolSpec] = {name: ToolSpec(name, _DESCRIPTIONS[name], _parameters(name))
                                   for name in TOOL_ARGUMENTS}

# One line each, and only the arguments a call needs: the compact schema small models read (agentic.compact_tools).
_COMPACT_DESCRIPTIONS = {
    "searchDocs": "Search the knowledge bases.",
    "keywordSearch": "Exact keyword search, for codes and names.",
    "webSearch": "Search the web.",
    "recall_memory": "Recall what the user asked to remember.",
    "executeCode": "Run Python; print the result.",
}

LOOP_TOOLS = ("searchDocs", "keywordSearch", "webSearch", "recall_memory")


def loop_tool_specs(sandbox_enabled: bool, compact: bool = False) -> list[ToolSpec]:
    """The tools the agentic loop may call; write and metadata tools are never among them."""
    names = [*LOOP_TOOLS, "executeCode"] if sandbox_enabled else list(LOOP_TOOLS)
    return [compact_spec(n) if compact else TOOL_SPECS[n] for n in names]


def compact_spec(name: str) -> ToolSpec:
    """A tool's schema with a one-line description and only its required arguments (the rest default)."""
    arguments = {n: a for n, a in TOOL_ARGUMENTS[name].items() if a.required}
    properties = {n: {"type": "integer" if a.type is int else "string"} for n, a in arguments.items()}
    return ToolSpec(name, _COMPACT_DESCRIPTIONS.get(name, _DESCRIPTIONS[name]),
                    {"type": "object", "properties": properties, "required": list(arguments)})


# --------------------------------------------------------------------------
# The toolbox
# --------------------------------------------------------------------------

class CandidateSource(Protocol):
    """What the search tools need from the retriever (``retrieval.hybrid.HybridRetriever``)."""

    def candidates(self, query: str, kb_ids: Sequence[int], settings: Settings,
                   doc_ids: Sequence[int] | None = None,
                   exclude_doc_ids: Sequence[int] | None = None) -> list[RetrievedChunk]: ...

    def keyword_candidates(self, query: str, kb_ids: Sequence[int], top_k: int,
                           doc_ids: Sequence[int] | None = None,
                           exclude_doc_ids: Sequence[int] | None = None) -> list[RetrievedChunk]: ...


class MemoryBackend(Protocol):
    """What the memory tools need (``memory.MemoryStore``)."""

    def add(self, user_id: int | None, text: str, source: str = "") -> Any: ...

    def recall(self, user_id: int | None, query: str, top_k: int = 5, min_similarity: float = 0.3) -> list[Any]: ...


class KnowledgeBaseInfo(Protocol):
    """What ``kb_meta`` needs (``store.kb_store.KnowledgeStore``)."""

    def get_kb(self, kb_id: int) -> Any: ...


class Toolbox:
    """The tool functions over the engine's backends; stateless apart from the ToolContext passed in."""

    def __init__(self, retriever: CandidateSource, web: WebSearch | None = None, memory: MemoryBackend | None = None,
                 store: KnowledgeBaseInfo | None = None):
        # web / memory / store None: that tool answers "unavailable" (evaluation runs KB evidence only).
        self.retriever = retriever
        self.web = web
        self.memory = memory
        self.store = store
        self._functions: dict[str, Callable[..., ToolOutput]] = {
            "searchDocs": self.search_docs, "keywordSearch": self.keyword_search, "webSearch": self.web_search,
            "recall_memory": self.recall_memory, "executeCode": self.execute_code,
            "store_memory": self.store_memory, "kb_meta": self.kb_meta,
        }

    # -- what the loop is offered ------------------------------------------------
    def offered_specs(self, ctx: ToolContext) -> tuple[list[ToolSpec], dict[str, str]]:
        """The loop's tools that can work in this run, and why each other one is withheld.

        A tool that can only answer "unavailable" costs a small model a call slot and prompt tokens: web search
        without a working backend and memory recall for a user with no memories are not offered.
        """
        settings = ctx.run.settings
        offered: list[ToolSpec] = []
        withheld: dict[str, str] = {}
        for spec in loop_tool_specs(settings.sandbox.enabled, settings.agentic.compact_tools):
            reason = self._unusable(spec.name, ctx)
            if reason:
                withheld[spec.name] = reason
            else:
                offered.append(spec)
        return offered, withheld

    def web_unavailable(self) -> str:
        """Why web search cannot run in this deployment ("" when a live backend is configured)."""
        if self.web is None:
            return "no web search backend"
        try:
            status = self.web.status()
        except Exception as exc:  # noqa: BLE001 - a backend that cannot say is not offered
            return f"web search status failed: {exc}"
        return "" if status.live else f"web search unavailable ({status.detail or status.name})"

    def _unusable(self, name: str, ctx: ToolContext) -> str:
        if name == "webSearch":
            return self.web_unavailable()
        if name == "recall_memory":
            if self.memory is None or ctx.run.user_id is None:
                return "no memory for this session"
            listing = getattr(self.memory, "list", None)
            try:
                has_any = bool(listing(ctx.run.user_id)) if callable(listing) else True
            except Exception:  # noqa: BLE001
                has_any = False
            return "" if has_any else "the user has no memories"
        return ""

    # -- the tools ---------------------------------------------------------------
    def search_docs(self, ctx: ToolContext, query: str, top_k: int | None = None) -> ToolOutput:
        """Hybrid candidates (vector + keyword, fused), best first; ``top_k=None`` returns all of them."""
        excluded = {"exclude_doc_ids": sorted(ctx.run.exclude_doc_ids)} if ctx.run.exclude_doc_ids else {}
        chunks = self.retriever.candidates(query, list(ctx.run.kb_ids), ctx.run.settings, **excluded)
        chunks = [c for c in chunks if c.cut_by != CutBy.FUSION] or chunks
        if top_k is not None:
            chunks = chunks[:top_k]
        return ToolOutput(chunks=_labelled(chunks, "searchDocs"), text=_describe(chunks))

    def keyword_search(self, ctx: ToolContext, query: str, top_k: int | None = None) -> ToolOutput:
        k = top_k if top_k is not None else ctx.run.settings.retrieval.keyword_top_k
        excluded = {"exclude_doc_ids": sorted(ctx.run.exclude_doc_ids)} if ctx.run.exclude_doc_ids else {}
        chunks = self.retriever.keyword_candidates(query, list(ctx.run.kb_ids), k, **excluded)
        return ToolOutput(chunks=_labelled(chunks, "keywordSearch"), text=_describe(chunks))

    def web_search(self, ctx: ToolContext, query: str, max_results: int | None = None) -> ToolOutput:
        if self.web is None:
            return ToolOutput(status="unavailable", message="web search unavailable: no web backend configured",
                              text="Web search is unavailable.")
        n = max_results if max_results is not None else ctx.run.settings.web.max_results
        result = self.web.search(query, n)
        if not result.available:
            msg = result.message or "web search unavailable"
            return ToolOutput(status="unavailable", message=msg, text=msg)
        if not result.chunks and result.message.startswith("web search failed"):
            return ToolOutput(status="error", message=result.message, text=result.message)
        ctx.mark_web_used()
        chunks = [c.model_copy(update={"origin": "web"}) for c in result.chunks]
        return ToolOutput(chunks=_labelled(chunks, "webSearch"), text=_describe(chunks), message=result.message)

    def recall_memory(self, ctx: ToolContext, query: str) -> ToolOutput:
        if self.memory is None or ctx.run.user_id is None:
            return ToolOutput(status="unavailable", message="no memory for this session", text="No memories.")
        memory = ctx.run.settings.memory
        items = self.memory.recall(ctx.run.user_id, query, memory.top_k, memory.min_similarity)
        texts = [getattr(m, "text", m) if not isinstance(m, str) else m for m in items]
        texts = [str(t) for t in texts if t]
        ctx.add_memories(texts)
        body = "\n".join(f"- {t}" for t in texts) if texts else "No matching memories."
        return ToolOutput(text=body, memories=texts)

    def store_memory(self, ctx: ToolContext, text: str) -> ToolOutput:
        if self.memory is None or ctx.run.user_id is None:
            return ToolOutput(status="unavailable", message="no memory for this session", text="Not stored.")
        self.memory.add(ctx.run.user_id, text, "tool")
        return ToolOutput(text="Stored.")

    def kb_meta(self, ctx: ToolContext) -> ToolOutput:
        if self.store is None:
            return ToolOutput(status="unavailable", message="no knowledge store", text="No metadata.")
        lines = []
        for kb_id in ctx.run.kb_ids:
            kb = self.store.get_kb(kb_id)
            desc = f": {kb.description}" if kb.description else ""
            lines.append(f"- {kb.name}{desc} ({kb.document_count} documents)")
        return ToolOutput(text="\n".join(lines) or "No knowledge base selected.")

    def execute_code(self, ctx: ToolContext, code: str) -> ToolOutput:
        if not ctx.run.settings.sandbox.enabled:
            return ToolOutput(status="rejected", message="executeCode is disabled (sandbox.enabled is off)",
                              text="Code execution is disabled.")
        run = run_python(code, ctx.run.settings.sandbox.timeout_s)
        return ToolOutput(status="ok" if run.ok else "error", text=run.output, message=run.problem)

    # -- dispatch ----------------------------------------------------------------
    def call(self, ctx: ToolContext, name: str, args: dict[str, Any]) -> ToolOutput:
        """Run one tool by name with already-validated arguments (used by the one-shot workers)."""
        check_tool_call(args, ctx.run.settings)  # InputTooLarge before any work (MCP callers come in here)
        try:
            return self._functions[name](ctx, **args)
        except DocMindError:
            raise
        except Exception as exc:  # noqa: BLE001 - a backend failure becomes one typed error
            raise ToolExecutionError(name, exc) from exc

    def dispatch_round(self, ctx: ToolContext, requests: Sequence[ToolCallRequest],
                       allowed: Sequence[str] | None = None, workers: int = 4) -> RoundDispatch:
        """One round's calls in the model's order: repeats dropped, the cap applied in that order, the rest run
        side by side, and their records kept in the model's order (not in the order the threads finish)."""
        keys: set[tuple[str, str]] = set()
        unique: list[ToolCallRequest] = []
        repeated = 0
        for request in requests:
            key = call_key(request)
            if key in keys:
                repeated += 1
                continue
            keys.add(key)
            unique.append(request)
        room = max(0, ctx.run.settings.agentic.max_tool_calls - ctx.call_count)
        # calls past the cap are not run; the first of them is recorded as refused (the model learns the budget)
        run, over = unique[:max(room, 1)], unique[max(room, 1):]
        sinks: list[list[ToolCallRecord]] = [[] for _ in run]
        if len(run) == 1:
            observations = [self.dispatch(ctx, run[0], allowed, sink=sinks[0].append)]
        else:
            with ThreadPoolExecutor(max_workers=min(workers, len(run)), thread_name_prefix="docmind-tool") as pool:
                observations = list(pool.map(lambda i: self.dispatch(ctx, run[i], allowed, sink=sinks[i].append),
                                             range(len(run))))
        for sink in sinks:
            for record in sink:
                ctx.record(record)
        if repeated:
            with ctx._lock:
                ctx.dedupe_hits += repeated
        return RoundDispatch(observations=observations, printed=len(requests), repeated=repeated,
                             over_cap=len(over))

    def dispatch(self, ctx: ToolContext, request: ToolCallRequest,
                 allowed: Sequence[str] | None = None,
                 sink: Callable[[ToolCallRecord], None] | None = None) -> Observation:
        """Run one model-requested call under the context's rules and record it.

        Validation problems (unknown tool, bad arguments, cap reached, repeated
        query) become an observation for the model.  The record goes to ``sink`` when one is
        given (:meth:`dispatch_round` keeps a round's records in the model's order), else into the context.  A backend failure raises
        :class:`ToolExecutionError`: the loop then falls back to one-shot
        instead of letting the model reason over an error.
        """
        allowed = list(allowed) if allowed is not None else [s.name for s in
                                                            loop_tool_specs(ctx.run.settings.sandbox.enabled)]
        started = time.perf_counter()
        args, notes = _scrub_session_args(request.arguments)
        adjusted: list[str] = []

        def finish(status: ToolStatus, text: str, message: str = "", output: ToolOutput | None = None,
                   new: list[str] | None = None, dup: int = 0) -> Observation:
            chunks = output.chunks if output else []
            record = ToolCallRecord(
                name=request.name, args=args, result_count=len(chunks) + len(output.memories if output else []),
                new_chunks=len(new or []), duplicate_chunks=dup, status=status,
                latency_ms=round((time.perf_counter() - started) * 1000, 2),
                message="; ".join(x for x in [message, *notes] if x), repaired_from=request.repaired_from,
                adjusted=adjusted)
            (sink or ctx.record)(record)
            return Observation(call=request, text=text, chunks=chunks, new_chunk_ids=new or [])

        if ctx.closed or ctx.stop.is_set():
            return finish("rejected", "The search has ended.", "run ended")
        if not ctx.reserve_call():
            return finish("rejected", "Tool-call budget exhausted; stop and let the answer be written.",
                          f"cap of {ctx.run.settings.agentic.max_tool_calls} tool calls reached")
        if request.name not in allowed:
            return finish("error", f"Unknown tool {request.name!r}. Available: {', '.join(allowed)}.",
                          "unknown tool")
        too_large = tool_arguments_problem(args, request.raw_arguments, ctx.run.settings)
        if too_large:
            args = clipped_arguments(args)  # the trace keeps the call, not megabytes of it
        problem = request.parse_error or too_large or _check_args(request.name, args)
        if problem:
            return finish("error", f"Invalid arguments for {request.name}: {problem}", problem)
        args, adjusted[:] = _with_defaults(request.name, args, ctx.run.settings)
        query = args.get("query")
        if isinstance(query, str) and not ctx.claim_query(request.name, query):
            return finish("deduplicated", "Already searched; try another angle or stop.", "repeated query")
        output = self.call(ctx, request.name, args)
        new, dup = ctx.absorb(output.chunks, request.name)
        if request.name in ("searchDocs", "keywordSearch") and output.chunks:
            ctx.add_search_group([c.chunk_id for c in output.chunks])
        return finish(output.status, output.text, output.message, output, new, dup)


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------

def _scrub_session_args(arguments: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    args = dict(arguments or {})
    notes = []
    for key in _SESSION_ARGS:
        if key in args:
            args.pop(key)
            notes.append(f"{key} overridden by the session")
    return args, notes


def _check_args(name: str, args: dict[str, Any]) -> str:
    spec = TOOL_ARGUMENTS.get(name, {})
    by_spelling = {**{a.alias: a for a in spec.values() if a.alias}, **spec}
    for key, value in args.items():
        argument = by_spelling.get(key)
        if argument is None:
            return f"unexpected argument {key!r}"
        if argument.type is int and (isinstance(value, bool) or not isinstance(value, int)):
            return f"{key} must be an integer"
        if argument.type is str and not isinstance(value, str):
            return f"{key} must be a string"
    for key, argument in spec.items():
        if argument.required and not str(args.get(key, "")).strip():
            return f"missing {key}"
    return ""


def _with_defaults(name: str, args: dict[str, Any], settings: Settings) -> tuple[dict[str, Any], list[str]]:
    """The arguments with the settings' defaults filled in, and a model's values moved into the settings' floor
    and ceiling; also says which of the model's values were moved (``top_k 1 -> 5 (agentic.search_top_k_min)``)."""
    args = dict(args)
    adjusted: list[str] = []
    for key, argument in TOOL_ARGUMENTS.get(name, {}).items():
        if argument.alias in args:
            args[key] = args.pop(argument.alias)
        if not argument.default_key:
            continue
        if key not in args:
            value = int(settings.get(argument.default_key))
            low, high = argument.bounds or (value, value)
            args[key] = max(low, min(value, high))
            continue
        asked = int(args[key])
        low, high = argument.bounds or (asked, asked)
        bounds = [(max(low, int(settings.get(argument.floor_key))) if argument.floor_key else low,
                   argument.floor_key or "schema minimum"),
                  (min(high, int(settings.get(argument.ceiling_key))) if argument.ceiling_key else high,
                   argument.ceiling_key or "schema maximum")]
        (floor, floor_from), (ceiling, ceiling_from) = bounds
        value = max(floor, min(asked, ceiling))
        if value != asked:
            adjusted.append(f"{key} {asked} -> {value} ({floor_from if value > asked else ceiling_from})")
        args[key] = value
    return args, adjusted


def call_key(request: ToolCallRequest) -> tuple[str, str]:
    """What makes two calls the same: the tool and its normalised arguments (a query compares normalised, as
    the context's repeated-query check does)."""
    arguments = {k: (normalise_query(v) if k == "query" and isinstance(v, str) else v)
                 for k, v in (request.arguments or {}).items() if k not in _SESSION_ARGS}
    if "query" in arguments:  # the same query with another top_k is the same search
        arguments = {"query": arguments["query"]}
    return request.name, json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)


def _labelled(chunks: Sequence[RetrievedChunk], tool: str) -> list[RetrievedChunk]:
    return [c.model_copy(update={"found_by": list(dict.fromkeys([*c.found_by, tool]))}) for c in chunks]


def _describe(chunks: Sequence[RetrievedChunk]) -> str:
    """The observation the model reads: numbered passages with their document and origin."""
    if not chunks:
        return "No results."
    lines = []
    for i, c in enumerate(chunks, 1):
        where = f"web: {c.url or c.document}" if c.origin == "web" else c.cited_as
        snippet = truncate_to_tokens(" ".join(c.text.split()), _SNIPPET_TOKENS)
        lines.append(f"[{i}] ({where}) {snippet}")
    return "\n".join(lines)
