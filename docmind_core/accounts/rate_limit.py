"""A per-key sliding-window rate limiter (used for webSearch over MCP).

A sliding window over the last 60 seconds rather than a fixed minute, so a
caller cannot spend two minutes' worth of calls around a minute boundary.
The limit is read on every call, so a config change applies immediately.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Callable, Hashable


@dataclass(frozen=True)
class RateDecision:
    allowed: bool
    retry_after_s: float = 0.0  # when refused: seconds until the oldest call leaves the window


class SlidingWindowLimiter:
    """At most ``limit`` events per ``window_s`` seconds for each key; thread-safe."""

    def __init__(self, window_s: float = 60.0, clock: Callable[[], float] = time.monotonic):
        if window_s <= 0:
            raise ValueError(f"window_s must be positive, got {window_s}")
        self.window_s = window_s
        self._clock = clock
        self._events: dict[Hashable, deque[float]] = defaultdict(deque)
        self._lock = threading.Lock()

    def acquire(self, key: Hashable, limit: int) -> RateDecision:
        """Record one event for the key when it fits under the limit."""
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        now = self._clock()
        with self._lock:
            events = self._events[key]
            while events and events[0] <= now - self.window_s:
                events.popleft()
            if len(events) >= limit:
                return RateDecision(False, round(events[0] + self.window_s - now, 1))
            events.append(now)
            return RateDecision(True)
