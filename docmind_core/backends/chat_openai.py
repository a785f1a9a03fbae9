"""The language model behind any OpenAI-compatible Chat Completions endpoint.

Works with OpenAI, DashScope (its compatible-mode URL), Ollama, vLLM and
anything else that speaks ``/v1/chat/completions``: only ``base_url``, the key
and the model name differ.  Every call has a timeout; only transient failures
(429, 408/409, 5xx, connection errors, timeouts) are retried, with a short
exponential back-off, and a streamed answer is retried only before its first
token.  Each logical call is recorded in the run's :class:`UsageMeter` with
its purpose, token usage and latency, failed or not.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Iterator, Sequence, TypeVar
from urllib.parse import urlparse

import httpx
import openai

from docmind_core.backends.openai_parsing import (
    assistant_message,
    calls_from_content,
    parse_tool_call,
    parse_understanding,
)
from docmind_core.backends.protocols import (
    AgentTranscript,
    AgentTurn,
    AnswerPrompt,
    ToolSpec,
    UnderstandingRequest,
    UsageMeter,
)
from docmind_core.errors import BackendUnavailable, ModelOutputError
from docmind_core.models import BackendStatus, ModelCall, Understanding
from docmind_core.prompts import PromptLibrary
from docmind_core.text import count_tokens

log = logging.getLogger(__name__)
T = TypeVar("T")

TRANSIENT_STATUS = frozenset({408, 409, 429})


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: rate limits, server errors, lost connections and timeouts."""
    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in TRANSIENT_STATUS or exc.status_code >= 500
    return False


class OpenAIChatModel:
    """Implements ``protocols.LanguageModel`` over the ``openai`` SDK."""

    def __init__(self, base_url: str | None, api_key: str | None, model: str, timeout_s: float = 30.0,
                 max_retries: int = 2, temperature: float = 0.1, prompts: PromptLibrary | None = None,
                 retry_backoff_s: float = 0.25):
        if not model:
            raise ValueError("model must be a model name")
        self.base_url = (base_url or "").strip()
        self.model = model
        self.timeout_s = float(timeout_s)
        self.max_retries = max(0, int(max_retries))
        self.temperature = float(temperature)
        self.prompts = prompts
        self.retry_backoff_s = retry_backoff_s
        self.host = urlparse(self.base_url).netloc or "api.openai.com"
        self.name = f"openai:{model}@{self.host}"
        # Retries are ours (so only transient errors retry and each call is recorded once).
        self._client = openai.OpenAI(base_url=self.base_url or None, api_key=api_key or "not-needed",
                                     timeout=self.timeout_s, max_retries=0)

    # -- the protocol ---------------------------------------------------------
    def understand(self, request: UnderstandingRequest, meter: UsageMeter) -> Understanding:
        kwargs: dict[str, Any] = dict(messages=request.messages, temperature=0.0,
                                      response_format={"type": "json_object"})
        response = self._complete("understanding", meter, kwargs)
        content = response.choices[0].message.content if response.choices else None
        return parse_understanding(content or "", fallback_query=request.question)

    def agent_turn(self, transcript: AgentTranscript, tools: Sequence[ToolSpec], meter: UsageMeter,
                   timeout_s: float) -> AgentTurn:
        kwargs: dict[str, Any] = dict(messages=transcript.messages, temperature=0.0, timeout=timeout_s)
        if tools:
            kwargs.update(tools=[t.openai_schema() for t in tools], tool_choice="auto")
        response = self._complete("agent_round", meter, kwargs)
        if not response.choices:
            raise ModelOutputError(f"{self.name} returned no choices for the agent turn")
        message = response.choices[0].message
        calls = [parse_tool_call(tc.id, tc.function.name, tc.function.arguments)
                 for tc in (message.tool_calls or []) if getattr(tc, "function", None) is not None]
        text = message.content or ""
        if not calls and tools:  # small local models often print the call as text instead
            calls, text = calls_from_content(text, tools)
        return AgentTurn(tool_calls=calls, text=text, assistant_message=assistant_message(text, calls))

    def stream_answer(self, prompt: AnswerPrompt, meter: UsageMeter,
                      cancel: threading.Event | None = None) -> Iterator[str]:
        started = time.perf_counter()
        usage: Any = None
        produced: list[str] = []
        error = ""
        stream = self._with_retries("answer", lambda: self._client.chat.completions.create(
            model=self.model, messages=prompt.messages, temperature=self.temperature, stream=True,
            stream_options={"include_usage": True}), meter, started)
        try:
            for chunk in stream:
                if cancel is not None and cancel.is_set():
                    error = "cancelled"
                    break
                if getattr(chunk, "usage", None) is not None:
                    usage = chunk.usage
                for choice in chunk.choices or ():
                    piece = choice.delta.content if choice.delta is not None else None
                    if piece:
                        produced.append(piece)
                        yield piece
        except (openai.OpenAIError, httpx.HTTPError) as exc:  # a stream can break after its first token
            error = self._describe(exc, "answer")
            raise BackendUnavailable(error) from exc
        finally:
            stream.close()
            prompt_tokens = usage.prompt_tokens if usage is not None else \
                sum(count_tokens(str(m.get("content") or "")) for m in prompt.messages)  # estimate
            completion_tokens = usage.completion_tokens if usage is not None else count_tokens("".join(produced))
            meter.record(ModelCall(purpose="answer", model=self.model, prompt_tokens=prompt_tokens,
                                   completion_tokens=completion_tokens,
                                   latency_ms=round((time.perf_counter() - started) * 1000, 1),
                                   ok=not error or error == "cancelled", error=error))

    def status(self) -> BackendStatus:
        return BackendStatus(role="llm", name=self.name, live=True,
                             detail=f"{self.base_url or 'default OpenAI endpoint'}; timeout {self.timeout_s:g}s, "
                                    f"{self.max_retries} retries on transient errors")

    # -- plumbing ---------------------------------------------------------------
    def _complete(self, purpose: str, meter: UsageMeter, kwargs: dict[str, Any]) -> Any:
        """One non-streamed call with retries, recorded in the meter."""
        started = time.perf_counter()

        def create() -> Any:
            try:
                return self._client.chat.completions.create(model=self.model, **kwargs)
            except openai.BadRequestError as exc:
                if "response_format" in kwargs and "response_format" in str(exc):
                    # some compatible servers reject JSON mode; the prompt asks for JSON anyway
                    kwargs.pop("response_format")
                    return self._client.chat.completions.create(model=self.model, **kwargs)
                raise

        response = self._with_retries(purpose, create, meter, started, kwargs.get("timeout"))
        usage = getattr(response, "usage", None)
        meter.record(ModelCall(purpose=purpose, model=self.model,
                               prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                               completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
                               latency_ms=round((time.perf_counter() - started) * 1000, 1)))
        return response

    def _with_retries(self, purpose: str, fn: Callable[[], T], meter: UsageMeter, started: float,
                      timeout_s: float | None = None) -> T:
        attempt = 0
        while True:
            try:
                return fn()
            except openai.OpenAIError as exc:
                if is_transient(exc) and attempt < self.max_retries:
                    wait = min(2.0, self.retry_backoff_s * (2 ** attempt))
                    log.info("%s: %s failed transiently (%s); retry %d in %.2fs",
                             self.name, purpose, type(exc).__name__, attempt + 1, wait)
                    attempt += 1
                    time.sleep(wait)
                    continue
                message = self._describe(exc, purpose, timeout_s)
                if attempt:
                    message += f" (after {attempt + 1} attempts)"
                meter.record(ModelCall(purpose=purpose, model=self.model, ok=False, error=message,
                                       latency_ms=round((time.perf_counter() - started) * 1000, 1)))
                raise BackendUnavailable(message) from exc

    def _describe(self, exc: BaseException, purpose: str, timeout_s: float | None = None) -> str:
        where = f"{self.name} ({purpose})"
        if isinstance(exc, openai.APITimeoutError):
            return f"{where}: no reply within {timeout_s or self.timeout_s:g}s (timeout)"
        if isinstance(exc, openai.APIConnectionError):
            return f"{where}: cannot reach {self.base_url or 'the OpenAI API'} ({exc})"
        if isinstance(exc, openai.AuthenticationError):
            return f"{where}: the endpoint refused the API key (HTTP 401); check OPENAI_API_KEY or llm settings"
        if isinstance(exc, openai.NotFoundError):
            return f"{where}: HTTP 404, check llm.model ({self.model!r}) and the base URL"
        if isinstance(exc, openai.APIStatusError):
            body = exc.body if isinstance(exc.body, dict) else {}
            detail = body.get("message") or (body.get("error") or {}).get("message") if body else None
            return f"{where}: HTTP {exc.status_code}: {detail or exc.message}"
        return f"{where}: {exc}"
