"""Turning Chat Completions output into DocMind values: the understanding JSON and tool calls.

Kept apart from the client so it can be tested without a server.

Small local models (Qwen2.5-Coder 0.5B / 1.5B under ``llama-server --jinja``,
Ollama) often print a tool call as text instead of sending ``tool_calls``: a
bare JSON object ``{"name": ..., "arguments": {...}}``, the same in a
```json code block, or Qwen's ``<tool_call>...</tool_call>`` tags, one call or a
list, Qwen2.5-Coder's ``<tools>...</tools>`` blocks, or ``<function=name>``
blocks.  :func:`calls_from_content` recovers such calls in the order they were
printed when they name a declared tool, keeps only the arguments that tool
declares, and marks each one with ``repaired_from`` so the run's events say the
call was printed, not sent, and in which dialect.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any, Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from docmind_core.backends.protocols import ToolCallRequest, ToolSpec
from docmind_core.errors import ModelOutputError
from docmind_core.values import Complexity, Intent, Scope, Specificity, Understanding

_FENCE_RE = re.compile(r"^\s*```(?:json)?\s*|\s*```\s*$", re.IGNORECASE)


class UnderstandingPayload(BaseModel):
    """The JSON the query_understanding prompt asks for (camelCase keys; snake_case accepted too)."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    rewritten_query: str = Field(alias="rewrittenQuery", min_length=1)
    intent: Intent
    complexity: Complexity
    specificity: Specificity = Specificity.BROAD
    time_aware: bool = Field(False, alias="timeAware")
    memory_aware: bool = Field(False, alias="memoryAware")
    is_ambiguous: bool = Field(False, alias="isAmbiguous")
    scope: Scope = Scope.KNOWLEDGE_QUERY
    scope_confidence: float = Field(0.5, alias="scopeConfidence")
    memory_write_hints: list[str] = Field(default_factory=list, alias="memoryWriteHints")

    @field_validator("intent", "scope", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower().replace(" ", "_").replace("-", "_") if isinstance(value, str) else value

    @field_validator("complexity", "specificity", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("scope_confidence", mode="before")
    @classmethod
    def _clamp(cls, value: Any) -> Any:
        try:
            return min(1.0, max(0.0, float(value)))
        except (TypeError, ValueError):
            return value

    @field_validator("memory_write_hints", mode="before")
    @classmethod
    def _hints(cls, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, str):
            return [value] if value.strip() else []
        return value

    def to_understanding(self) -> Understanding:
        return Understanding(
            rewritten_query=self.rewritten_query.strip(), intent=self.intent, complexity=self.complexity,
            specificity=self.specificity, time_aware=self.time_aware, memory_aware=self.memory_aware,
            is_ambiguous=self.is_ambiguous, scope=self.scope, scope_confidence=self.scope_confidence,
            memory_write_hints=[h.strip() for h in self.memory_write_hints if str(h).strip()],
        )


def extract_json_object(content: str) -> dict[str, Any]:
    """The JSON object in a reply, tolerating code fences and text around it; raises ModelOutputError."""
    text = _FENCE_RE.sub("", content.strip())
    try:
        value = json.loads(text)
    except ValueError:
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end <= start:
            raise ModelOutputError(f"the model's reply is not JSON: {content[:120]!r}") from None
        try:
            value = json.loads(text[start:end + 1])
        except ValueError as exc:
            raise ModelOutputError(f"the model's reply is not valid JSON ({exc.msg}): {content[:120]!r}") from None
    if not isinstance(value, dict):
        raise ModelOutputError(f"the model's reply is JSON but not an object: {content[:120]!r}")
    return value


def parse_understanding(content: str, fallback_query: str = "") -> Understanding:
    """Validate the understanding JSON; raises ModelOutputError naming the bad fields."""
    data = extract_json_object(content)
    if fallback_query and not str(data.get("rewrittenQuery") or data.get("rewritten_query") or "").strip():
        data["rewrittenQuery"] = fallback_query  # an empty rewrite is harmless: search the question itself
    try:
        return UnderstandingPayload.model_validate(data).to_understanding()
    except ValidationError as exc:
        fields = ", ".join(".".join(str(p) for p in e["loc"]) + f" ({e['msg']})" for e in exc.errors())
        raise ModelOutputError(f"the understanding JSON has invalid fields: {fields}") from None


def parse_tool_call(call_id: str | None, name: str | None, raw_arguments: str | None) -> ToolCallRequest:
    """One tool call; malformed arguments set ``parse_error`` instead of raising."""
    raw = raw_arguments or ""
    arguments: dict[str, Any] = {}
    error = ""
    if raw.strip():
        try:
            value = json.loads(raw)
        except ValueError as exc:
            error = f"arguments are not valid JSON ({exc.msg} at char {exc.pos})"
        else:
            if isinstance(value, dict):
                arguments = value
            else:
                error = f"arguments must be a JSON object, got {type(value).__name__}"
    return ToolCallRequest(id=call_id or "", name=name or "", arguments=arguments, raw_arguments=raw,
                           parse_error=error)


# -- tool calls printed as text ------------------------------------------------

# Each dialect a small model prints calls in: the repair it is recorded as, and the pattern of one block.
# An unclosed block runs to the end of the text (a model stopped by a stop sequence or by max_tokens).
_TAG_DIALECTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("tools_tags", re.compile(r"<tools>(.*?)(?:</tools>|\Z)", re.DOTALL)),  # Qwen2.5-Coder's own habit
    ("tool_call_tags", re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)),  # Qwen's chat template
    ("function_tags", re.compile(r"<function=([A-Za-z_][\w.-]*)>(.*?)(?:</function>|\Z)", re.DOTALL)),
    ("fenced_json", re.compile(r"```[ \t]*(?:json|tool_call|tool_code)?[ \t]*\n?(.*?)(?:```|\Z)",
                               re.DOTALL | re.IGNORECASE)),
)
_PARAMETER_RE = re.compile(r"<parameter=([A-Za-z_][\w-]*)>(.*?)(?:</parameter>|(?=<parameter=)|\Z)", re.DOTALL)
# What is left of the dialects once the calls are cut out: empty tag pairs, lone tags, a cut-off JSON tail.
_LEFTOVER_TAG_RE = re.compile(r"</?(?:tools|tool_call|function(?:=[^>]*)?|parameter(?:=[^>]*)?)>")
_JSON_START_RE = re.compile(r"[\[{]")
_ARGUMENT_KEYS = ("arguments", "parameters")  # "parameters": what Llama-style templates print
_MAX_SCANNED_CHARS = 20_000  # an agent turn is short; this bounds the scan for JSON starts
_MAX_JSON_STARTS = 64

# Where a model that prints its calls has finished one: the request's stop sequences for tool rounds, so a
# small model stops after its first complete call instead of printing blocks until max_tokens runs out.
CALL_STOP_SEQUENCES: tuple[str, ...] = ("</tools>", "</tool_call>", "</function>")


def calls_from_content(content: str, tools: Sequence[ToolSpec]) -> tuple[list[ToolCallRequest], str]:
    """Tool calls a model printed in its text instead of sending them, and the text without them.

    Every dialect is read, in the order the model printed it: ``<tools>`` and
    ``<tool_call>`` blocks (each may hold one call, several, or a list),
    ``<function=name>`` blocks (JSON arguments or ``<parameter=key>`` pairs),
    ```json code blocks, and bare JSON between them.  A call to a tool that was
    not declared is not a call: it stays in the text.  Each call is marked with
    the dialect it was recovered from (``repaired_from``).  The text that comes
    back has no leftover tags or cut-off JSON (it is shown as the model's
    thought).  Returns ``([], content)`` when nothing was recovered.
    """
    declared = {tool.name: tool for tool in tools}
    if not content or not declared:
        return [], content
    text = content[:_MAX_SCANNED_CHARS]
    found: list[tuple[int, ToolCallRequest]] = []
    blocks: list[tuple[int, int]] = []  # spans of every dialect block, with or without a call in it
    pos = 0
    while pos < len(text):
        match, repaired_from = _next_block(text, pos)
        if match is None:
            break
        gap_calls, gap_spans = _calls_in_json_text(text[pos:match.start()], declared, "content_json")
        found += [(pos, c) for c in gap_calls]
        blocks += [(pos + s, pos + e) for s, e in gap_spans]
        found += [(match.start(), c) for c in _calls_in_block(match, repaired_from, declared)]
        blocks.append(match.span())
        pos = max(match.end(), match.start() + 1)
    tail_calls, tail_spans = _calls_in_json_text(text[pos:], declared, "content_json")
    found += [(pos, c) for c in tail_calls]
    calls = [call for _, call in sorted(found, key=lambda item: item[0])]
    if not calls:
        return [], content
    spans = sorted(blocks + [(pos + s, pos + e) for s, e in tail_spans])
    gap_text = _without(text, spans)
    return calls, _tidy_thought(gap_text, declared)


def _next_block(text: str, pos: int) -> tuple[re.Match[str] | None, str]:
    """The dialect block that starts first at or after ``pos``."""
    best: tuple[re.Match[str] | None, str] = (None, "")
    for repaired_from, pattern in _TAG_DIALECTS:
        match = pattern.search(text, pos)
        if match is not None and (best[0] is None or match.start() < best[0].start()):
            best = (match, repaired_from)
    return best


def _calls_in_block(match: re.Match[str], repaired_from: str,
                    declared: dict[str, ToolSpec]) -> list[ToolCallRequest]:
    if repaired_from != "function_tags":
        return _calls_in_json_text(match.group(1), declared, repaired_from)[0]
    name, body = match.group(1), match.group(2)
    if name not in declared:
        return []
    parameters = _PARAMETER_RE.findall(body)
    if parameters:  # <function=name><parameter=key>value</parameter>...</function>
        properties = (declared[name].parameters or {}).get("properties") or {}
        arguments = {key: _typed(value.strip(), properties.get(key) or {}) for key, value in parameters}
        call = _printed_call({"name": name, "arguments": arguments}, declared, "function_parameters")
        return [call] if call is not None else []
    start = body.find("{")
    if start < 0:  # a call without arguments
        call = _printed_call({"name": name, "arguments": {}}, declared, repaired_from)
        return [call] if call is not None and not body.strip() else []
    try:
        value, _ = json.JSONDecoder().raw_decode(body, start)
    except ValueError:
        return []  # cut off before its arguments closed: not a call
    if isinstance(value, dict) and value.get("name") == name:  # <function=x>{"name": x, "arguments": ...}
        value = next((value[key] for key in _ARGUMENT_KEYS if key in value), {})
    call = _printed_call({"name": name, "arguments": value}, declared, repaired_from)
    return [call] if call is not None else []


def _typed(value: str, schema: dict[str, Any]) -> Any:
    """A ``<parameter>`` value as its schema's type (they are printed as bare text)."""
    if schema.get("type") == "integer":
        try:
            return int(value)
        except ValueError:
            return value
    return value


def _tidy_thought(text: str, declared: dict[str, ToolSpec]) -> str:
    """The model's text beside its calls, without empty tag pairs, lone tags or a JSON tail cut off mid-call."""
    text = _LEFTOVER_TAG_RE.sub("", text)
    start = _JSON_START_RE.search(text)
    while start is not None:  # a JSON value that never closes is a call cut off by max_tokens or a stop
        try:
            _, end = json.JSONDecoder().raw_decode(text, start.start())
        except ValueError:
            tail = text[start.start():]
            if '"name"' in tail or any(f'"{name}"' in tail for name in declared):
                text = text[:start.start()]
                break
            start = _JSON_START_RE.search(text, start.start() + 1)
            continue
        start = _JSON_START_RE.search(text, end)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _calls_in_json_text(text: str, declared: dict[str, ToolSpec],
                        repaired_from: str) -> tuple[list[ToolCallRequest], list[tuple[int, int]]]:
    """Calls in every JSON value (object or list of objects) found in ``text``, with their spans."""
    decoder = json.JSONDecoder()
    calls: list[ToolCallRequest] = []
    spans: list[tuple[int, int]] = []
    scanned = text[:_MAX_SCANNED_CHARS]
    pos, starts = 0, 0
    while starts < _MAX_JSON_STARTS:
        start = _JSON_START_RE.search(scanned, pos)
        if start is None:
            break
        starts += 1
        try:
            value, end = decoder.raw_decode(scanned, start.start())
        except ValueError:
            pos = start.start() + 1
            continue
        found = [c for item in (value if isinstance(value, list) else [value])
                 if (c := _printed_call(item, declared, repaired_from)) is not None]
        if found:
            calls += found
            spans.append((start.start(), end))
            pos = end
        else:
            pos = start.start() + 1
    return calls, spans


def _printed_call(item: Any, declared: dict[str, ToolSpec], repaired_from: str) -> ToolCallRequest | None:
    """One printed ``{"name", "arguments" | "parameters"}`` object as a call, or None when it is not one."""
    if not isinstance(item, dict):
        return None
    if isinstance(item.get("function"), dict) and "name" not in item:  # {"type": "function", "function": {...}}
        item = item["function"]
    name = item.get("name")
    if not isinstance(name, str) or name not in declared:
        return None
    raw = next((item[key] for key in _ARGUMENT_KEYS if key in item), None)
    if isinstance(raw, str):
        call = parse_tool_call(None, name, raw)
        arguments, error = call.arguments, call.parse_error
    elif isinstance(raw, dict) or raw is None:
        arguments, error = dict(raw or {}), ""
    else:
        arguments, error = {}, f"arguments must be a JSON object, got {type(raw).__name__}"
    allowed = (declared[name].parameters or {}).get("properties") or {}
    arguments = {key: value for key, value in arguments.items() if key in allowed}  # the schema, nothing else
    raw_arguments = raw if error and isinstance(raw, str) else json.dumps(arguments, ensure_ascii=False)
    return ToolCallRequest(id=f"call_{uuid.uuid4().hex[:12]}", name=name, arguments=arguments,
                           raw_arguments=raw_arguments, parse_error=error, repaired_from=repaired_from)


def _without(text: str, spans: list[tuple[int, int]]) -> str:
    kept, pos = [], 0
    for start, end in spans:
        kept.append(text[pos:start])
        pos = end
    kept.append(text[pos:])
    return "".join(kept).strip()


def assistant_message(text: str, calls: Iterable[ToolCallRequest]) -> dict[str, Any]:
    """The assistant turn to append to the transcript, in the shape the API expects back."""
    calls = list(calls)
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.name, "arguments": c.raw_arguments or "{}"}}
                                 for c in calls]
    return message


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)
