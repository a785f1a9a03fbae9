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


def kb_with_texts(engine, name: str, texts: dict[str, str]):
    """A KB of ``engine`` holding these texts (file name -> text), every one ingested."""
    from tests.paths import write_texts

    kb = engine.create_kb(name)
    outcomes = engine.ingest(kb.id, write_texts(engine.home.parent / f"{name}-docs", texts))
    assert all(o.status == "added" for o in outcomes), outcomes
    return kb
