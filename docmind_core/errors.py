"""DocMind's errors: one base, two branches.

``DocMindError`` texts are written for the person using DocMind and shown as they are.  Every error DocMind
raises on purpose is one of two kinds, and an entry point (CLI, pages, MCP) may tell them apart:

* :class:`CallerError` -- the request cannot be served as asked, and the caller can change that: bad or
  oversized input, a refused value, an object that does not exist, access denied.  Asking again unchanged
  gives the same answer.
* :class:`RuntimeFailure` -- a well-formed request failed while it ran: a backend is down or answered in a
  shape we cannot use, a call timed out, a stage or a tool broke.  The caller cannot fix the request; the
  same request may succeed later.

::

    DocMindError
    ├── CallerError
    │   ├── ConfigError ─ ConfigConflict      a config key or value refused; a form's write refused
    │   ├── InputTooLarge                     over a limits.* cap
    │   ├── InvalidId                         an id from outside that no record can have
    │   ├── EmptyInput                        a question or query with nothing but spaces
    │   ├── PageImagesUnavailable             page images asked for without the pages extra
    │   ├── AccessDenied ─ SignInRequired     may not read or change it; nobody signed in
    │   ├── NotFound                          no such knowledge base, document, run ...
    │   ├── IngestError                       a document that cannot be read or indexed
    │   ├── IngestCancelled                   the caller cancelled the ingest
    │   ├── EmbedderMismatch                  a knowledge base built by another encoder: reindex it
    │   ├── DocumentBusy                      the document is being written by another process
    │   ├── UserError                         an account change refused
    │   ├── DatasetError                      a dataset file or folder that cannot be read
    │   ├── ExperimentError                   an experiment that cannot be created or run as asked
    │   └── TraceFormatError                  a file to import that is not a trace export
    └── RuntimeFailure
        ├── BackendUnavailable                a backend that cannot be used right now
        │   ├── ModelCallCut                  a model call its deadline ended
        │   └── IncompleteReply               a model reply that broke off
        ├── ModelOutputError ─ EmptyReply     a model reply not in the shape asked for; no text at all
        ├── DeadlineCut                       any call the clock ended (also a TimeoutError)
        ├── StageError                        a pipeline stage failed (wraps the cause)
        └── ToolExecutionError                a tool's backend failed on a well-formed call

Developer mistakes (wrong arguments to the API, a broken invariant) are not DocMindErrors: they stay
``TypeError`` / ``ValueError`` / ``assert``, and entry points never word them as the user's fault.
``DocMindError`` itself is not raised: a new error subclasses the branch it belongs to.
"""

from __future__ import annotations


class DocMindError(Exception):
    """An error whose message is meant for the person using DocMind."""


class CallerError(DocMindError):
    """The request cannot be served as asked; the caller can change the request (see the module docstring)."""


class RuntimeFailure(DocMindError):
    """A well-formed request failed while it ran; it may succeed later (see the module docstring)."""


# -- the caller's mistakes -------------------------------------------------------------------------------

class ConfigError(CallerError):
    """A config key or value was refused."""


class ConfigConflict(ConfigError):
    """A form's write was refused: keys it changes were changed by someone else since it was drawn."""

    def __init__(self, message: str, keys: list[str]):
        super().__init__(message)
        self.keys = keys


class InputTooLarge(CallerError):
    """A question, id list or tool argument is over its ``limits.*`` cap."""


class AccessDenied(CallerError):
    """The user may not read or change this object."""


class SignInRequired(AccessDenied):
    """Sign-in is on and nobody is signed in."""


class NotFound(CallerError):
    """A knowledge base, document, conversation or trace does not exist."""


class IngestError(CallerError):
    """A document could not be read or indexed; the message says why."""


class IngestCancelled(CallerError):
    """An ingest was cancelled (an ingest job's cancel); ``outcomes`` holds what finished before it, by position."""

    def __init__(self, message: str = "ingest cancelled", outcomes: list | None = None):
        super().__init__(message)
        self.outcomes = outcomes or []


class IngestPaused(CallerError):
    """An ingest stopped writing vectors to let a newer ingest job go first.  Its documents stay searchable by
    keyword (``embedding``); ingesting the same files again resumes them.  ``outcomes`` as for
    :class:`IngestCancelled`."""

    def __init__(self, message: str = "ingest paused for a newer job", outcomes: list | None = None):
        super().__init__(message)
        self.outcomes = outcomes or []


class EmbedderMismatch(CallerError):
    """A knowledge base was indexed with another embedder than the one configured."""


class DocumentBusy(CallerError):
    """The document is pending under another live process's lease (being written or deleted there)."""


class UserError(CallerError):
    """A user account could not be created or changed; the message says why."""


class DatasetError(CallerError):
    """A dataset file or folder cannot be read; the message says where and why."""


class ExperimentError(CallerError):
    """An experiment cannot be created or run; the message says why."""


class TraceFormatError(CallerError):
    """A file given to import is not a DocMind trace export."""


# -- failures at run time ---------------------------------------------------------------------------------

class BackendUnavailable(RuntimeFailure):
    """A configured backend (model, server, key) cannot be used right now."""


class ModelCallCut(BackendUnavailable):
    """A model call the clock ended: its deadline passed while the server was still sending (or silent)."""


class IncompleteReply(BackendUnavailable):
    """A model reply that broke off before its end: a stream without a finish_reason, JSON cut mid-way."""


class ModelOutputError(RuntimeFailure):
    """A model answered, but not in the shape asked for (invalid JSON, missing fields)."""


class EmptyReply(ModelOutputError):
    """A model finished its reply without any text."""


class DeadlineCut(RuntimeFailure, TimeoutError):
    """A call the clock ended: its time ran out while it was still in progress (whatever the server sent).

    A ``TimeoutError`` too, so code that handles timeouts of any origin handles it."""


class StageError(RuntimeFailure):
    """A pipeline stage failed; wraps the cause with the stage's name."""

    def __init__(self, stage: str, cause: BaseException):
        super().__init__(f"{stage} failed: {cause}")
        self.stage = stage
        self.cause = cause


class ToolExecutionError(RuntimeFailure):
    """A tool's backend failed while running a well-formed call."""

    def __init__(self, tool: str, cause: BaseException):
        super().__init__(f"{tool} failed: {cause}")
        self.tool = tool
        self.cause = cause


class InvalidId(CallerError):
    """An id from outside that no record can have (not a whole number in range, or not an id's characters)."""


class EmptyInput(CallerError):
    """A question, query or text with nothing in it but spaces."""


class PageImagesUnavailable(CallerError):
    """Page images need the optional pypdfium2 package (the ``pages`` extra)."""
