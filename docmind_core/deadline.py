"""One run's time budget and its circuit breaker, passed explicitly to every stage.

A run has one deadline (``run.deadline_ms``).  Understanding and retrieval must
end ``run.answer_reserve_ms`` before it, so that writing the answer always has
time left; each model call's timeout and each one-shot worker's timeout is
clipped to what is left of the budget of its stage.

The breaker remembers which backends failed by timing out in this run: after
the first timeout the run stops calling that backend and finishes from what it
has (the offline engine writes the answer when the model is the one that
stalled).  It is per run, never shared: the next run tries the backend again.

Read timeouts cannot keep a deadline: they restart on every byte, so a server
that trickles one byte a second holds a call open for ever.  :func:`call_within`
and :func:`iterate_within` bound a call by the clock instead: the call runs in a
worker thread, the caller waits at most its budget, and past it the call's
connection is closed and the caller gets :class:`DeadlineCut`.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, TypeVar

from docmind_core.errors import DeadlineCut, ModelCallCut
from docmind_core.settings import Settings

LLM = "llm"  # breaker key of the language model; retrieval tools use their tool name (searchDocs, webSearch ...)
# Understanding may use at most this share of the time left for understanding and retrieval: a stalled model
# must leave retrieval time to find the evidence the offline engine then answers from.
UNDERSTANDING_SHARE = 0.5
_MIN_CALL_S = 0.05  # a call given less than this would only fail; callers treat it as "no time left"
_CANCEL_POLL_S = 0.1  # how often a bounded stream's reader looks at its cancel flag while no item arrives
T = TypeVar("T")


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
    """A timeout, however the layer below phrased it (TimeoutError, SDK timeout errors, our own messages);
    a call the clock cut (ModelCallCut) is one too."""
    name = type(exc).__name__.lower()
    text = str(exc).lower()
    return isinstance(exc, (TimeoutError, ModelCallCut)) or "timeout" in name or "timed out" in text \
        or "(timeout)" in text


def _cut_quietly(cut: Callable[[], None] | None) -> None:
    if cut is None:
        return
    try:
        cut()
    except Exception:  # closing a half-read connection may itself fail; the caller has already moved on
        pass


def call_within(seconds: float, fn: Callable[[], T], cut: Callable[[], None] | None = None,
                what: str = "the call") -> T:
    """``fn()``, but the caller waits at most ``seconds`` by the clock.

    ``fn`` runs in a daemon worker thread.  When it returns or raises in time, so does this.  Otherwise
    ``cut()`` is called (it closes the call's connection, so the worker ends at the server's next byte)
    and :class:`DeadlineCut` is raised; whatever the worker does afterwards is dropped."""
    done = threading.Event()
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # handed to the caller, who re-raises it
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=work, name="bounded-call", daemon=True).start()
    if not done.wait(max(0.0, seconds)):
        _cut_quietly(cut)
        raise DeadlineCut(f"{what} was cut after {seconds:.1f}s (the time it was given ran out while it was "
                          f"still in progress)")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def iterate_within(seconds: float | None, items: Iterable[T], cut: Callable[[], None] | None = None,
                   what: str = "the stream", cancel: threading.Event | None = None) -> Iterator[T]:
    """The items of ``items``, read in a worker thread, for at most ``seconds`` by the clock (``None``: no
    bound of its own, the stream's read timeout ends it).

    Past the time :class:`DeadlineCut` is raised (after ``cut()`` closes the stream); an error of the
    stream is raised in the reader; a set ``cancel`` ends the iteration quietly (the stream is cut too)."""
    end = None if seconds is None else time.monotonic() + max(0.0, seconds)
    handoff: queue.Queue[tuple[str, Any]] = queue.Queue()
    stop = threading.Event()  # set by the reader when it leaves: the worker stops handing items over

    def work() -> None:
        try:
            for item in items:
                if stop.is_set():
                    return
                handoff.put(("item", item))
            handoff.put(("end", None))
        except BaseException as exc:
            handoff.put(("error", exc))

    threading.Thread(target=work, name="bounded-stream", daemon=True).start()
    finished = False
    try:
        while True:
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                raise DeadlineCut(f"{what} was cut after {seconds:.1f}s (the time it was given ran out while it "
                                  f"was still streaming)")
            if cancel is not None and cancel.is_set():
                return
            wait = left if cancel is None else _CANCEL_POLL_S if left is None else min(left, _CANCEL_POLL_S)
            try:
                kind, value = handoff.get(timeout=wait)
            except queue.Empty:
                continue
            if kind == "end":
                finished = True
                return
            if kind == "error":
                finished = True
                raise value
            yield value
    finally:
        stop.set()
        if not finished:
            _cut_quietly(cut)
