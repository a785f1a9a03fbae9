"""Issue 12 item 4, the app's side: stored values that make backends unusable (an unreachable Chroma server, an
empty model name and a malformed URL that an older version accepted) never stop the app; it starts, draws its
pages and names the unreachable server in the Backends panel (AppTest, offline backends, real engine)."""

from __future__ import annotations

import html
import json
import sqlite3

import pytest

pytest.importorskip("docmind_core.engine")
from streamlit.testing.v1 import AppTest  # noqa: E402

from tests.paths import ROOT  # noqa: E402

pytestmark = pytest.mark.slow  # whole app runs (AppTest) on a real engine
UNREACHABLE_CHROMA = "http://127.0.0.1:1"


@pytest.fixture
def locked_home(tmp_path, monkeypatch):
    from docmind_core.engine import Engine

    home = tmp_path / "home"
    Engine.open(home, env={}, warm=False)  # creates and migrates the database
    with sqlite3.connect(home / "docmind.db") as con:  # as an older version, with laxer validation, stored them
        for key, value in (("vector_store.url", UNREACHABLE_CHROMA), ("llm.base_url", "http://127.0.0.1:9/v1"),
                           ("llm.model", ""), ("web.tavily_base_url", "not a url")):
            con.execute("INSERT OR REPLACE INTO config (key, value, updated_at) VALUES (?, ?, '2024-01-01')",
                        [key, json.dumps(value)])
    monkeypatch.setenv("DOCMIND_HOME", str(home))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    return home


def test_the_app_starts_and_names_an_unreachable_backend(locked_home):
    from docmind_ui.session import engine_for

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    at.run()
    assert not at.exception, at.exception
    assert engine_for(str(locked_home.resolve())).wait_ready(90)  # the backends open in the background
    at.run()
    assert not at.exception, at.exception
    assert at.title and at.sidebar.multiselect  # the Chat page and the sidebar are drawn
    panel = html.unescape("\n".join(m.value for m in at.sidebar.markdown))
    vector_store = next(line for line in panel.split('<div class="dm-backend">') if "vector_store" in line)
    assert "127.0.0.1:1" in vector_store and "dm-dot-fallback" in vector_store, vector_store
    at.switch_page("pages/config.py").run()
    assert not at.exception, at.exception
