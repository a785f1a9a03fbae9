"""``docmind serve``: start the web app, unless it would hand the admin's rights to the network.

With sign-in off every visitor acts as the local admin.  On a public address (or with no address, which
Streamlit takes as every interface) that is refused here, before any server starts, unless
``auth.allow_public_without_sign_in`` says it is wanted.  ``streamlit run app.py`` started by hand cannot be
stopped before it listens (Streamlit runs no app code until a browser connects), so the app itself also serves
no page in that case (``docmind_ui/exposure_gate.py``).
"""

from __future__ import annotations

import os
import sys

import click

from docmind_core.commands import Invocation, echo, pass_invocation
from docmind_core.engine import PACKAGE_ROOT, stored_settings
from docmind_core.accounts.exposure import (Exposure, exposure_message, public_exposure, streamlit_address,
                                             streamlit_config_files)

APP = PACKAGE_ROOT / "app.py"


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("streamlit_args", nargs=-1, type=click.UNPROCESSED)
@pass_invocation
def serve(invocation: Invocation, streamlit_args: tuple[str, ...]) -> None:
    """Serve the web app: ``streamlit run app.py`` with STREAMLIT_ARGS (e.g. --server.port 8502), the core loaded
    as soon as the server listens.

    Refuses to start on a public address with sign-in off, unless auth.allow_public_without_sign_in is
    set; then it starts and every page warns."""
    if not APP.is_file():
        echo(f"error: the web app is not installed beside the package ({APP.name} is missing)", err=True)
        sys.exit(2)
    try:
        address = streamlit_address(streamlit_args, os.environ, streamlit_config_files(APP))
    except ValueError as exc:
        echo(f"error: {exc}", err=True)
        sys.exit(2)
    auth = stored_settings(invocation.home).auth
    exposure = public_exposure(address, auth.enabled, auth.allow_public_without_sign_in)
    if exposure is Exposure.REFUSE:
        echo(f"error: not started. {exposure_message(exposure, address)}", err=True)
        sys.exit(2)
    if exposure is Exposure.WARN:
        echo(f"warning: {exposure_message(exposure, address)}", err=True)
    # The server replaces this process: it runs in the app's folder (its .streamlit/config.toml and pages/),
    # on this invocation's data folder, which it reads from its own environment.  docmind_ui.serve is
    # `streamlit run` with the core loaded as soon as the server listens, before the first visitor.
    server_env = {**os.environ, "DOCMIND_HOME": str(invocation.home)}
    os.chdir(APP.parent)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", "docmind_ui.serve", str(APP), *streamlit_args], server_env)
