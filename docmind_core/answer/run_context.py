"""What one run carries through every stage: its settings, its session scope, its cancel flag, its deadline and
its usage meter.

The pipeline builds one :class:`RunContext` at the start of a run (``answer.pipeline``) and hands it to each
stage; the tools read it through their :class:`~docmind_core.answer.tools.ToolContext`, which adds only what the
tools found so far.  A stage takes the run's context instead of settings, cancel, guard and meter one by one,
so each of them has a single way into a stage.

The session scope (knowledge bases, user, excluded documents) is what the access facade (``workbench``)
decided before the run; a model never sets it.  The context is frozen: a stage cannot swap the settings or
the scope mid-run.  The cancel flag, the guard's breaker and the meter are shared, thread-safe objects that
the stages update in place.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Sequence

from docmind_core.backends.protocols import UsageMeter
from docmind_core.deadline import RunGuard
from docmind_core.settings import Settings


@dataclass(frozen=True)
class RunContext:
    settings: Settings
    kb_ids: tuple[int, ...] = ()  # the knowledge bases the session may search
    user_id: int | None = None  # whose memories; None: no memory for this session
    exclude_doc_ids: frozenset[int] = frozenset()  # never retrieved nor read (leave-gold-out evaluation)
    cancel: threading.Event = field(default_factory=threading.Event)  # set: the caller stopped the run
    meter: UsageMeter = field(default_factory=UsageMeter)  # every model call of the run
    # the run's deadline and circuit breaker; None outside an answer run (one MCP tool call, evaluation, tests):
    # no deadline of its own, each call keeps its configured timeout
    guard: RunGuard | None = None

    @classmethod
    def start(cls, settings: Settings, kb_ids: Sequence[int] = (), user_id: int | None = None,
              exclude_doc_ids: Sequence[int] | None = None, cancel: threading.Event | None = None,
              meter: UsageMeter | None = None, guard: RunGuard | None = None) -> "RunContext":
        """A context with its collections normalised (ids as ints) and a fresh cancel flag and meter where none
        is given."""
        return cls(settings=settings, kb_ids=tuple(int(k) for k in kb_ids), user_id=user_id,
                   exclude_doc_ids=frozenset(int(d) for d in exclude_doc_ids or ()),
                   cancel=cancel if cancel is not None else threading.Event(),
                   meter=meter if meter is not None else UsageMeter(), guard=guard)
