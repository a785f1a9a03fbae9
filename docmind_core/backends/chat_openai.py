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

The SDK's timeout is a read timeout: it restarts on every byte, so a server that
trickles keeps a call open for as long as it likes.  Every call is therefore also
bounded by the clock (:func:`~docmind_core.deadline.call_within`,
:func:`~docmind_core.deadline.iterate_within`): past its budget the caller stops
waiting, the connection is closed and the call fails as cut.  A reply that is not
whole is a failure too: a JSON body cut mid-way, a stream that ends without a
``finish_reason`` (the connection dropped), or an answer with no text at all.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from typing import Any, Callable, Iterator, Sequence, TypeVar
from urllib.parse import urlparse

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
from docmind_core.deadline import (
    LLM,
    UNDERSTANDING_SHARE,
    DeadlineCut,
    RunGuard,
    call_within,
    iterate_within,
    looks_like_timeout,
)
from docmind_core.errors import (
    BackendUnavailable,
    EmptyReply,
    IncompleteReply,
    ModelCallCut,
    ModelOutputError,
)
from docmind_core.values import BackendStatus, ModelCall, Understanding
from docmind_core.prompts import PromptLibrary
from docmind_core.text.tokens import count_tokens

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


class _InFlight:
    """The open response of one call in progress, so the caller's thread can close it when the clock runs
    out; a response that arrives after that is closed at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._response: Any = None
        self._cut = False

    def attach(self, response: Any) -> None:
        with self._lock:
            if not self._cut:
                self._response = response
                return
        response.close()
        raise DeadlineCut("the reply arrived after the call was cut")

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            response = self._response
        if response is not None:
            response.close()


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
        def parse(response: Any) -> Understanding:
            content = response.choices[0].message.content if response.choices else None
            return parse_understanding(content or "", fallback_query=request.question)

        return self.bounded_chat("understanding", meter, request.messages, parse=parse, retrieval=True,
                                 share=UNDERSTANDING_SHARE, temperature=0.0,
                                 response_format={"type": "json_object"})

    def agent_turn(self, transcript: AgentTranscript, tools: Sequence[ToolSpec], meter: UsageMeter,
                   timeout_s: float) -> AgentTurn:
        options: dict[str, Any] = dict(temperature=0.0)
        if tools:
            options.update(tools=[t.openai_schema() for t in tools], tool_choice="auto")
        if transcript.max_tokens:
            options["max_tokens"] = min(self.max_tokens, transcript.max_tokens)
        if transcript.stop and tools:
            options["stop"] = list(transcript.stop)
        response = self.bounded_chat("agent_round", meter, transcript.messages, timeout_s=timeout_s,
                                     retrieval=True, **options)
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
        """The answer's text pieces as they stream.  Raises BackendUnavailable when the call fails: its
        ModelCallCut when the run's deadline cut it, IncompleteReply when the stream ends without a
        finish_reason (the connection dropped) or mid-chunk; EmptyReply when the model finished without text."""
        started = time.perf_counter()
        usage: Any = None
        produced: list[str] = []
        error = ""
        finish_reason: str | None = None
        where = f"{self.name} (answer)"
        attempt_s = self._budget("answer", self.timeout_s)  # the read timeout of each attempt
        # the clock's bound: what is left of the run (outside a run, only the read timeout bounds the body)
        wall_s = self._guard.remaining() if self._guard is not None else None
        inflight = _InFlight()

        def open_stream(attempt_timeout_s: float) -> Any:
            stream = self._client.chat.completions.create(
                model=self.model, messages=prompt.messages, temperature=self.temperature, stream=True,
                max_tokens=self.max_tokens, stream_options={"include_usage": True}, timeout=attempt_timeout_s)
            inflight.attach(stream)
            return stream

        try:
            def opened() -> Any:
                return self._with_retries("answer", open_stream, started, attempt_s)

            open_s = attempt_s if wall_s is None else wall_s  # outside a run: the attempts' own budget
            try:
                stream = call_within(open_s, opened, inflight.cut, where)
            except DeadlineCut as exc:
                error = self._cut_message("answer", open_s, "before the stream started")
                raise ModelCallCut(error) from exc
            left_s = None if wall_s is None else wall_s - (time.perf_counter() - started)
            try:
                for chunk in iterate_within(left_s, stream, stream.close, where, cancel):
                    if getattr(chunk, "usage", None) is not None:
                        usage = chunk.usage
                    for choice in chunk.choices or ():
                        finish_reason = choice.finish_reason or finish_reason
                        piece = choice.delta.content if choice.delta is not None else None
                        if piece:
                            produced.append(piece)
                            yield piece
            except DeadlineCut as exc:
                error = self._cut_message("answer", wall_s or attempt_s,
                                          f"while the answer was streaming ({len(''.join(produced))} characters "
                                          f"in)")
                raise ModelCallCut(error) from exc
            except (BackendUnavailable, ModelOutputError):
                raise
            except ValueError as exc:  # json.JSONDecodeError: a chunk that ends mid-JSON
                error = (f"{where}: the stream broke off inside a chunk after {len(''.join(produced))} characters "
                         f"(not complete JSON: {exc})")
                raise IncompleteReply(error) from exc
            except Exception as exc:  # a stream can break after its first token (the connection dropped ...)
                error = self._describe(exc, "answer")
                raise BackendUnavailable(error) from exc
            if cancel is not None and cancel.is_set():
                error = "cancelled"
                return
            text = "".join(produced)
            if finish_reason is None:
                error = (f"{where}: the stream ended without a finish_reason after {len(text)} characters "
                         f"(the connection was cut; the answer is incomplete)")
                raise IncompleteReply(error)
            if not text.strip():
                error = f"{where}: the model finished (finish_reason={finish_reason}) without any answer text"
                raise EmptyReply(error)
        except BackendUnavailable as exc:
            error = error or str(exc)
            raise
        finally:
            prompt_tokens = usage.prompt_tokens if usage is not None else \
                sum(count_tokens(str(m.get("content") or "")) for m in prompt.messages)  # estimate
            completion_tokens = usage.completion_tokens if usage is not None else count_tokens("".join(produced))
            meter.record(ModelCall(purpose="answer", model=self.model, prompt_tokens=prompt_tokens,
                                   completion_tokens=completion_tokens,
                                   latency_ms=round((time.perf_counter() - started) * 1000, 1),
                                   ok=not error or error == "cancelled", error=error))

    def complete(self, messages: list[dict[str, Any]], meter: UsageMeter, *, purpose: str, timeout_s: float,
                 max_tokens: int, top_logprobs: int = 0, json_object: bool = True) -> Completion:
        """A short scored reply (``protocols.CompletingModel``) through :meth:`bounded_chat`.  The caller bounds
        it by ``timeout_s``, taken from its run's deadline; the call is made without the run's guard, so a slow
        judge never opens the breaker and the run still writes its answer with the model.  A server that
        refuses ``logprobs`` (HTTP 400) is asked again without, and not asked for them again."""
        options: dict[str, Any] = dict(temperature=0.0, max_tokens=max_tokens)
        if json_object:
            options["response_format"] = {"type": "json_object"}
        asks_logprobs = top_logprobs > 0 and not self._refuses_logprobs
        if asks_logprobs:
            options.update(logprobs=True, top_logprobs=int(top_logprobs))
        unbound = copy.copy(self)
        unbound._guard = None
        try:
            response = unbound.bounded_chat(purpose, meter, messages, timeout_s=timeout_s, **options)
        except BackendUnavailable as exc:
            refused = isinstance(exc.__cause__, openai.BadRequestError) and "logprob" in str(exc).lower()
            if not (asks_logprobs and refused):
                raise
            self._refuses_logprobs = True
            options.pop("logprobs", None)
            options.pop("top_logprobs", None)
            response = unbound.bounded_chat(purpose, meter, messages, timeout_s=timeout_s, **options)
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

    def bounded_chat(self, purpose: str, meter: UsageMeter, messages: list[dict[str, Any]], *,
                     parse: Callable[[Any], T] | None = None, timeout_s: float | None = None,
                     retrieval: bool = False, share: float = 1.0, **options: Any) -> Any:
        """One non-streamed chat call, bounded by the clock: every purpose (understanding, agent rounds, the
        judge) goes through here.

        The call gets ``timeout_s`` (default ``llm.timeout_s``) clipped to what is left of the run (of its
        retrieval budget when ``retrieval``, times ``share``); it is retried only on transient errors, and
        past its time the caller stops waiting and the connection is closed, however the server trickles.
        Returns ``parse(completion)`` (the completion itself without ``parse``) and records the call in
        ``meter`` once, failed or not.  Raises BackendUnavailable (not called, failed, timed out; its
        ModelCallCut when cut, IncompleteReply for a body cut mid-JSON) or what ``parse`` raises
        (ModelOutputError).  ``options`` go to the SDK's ``chat.completions.create`` (temperature,
        response_format, tools, max_tokens ...)."""
        budget = self._budget(purpose, self.timeout_s if timeout_s is None else timeout_s, retrieval=retrieval,
                              share=share)
        started = time.perf_counter()
        options.setdefault("max_tokens", self.max_tokens)
        inflight = _InFlight()

        def create(attempt_s: float) -> Any:
            try:
                return self._create_whole(messages, attempt_s, options, inflight, purpose)
            except openai.BadRequestError as exc:
                # some compatible servers reject JSON mode or stop sequences; the prompt asks for JSON anyway,
                # and a printed call is still read without a stop
                optional = [key for key in ("response_format", "stop") if key in options and key in str(exc)]
                if optional:
                    for key in optional:
                        options.pop(key)
                    return self._create_whole(messages, attempt_s, options, inflight, purpose)
                raise

        def call() -> Any:
            response = self._with_retries(purpose, create, started, budget)
            return response, (parse(response) if parse is not None else response)

        response: Any = None
        try:
            response, result = call_within(budget, call, inflight.cut, f"{self.name} ({purpose})")
        except DeadlineCut as exc:
            message = self._cut_message(purpose, budget, "while the reply was still arriving")
            self._record_failure(meter, purpose, started, message)
            raise ModelCallCut(message) from exc
        except Exception as exc:  # BackendUnavailable, or what parse raised (ModelOutputError ...)
            self._record_failure(meter, purpose, started, str(exc))
            raise
        usage = getattr(response, "usage", None)
        meter.record(ModelCall(purpose=purpose, model=self.model,
                               prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                               completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
                               latency_ms=round((time.perf_counter() - started) * 1000, 1)))
        return result

    def _create_whole(self, messages: list[dict[str, Any]], attempt_s: float, options: dict[str, Any],
                      inflight: _InFlight, purpose: str) -> Any:
        """One attempt of a non-streamed call; the response is open to ``inflight`` while its body is read."""
        with self._client.chat.completions.with_streaming_response.create(
                model=self.model, messages=messages, timeout=attempt_s, **options) as raw:
            inflight.attach(raw.http_response)
            try:
                return raw.parse()
            except openai.OpenAIError:
                raise
            except ValueError as exc:  # json.JSONDecodeError: the body ended mid-JSON
                raise IncompleteReply(f"{self.name} ({purpose}): the reply is not complete JSON, it ends after "
                                       f"{len(raw.http_response.content)} bytes ({exc})") from None
            except Exception as exc:  # the body broke off: the transport's own error, as the SDK names it
                request = raw.http_response.request
                if looks_like_timeout(exc):
                    raise openai.APITimeoutError(request=request) from exc
                raise openai.APIConnectionError(message=f"the reply broke off: {exc}", request=request) from exc

    def _record_failure(self, meter: UsageMeter, purpose: str, started: float, message: str) -> None:
        meter.record(ModelCall(purpose=purpose, model=self.model, ok=False, error=message,
                               latency_ms=round((time.perf_counter() - started) * 1000, 1)))

    def _cut_message(self, purpose: str, budget_s: float, when: str) -> str:
        """What a cut call says, and the breaker remembers: the model is not called again in this run."""
        limit = "the run deadline (run.deadline_ms)" if self._guard is not None else "llm.timeout_s"
        message = f"{self.name} ({purpose}): cut after {budget_s:.1f}s by {limit} {when}"
        if self._guard is not None:
            self._guard.trip(LLM, f"a call was cut earlier in this run ({message})")
        return message

    def _with_retries(self, purpose: str, fn: Callable[[float], T], started: float, budget_s: float) -> T:
        """``fn(attempt_timeout_s)`` until it succeeds; no attempt starts with less than 0.1 s of ``budget_s``
        left (the clock, not this loop, ends an attempt in progress: see :meth:`bounded_chat`).

        Only transient errors are retried, and only while the budget has room.  A timeout is not retried: a
        server that did not answer in time will not answer faster the second time; inside a run it also
        opens the breaker, so the run stops calling the model.  Failures are raised as BackendUnavailable."""
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
