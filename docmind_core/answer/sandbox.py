"""``executeCode``'s runner: Python in a child process, isolated mode, temp directory, wall-clock limit.

What it does *not* do: enforce "no network" or memory limits — nothing on
this machine lets an unprivileged process drop those.  That is why the tool
is off by default (``sandbox.enabled``), never offered over MCP, and only
offered to the agentic loop when an operator turns it on.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass

OUTPUT_CHARS = 4000  # what the model gets back at most


@dataclass(frozen=True)
class CodeRun:
    ok: bool
    output: str  # stdout (+ stderr), truncated; what the model reads
    problem: str = ""  # "timed out after 5s" / "exit code 1"


def run_python(code: str, timeout_s: float) -> CodeRun:
    """Run ``code`` with ``python -I`` (no site-packages paths from the environment) in an empty temp dir."""
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONIOENCODING": "utf-8"}  # no keys or tokens leak in
    with tempfile.TemporaryDirectory(prefix="docmind-exec-") as workdir:
        try:
            done = subprocess.run([sys.executable, "-I", "-c", code], cwd=workdir, env=env, capture_output=True,
                                  text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return CodeRun(False, f"The program was stopped after {timeout_s:g} seconds.",
                           f"timed out after {timeout_s:g}s")
    out = (done.stdout + (f"\n[stderr]\n{done.stderr}" if done.stderr else ""))[:OUTPUT_CHARS]
    if done.returncode != 0:
        return CodeRun(False, out or "(no output)", f"exit code {done.returncode}")
    return CodeRun(True, out or "(no output)")
