"""Feedback in a real browser (issue 37 items 1-2): ask the demo KB in Chat, open the answer's feedback, label
it wrong, and see the KB's statement change under the answer.  Uses /usr/bin/chromium
(tests/browser_support.py); skips, saying why, only when it is missing.  Screenshots go to artifacts/."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.test_browser import server  # noqa: F401 - the fixture: the app over a home with the demo KB
from tests.browser_support import ARTIFACTS, browser_page

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ANSWER_TIMEOUT_MS = 90_000
STATEMENT = '[class*="st-key-dm-feedback-"] [data-testid="stCaptionContainer"]'


def test_labelling_an_answer_changes_the_kb_statement(server):
    with browser_page() as page:
        page.goto(server + "/", wait_until="domcontentloaded")
        box = page.locator('[data-testid="stChatInputTextArea"]')
        box.wait_for(timeout=ANSWER_TIMEOUT_MS)
        box.fill("How long does the Aurora X2 battery last?")
        box.press("Enter")
        statement = page.locator(STATEMENT).last
        statement.wait_for(timeout=ANSWER_TIMEOUT_MS)
        before = statement.inner_text()
        assert "no such answer labelled yet" in before, before
        feedback = page.locator('[class*="st-key-dm-feedback-"]').last
        feedback.get_by_text("Was this answer right?").click()
        feedback.get_by_text("Wrong", exact=True).click()
        save = feedback.get_by_role("button", name="Save label")
        expect(save).to_be_enabled(timeout=ANSWER_TIMEOUT_MS)  # once the pick has reached the server
        save.click()
        page.wait_for_selector("text=You labelled this answer: wrong", timeout=ANSWER_TIMEOUT_MS)
        page.wait_for_function(
            """([selector, before]) => { const all = document.querySelectorAll(selector);
                   return all.length && all[all.length - 1].innerText !== before; }""",
            arg=[STATEMENT, before], timeout=ANSWER_TIMEOUT_MS)
        after = page.locator(STATEMENT).last.inner_text()
        assert "0 of 1 labelled so far were right" in after or "1 other labelled answer" in after, after
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "feedback-labelled.png"))
