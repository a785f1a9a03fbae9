"""Process-wide effects happen once, at the entry points (app.py, the docmind command, the MCP server), through
``docmind_core.process.prepare_process``; an engine opened directly changes nothing process-wide."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest

from docmind_core import process
from tests.paths import ROOT

OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


@pytest.mark.parametrize("version, affected", [
    ((3, 10, 14), False), ((3, 11, 0), True), ((3, 11, 7), True), ((3, 11, 8), False), ((3, 11, 12), False),
    ((3, 12, 0), True), ((3, 12, 1), True), ((3, 12, 2), False), ((3, 13, 0), False), ((3, 14, 1), False),
])
def test_the_parse_lock_is_for_the_versions_with_the_race(version, affected):
    # python/cpython#106905: fixed by python/cpython#113035, first released in 3.11.8 and 3.12.2
    assert process.parse_race_affects(version) is affected


def _plain_parse(monkeypatch):
    """An ``ast.parse`` without the lock's mark, as a fresh interpreter has."""
    real = ast.parse

    def parse(*args, **kwargs):
        return real(*args, **kwargs)

    monkeypatch.setattr(ast, "parse", parse)
    return parse


@pytest.mark.parametrize("affected", [True, False])
def test_prepare_process_sets_the_offline_hubs_and_locks_parsing_only_where_needed(monkeypatch, affected):
    plain = _plain_parse(monkeypatch)
    for name in OFFLINE_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(process, "parse_race_affects", lambda version=None: affected)
    process.prepare_process()
    process.prepare_process()  # idempotent: app.py calls it at every script run
    assert all(process.os.environ[name] == "1" for name in OFFLINE_VARS)
    assert (ast.parse is not plain) is affected
    assert getattr(ast.parse, "docmind_parse_lock", False) is affected
    assert isinstance(ast.parse("x = 1"), ast.Module)


def test_a_value_in_the_environment_wins(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # a process started to download models
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    process.prepare_process()
    assert process.os.environ["HF_HUB_OFFLINE"] == "0" and process.os.environ["TRANSFORMERS_OFFLINE"] == "1"


@pytest.mark.slow  # a real engine with the bundled encoder
def test_opening_an_engine_changes_nothing_process_wide(tmp_path, monkeypatch):
    from docmind_core.engine import Engine

    plain = _plain_parse(monkeypatch)
    for name in OFFLINE_VARS:
        monkeypatch.delenv(name, raising=False)
    Engine.open(tmp_path / "home", env={}, warm=False)
    assert ast.parse is plain
    assert not any(name in process.os.environ for name in OFFLINE_VARS)


CLI_PROBE = """
import ast, json, os, sys
from docmind_core.cli import main
sys.argv = ["docmind", "--help"]
try:
    main()
except SystemExit:
    pass
print(json.dumps({"offline": [os.environ.get(v) for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")],
                  "locked": getattr(ast.parse, "docmind_parse_lock", False)}))
"""


@pytest.mark.slow  # waits out a real deadline or runs the docmind command: make test only
def test_the_docmind_command_prepares_the_process_at_its_entry(tmp_path):
    out = subprocess.run([sys.executable, "-c", CLI_PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                              "DOCMIND_HOME": str(tmp_path / "home"), "ANONYMIZED_TELEMETRY": "False"})
    assert out.returncode == 0, out.stderr[-2000:]
    state = json.loads(out.stdout.strip().splitlines()[-1])
    assert state == {"offline": ["1", "1"], "locked": process.parse_race_affects()}, state


def test_the_mcp_server_prepares_the_process_at_its_entry(monkeypatch):
    import uvicorn

    from docmind_core import mcp_server

    calls: list[str] = []
    monkeypatch.setattr(mcp_server, "prepare_process", lambda: calls.append("prepare"))
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: calls.append("run"))

    class KeyCheckOnly:
        def resolve_api_key(self, key):
            return None

    mcp_server.serve(KeyCheckOnly(), port=1)
    assert calls == ["prepare", "run"]  # before the server runs


@pytest.mark.slow  # a whole app run (AppTest) on a real engine
def test_the_app_prepares_the_process_before_the_frame(app_engine, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from docmind_ui import session

    calls: list[str] = []
    real_frame = session.draw_frame
    monkeypatch.setattr(process, "prepare_process", lambda: calls.append("prepare"))
    monkeypatch.setattr(session, "draw_frame", lambda: calls.append("frame") or real_frame())
    monkeypatch.setattr(session, "warm_server", lambda: None)  # no warm-up thread left running after this test
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    at.run()
    assert not at.exception, at.exception
    assert calls[:2] == ["prepare", "frame"], calls
    assert app_engine.wait_ready(90)  # its opener thread is done before the next test counts parses
