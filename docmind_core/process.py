"""What the process needs before any engine opens, done once by each entry point.

``prepare_process()`` is called by every entry point and nowhere else: ``app.py`` (the Streamlit app), the
``docmind`` command's ``main`` (``cli.py``) and the MCP server's ``serve`` (``mcp_server.py``); the test suite's
``conftest.py`` calls it once for the engines tests build directly.  An engine changes nothing process-wide.

It does two things, each for the whole process:

* The model hubs are offline: ``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1`` unless the environment sets
  them already.  huggingface_hub reads them once, at its import, so they must be set before any backend loads
  a sentence-transformers model; an uncached hub name would otherwise retry for about 70 s.  A process started
  with ``HF_HUB_OFFLINE=0`` may download (with ``embedding.allow_hub_download=true``).
* One ``ast.parse`` at a time, on the Python versions that need it (see ``install_parse_lock``).
"""

from __future__ import annotations

import ast
import functools
import os
import sys
import threading

# python/cpython#106905: CPython 3.11 and 3.12 keep the recursion counter that guards building ``ast`` objects
# in interpreter-wide state, so two threads building them at once (the GIL can be released mid-build) can fail
# with "SystemError: AST constructor recursion depth mismatch".  Seen here on 3.11.7, when the engine's opener
# imported chromadb beside a Streamlit script run.  The fix (python/cpython#113035: one counter per call) was
# backported to 3.11 and 3.12 and first released in 3.11.8 and 3.12.2; 3.13.0 has it.  [first, fixed) ranges:
PARSE_RACE_VERSIONS = (((3, 11, 0), (3, 11, 8)), ((3, 12, 0), (3, 12, 2)))

_LOCK = threading.RLock()  # reentrant: a parse never calls parse, but a signal handler in the same thread might


def prepare_process() -> None:
    """The process-wide set-up every entry point makes before it opens an engine (idempotent: app.py calls
    it at every script run, a CLI invocation that serves MCP reaches it twice)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    if parse_race_affects():
        install_parse_lock()


def parse_race_affects(version: tuple[int, ...] | None = None) -> bool:
    """True for the CPython versions with python/cpython#106905 (``version``: default, this interpreter's)."""
    v = tuple(version if version is not None else sys.version_info[:3])[:3]
    return any(first <= v < fixed for first, fixed in PARSE_RACE_VERSIONS)


def install_parse_lock() -> None:
    """Wrap ``ast.parse`` with one process-wide lock (idempotent).

    Parsing happens in places no caller controls: Streamlit parses every page script it runs,
    ``inspect.signature`` parses the text signature of a builtin (attrs does this for chromadb's classes at
    import), numpy reads ``.npy`` headers with ``ast.literal_eval``.  All of them go through the module attribute
    ``ast.parse``, so one lock around it removes the race without asking each library; a parse takes
    microseconds to milliseconds, so the lock costs nothing seen.

    Remove this function, ``PARSE_RACE_VERSIONS`` and the call in ``prepare_process`` once pyproject's
    ``requires-python`` excludes 3.11.0-3.11.7 and 3.12.0-3.12.1 (``>=3.11.8,!=3.12.0,!=3.12.1``, or ``>=3.13``).
    """
    with _LOCK:
        if getattr(ast.parse, "docmind_parse_lock", False):
            return
        unlocked = ast.parse

        @functools.wraps(unlocked)
        def parse(*args, **kwargs):
            with _LOCK:
                return unlocked(*args, **kwargs)

        parse.docmind_parse_lock = True  # type: ignore[attr-defined]
        ast.parse = parse  # ast.literal_eval looks the name up in this same module, so it is covered too
