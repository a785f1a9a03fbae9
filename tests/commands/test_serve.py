"""``docmind serve``: the web app does not start on a public address with sign-in off unless allowed (issue 12,
item 7), and where it starts it serves this invocation's data."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from docmind_core.accounts.exposure import streamlit_address
from tests.browser_support import free_port, home_env, wait_healthy
from tests.paths import ROOT

DOCMIND = [sys.executable, "-m", "docmind_core.cli"]


def _serve(home: Path, *args: str, env: dict[str, str] | None = None, **popen) -> subprocess.Popen:
    environment = home_env(home)
    environment.pop("STREAMLIT_SERVER_ADDRESS", None)
    environment.update(env or {})
    return subprocess.Popen([*DOCMIND, "serve", *args], env=environment, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **popen)


def _listening(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1):
            return True
    except OSError:
        return False


@pytest.mark.slow  # three `docmind serve` subprocesses
@pytest.mark.parametrize("address_args, env", [
    (["--server.address", "0.0.0.0"], {}),
    (["--server.address=192.168.1.20"], {}),
    ([], {"STREAMLIT_SERVER_ADDRESS": "0.0.0.0"}),  # beats the project's 127.0.0.1 in .streamlit/config.toml
])
def test_a_public_address_with_sign_in_off_is_refused_before_any_server_starts(tmp_path, address_args, env):
    port = free_port()
    proc = _serve(tmp_path / "home", *address_args, "--server.port", str(port), env=env, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=60)  # a refusal takes a second; a server that started never ends
    finally:
        if proc.poll() is None:  # the refusal failed: never leave a public server with sign-in off running
            os.killpg(proc.pid, 9)
            proc.wait(10)
    assert proc.returncode == 2, out
    assert "not started" in out and "auth.allow_public_without_sign_in" in out
    assert "Traceback" not in out
    assert not _listening(port)


@pytest.mark.slow
def test_allowed_public_serving_warns_and_starts_and_loopback_serving_starts_quietly(tmp_path):
    home = tmp_path / "home"
    subprocess.run([*DOCMIND, "config", "set", "auth.allow_public_without_sign_in", "true"], env=home_env(home),
                   cwd=ROOT, check=True, capture_output=True, timeout=120)
    # allowed: warned, then handed to Streamlit.  192.0.2.1 (TEST-NET-1, RFC 5737) is public to the check but
    # belongs to no interface here, so the handed-over server cannot bind it: nothing is exposed by the test
    proc = _serve(home, "--server.address", "192.0.2.1", "--server.port", str(free_port()), "--server.headless",
                  "true", start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            out, _ = proc.communicate(timeout=10)
    assert "warning: Served on 192.0.2.1 without sign-in" in out and "not started" not in out, out
    assert "Cannot assign requested address" in out or "Errno 99" in out, out  # Streamlit ran, and could not bind
    # loopback: starts and answers, no warning
    port = free_port()
    proc = _serve(home, "--server.address", "127.0.0.1", "--server.port", str(port), "--server.headless", "true",
                  start_new_session=True)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc, timeout_s=120)
    finally:
        os.killpg(proc.pid, 15)
        out, _ = proc.communicate(timeout=60)
    assert "warning" not in out, out


def test_the_address_is_read_where_streamlit_reads_it(tmp_path):
    user = tmp_path / "user.toml"
    project = tmp_path / "project.toml"
    user.write_text('[server]\naddress = "0.0.0.0"\n', encoding="utf-8")
    project.write_text('[server]\naddress = "127.0.0.1"\nport = 8501\n', encoding="utf-8")
    files = [user, project]
    assert streamlit_address([], {}, files) == "127.0.0.1"  # the project's file is read last
    assert streamlit_address([], {}, [project, user]) == "0.0.0.0"
    assert streamlit_address([], {"STREAMLIT_SERVER_ADDRESS": "10.0.0.5"}, files) == "10.0.0.5"
    assert streamlit_address(["--server.address", "::"], {"STREAMLIT_SERVER_ADDRESS": "10.0.0.5"}, files) == "::"
    assert streamlit_address(["--server.port", "1", "--server.address=localhost"], {}, files) == "localhost"
    # the last flag wins, as Streamlit reads them; after "--" the arguments are the script's
    assert streamlit_address(["--server.address", "127.0.0.1", "--server.address", "0.0.0.0"], {}, files) == "0.0.0.0"
    assert streamlit_address(["--", "--server.address", "127.0.0.1"], {"STREAMLIT_SERVER_ADDRESS": "0.0.0.0"},
                             files) == "0.0.0.0"
    assert streamlit_address([], {}, [tmp_path / "missing.toml"]) is None  # unset: every interface
    broken = tmp_path / "broken.toml"
    broken.write_text("[server\naddress = ", encoding="utf-8")
    with pytest.raises(ValueError, match="cannot read Streamlit's config broken.toml"):
        streamlit_address([], {}, [broken])


@pytest.mark.slow  # a `docmind serve` subprocess
def test_the_server_loads_the_core_before_any_visitor(tmp_path):
    """`docmind serve` starts docmind_ui.serve: once Streamlit listens, and before any browser connects, the
    core is imported and the home's engine opened (Streamlit alone runs no app code until a session starts,
    so the first visitor's page paid for both)."""
    import threading

    from docmind_ui.serve import READY_LINE

    port = free_port()
    proc = _serve(tmp_path / "home", "--server.address", "127.0.0.1", "--server.port", str(port),
                  "--server.headless", "true", start_new_session=True)
    lines: list[str] = []
    ready = threading.Event()

    def read() -> None:
        for line in proc.stdout:
            lines.append(line)
            if READY_LINE in line:
                ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert ready.wait(120), "".join(lines)
        assert _listening(port)  # the head start ran beside a server that answers
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(60)
        reader.join(10)
    assert (tmp_path / "home" / "docmind.db").is_file()  # the engine's stores were opened on that home
    assert "Traceback" not in "".join(lines), "".join(lines)
