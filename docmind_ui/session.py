"""The engine shared by every session, the acting user's facade, and what the shared sidebar stores.

Pages get everything through :func:`workbench`: the access facade of the user
this browser session acts as.  They never touch the engine's stores.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING

import streamlit as st

from docmind_core.accounts.gate import SignInGate, default_home
from docmind_core.errors import DocMindError
from docmind_core.text.visible import escape_markdown, visible_text
from docmind_ui.auth import apply_cookie, current_user, draw_sign_in, sign_out_button
from docmind_ui.exposure_gate import guard_exposure
from docmind_ui.nav import draw_page_links, route_through_frame

if TYPE_CHECKING:  # the engine and the facade import every stage: the sign-in form is drawn without them
    from docmind_core.engine import Engine
    from docmind_core.workbench import Workbench

log = logging.getLogger(__name__)
KB_KEY = "dm_kb_ids"  # selected knowledge base ids (sidebar multi-select)
KB_PARAM = "kb"  # the URL's query parameter that keeps KB_KEY across reloads
KB_PARAM_NONE = "none"  # its value for "no knowledge base selected"
DOC_KEY = "dm_doc_ids"  # optionally selected document ids within them
FRAME_KEY = "dm_frame_drawn"  # set once the frame has been drawn in this session
# True while app.py's frame runs in this script thread: the page it runs is inside the frame.  Not in the
# session state: once a run is stopped (st.stop, a rerun) Streamlit refuses every further session-state access
# of that run, so a flag there could not be cleared on the way out.
_IN_FRAME_RUN: ContextVar[bool] = ContextVar("docmind_in_frame_run", default=False)
NEW_KB_KEY = "dm_new_kb"  # a KB created on a page, added to the sidebar's selection at the next run
# A page waits for the engine in its own run, its loading notice on screen (the engine's imports take 1-4 s on a
# quiet machine, tens of seconds on a loaded one), looking up every ENGINE_CHECK_S: each look updates the notice,
# which is where Streamlit ends a run for a newer one, so a click in the frame is never held up by the wait.
# After ENGINE_WAIT_S the run ends with a "try again" button.  No timer fragment (``run_every``): a page that
# went through one kept its browser busy after the engine was there (the side-by-side browser test never reached
# network idle under load) and made the next page switches seconds slower (bench/page_speed.py).
ENGINE_WAIT_S = 180.0
ENGINE_CHECK_S = 0.5
# The modules a page needs that the sign-in form does not (the engine imports every stage: about 1-2 s)
_CORE_MODULES = ("docmind_core.engine", "docmind_core.workbench")
# The warm-up (seconds of CPU: the encoder's build, jieba's tables, pandas) runs a step at a time, each once no
# page has run for WARM_UP_QUIET_S: a page's run ends before the browser has drawn it, and a build beside that
# held the page's last messages back (bench/RESULTS.md, "Page speed": the first page's script end to
# interactive 0.9-1.0 s with the build at once, 0.5-0.6 s after a 1 s wait), and page switches made while it ran
# took 1.0-1.8 s.  A step waits at most WARM_UP_MAX_WAIT_S (a visitor who keeps clicking does not hold it back
# for ever); a question asked meanwhile builds the backends itself.
WARM_UP_QUIET_S = 0.75
WARM_UP_MAX_WAIT_S = 10.0
# What the other pages import that the first one does not (pandas ~0.45 s): loaded by the warm-up, so the first
# switch to them does not pay it
_OTHER_PAGES_MODULES = ("pandas", "docmind_ui.kb_page", "docmind_ui.jobs_view", "docmind_ui.experiment_charts",
                        "docmind_core.reports.regrade", "docmind_core.experiments.sweep")
_starts: dict[str, threading.Thread] = {}  # home -> the thread importing the core and opening its engine
_opened: set[str] = set()  # homes whose start thread opened the engine
_backends_wanted: set[str] = set()  # homes whose backends were asked for before their engine was open
_starts_lock = threading.Lock()


class PageActivity:
    """The frame's script runs in progress in this process, and when the last one ended."""

    def __init__(self) -> None:
        lock = threading.Lock()
        self._changed = threading.Condition(lock)  # a run began or ended
        self._held = threading.Condition(lock)  # a waiter was held back once more
        self._running = 0
        self._last_end = time.monotonic()
        self._holds = 0  # times a wait_quiet found a run in progress (or too recent) and went on waiting

    @contextmanager
    def running(self) -> Iterator[None]:
        with self._changed:
            self._running += 1
        try:
            yield
        finally:
            with self._changed:
                self._running -= 1
                self._last_end = time.monotonic()
                self._changed.notify_all()

    def wait_quiet(self, quiet_s: float, max_wait_s: float) -> bool:
        """Wait until no run has been in progress for ``quiet_s``; False when ``max_wait_s`` ran out first."""
        deadline = time.monotonic() + max_wait_s
        with self._changed:
            while True:
                now = time.monotonic()
                quiet_from = self._last_end + quiet_s
                if self._running == 0 and now >= quiet_from:
                    return True
                if now >= deadline:
                    return False
                wake = deadline if self._running else min(deadline, quiet_from)
                self._holds += 1
                self._held.notify_all()
                self._changed.wait(wake - now)

    def wait_held(self, holds: int, timeout_s: float) -> bool:
        """Wait until waiters have been held back ``holds`` times in all (the state a test waits on instead of
        sleeping: the warm-up's step is parked behind a run); False when ``timeout_s`` ran out first."""
        with self._held:
            return self._held.wait_for(lambda: self._holds >= holds, timeout_s)

    @property
    def holds(self) -> int:
        with self._held:
            return self._holds


_pages = PageActivity()  # one per server process, like the engine: what the warm-up steps wait on


@st.cache_resource(show_spinner=False)
def gate_for(home: str) -> SignInGate:
    """One sign-in gate per home for the whole server: the database, settings, accounts and sessions."""
    return SignInGate.open(home)


@st.cache_resource(show_spinner=False)
def engine_for(home: str) -> Engine:
    # One Engine per home for the whole server, on the gate's database: it is thread-safe and holds the models.
    # The first page needs only its stores: its backends (the encoder's build is seconds of CPU that would share
    # the interpreter with that page's run) are built once the first page is drawn, by warm_server(), or
    # behind the sign-in form (start_engine), or by the first call that needs them.
    from docmind_core.engine import Engine

    gate = gate_for(home)
    return Engine(Path(home), gate.db, gate.config, warm=False, background=True, open_on_demand=True)


def start_engine(home: str, build_backends: bool = False) -> None:
    """Import the core and open ``home``'s engine in a background thread, once per home and process;
    ``build_backends``: then start building its backends too (also when the thread was started earlier
    without: the server's head start opens the engine before the sign-in form asks for its models).

    The sign-in form starts it with its backends, so the engine is ready by the time the visitor has typed
    their password; a page drawn before it is ready shows the frame and a loading notice (see
    :func:`draw_frame`)."""
    build_now = False
    with _starts_lock:
        if build_backends:
            if home in _opened:
                build_now = True
            else:
                _backends_wanted.add(home)  # the thread starts the build once the engine is open
        if home not in _starts:
            thread = threading.Thread(target=_open_engine, args=(home,), name="docmind-engine-start", daemon=True)
            _starts[home] = thread
            thread.start()
    if build_now:
        _build_backends(home)


def _open_engine(home: str) -> None:
    try:
        engine_for(home)
    except Exception as exc:  # noqa: BLE001 - the page's own engine_for() call raises it again and shows it
        log.info("the engine of %s did not open in the background: %s", home, exc)
        return
    with _starts_lock:
        _opened.add(home)
        wanted = home in _backends_wanted
    if wanted:
        _build_backends(home)


def _build_backends(home: str) -> None:
    try:
        engine_for(home).start_opening()  # once: a no-op when the backends are built or being built
    except Exception as exc:  # noqa: BLE001 - the call that needs the backends raises it again and shows it
        log.info("the backends of %s did not start building: %s", home, exc)


def preload(home: str | None = None) -> None:
    """The server's head start (``docmind_ui/serve.py``), before any browser connects: the home's sign-in
    gate, the frame's own modules, then the core imported and the engine opened (its stores) by the same
    thread a page would start, waited for here.  Nothing is raised: a page that needs what failed raises it
    again and shows it."""
    home = home or _home()
    try:
        gate_for(home)
    except Exception as exc:  # noqa: BLE001 - see above
        log.info("the head start could not open %s: %s", home, exc)
        return
    importlib.import_module("docmind_ui.html_views")  # the frame's CSS and the sidebar's backend list

    start_engine(home)
    with _starts_lock:
        thread = _starts[home]
    thread.join()


def engine_started(home: str) -> bool:
    """True when a script run can get ``home``'s engine without waiting for the core's imports: its start
    thread is done, or (no start thread) this process imported the core already, e.g. for another home."""
    with _starts_lock:
        thread = _starts.get(home)
    if thread is not None:
        return not thread.is_alive()
    return all(name in sys.modules for name in _CORE_MODULES)


@st.cache_resource(show_spinner=False)
def warm_server_once() -> threading.Thread:
    # once per server, after the first page: the other pages' modules (pandas among them), the engine's warm-up
    # (encoder, indexes, jieba, one search) and plotly's validators, so the first page switch, the first answer
    # and its chart come at once
    from docmind_ui.charts import warm_charts

    engine = get_engine()

    def quiet() -> None:
        _pages.wait_quiet(WARM_UP_QUIET_S, WARM_UP_MAX_WAIT_S)

    def warm() -> None:
        for module in _OTHER_PAGES_MODULES:
            quiet()
            importlib.import_module(module)
        # builds the backends first when nothing has yet (the engine opens them on demand)
        engine.warm_up(before_step=quiet)
        quiet()
        warm_charts()

    thread = threading.Thread(target=warm, name="docmind-warm-up", daemon=True)
    thread.start()
    return thread


def warm_server() -> None:
    """Start the once-per-server warm-up.  app.py calls it after the page is drawn: run beside the first page
    it competed with its rendering for the interpreter (bench/page_speed.py: +1 s to the first page)."""
    warm_server_once()


@contextmanager
def frame_run() -> Iterator[None]:
    """app.py's run: a page that runs within it is inside the frame (see :func:`ensure_frame`)."""
    token = _IN_FRAME_RUN.set(True)
    try:
        with _pages.running():
            yield
    finally:  # also when the run stops early (st.stop, st.rerun, st.switch_page raise)
        _IN_FRAME_RUN.reset(token)


def draw_frame() -> Workbench:
    """What every page shares: page config, the acting user and, once signed in, the list of pages, CSS, the
    facade and the sidebar.  Returns the signed-in (or, sign-in off, the local) user's facade.

    Signed out (sign-in on): draws the sign-in form from the gate alone and stops the run; the engine starts
    loading behind it.  Signed in while the engine still loads (a fresh server): draws the page list and a
    loading notice, and the page follows once the engine is there (see :func:`_wait_for_engine`).
    """
    st.set_page_config(page_title="DocMind", page_icon=":material/menu_book:", layout="wide")
    st.session_state[FRAME_KEY] = True
    home = _home()
    gate = get_gate(home)
    guard_exposure(gate.settings)  # no page on a public address with sign-in off, unless allowed
    user = current_user(gate)
    if not user.is_signed_in:
        draw_sign_in(gate)
        start_engine(home, build_backends=True)  # the visitor types while the models load
        st.stop()
    inject_css()
    apply_cookie()
    draw_page_links()
    sign_out_button(user, gate)
    if not engine_started(home):
        _wait_for_engine(home)
    from docmind_core.workbench import Workbench

    bench = Workbench(get_engine(), user, channel="web")
    draw_sidebar(bench)
    return bench


def _wait_for_engine(home: str) -> None:
    """A loading notice where the page goes while the engine starts; the page follows in this run once it is
    there.  See ENGINE_WAIT_S for why the run waits rather than a timer rerunning it."""
    start_engine(home)
    notice = st.empty()
    with _starts_lock:
        thread = _starts[home]
    started = time.monotonic()
    while thread.is_alive():
        waited = time.monotonic() - started
        if waited >= ENGINE_WAIT_S:
            notice.warning(f"DocMind is still loading after {waited:.0f} s (the machine may be busy).",
                           icon=":material/hourglass_top:")
            st.button("Try again", key="dm_engine_try_again")  # a click reruns the page, which waits again
            st.stop()
        notice.info(f"Loading DocMind (its stores and answer stages): {waited:.0f} s. This page opens by itself "
                    f"once it is there.", icon=":material/hourglass_top:")
        thread.join(ENGINE_CHECK_S)
    notice.empty()


def ensure_frame() -> None:
    """Make sure the calling page runs inside the frame, never as a bare page.

    Until the first ``st.navigation`` call of the server process, Streamlit treats the ``pages/`` folder as
    a legacy multipage app: a fresh server's first visit straight to e.g. /traces runs that page alone (no
    sidebar, CSS or sign-in gate).  On a session's first run the page hands over to app.py, which switches
    back to it inside the frame.  When the mode comes back later in a session (only AppTest re-enters it, at
    every run) a hand-over would drop the click being handled, so the frame is drawn here instead.
    """
    if _IN_FRAME_RUN.get():
        return
    if not st.session_state.get(FRAME_KEY):
        caller = inspect.currentframe().f_back  # the page module calling us: its file names the page
        route_through_frame(caller.f_globals["__file__"])
    draw_frame()


def _home() -> str:
    return str(default_home().resolve())


def get_gate(home: str | None = None) -> SignInGate:
    try:
        return gate_for(home or _home())
    except DocMindError as exc:
        st.error(f"DocMind could not start: {escape_markdown(exc)}")
        st.stop()
        raise  # pragma: no cover - st.stop raises


def get_engine() -> Engine:
    try:
        return engine_for(_home())
    except DocMindError as exc:
        st.error(f"DocMind could not start: {escape_markdown(exc)}")
        st.stop()
        raise  # pragma: no cover - st.stop raises


def workbench() -> Workbench:
    """The access facade of the user this browser session acts as (re-validated at every run)."""
    from docmind_core.workbench import Workbench

    engine = get_engine()
    return Workbench(engine, current_user(engine), channel="web")


def live_workbench() -> Workbench:
    """The facade for a part of a page that reruns on its own (a fragment, a timer) or acts later (a callback).

    Such a run does not pass the frame's sign-in check: when the session ended since the page was drawn
    (signed out in another tab, expired, sign-in switched on), the whole page reruns instead, and the frame
    shows the sign-in screen.  The part never runs as a signed-out user, so nothing raises and nothing is
    logged at every refresh.
    """
    bench = workbench()
    if not bench.user.is_signed_in:
        st.rerun(scope="app")
    return bench


def select_new_kb(kb_id: int) -> None:
    """Add a KB just created to the sidebar's selection (the sidebar applies it at its next draw)."""
    st.session_state[NEW_KB_KEY] = kb_id


def selected_kb_ids() -> list[int]:
    return list(st.session_state.get(KB_KEY, []))


def selected_doc_ids() -> list[int]:
    return list(st.session_state.get(DOC_KEY, []))


def inject_css() -> None:
    # not on the sign-in form: html_views imports the run reports
    from docmind_ui.html_views import PAGE_CSS

    st.markdown(PAGE_CSS, unsafe_allow_html=True)


def kbs_in_url(kb_ids: list[int]) -> str:
    """The sidebar's KB selection as the URL keeps it: "1,4", or "none" for an empty selection."""
    return ",".join(str(k) for k in kb_ids) or KB_PARAM_NONE


def kbs_from_url(value: str | None, readable: dict[int, str]) -> list[int] | None:
    """The KB ids a URL's ``kb`` parameter selects, those this user can read; None when it has none (or none
    that parses), so the default applies."""
    if not value:
        return None
    if value == KB_PARAM_NONE:
        return []
    ids = [int(part) for part in value.split(",") if part.strip().isdigit()]
    return [k for k in ids if k in readable] if ids else None


def draw_sidebar(bench: Workbench) -> None:
    """Knowledge base and document selection, then the live backends with a health dot each."""
    from docmind_ui.html_views import backend_html

    with st.sidebar:
        kbs = bench.list_kbs()
        names = {kb.id: visible_text(f"{kb.name} ({kb.document_count} docs)") for kb in kbs}
        if KB_KEY not in st.session_state:  # a reload: the URL's selection, else the user's default KBs
            remembered = kbs_from_url(st.query_params.get(KB_PARAM), names)
            # an admin's default leaves out members' private KBs
            st.session_state[KB_KEY] = remembered if remembered is not None else \
                [kb.id for kb in bench.default_kbs()]
        else:  # drop KBs deleted since they were selected
            st.session_state[KB_KEY] = [k for k in st.session_state[KB_KEY] if k in names]
        new_kb = st.session_state.pop(NEW_KB_KEY, None)
        if new_kb in names and new_kb not in st.session_state[KB_KEY]:
            st.session_state[KB_KEY] = [*st.session_state[KB_KEY], new_kb]
        st.multiselect("Knowledge bases", list(names), format_func=lambda k: names.get(k, str(k)), key=KB_KEY,
                       placeholder="Choose knowledge bases")
        in_url = kbs_in_url(st.session_state[KB_KEY])
        if st.query_params.get(KB_PARAM) != in_url:  # kept in the URL, so a reload selects the same KBs
            st.query_params[KB_PARAM] = in_url
        docs = {}
        for kb_id in st.session_state[KB_KEY]:
            for doc in bench.list_documents(kb_id):
                if doc.status in ("complete", "embedding"):  # searchable by keyword already
                    docs[doc.id] = visible_text(doc.name)
        if DOC_KEY in st.session_state:
            st.session_state[DOC_KEY] = [d for d in st.session_state[DOC_KEY] if d in docs]
        st.multiselect("Documents (optional)", list(docs), format_func=lambda d: docs.get(d, str(d)), key=DOC_KEY,
                       placeholder="All documents",
                       help="Select up to a few documents to ask about them directly (summaries, 'this document').")
        with st.expander("Backends", expanded=False):
            try:
                statuses = bench.backends()
            except Exception as exc:  # noqa: BLE001 - the sidebar must render even when a backend is broken
                st.error(f"Could not read backend status: {escape_markdown(exc)}")
                statuses = []
            st.markdown("".join(backend_html(s) for s in statuses), unsafe_allow_html=True)
