"""Whether the web app may serve on its configured address with sign-in off.

With ``auth.enabled`` off everyone who reaches the server acts as the local
admin, so that is only safe on a loopback address.  Streamlit listens on every
interface when ``server.address`` is unset, so unset counts as public.  The
app refuses to serve pages on a public address with sign-in off unless
``auth.allow_public_without_sign_in`` says it is wanted, and then warns on
every page.  Pure functions here; ``docmind_ui`` reads the address from
Streamlit's config.
"""

from __future__ import annotations

import ipaddress
from enum import Enum


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
        return (f"DocMind is served on {where} with sign-in off, so anyone who can reach it would act as the "
                "admin. Serve it on 127.0.0.1 (streamlit run app.py --server.address 127.0.0.1), turn sign-in on "
                "(docmind config set auth.enabled true), or, if this is really wanted, "
                "docmind config set auth.allow_public_without_sign_in true.")
    if exposure is Exposure.WARN:
        return (f"Served on {where} without sign-in: anyone who can reach this server acts as the admin "
                "(auth.allow_public_without_sign_in is on).")
    return ""
