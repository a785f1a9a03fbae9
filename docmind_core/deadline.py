"""One run's time budget and its circuit breaker, passed explicitly to every stage.

A run has one deadline (``run.deadline_ms``).  Understanding and retrieval must
end ``run.answer_reserve_ms`` before it, so that writing the answer always has
time left; each model call's timeout and each one-shot worker's timeout is
clipped to what is left of the budget of its stage.

The breaker remembers which backends failed by timing out in this run: after
the first timeout the run stops calling that backend and finishes from what it
has (the offline engine writes the answer when the model is the one that
stalled).  It is per run, never shared: the next run tries the backend again.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from docmind_core.settings import Settings

LLM = "llm"  # breaker key of the language model; retrieval tools use their tool name (searchDocs, webSearch ...)
# Understanding may use at most this share of the time left for understanding and retrieval: a stalled model
# must leave retrieval time to find the evidence the offline engine then answers from.
UNDERSTANDING_SHARE = 0.5
_MIN_CALL_S = 0.05  # a call given less than this would only fail; callers treat it as "no time left"


@dataclass
class CircuitBreaker:
    """Backends that timed out (or were otherwise given up on) in one run, with the reason."""

    _open: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def trip(self, backend: str, reason: str) -> bool:
        """Open the breaker for ``backend``; True when this call opened it (it was closed)."""
        with self._lock:
            if backend in self._open:
                return False
            self._open[backend] = reason
            return True

    def is_open(self, backend: str) -> bool:
        with self._lock:
            return backend in self._open

    def reason(self, backend: str) -> str:
        with self._lock:
            return self._open.get(backend, "")


@dataclass
class RunGuard:
    """The deadline of one run plus its breaker.  ``clock`` is ``time.monotonic`` outside tests."""

    deadline_s: float  # absolute, on ``clock``
    retrieval_deadline_s: float  # absolute: understanding and retrieval end here (the answer keeps the rest)
    breaker: CircuitBreaker = field(default_factory=CircuitBreaker)
    clock: Callable[[], float] = time.monotonic

    @classmethod
    def start(cls, settings: Settings, clock: Callable[[], float] = time.monotonic) -> "RunGuard":
        now = clock()
        return cls(deadline_s=now + settings.run.deadline_ms / 1000,
                   retrieval_deadline_s=now + (settings.run.deadline_ms - settings.run.answer_reserve_ms) / 1000,
                   clock=clock)

    # -- time ---------------------------------------------------------------
    def remaining(self) -> float:
        """Seconds left until the run's deadline (never negative)."""
        return max(0.0, self.deadline_s - self.clock())

    def retrieval_remaining(self) -> float:
        """Seconds left for understanding and retrieval."""
        return max(0.0, self.retrieval_deadline_s - self.clock())

    def expired(self) -> bool:
        return self.remaining() < _MIN_CALL_S

    def retrieval_expired(self) -> bool:
        return self.retrieval_remaining() < _MIN_CALL_S

    def clip(self, timeout_s: float, retrieval: bool = False, share: float = 1.0) -> float:
        """``timeout_s`` cut to ``share`` of what is left (of the retrieval budget when ``retrieval``)."""
        left = self.retrieval_remaining() if retrieval else self.remaining()
        return max(0.0, min(float(timeout_s), left * share))

    # -- the breaker ----------------------------------------------------------
    def usable(self, backend: str) -> bool:
        return not self.breaker.is_open(backend)

    def trip(self, backend: str, reason: str) -> bool:
        return self.breaker.trip(backend, reason)


def elapsed_ms(since: float) -> float:
    """Milliseconds since a ``time.perf_counter()`` reading, as every stage's timings record them."""
    return round((time.perf_counter() - since) * 1000, 2)


def bind_model(llm: Any, guard: RunGuard | None) -> Any:
    """The language model as this run should call it: a model that supports deadlines (``for_run``) gets the
    run's guard; one that does not (the offline engine, test stand-ins) is local and fast, and is used as is."""
    if guard is None:
        return llm
    binder = getattr(llm, "for_run", None)
    return binder(guard) if callable(binder) else llm


def looks_like_timeout(exc: BaseException) -> bool:
    """A timeout, however the layer below phrased it (TimeoutError, SDK timeout errors, our own messages)."""
    name = type(exc).__name__.lower()
    text = str(exc).lower()
    return isinstance(exc, TimeoutError) or "timeout" in name or "timed out" in text or "(timeout)" in text
