"""Turning Chat Completions output into DocMind values: the understanding JSON and tool calls.

Kept apart from the client so it can be tested without a server and reused by
any code that streams tool calls (:class:`ToolCallAccumulator` joins
``delta.tool_calls`` pieces by their ``index``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from docmind_core.backends.protocols import ToolCallRequest
from docmind_core.errors import ModelOutputError
from docmind_core.models import Complexity, Intent, Scope, Specificity, Understanding

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


def assistant_message(text: str, calls: Iterable[ToolCallRequest]) -> dict[str, Any]:
    """The assistant turn to append to the transcript, in the shape the API expects back."""
    calls = list(calls)
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.name, "arguments": c.raw_arguments or "{}"}}
                                 for c in calls]
    return message


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ToolCallAccumulator:
    """Joins streamed ``delta.tool_calls`` pieces by index into whole tool calls.

    The first piece of a call carries its id and name; later pieces append to
    ``function.arguments``.  Accepts SDK objects or plain dicts.
    """

    def __init__(self) -> None:
        self._calls: dict[int, _PartialCall] = {}

    def add(self, deltas: Iterable[Any] | None) -> None:
        for delta in deltas or ():
            index = _get(delta, "index")
            index = int(index) if index is not None else len(self._calls)
            partial = self._calls.setdefault(index, _PartialCall())
            if _get(delta, "id"):
                partial.id = _get(delta, "id")
            function = _get(delta, "function")
            if function is not None:
                if _get(function, "name"):
                    partial.name += _get(function, "name") if not partial.name else ""
                if _get(function, "arguments"):
                    partial.arguments.append(_get(function, "arguments"))

    def calls(self) -> list[ToolCallRequest]:
        return [parse_tool_call(p.id, p.name, "".join(p.arguments))
                for _, p in sorted(self._calls.items())]


def accumulate_tool_call_deltas(chunks: Iterable[Any]) -> list[ToolCallRequest]:
    """Tool calls of a whole stream of chat.completion.chunk objects (or dicts)."""
    acc = ToolCallAccumulator()
    for chunk in chunks:
        for choice in _get(chunk, "choices") or ():
            delta = _get(choice, "delta")
            if delta is not None:
                acc.add(_get(delta, "tool_calls"))
    return acc.calls()


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)
