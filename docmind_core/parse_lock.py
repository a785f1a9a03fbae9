"""One ``ast.parse`` at a time in this process.

CPython 3.11 keeps the counter that guards building ``ast`` objects in interpreter-wide state, so two threads
parsing at once can fail with "SystemError: AST constructor recursion depth mismatch" (python/cpython#106905;
seen here on 3.11.7 when the engine's opener imported chromadb beside a Streamlit script run).  Parsing happens
in places no caller controls: Streamlit parses every page script it runs, ``inspect.signature`` parses the text
signature of a builtin (attrs does this for chromadb's classes at import), numpy reads ``.npy`` headers with
``ast.literal_eval``.  All of them go through the module attribute ``ast.parse``, so one lock around it removes the
race without asking each library; a parse takes microseconds to milliseconds, so the lock costs nothing seen.
"""

from __future__ import annotations

import ast
import functools
import threading

_LOCK = threading.RLock()  # reentrant: a parse never calls parse, but a signal handler in the same thread might


def install() -> None:
    """Wrap ``ast.parse`` with the process-wide lock (idempotent)."""
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
