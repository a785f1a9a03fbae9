"""The lifecycle every fake server shares: a threaded HTTP server on 127.0.0.1 (a free port) in a background thread.

A fake extends :class:`LoopbackServer` with its protocol only: a handler class derived from :class:`FakeHandler`
(named by ``handler``), which reaches the fake it serves as ``self.fake``::

    class _Handler(FakeHandler):
        fake: "FakeThing"

        def do_POST(self) -> None:
            self.send_bytes(200, self.read_body(), "application/octet-stream")

    class FakeThing(LoopbackServer):
        handler = _Handler

    with FakeThing() as thing:
        thing.url  # "http://127.0.0.1:<port>"
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Self


class FakeHandler(BaseHTTPRequestHandler):
    """A request handler of a fake server: quiet, with helpers to read a body and send one."""

    fake: Any  # the LoopbackServer this handler serves (bound per server by LoopbackServer.start)

    def log_message(self, *args: Any) -> None:  # keep test output quiet
        pass

    def read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def send_bytes(self, status: int, data: bytes, content_type: str) -> None:
        """One whole reply; a client that already hung up (a timeout test) is no error of the fake's."""
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass


class LoopbackServer:
    """Starts on ``start()`` / ``with``, stops on ``stop()`` / leaving the block; ``url`` while it runs."""

    handler: ClassVar[type[FakeHandler]]
    # a short poll interval keeps stop(), and so each test's teardown, fast
    poll_interval_s: ClassVar[float] = 0.02

    _httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``, the root of the running server."""
        assert self._httpd is not None, f"{type(self).__name__} is not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> Self:
        bound = type(self.handler.__name__, (self.handler,), {"fake": self})
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), bound)
        httpd.daemon_threads = True  # a handler still sleeping (a hang or delay test) never holds up the exit
        httpd.block_on_close = False
        self._httpd = httpd
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": self.poll_interval_s},
                         name=f"fake-{type(self).__name__}", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
