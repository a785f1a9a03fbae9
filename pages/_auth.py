"""The sign-in gate of the web app (not a page: the leading underscore keeps it out of navigation).

``app.py`` calls :func:`require_user` right after building the engine and
before the sidebar or any page renders.  With ``auth.enabled`` off it returns
``LOCAL_USER`` (single-user mode).  With it on, it draws a sign-in form over
the users table and stops the script until the password matches; the signed
in user's id then lives in ``st.session_state`` under :data:`SESSION_USER_KEY`,
which no widget is bound to, so nothing the user types can change it.  Every
render re-reads the account, so a removed user is signed out at once.
"""

from __future__ import annotations

import time

import streamlit as st

from docmind_core.errors import NotFound
from docmind_core.rate_limit import SlidingWindowLimiter
from docmind_core.users import ADMIN_PASSWORD_ENV, ADMIN_USER_ENV, LOCAL_USER, User, UserStore

SESSION_USER_KEY = "dm_user_id"  # read by docmind_ui.session.user_id()
_FAILURES_KEY = "dm_sign_in_failures"
_SLOW_DOWN_AFTER = 5  # failed attempts in one session before each further attempt is delayed
# Across all sessions of this server: at most this many attempts per user name in 5 minutes, so opening
# new browser sessions does not reset the count. (Someone could lock a name out for a few minutes; on a
# team server that is the better failure than unlimited guessing.)
ATTEMPTS_PER_NAME = 10
_attempts_by_name = SlidingWindowLimiter(window_s=300.0)


def require_user(engine) -> User:
    """The signed-in user, or LOCAL_USER in single-user mode; otherwise shows the form and stops."""
    if not engine.settings.auth.enabled:
        return LOCAL_USER
    users = UserStore(engine.db)
    user_id = st.session_state.get(SESSION_USER_KEY)
    if user_id is not None:
        try:
            return users.get(user_id)
        except NotFound:  # the account was removed while signed in
            _forget_session()
    _draw_sign_in(users)
    st.stop()
    raise AssertionError("st.stop() returned")  # pragma: no cover - st.stop raises


def sign_out_button(user: User, container=None) -> None:
    """'Signed in as …' with a sign-out button (nothing in single-user mode)."""
    if user.id == LOCAL_USER.id:
        return
    where = container if container is not None else st.sidebar
    where.caption(f"Signed in as **{user.username}**" + (f" · {user.department}" if user.department else "")
                  + (" · admin" if user.is_admin else ""))
    if where.button("Sign out", key="dm_sign_out", icon=":material/logout:"):
        _forget_session()
        st.rerun()


def _draw_sign_in(users: UserStore) -> None:
    users.ensure_admin_from_env()
    st.title("DocMind")
    if users.count() == 0:
        st.warning("No accounts exist yet. Create an admin on the server with "
                   "`docmind user add NAME --role admin`, or set "
                   f"`{ADMIN_USER_ENV}` and `{ADMIN_PASSWORD_ENV}` before starting the app.")
        return
    with st.form("dm_sign_in", clear_on_submit=True):  # clear: the password does not stay in the session
        st.subheader("Sign in")
        username = st.text_input("User name", autocomplete="username")
        password = st.text_input("Password", type="password", autocomplete="current-password")
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
    user = users.authenticate(username, password) if username and password else None
    if user is None:
        st.session_state[_FAILURES_KEY] = failures + 1
        st.error("Wrong user name or password.")
        return
    _forget_session()  # nothing from a previous user's session carries over
    st.session_state[SESSION_USER_KEY] = user.id
    st.rerun()


def _forget_session() -> None:
    for key in list(st.session_state.keys()):
        del st.session_state[key]
