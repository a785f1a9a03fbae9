"""Running ``engine.ask`` in a background thread so a page can stream it and stop it.

The pump consumes the core's event iterator in its own thread and hands the
events to the page through a queue.  Because the run lives outside the script
thread, pressing Stop (which reruns the page and abandons the old script run)
does not abandon the run: the cancel event is set, the core ends it with a
``done`` event marked cancelled, and the trace and conversation are saved.
"""

from __future__ import annotations

import queue
import threading
from typing import Callable, Iterator

from docmind_core.events import ErrorRaised, Event

_END = object()


class RunPump:
    def __init__(self, start: Callable[[threading.Event], Iterator[Event]], label: str = ""):
        self.label = label
        self.cancel = threading.Event()
        self.events: list[Event] = []
        self.finished = threading.Event()
        self._start = start
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=f"docmind-run-{label}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for event in self._start(self.cancel):
                self.events.append(event)
                self._queue.put(event)
        except Exception as exc:  # noqa: BLE001 - shown to the user as an error row, never swallowed silently
            error = ErrorRaised(stage="ui", message=f"the run failed: {exc}")
            self.events.append(error)
            self._queue.put(error)
        finally:
            self.finished.set()
            self._queue.put(_END)

    def stream(self, idle: Callable[[], None] | None = None, poll_s: float = 0.2) -> Iterator[Event]:
        """Events as they arrive; ``idle`` is called while waiting (it lets Streamlit notice a Stop click)."""
        while True:
            try:
                item = self._queue.get(timeout=poll_s)
            except queue.Empty:
                if idle is not None:
                    idle()
                continue
            if item is _END:
                return
            yield item

    def stop(self) -> None:
        self.cancel.set()

    def wait(self, timeout_s: float = 10.0) -> bool:
        return self.finished.wait(timeout_s)
