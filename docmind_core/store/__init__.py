"""DocMind's SQLite stores.

Importing this package imports ``sqlite_utils`` without the pandas it would import for itself.  sqlite-utils
imports pandas at module load, when installed, only to map ``pandas.Timestamp`` to TEXT in the tables it
infers from Python values.  DocMind declares every column in its migrations and stores no pandas values, yet
that import was 0.45-0.7 s of a fresh server's first page and of every CLI start (bench/RESULTS.md, "Page
speed").  The refusal applies only to imports made while sqlite-utils' own module runs, in that thread:
another thread importing pandas at the same moment gets it, and so does any later ``import pandas``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import sys

_SQLITE_UTILS_MODULE = "sqlite_utils.db"  # the module whose top level imports pandas


class _NoPandasForSqliteUtils(importlib.abc.MetaPathFinder):
    """Refuses ``pandas`` to an import issued from sqlite-utils' module code (its ``except ImportError`` then
    leaves pandas out); every other import goes on to the next finder."""

    def find_spec(self, fullname, path, target=None):  # noqa: ANN001, ANN201 - the finder protocol
        if fullname != "pandas":
            return None
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_globals.get("__name__") == _SQLITE_UTILS_MODULE:
                raise ImportError("pandas is not imported for sqlite-utils in DocMind")
            frame = frame.f_back
        return None


def _import_sqlite_utils() -> None:
    if "sqlite_utils" in sys.modules:
        return
    finder = _NoPandasForSqliteUtils()
    sys.meta_path.insert(0, finder)
    try:
        importlib.import_module("sqlite_utils")  # here, for the rest of the package
    finally:
        sys.meta_path.remove(finder)


_import_sqlite_utils()
