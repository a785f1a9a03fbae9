"""A small error hierarchy.

``DocMindError`` texts are written for the user and shown as they are.
Developer mistakes (wrong arguments to the API) stay ordinary ``ValueError``/
``TypeError``.
"""

from __future__ import annotations


class DocMindError(Exception):
    """An error whose message is meant for the person using DocMind."""


class ConfigError(DocMindError):
    """A config key or value was refused."""


class BackendUnavailable(DocMindError):
    """A configured backend (model, server, key) cannot be used right now."""


class ModelCallCut(BackendUnavailable):
    """A model call the clock ended: its deadline passed while the server was still sending (or silent)."""


class IncompleteReply(BackendUnavailable):
    """A model reply that broke off before its end: a stream without a finish_reason, JSON cut mid-way."""


class IngestError(DocMindError):
    """A document could not be read or indexed; the message says why."""


class IngestCancelled(DocMindError):
    """An ingest was cancelled (an ingest job's cancel); ``outcomes`` holds what finished before it, by position."""

    def __init__(self, message: str = "ingest cancelled", outcomes: list | None = None):
        super().__init__(message)
        self.outcomes = outcomes or []


class EmbedderMismatch(DocMindError):
    """A knowledge base was indexed with another embedder than the one configured."""


class AccessDenied(DocMindError):
    """The user may not read or change this object."""


class SignInRequired(AccessDenied):
    """Sign-in is on and nobody is signed in."""


class NotFound(DocMindError):
    """A knowledge base, document, conversation or trace does not exist."""


class StageError(DocMindError):
    """A pipeline stage failed; wraps the cause with the stage's name."""

    def __init__(self, stage: str, cause: BaseException):
        super().__init__(f"{stage} failed: {cause}")
        self.stage = stage
        self.cause = cause


class ModelOutputError(DocMindError):
    """A model answered, but not in the shape asked for (invalid JSON, missing fields)."""


class EmptyReply(ModelOutputError):
    """A model finished its reply without any text."""
