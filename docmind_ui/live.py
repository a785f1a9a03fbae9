"""Running ``engine.ask`` in a background thread so a page can stream it, come back to it and stop it.

The pump consumes the core's event iterator in its own thread and keeps every event.  Because the run lives
outside the script thread, a rerun of the page (a Stop click, or a question typed while this one streams)
does not abandon the run: a Stop sets the cancel event and the core ends the run with a ``done`` event marked
cancelled; a rerun for any other reason finds the pump in the session and streams it again from its first
event (:meth:`RunPump.stream` replays what is already there, then follows the run).
"""

from __future__ import annotations

import threading
from typing import Callable, Iterator

from docmind_core.events import ErrorRaised, Event


class RunPump:
    def __init__(self, start: Callable[[threading.Event], Iterator[Event]], label: str = ""):
        self.label = label
        self.cancel = threading.Event()
        self.events: list[Event] = []
        self.finished = threading.Event()
        self._start = start
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name=f"docmind-run-{label}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for event in self._start(self.cancel):
                with self._changed:
                    self.events.append(event)
                    self._changed.notify_all()
        except Exception as exc:  # noqa: BLE001 - shown to the user as an error row, never swallowed silently
            with self._changed:
                self.events.append(ErrorRaised(stage="ui", message=f"the run failed: {exc}"))
        finally:
            with self._changed:
                self.finished.set()
                self._changed.notify_all()

    def stream(self, idle: Callable[[], None] | None = None, poll_s: float = 0.2) -> Iterator[Event]:
        """Every event from the first, then each new one as it arrives, until the run ends; ``idle`` is called
        while waiting (it lets Streamlit notice a click)."""
        seen = 0
        while True:
            with self._changed:
                if seen >= len(self.events) and not self.finished.is_set():
                    self._changed.wait(poll_s)
                fresh = self.events[seen:]
                done = self.finished.is_set() and seen + len(fresh) >= len(self.events)
            seen += len(fresh)
            yield from fresh
            if done and not fresh:
                return
            if not fresh and idle is not None:
                idle()

    @property
    def stopped(self) -> bool:
        return self.cancel.is_set()

    def stop(self) -> None:
        self.cancel.set()

    def wait(self, timeout_s: float = 10.0) -> bool:
        return self.finished.wait(timeout_s)
