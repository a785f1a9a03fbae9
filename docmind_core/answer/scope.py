"""Scope check: does this message ask the knowledge bases at all?

Two steps.  The text rules (:func:`docmind_core.text.query_signals.fast_scope`) decide with zero model calls
when the whole message is unmistakable (a greeting, "remember that ...").  Otherwise the understanding
call's scope decides, but a non-knowledge scope is trusted only at ``rag.scope_min_confidence`` or above:
sending a real question down a path that never retrieves costs more than retrieving once too often.
"""

from __future__ import annotations

from docmind_core.values import Scope, Understanding
from docmind_core.settings import Settings


def trusted_scope(understanding: Understanding, settings: Settings) -> tuple[Scope, str]:
    """The scope the run follows, and why it differs from the model's when it does."""
    if (understanding.scope == Scope.KNOWLEDGE_QUERY
            or understanding.scope_confidence >= settings.rag.scope_min_confidence):
        return understanding.scope, ""
    return Scope.KNOWLEDGE_QUERY, (f"model said {understanding.scope.value} with low confidence; "
                                   f"treated as a knowledge query")
