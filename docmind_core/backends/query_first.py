"""Queries before ingestion on the shared encoder.

One encoder serves both: a question's embedding (one text) and ingestion's
batches (up to ``embedding.batch_size`` chunks, ~1 s each on 2 cores).  The
encoder runs one call at a time, so a question that arrives during a batch used
to wait for it, and eight questions during a large ingest waited for eight
(bench/concurrency.py measured a loaded p95 16x the idle one).

:class:`QueryFirstEmbedder` wraps the engine's embedder: a bulk call (at least
``bulk_min`` texts: ingestion, re-indexing) is encoded in slices of
``slice_size`` texts, and before each slice it waits while any smaller call (a
question, a rerank) is in progress.  A question then waits for one slice at
most.  The wait is bounded (``max_yield_s`` per slice) so a flood of questions
slows ingestion down but cannot stop it.  Slices of 16 cost the encoder about
what whole batches do per text (a batch of 8 would cost twice as much).
"""

from __future__ import annotations

import threading
from typing import Any, Sequence

import numpy as np


class QueryFirstEmbedder:
    """Implements ``Embedder`` over another embedder; everything else (id, dim, status ...) is the inner one's."""

    def __init__(self, inner: Any, bulk_min: int = 32, slice_size: int = 16, max_yield_s: float = 5.0):
        self.inner = inner
        self.bulk_min = bulk_min
        self.slice_size = slice_size
        self.max_yield_s = max_yield_s
        self._cond = threading.Condition()
        self._small_calls = 0  # questions and reranks in progress

    def __getattr__(self, name: str) -> Any:  # id, dim, status(), model_name ...
        return getattr(self.inner, name)

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        """Questions are small calls: they go ahead of ingestion like ``embed`` of a few texts."""
        encode = getattr(self.inner, "embed_query", None) or self.inner.embed
        return self._small(encode, list(texts))

    def _small(self, encode, texts: list[str]) -> np.ndarray:
        with self._cond:
            self._small_calls += 1
        try:
            return encode(texts)
        finally:
            with self._cond:
                self._small_calls -= 1
                self._cond.notify_all()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if len(texts) < self.bulk_min:
            return self._small(self.inner.embed, texts)
        parts = []
        for start in range(0, len(texts), self.slice_size):
            with self._cond:
                self._cond.wait_for(lambda: self._small_calls == 0, timeout=self.max_yield_s)
            parts.append(np.asarray(self.inner.embed(texts[start:start + self.slice_size])))
        return np.vstack(parts)
