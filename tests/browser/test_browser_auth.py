"""Sign-in like a web app, in a real browser (Debian's chromium, as in test_browser.py).

A fresh `streamlit run app.py` with sign-in on:
- a deep link (/traces) while signed out shows only the sign-in form: no page is listed;
- after signing in the visitor lands on the page the link named, and every page is listed in the sidebar;
- a deep link to /config (the server has run app.py by then) lands there after sign-in too;
- a refresh keeps the browser signed in (the session cookie holds an opaque token only);
- signing out in one browser signs that user out in every browser.
"""

from __future__ import annotations

import time
from urllib.parse import urlparse

import pytest

from tests.browser_support import (
    ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, prepare_home, require_chromium, streamlit_server,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PASSWORD = "correct horse battery"
ANSWER_TIMEOUT_MS = 90_000
SIGN_IN = 'button:has-text("Sign in")'
PAGE_LINKS = '[data-testid="stSidebar"] [data-testid="stPageLink-NavLink"]'
LISTED_PAGES = ["Chat", "Knowledge bases", "Config", "Traces", "Experiments"]  # in this order


def _path(url: str) -> str:
    """The page a URL names, without its query (the sidebar's KB selection is kept there, ?kb=...)."""
    return urlparse(url).path.rstrip("/")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    require_chromium()
    base = tmp_path_factory.mktemp("browser-auth")
    (base / "plan.txt").write_text("The Orion launch budget is 4.2 million dollars.", encoding="utf-8")
    prepare_home(base / "home", (
        "import sys; from docmind_core.engine import Engine; from docmind_core.accounts.users import LOCAL_USER, UserStore; "
        "from docmind_core.workbench import Workbench; "
        "e = Engine.open(); u = UserStore(e.db); a = u.add('alice', sys.argv[1], department='research'); "
        "u.add('bob', sys.argv[1], department='sales'); w = Workbench(e, a); "
        "kb = w.create_kb('alice-private-kb'); w.ingest(kb.id, [sys.argv[2]]); "
        "Workbench(e, LOCAL_USER).set_config({'auth.enabled': True})"), PASSWORD, str(base / "plan.txt"))
    with streamlit_server(base / "home", base / "streamlit.log") as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def _sign_in(pg, username: str) -> None:
    pg.wait_for_selector(SIGN_IN, timeout=ANSWER_TIMEOUT_MS)
    pg.get_by_role("textbox", name="User name").fill(username)
    pg.get_by_role("textbox", name="Password").fill(PASSWORD)
    pg.locator(SIGN_IN).click()
    pg.wait_for_selector(f'[data-testid="stSidebar"] >> text=Signed in as', timeout=ANSWER_TIMEOUT_MS)


def _session_cookie(context, timeout_s: float = ANSWER_TIMEOUT_MS / 1000) -> dict:
    """The session cookie: the page sets it from the browser once signed in, which can land after the page's
    first signed-in draw on a loaded machine."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = [c for c in context.cookies() if c["name"] == "docmind_session"]
        if found or time.monotonic() > deadline:
            assert found, "no docmind_session cookie after signing in"
            return found[0]
        time.sleep(0.2)


def test_deep_link_sign_in_refresh_and_sign_out_everywhere(server, browser):
    first = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = first.new_page()
    # first visit of the fresh server, straight to a page, signed out
    pg.goto(server + "/traces", wait_until="domcontentloaded")
    pg.wait_for_selector(SIGN_IN, timeout=ANSWER_TIMEOUT_MS)
    assert pg.locator('[data-testid="stSidebarNav"] a').count() == 0, "no page is listed before sign-in"
    assert pg.locator('[data-testid="stPageLink"]').count() == 0
    assert pg.get_by_role("link", name="Chat").count() == 0
    assert "alice-private-kb" not in pg.content() and "What-if regrade" not in pg.content()
    pg.screenshot(path=str(ARTIFACTS / "sign_in.png"))

    _sign_in(pg, "alice")
    pg.wait_for_selector("text=What-if regrade", timeout=ANSWER_TIMEOUT_MS)  # back on the page the link named
    assert _path(pg.url).endswith("/traces")  # the KB selection rides in the query
    assert _listed_pages(pg) == LISTED_PAGES
    cookie = _session_cookie(first)
    assert "alice" not in cookie["value"] and PASSWORD.split()[0] not in cookie["value"]
    assert cookie["sameSite"] == "Strict"

    pg.reload(wait_until="domcontentloaded")  # a refresh keeps the session
    pg.wait_for_selector("text=What-if regrade", timeout=ANSWER_TIMEOUT_MS)
    assert pg.locator(SIGN_IN).count() == 0
    # the page's body can draw before the sidebar's page list on a loaded machine: wait for the list
    assert _listed_pages(pg) == LISTED_PAGES
    assert pg.get_by_role("link", name="Chat").count() == 1

    second = browser.new_context(viewport={"width": 1400, "height": 1000})
    other = second.new_page()
    other.goto(server + "/", wait_until="domcontentloaded")
    _sign_in(other, "alice")
    other.wait_for_selector('[data-testid="stChatInputTextArea"]', timeout=ANSWER_TIMEOUT_MS)

    pg.get_by_role("button", name="Sign out").click()
    pg.wait_for_selector(SIGN_IN, timeout=ANSWER_TIMEOUT_MS)
    pg.reload(wait_until="domcontentloaded")
    pg.wait_for_selector(SIGN_IN, timeout=ANSWER_TIMEOUT_MS)  # the cleared cookie does not sign back in
    other.reload(wait_until="domcontentloaded")  # the other browser was signed out too
    other.wait_for_selector(SIGN_IN, timeout=ANSWER_TIMEOUT_MS)
    assert "alice-private-kb" not in other.content()
    other.screenshot(path=str(ARTIFACTS / "signed_out_everywhere.png"))
    second.close()
    first.close()


def test_deep_link_to_config_lands_there_after_sign_in(server, browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    pg.goto(server + "/config", wait_until="domcontentloaded")
    pg.wait_for_selector(SIGN_IN, timeout=ANSWER_TIMEOUT_MS)
    assert pg.locator('[data-testid="stPageLink"]').count() == 0, "no page is listed before sign-in"
    _sign_in(pg, "bob")
    pg.wait_for_selector('h1:has-text("Config")', timeout=ANSWER_TIMEOUT_MS)
    assert _path(pg.url).endswith("/config")  # the KB selection rides in the query
    assert _listed_pages(pg) == LISTED_PAGES
    pg.locator(PAGE_LINKS).filter(has_text="Traces").click()  # the list navigates
    pg.wait_for_selector("text=What-if regrade", timeout=ANSWER_TIMEOUT_MS)
    assert _path(pg.url).endswith("/traces")  # the KB selection rides in the query
    context.close()


def _listed_pages(pg) -> list[str]:
    """The titles of the page links in the sidebar, in order."""
    # the links arrive one by one in the page's delta stream: wait for the last before reading them all
    pg.locator(PAGE_LINKS).filter(has_text=LISTED_PAGES[-1]).wait_for(timeout=ANSWER_TIMEOUT_MS)
    # a link's text is its icon's ligature name ("timeline"), then its title
    return [text.strip().splitlines()[-1].strip() for text in pg.locator(PAGE_LINKS).all_inner_texts()]
