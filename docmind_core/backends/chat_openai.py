"""The language model behind any OpenAI-compatible Chat Completions endpoint.

Works with OpenAI, DashScope (its compatible-mode URL), Ollama, vLLM and
anything else that speaks ``/v1/chat/completions``: only ``base_url``, the key
and the model name differ.  Every call has a timeout; only transient failures
(429, 408/409, 5xx, connection errors, timeouts) are retried, with a short
exponential back-off, and a streamed answer is retried only before its first
token.  Each logical call is recorded in the run's :class:`UsageMeter` with
its purpose, token usage and latency, failed or not.

Inside a run the model is used through :meth:`OpenAIChatModel.for_run`, which
binds the run's :class:`~docmind_core.deadline.RunGuard`: every attempt's
timeout is clipped to what is left of the run (understanding and agent rounds
to the retrieval budget, the answer to the whole deadline), a timed-out call is
never retried and opens the run's breaker for the model, and once it is open
the model is not called again in that run.  Every call carries ``max_tokens``.
"""

from __future__ import annotations

import copy
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
    Completion,
    TokenAlternatives,
    ToolSpec,
    UnderstandingRequest,
    UsageMeter,
)
from docmind_core.deadline import LLM, UNDERSTANDING_SHARE, RunGuard
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
                 retry_backoff_s: float = 0.25, max_tokens: int = 1024):
        if not model or not model.strip():
            raise BackendUnavailable("llm.model is empty: set a model name (docmind config set llm.model NAME)")
        self.base_url = (base_url or "").strip()
        self.model = model
        self.timeout_s = float(timeout_s)
        self.max_retries = max(0, int(max_retries))
        self.temperature = float(temperature)
        self.prompts = prompts
        self.retry_backoff_s = retry_backoff_s
        self.max_tokens = int(max_tokens)
        self._guard: RunGuard | None = None  # set on the per-run copy made by for_run()
        self._refuses_logprobs = False  # the server answered "logprobs" with HTTP 400 once: not asked again
        self.host = urlparse(self.base_url).netloc or "api.openai.com"
        self.name = f"openai:{model}@{self.host}"
        # Retries are ours (so only transient errors retry and each call is recorded once).
        self._client = openai.OpenAI(base_url=self.base_url or None, api_key=api_key or "not-needed",
                                     timeout=self.timeout_s, max_retries=0)

    def for_run(self, guard: RunGuard) -> "OpenAIChatModel":
        """This model as one run calls it: same client, timeouts clipped to the run, the run's breaker."""
        bound = copy.copy(self)
        bound._guard = guard
        return bound

    # -- the protocol ---------------------------------------------------------
    def understand(self, request: UnderstandingRequest, meter: UsageMeter) -> Understanding:
        kwargs: dict[str, Any] = dict(messages=request.messages, temperature=0.0,
                                      response_format={"type": "json_object"},
                                      timeout=self._budget("understanding", self.timeout_s, retrieval=True,
                                                           share=UNDERSTANDING_SHARE))
        response = self._complete("understanding", meter, kwargs)
        content = response.choices[0].message.content if response.choices else None
        return parse_understanding(content or "", fallback_query=request.question)

    def agent_turn(self, transcript: AgentTranscript, tools: Sequence[ToolSpec], meter: UsageMeter,
                   timeout_s: float) -> AgentTurn:
        kwargs: dict[str, Any] = dict(messages=transcript.messages, temperature=0.0,
                                      timeout=self._budget("agent_round", timeout_s, retrieval=True))
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
        budget = self._budget("answer", self.timeout_s)
        stream = self._with_retries("answer", lambda attempt_s: self._client.chat.completions.create(
            model=self.model, messages=prompt.messages, temperature=self.temperature, stream=True,
            max_tokens=self.max_tokens, stream_options={"include_usage": True}, timeout=attempt_s),
            meter, started, budget)
        try:
            for chunk in stream:
                if cancel is not None and cancel.is_set():
                    error = "cancelled"
                    break
                if self._guard is not None and self._guard.expired():  # a trickling stream ends at the deadline
                    error = f"{self.name} (answer): the run deadline passed while the answer was streaming"
                    self._guard.trip(LLM, error)
                    raise BackendUnavailable(error)
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

    def complete(self, messages: list[dict[str, Any]], meter: UsageMeter, *, purpose: str, timeout_s: float,
                 max_tokens: int, top_logprobs: int = 0, json_object: bool = True) -> Completion:
        """A short scored reply (``protocols.CompletingModel``).  The caller bounds it by ``timeout_s``, taken from
        its run's deadline; it is not clipped by a bound guard and never opens the breaker, so a slow judge does
        not keep the run from writing its answer.  A server that refuses ``logprobs`` is asked again without."""
        kwargs: dict[str, Any] = dict(messages=messages, temperature=0.0, max_tokens=max_tokens,
                                      timeout=max(0.05, float(timeout_s)))
        if json_object:
            kwargs["response_format"] = {"type": "json_object"}
        asks_logprobs = top_logprobs > 0 and not self._refuses_logprobs
        if asks_logprobs:
            kwargs.update(logprobs=True, top_logprobs=int(top_logprobs))
        unbound = copy.copy(self)
        unbound._guard = None
        try:
            response = unbound._complete(purpose, meter, dict(kwargs))
        except BackendUnavailable as exc:
            refused = isinstance(exc.__cause__, openai.BadRequestError) and "logprob" in str(exc).lower()
            if not (asks_logprobs and refused):
                raise
            self._refuses_logprobs = True
            kwargs.pop("logprobs", None)
            kwargs.pop("top_logprobs", None)
            response = unbound._complete(purpose, meter, dict(kwargs))
        choice = response.choices[0] if response.choices else None
        if choice is None:
            raise ModelOutputError(f"{self.name} ({purpose}): the reply has no choices")
        tokens = getattr(getattr(choice, "logprobs", None), "content", None)
        logprobs = None if not tokens else tuple(
            TokenAlternatives(t.token, float(t.logprob),
                              tuple((a.token, float(a.logprob)) for a in (t.top_logprobs or ())))
            for t in tokens)
        return Completion(text=choice.message.content or "", logprobs=logprobs)

    def status(self) -> BackendStatus:
        return BackendStatus(role="llm", name=self.name, live=True,
                             detail=f"{self.base_url or 'default OpenAI endpoint'}; timeout {self.timeout_s:g}s, "
                                    f"{self.max_retries} retries on transient errors, max_tokens {self.max_tokens}")

    # -- plumbing ---------------------------------------------------------------
    def _budget(self, purpose: str, timeout_s: float, retrieval: bool = False, share: float = 1.0) -> float:
        """Seconds this call may take: ``timeout_s`` clipped to the run.  Raises BackendUnavailable, without
        calling, when the run's breaker is open for the model or the run has no time left for this stage."""
        guard = self._guard
        if guard is None:
            return float(timeout_s)
        if not guard.usable(LLM):
            raise BackendUnavailable(f"{self.name} ({purpose}): not called, {guard.breaker.reason(LLM)}")
        budget = guard.clip(timeout_s, retrieval=retrieval, share=share)
        if budget < 0.1:
            stage = "understanding and retrieval" if retrieval else "the run"
            raise BackendUnavailable(f"{self.name} ({purpose}): not called, no time left for {stage} "
                                     f"(run.deadline_ms)")
        return budget

    def _complete(self, purpose: str, meter: UsageMeter, kwargs: dict[str, Any]) -> Any:
        """One non-streamed call with retries, recorded in the meter."""
        started = time.perf_counter()
        budget = float(kwargs.pop("timeout", None) or self.timeout_s)
        kwargs.setdefault("max_tokens", self.max_tokens)

        def create(attempt_s: float) -> Any:
            try:
                return self._client.chat.completions.create(model=self.model, timeout=attempt_s, **kwargs)
            except openai.BadRequestError as exc:
                if "response_format" in kwargs and "response_format" in str(exc):
                    # some compatible servers reject JSON mode; the prompt asks for JSON anyway
                    kwargs.pop("response_format")
                    return self._client.chat.completions.create(model=self.model, timeout=attempt_s, **kwargs)
                raise

        response = self._with_retries(purpose, create, meter, started, budget)
        usage = getattr(response, "usage", None)
        meter.record(ModelCall(purpose=purpose, model=self.model,
                               prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                               completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
                               latency_ms=round((time.perf_counter() - started) * 1000, 1)))
        return response

    def _with_retries(self, purpose: str, fn: Callable[[float], T], meter: UsageMeter, started: float,
                      budget_s: float) -> T:
        """``fn(attempt_timeout_s)`` until it succeeds; every attempt ends within ``budget_s`` of ``started``.

        Only transient errors are retried, and only while the budget has room.  A timeout is not retried: a
        server that did not answer in time will not answer faster the second time; inside a run it also
        opens the breaker, so the run stops calling the model."""
        attempt = 0
        end = started + budget_s
        while True:
            try:
                return fn(max(0.05, end - time.perf_counter()))
            except openai.OpenAIError as exc:
                timed_out = isinstance(exc, openai.APITimeoutError)
                wait = min(2.0, self.retry_backoff_s * (2 ** attempt))
                room = end - time.perf_counter() - wait
                if is_transient(exc) and not timed_out and attempt < self.max_retries and room >= 0.1:
                    log.info("%s: %s failed transiently (%s); retry %d in %.2fs",
                             self.name, purpose, type(exc).__name__, attempt + 1, wait)
                    attempt += 1
                    time.sleep(wait)
                    continue
                message = self._describe(exc, purpose, budget_s)
                if attempt:
                    message += f" (after {attempt + 1} attempts)"
                if timed_out and self._guard is not None:
                    self._guard.trip(LLM, f"it timed out earlier in this run ({message})")
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
