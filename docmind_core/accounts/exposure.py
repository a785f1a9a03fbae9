"""Whether the web app may serve on its configured address with sign-in off.

With ``auth.enabled`` off everyone who reaches the server acts as the local
admin, so that is only safe on a loopback address.  Streamlit listens on every
interface when ``server.address`` is unset, so unset counts as public.  The
app refuses to serve pages on a public address with sign-in off unless
``auth.allow_public_without_sign_in`` says it is wanted, and then warns on
every page.  ``docmind serve`` goes further and does not start the server at all.
Pure functions here; ``docmind_ui`` reads the address from Streamlit's config,
``docmind serve`` from the same places Streamlit does (:func:`streamlit_address`).
"""

from __future__ import annotations

import ipaddress
import tomllib
from enum import Enum
from pathlib import Path
from typing import Mapping, Sequence


class Exposure(str, Enum):
    OK = "ok"  # loopback, a unix socket, or sign-in is on
    WARN = "warn"  # public without sign-in, explicitly allowed
    REFUSE = "refuse"  # public without sign-in, not allowed


def is_loopback(address: str | None) -> bool:
    """True when only this machine can connect: a loopback IP, ``localhost`` or a unix socket."""
    value = (address or "").strip().lower()
    if not value:
        return False  # unset: every interface
    if value.startswith("unix://") or value == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(value.strip("[]"))
    except ValueError:
        return False  # a host name may resolve to any interface
    mapped = getattr(ip, "ipv4_mapped", None)
    return ip.is_loopback or bool(mapped and mapped.is_loopback)


def public_exposure(address: str | None, auth_enabled: bool, allowed: bool) -> Exposure:
    if auth_enabled or is_loopback(address):
        return Exposure.OK
    return Exposure.WARN if allowed else Exposure.REFUSE


def exposure_message(exposure: Exposure, address: str | None) -> str:
    where = address or "every network interface (server.address is unset)"
    if exposure is Exposure.REFUSE:
        return (f"DocMind on {where} with sign-in off would let anyone who can reach it act as the admin. "
                "Serve it on 127.0.0.1 (docmind serve --server.address 127.0.0.1), turn sign-in on "
                "(docmind config set auth.enabled true), or, if this is really wanted, "
                "docmind config set auth.allow_public_without_sign_in true.")
    if exposure is Exposure.WARN:
        return (f"Served on {where} without sign-in: anyone who can reach this server acts as the admin "
                "(auth.allow_public_without_sign_in is on).")
    return ""


def streamlit_config_files(app: Path) -> list[Path]:
    """Where Streamlit reads ``config.toml`` for the app script ``app``, lowest precedence first: the user's,
    then the project's (the server runs in the app's folder)."""
    return [Path.home() / ".streamlit" / "config.toml", app.parent / ".streamlit" / "config.toml"]


def streamlit_address(args: Sequence[str], env: Mapping[str, str], config_files: Sequence[Path]) -> str | None:
    """The address ``streamlit run`` with ``args`` will listen on (see ``streamlit_server_option``).  ``None`` when
    nothing sets it: Streamlit then listens on every interface.

    A config file that cannot be read is an error, not "unset": Streamlit would refuse it too."""
    return streamlit_server_option("address", args, env, config_files)


def streamlit_server_option(name: str, args: Sequence[str], env: Mapping[str, str],
                            config_files: Sequence[Path]) -> str | None:
    """``[server] name`` as ``streamlit run`` with ``args`` will read it, highest first: the ``--server.NAME``
    flag, ``STREAMLIT_SERVER_NAME``, then the last of ``config_files`` that sets it; ``None`` when none does."""
    flag = f"--server.{name}"
    flagged = None
    for i, arg in enumerate(args):
        if arg == "--":  # what follows goes to the script, not to Streamlit
            break
        if arg == flag and i + 1 < len(args):
            flagged = args[i + 1]  # the last one given wins, as in Streamlit's own option parsing
        elif arg.startswith(f"{flag}="):
            flagged = arg.split("=", 1)[1]
    if flagged is not None:
        return flagged
    variable = f"STREAMLIT_SERVER_{name.upper()}"
    if env.get(variable):
        return env[variable]
    value = None
    for path in config_files:
        if not path.is_file():
            continue
        try:
            server = tomllib.loads(path.read_text(encoding="utf-8")).get("server", {})
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ValueError(f"cannot read Streamlit's config {path.name}: {exc}") from exc
        if isinstance(server, dict) and server.get(name) not in (None, ""):
            value = str(server[name])
    return value
