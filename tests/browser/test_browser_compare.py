"""Issue 38 in a real browser: the side-by-side verdict line, no loading note left after reopening a
conversation, and the sidebar's KB selection kept across a reload.  Waits on the page's state (the app root's
``data-test-script-state`` and the elements a run draws), never on quiet."""

from __future__ import annotations

import pytest

from tests.browser_support import (
    ARTIFACTS, ROOT, browser_page, prepare_demo_home, require_chromium, streamlit_server,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ANSWER_TIMEOUT_MS = 120_000
QUESTION = "How long does Aurora keep data by default?"
DOCS = ["aurora_overview.md", "faq.md"]  # two of the demo's documents: a quick ingest
IDLE = "document.querySelector('[data-test-script-state=\"notRunning\"]') !== null"
SIDEBAR_TAGS = '[data-testid="stSidebar"] [data-testid="stMultiSelect"] [data-rac] [data-tag]'


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    require_chromium()
    base = tmp_path_factory.mktemp("browser_compare")
    prepare_demo_home(base / "home", [ROOT / "data" / "demo" / name for name in DOCS])
    with streamlit_server(base / "home", base / "streamlit.log") as url:
        yield url


@pytest.fixture(scope="module")
def page(server):
    with browser_page() as pg:
        pg.goto(server, wait_until="domcontentloaded")
        pg.wait_for_selector('[data-testid="stChatInputTextArea"]', timeout=ANSWER_TIMEOUT_MS)
        pg.wait_for_function(IDLE, timeout=ANSWER_TIMEOUT_MS)
        yield pg


def _wait_idle_with(pg, selector: str, count: int) -> None:
    """Until the script has ended and at least ``count`` elements match ``selector``."""
    pg.wait_for_function(
        "([sel, n]) => document.querySelectorAll(sel).length >= n && "
        "document.querySelector('[data-test-script-state=\"notRunning\"]') !== null",
        arg=[selector, count], timeout=ANSWER_TIMEOUT_MS)


def test_side_by_side_says_which_path_did_better(page):
    page.get_by_role("radio", name="Side by side").click()
    page.wait_for_function(IDLE, timeout=30_000)
    box = page.locator('[data-testid="stChatInputTextArea"]')
    box.fill(QUESTION)
    box.press("Enter")
    _wait_idle_with(page, ".dm-pair-verdict", 1)
    verdict = page.locator(".dm-pair-verdict").first
    text = verdict.inner_text()
    assert "Which did better?" in text and ("did better" in text.split("?", 1)[1] or "Tie:" in text), text
    assert verdict.get_attribute("data-winner") in ("A", "B", "tie")
    head = page.locator('[data-testid="stMarkdownContainer"]', has_text="Comparison — A:").first.inner_text()
    assert "rule planner" in head and "A: AGENTIC · B: AGENTIC" not in head, head
    assert "None" not in page.locator('[class*="st-key-cmp-"]').first.inner_text()
    verdict.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "side_by_side_verdict.png"))
    page.get_by_role("radio", name="Auto").click()
    page.wait_for_function(IDLE, timeout=30_000)


def test_no_loading_note_is_left_after_reopening_the_conversation(page, server):
    page.goto(server, wait_until="domcontentloaded")  # a new session: no conversation open
    page.wait_for_selector('[data-testid="stChatInputTextArea"]', timeout=ANSWER_TIMEOUT_MS)
    page.wait_for_function(IDLE, timeout=ANSWER_TIMEOUT_MS)
    picker = page.locator('[data-testid="stSidebar"]').get_by_role("combobox", name="Conversation")
    assert picker.input_value() == "— new conversation —"  # not the empty "Choose an option"
    picker.click()
    page.get_by_role("option").filter(has_text=QUESTION[:24]).first.click()
    _wait_idle_with(page, ".dm-pair-verdict", 1)  # the reopened pair drawn in full
    assert page.locator("text=Loading the sources and scores of this answer").count() == 0


def test_the_sidebar_kb_selection_survives_a_reload(page, server):
    page.wait_for_selector(SIDEBAR_TAGS, timeout=30_000)  # the demo KB is selected by default
    assert page.locator(SIDEBAR_TAGS).count() == 1
    page.locator('[data-testid="stSidebar"]').get_by_role("button", name="Remove demo").first.click()
    page.wait_for_function("() => location.search.includes('kb=none')", timeout=30_000)
    page.wait_for_function(IDLE, timeout=30_000)
    page.reload(wait_until="domcontentloaded")
    page.wait_for_selector('[data-testid="stSidebar"] >> text=Knowledge bases', timeout=ANSWER_TIMEOUT_MS)
    page.wait_for_function(IDLE, timeout=ANSWER_TIMEOUT_MS)
    assert page.locator(SIDEBAR_TAGS).count() == 0
    assert "kb=none" in page.url
