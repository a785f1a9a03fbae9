"""The sign-in gate of the web app.

``app.py`` asks :func:`current_user` for the acting user before the sidebar or
any page renders:

- sign-in off: ``LOCAL_USER`` (single-user mode);
- sign-in on: the user of the browser's session token, else ``SIGNED_OUT``
  (then ``app.py`` hides the navigation and draws :func:`draw_sign_in`).

The token (see ``docmind_core/accounts/sessions.py``) lives in the session state
and in a cookie, so a refresh keeps the browser signed in for
``auth.session_hours``.  It is re-validated on the server at every script run:
signing out anywhere (which ends every session of that user), a password
change, a removed account or an expired session signs the browser out at its
next interaction.  The cookie holds only the opaque token, never the password
or the user id; it is set from the page (Streamlit cannot send a Set-Cookie
header), so it is not HttpOnly, and it is SameSite=Strict.
"""

from __future__ import annotations

import time

import streamlit as st

from docmind_core.accounts.rate_limit import SlidingWindowLimiter
from docmind_core.text.visible import escape_markdown
from docmind_core.accounts.users import ADMIN_PASSWORD_ENV, ADMIN_USER_ENV, LOCAL_USER, SIGNED_OUT, User

TOKEN_KEY = "dm_session_token"  # the browser's session token (no widget is bound to it)
COOKIE_NAME = "docmind_session"
_COOKIE_ACTION_KEY = "dm_cookie_action"  # "set" after sign-in, "clear" after sign-out: done on the next run
_FAILURES_KEY = "dm_sign_in_failures"
_SLOW_DOWN_AFTER = 5  # failed attempts in one session before each further attempt is delayed
# Across all sessions of this server: at most this many attempts per user name in 5 minutes, so opening
# new browser sessions does not reset the count. (Someone could lock a name out for a few minutes; on a
# team server that is the better failure than unlimited guessing.)
ATTEMPTS_PER_NAME = 10
_attempts_by_name = SlidingWindowLimiter(window_s=300.0)


def current_user(gate) -> User:
    """LOCAL_USER when sign-in is off; the signed-in user; else SIGNED_OUT.  ``gate``: the home's
    ``SignInGate`` (or an engine, which has the same calls)."""
    if not gate.settings.auth.enabled:
        return LOCAL_USER
    token = st.session_state.get(TOKEN_KEY) or _cookie_token()
    user = gate.user_for_session(token) if token else None
    if user is None:
        if st.session_state.get(TOKEN_KEY):
            _forget_session()  # expired, signed out elsewhere, or the account was removed
        return SIGNED_OUT
    st.session_state[TOKEN_KEY] = token
    return user


def apply_cookie() -> None:
    """Write or clear the session cookie when the last run signed in or out."""
    action = st.session_state.pop(_COOKIE_ACTION_KEY, None)
    if action is None:
        return
    if action == "clear":
        script = f"document.cookie = '{COOKIE_NAME}=; Path=/; Max-Age=0; SameSite=Strict';"
    else:
        token, max_age = action
        script = f"document.cookie = '{COOKIE_NAME}={token}; Path=/; Max-Age={int(max_age)}; SameSite=Strict';"
    st.html(f"<script>{script}</script>", unsafe_allow_javascript=True)


def draw_sign_in(gate) -> None:
    """The sign-in form (the page the visitor asked for is shown once they are signed in).  ``gate``: the
    home's ``SignInGate`` (or an engine): the form needs the accounts only, never the engine's stages."""
    gate.ensure_admin_from_env()
    apply_cookie()
    st.title("DocMind")
    if not gate.has_accounts():
        st.warning("No accounts exist yet. Create an admin on the server with "
                   "`docmind user add NAME --role admin`, or set "
                   f"`{ADMIN_USER_ENV}` and `{ADMIN_PASSWORD_ENV}` before starting the app.")
        return
    with st.form("dm_sign_in", clear_on_submit=True):  # clear: the password does not stay in the session
        st.subheader("Sign in")
        # Keyed, so the fields keep their identity across runs that draw more or less around the form.
        username = st.text_input("User name", autocomplete="username", key="dm_sign_in_user")
        password = st.text_input("Password", type="password", autocomplete="current-password",
                                 key="dm_sign_in_password")
        submitted = st.form_submit_button("Sign in", type="primary")
    if not submitted:
        return
    failures = st.session_state.get(_FAILURES_KEY, 0)
    if failures >= _SLOW_DOWN_AFTER:
        time.sleep(min(2.0, 0.25 * (failures - _SLOW_DOWN_AFTER + 1)))  # blunt guessing from one session
    decision = _attempts_by_name.acquire(username.strip().lower(), ATTEMPTS_PER_NAME)
    if not decision.allowed:
        st.error(f"Too many sign-in attempts for this name; try again in {decision.retry_after_s:.0f} s.")
        return
    signed_in = gate.sign_in(username, password) if username and password else None
    if signed_in is None:
        st.session_state[_FAILURES_KEY] = failures + 1
        st.error("Wrong user name or password.")
        return
    _user, token = signed_in
    _forget_session()  # nothing from a previous user's session carries over
    st.session_state[TOKEN_KEY] = token
    st.session_state[_COOKIE_ACTION_KEY] = (token, gate.settings.auth.session_hours * 3600)
    st.rerun()


def sign_out_button(user: User, gate) -> None:
    """'Signed in as …' with a sign-out button that ends every session of this user (nothing in single-user
    mode).  ``gate``: the home's ``SignInGate``."""
    if user.id == LOCAL_USER.id or not user.is_signed_in:
        return
    st.sidebar.caption(f"Signed in as **{escape_markdown(user.username)}**"
                       + (f" · {escape_markdown(user.department)}" if user.department else "")
                       + (" · admin" if user.is_admin else ""))
    if st.sidebar.button("Sign out", key="dm_sign_out", icon=":material/logout:",
                         help="Ends your session in every browser"):
        gate.end_sessions(user)
        _forget_session()
        st.session_state[_COOKIE_ACTION_KEY] = "clear"
        st.rerun()


def _cookie_token() -> str | None:
    try:
        return st.context.cookies.get(COOKIE_NAME)
    except Exception:  # noqa: BLE001 - no browser context (bare script run): no cookie
        return None


def _forget_session() -> None:
    for key in list(st.session_state.keys()):
        del st.session_state[key]
