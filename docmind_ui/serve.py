"""The web app's server process: ``streamlit run app.py``, with a head start.

``python -m docmind_ui.serve app.py [streamlit flags]`` is what ``docmind serve`` (and so ``make run``) starts.
It runs Streamlit's own command line in this process, and beside it a thread that waits until the server
listens, then imports the DocMind core and opens the home's engine (its stores; the models load after the
first page, see ``session.warm_server``).

Why: Streamlit runs no app code until a browser session starts, so under a plain ``streamlit run app.py`` the
first visitor's page paid those imports (0.5-1.2 s on this project's 2-core machines).  Between the moment the
server listens and the first script run the interpreter is idle (the browser is loading Streamlit's
frontend), and when a person opens the page later it is idle for longer.  The thread waits for the server
rather than starting at once because Streamlit's own imports and start would otherwise share the interpreter
with it and the server would listen later (bench/RESULTS.md, "Page speed").

``streamlit run app.py`` started by hand still works: the first page then imports the core itself.
"""

from __future__ import annotations

import os
import runpy
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Mapping

from docmind_core.accounts.exposure import streamlit_config_files, streamlit_server_option

DEFAULT_PORT = 8501  # Streamlit's

# How often the head start looks whether the server listens yet, and for how long at most (a server that never
# starts exits, and the daemon thread with it).
_POLL_S = 0.02
_GIVE_UP_S = 300.0
READY_LINE = "DocMind: the core is loaded and the engine's stores are open"  # printed once the head start is done


def main(argv: list[str] | None = None) -> None:
    """Run ``streamlit run`` with ``argv`` (default: this process's arguments), with the head start."""
    from docmind_core.process import prepare_process

    args = list(sys.argv[1:] if argv is None else argv)
    prepare_process()  # before any thread parses Python source (see process.install_parse_lock)
    host, port = listening_address(args, os.environ)
    threading.Thread(target=head_start, args=(host, port), name="docmind-head-start", daemon=True).start()
    sys.argv = ["streamlit", "run", *args]
    runpy.run_module("streamlit", run_name="__main__", alter_sys=True)  # `python -m streamlit`: its public CLI


def listening_address(args: list[str], env: Mapping[str, str]) -> tuple[str, int]:
    """Where the server started with ``args`` can be reached from this host: its address (loopback when it
    listens on every interface) and its port, read where Streamlit reads them.  Streamlit picks another port
    when the default one is taken and none was set; the head start then begins before the server listens,
    which only makes it share the interpreter with Streamlit's start."""
    script = next((Path(a) for a in args if not a.startswith("-")), Path("app.py"))
    config_files = streamlit_config_files(script.resolve())
    try:
        address = streamlit_server_option("address", args, env, config_files)
        port = int(streamlit_server_option("port", args, env, config_files) or DEFAULT_PORT)
    except ValueError:  # an unreadable config or a port that is no number: Streamlit says so itself
        address, port = None, DEFAULT_PORT
    if not address or address in ("0.0.0.0", "::", "[::]"):
        address = "127.0.0.1"
    return address, port


def head_start(host: str, port: int) -> None:
    """Once the server listens: import the core and open the engine of the home this process serves."""
    if not _wait_for_server(host, port):
        return
    started = time.perf_counter()
    from docmind_ui.session import preload

    preload()
    print(f"{READY_LINE} ({time.perf_counter() - started:.1f} s).", file=sys.stderr, flush=True)


def _wait_for_server(host: str, port: int) -> bool:
    deadline = time.monotonic() + _GIVE_UP_S
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=_POLL_S * 10):
                return True
        except OSError:
            time.sleep(_POLL_S)
    return False


if __name__ == "__main__":
    main()
