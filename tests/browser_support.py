"""What the browser tests share: Debian's chromium (never `playwright install`) and the web app's server
(`docmind_ui.serve`, as `docmind serve` starts it) on a free loopback port over a prepared DocMind home.
Screenshots go to artifacts/ (git-ignored)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = ROOT / "artifacts"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run"]


def require_chromium() -> None:
    """Skip, saying why, when Debian's chromium or playwright's Python package is missing."""
    if not Path(CHROMIUM).exists():
        print(f"SKIP reason: {CHROMIUM} is missing; run scripts/browser_deps.sh (apt-get install chromium)")
        pytest.skip(f"{CHROMIUM} is missing; run scripts/browser_deps.sh to install Debian's chromium")
    pytest.importorskip("playwright.sync_api")


def home_env(home: Path) -> dict[str, str]:
    return {**os.environ, "DOCMIND_HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "ANONYMIZED_TELEMETRY": "False", "PYTHONPATH": str(ROOT)}


def prepare_home(home: Path, script: str, *args: str) -> None:
    """Run set-up code against the home in its own process, so the server is the only one holding the stores."""
    subprocess.run([sys.executable, "-c", script, *args], env=home_env(home), cwd=ROOT, check=True, timeout=300)


DEMO_KB_SCRIPT = (
    "import sys; from docmind_core.engine import Engine; e = Engine.open(warm=False); "
    "kb = e.create_kb('demo', 'Demo corpus: the fictional Aurora and Nimbus products'); "
    "out = e.ingest(kb.id, sys.argv[1:]); assert all(o.status != 'failed' for o in out), out")


def prepare_demo_home(home: Path, files: list[Path], then: str = "") -> None:
    """A home with the demo KB ``demo`` holding ``files``; ``then``: more set-up code (``e`` is the engine)."""
    prepare_home(home, DEMO_KB_SCRIPT + (f"; {then}" if then else ""), *(str(f) for f in files))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, proc: subprocess.Popen, timeout_s: float = 90) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError("streamlit did not become healthy")


@contextmanager
def streamlit_server(home: Path, log_path: Path) -> Iterator[str]:
    """The server `docmind serve` runs (``docmind_ui.serve``: `streamlit run app.py` with the core loaded as soon
    as it listens) on 127.0.0.1 over ``home``; yields its URL and stops it afterwards."""
    port = free_port()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "docmind_ui.serve", "app.py", "--server.headless", "true", "--server.address",
             "127.0.0.1", "--server.port", str(port), "--browser.gatherUsageStats", "false",
             "--server.fileWatcherType", "none"], cwd=ROOT, env=home_env(home), stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_healthy(url, proc)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


@contextmanager
def browser_page(width: int = 1500, height: int = 1100) -> Iterator:
    """One Chromium page (Debian's binary) in a fresh context; closed afterwards.  Dialogs the page opens are
    dismissed and kept in ``page.dialogs``."""
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": width, "height": height}).new_page()
            page.dialogs = []
            page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
            yield page
        finally:
            browser.close()
