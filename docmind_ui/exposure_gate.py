"""The frame's check that sign-in is not off on a server the network can reach (see docmind_core.accounts.exposure)."""

from __future__ import annotations

import streamlit as st

from docmind_core.accounts.exposure import Exposure, exposure_message, public_exposure
from docmind_core.text.visible import escape_markdown
from docmind_core.settings import Settings


def guard_exposure(settings: Settings) -> None:
    """Stops every page on a public address with sign-in off, unless allowed; then warns on every page."""
    address = st.get_option("server.address")
    exposure = public_exposure(address, settings.auth.enabled, settings.auth.allow_public_without_sign_in)
    if exposure is Exposure.REFUSE:
        st.error(escape_markdown(exposure_message(exposure, address)), icon=":material/public_off:")
        st.stop()
    elif exposure is Exposure.WARN:
        st.warning(escape_markdown(exposure_message(exposure, address)), icon=":material/public:")
