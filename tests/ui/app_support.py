"""What the AppTest page tests share: the app they drive and a started one."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.paths import ROOT

APP = str(ROOT / "app.py")
TIMEOUT = 90  # s per script run: a loaded machine opening the engine and the demo KB


def started_app() -> AppTest:
    """app.py run once (the frame and the Chat page), checked to have raised nothing."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert not at.exception, at.exception
    return at
