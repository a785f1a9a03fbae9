"""The workbench in a real browser: `streamlit run app.py` headless on 127.0.0.1, driven by Debian's chromium.

Never runs `playwright install`: it uses /usr/bin/chromium (scripts/browser_deps.sh installs it) and skips,
saying why, only when that binary is missing.  Screenshots go to artifacts/ (git-ignored).
"""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.browser_support import (
    ARTIFACTS, browser_page, prepare_demo_home, require_chromium, streamlit_server,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ANSWER_TIMEOUT_MS = 90_000

EVIL_DOC = (b"# Zephyr field notes\n\nThe Zephyr Q7 sensor calibration takes 42 seconds. "
            b"<script>alert('xss')</script> <img src=x onerror=\"alert('onerror')\"> "
            b"The Zephyr Q7 calibration must be repeated every 30 days.\n")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    require_chromium()
    from tests.ui.test_pages import demo_files

    base = tmp_path_factory.mktemp("browser")
    prepare_demo_home(base / "home", demo_files(base / "docs"))
    with streamlit_server(base / "home", base / "streamlit.log") as url:
        yield url


@pytest.fixture(scope="module")
def page(server):
    with browser_page() as pg:
        # first visit of the fresh server goes straight to a page URL: it must still get app.py's frame
        pg.goto(server + "/traces", wait_until="domcontentloaded")
        pg.wait_for_selector("text=What-if regrade", timeout=ANSWER_TIMEOUT_MS)
        pg.wait_for_selector('[data-testid="stSidebar"] >> text=Knowledge bases', timeout=30_000)
        assert pg.locator('[data-testid="stSidebarNav"] >> text=auth').count() == 0  # not the legacy page list
        pg.get_by_role("link", name="Chat").click()
        pg.wait_for_selector('[data-testid="stChatInputTextArea"]', timeout=ANSWER_TIMEOUT_MS)
        yield pg


def _ask(pg, question: str, expected_verdicts: int) -> None:
    box = pg.locator('[data-testid="stChatInputTextArea"]')
    box.fill(question)
    box.press("Enter")
    pg.wait_for_function(f"document.querySelectorAll('.dm-verdict').length >= {expected_verdicts}",
                         timeout=ANSWER_TIMEOUT_MS)
    pg.wait_for_load_state("networkidle", timeout=ANSWER_TIMEOUT_MS)  # a loaded machine idles late
    time.sleep(0.5)  # let Streamlit finish painting the last elements of the run


def _shot(pg, locator, name: str) -> None:
    """Screenshot of the viewport with ``locator`` scrolled to the top (Streamlit scrolls an inner container)."""
    locator.evaluate("el => el.scrollIntoView({block: 'start'})")
    time.sleep(0.3)
    pg.screenshot(path=str(ARTIFACTS / name))


ANSWER_CHART = '[class*="st-key-run-"] [data-testid="stPlotlyChart"]'  # an answer's chart, not the hidden preload


def test_the_chat_page_has_the_browser_load_the_other_pages_code_once_it_sits_idle(server, page):
    # not with the page's draw (it would stall a click or the first answer's text), but a moment later: plotly.js
    # for the first answer's chart, the table grid and the inputs for the first switch to another page.  A tab
    # of its own, opened on Chat: the module's page has visited Traces, which fetched some of them itself.
    wanted = ["PlotlyChart.", "DataFrame.", "NumberInput.", "DateInput.", "FileUploader."]
    tab = page.context.new_page()
    try:
        tab.goto(server, wait_until="domcontentloaded")
        tab.wait_for_selector('[data-testid="stChatInputTextArea"]', timeout=ANSWER_TIMEOUT_MS)
        # Each wait is on a state the page reaches; the timeouts only end a test that never gets there (a loaded
        # machine once took over 30 s from the chat input to the fetched code).  A timed run of the page draws the
        # examples, the browser fetches their code, and the next timed run removes them.
        tab.wait_for_function(
            "names => names.every(n => performance.getEntriesByType('resource').some(e => e.name.includes('/' + n)))",
            arg=wanted, timeout=ANSWER_TIMEOUT_MS)
        # and the hidden examples are gone again: they would only weigh on the page's later draws
        tab.wait_for_selector(".st-key-dm-chart-preload", state="detached", timeout=ANSWER_TIMEOUT_MS)
    finally:
        tab.close()


def test_chinese_and_english_questions_with_badge_chart_and_chips(page):
    _ask(page, "What is the maximum power draw of the Nimbus N2?", 1)  # demo q01
    # one verdict per answer, its meaning stated beside it (issue 34); the evidence grade is no coloured badge
    verdict = page.locator(".dm-verdict").first
    assert verdict.is_visible()
    said = verdict.inner_text()
    assert any(label in said for label in ("Supported by the sources", "Partly supported",
                                           "Not supported by the sources")), said
    assert "support score" in said and "why:" in said, said
    assert page.locator(".dm-tier").count() == 0
    page.wait_for_selector(ANSWER_CHART + " .main-svg", timeout=30_000)
    assert page.locator("a.dm-cite").count() >= 1
    # the route in plain words, under the answer (not only inside the collapsed timeline)
    route = page.locator(".dm-route").last
    assert route.is_visible() and "-> RULE_PLANNER" in route.inner_text()
    _shot(page, page.locator(".dm-verdict").last, "chat_english.png")

    _ask(page, "错误代码 AUR-4012 是什么意思？怎么处理？", 2)  # demo q03
    # the chart comes with the run, a moment after the badge on a busy machine
    page.wait_for_function(f"document.querySelectorAll('{ANSWER_CHART} .main-svg').length >= 2", timeout=30_000)
    # AGENTIC: each round's tool calls are readable without opening the timeline
    rounds = page.locator(".dm-rounds").last
    rounds.wait_for(state="visible", timeout=30_000)  # drawn with the run's last elements
    assert "Round 1" in rounds.inner_text() and "searchDocs" in rounds.inner_text()
    assert page.locator("a.dm-cite").count() >= 2
    _shot(page, page.locator(".dm-verdict").last, "chat_chinese.png")


def test_clicking_a_chip_highlights_its_source_card(page):
    chip = page.locator("a.dm-cite").last
    target = chip.get_attribute("href").lstrip("#")
    chip.click()
    page.wait_for_function(f"location.hash === '#{target}'", timeout=10_000)
    state = page.evaluate(
        """(id) => { const el = document.getElementById(id); const t = document.querySelector(':target');
                     return {targeted: t === el, shadow: getComputedStyle(el).boxShadow,
                             top: el.getBoundingClientRect().top, bottom: el.getBoundingClientRect().bottom,
                             height: window.innerHeight}; }""", target)
    assert state["targeted"], state
    assert state["shadow"] != "none"  # the :target highlight ring
    # on screen: a card taller than the window may start above it, but part of it must be visible
    assert state["top"] < state["height"] and state["bottom"] > 0, f"the card was not scrolled into view: {state}"
    page.screenshot(path=str(ARTIFACTS / "chip_highlight.png"))


_CARD_STATE = """(id) => { const el = document.getElementById(id); if (!el) { return null; }
    const r = el.getBoundingClientRect();
    return {top: r.top, bottom: r.bottom, height: window.innerHeight, jumped: el.classList.contains('dm-jumped'),
            shadow: getComputedStyle(el).boxShadow, lit: document.querySelectorAll('.dm-jumped').length}; }"""


# Records the card's state at the moment a jump lights it: a busy page may rerun and redraw the card (a fresh
# element, without the class) before a poll reads it, though the jump did light it.
_WATCH_CARD = f"""(id) => {{ window.__dmLit = window.__dmLit || {{}}; delete window.__dmLit[id];
    const seen = () => {{ const s = ({_CARD_STATE})(id); if (s && s.jumped && !window.__dmLit[id]) {{
        window.__dmLit[id] = s; }} }};
    new MutationObserver(seen).observe(document.body, {{subtree: true, childList: true, attributes: true,
                                                         attributeFilter: ['class']}}); }}"""


def _lit_card(pg, card_id: str, timeout_ms: int = 60_000) -> dict:
    """The card's state once a jump has lit it (read in one go in the page, when the jump lit it: see
    _WATCH_CARD); the state seen last when it never was."""
    try:
        return pg.wait_for_function(
            f"(id) => {{ const s = ({_CARD_STATE})(id); return (s && s.jumped && s) || (window.__dmLit || {{}})[id]; }}",
            arg=card_id, timeout=timeout_ms).json_value()
    except PlaywrightTimeout:
        return pg.evaluate(_CARD_STATE, card_id) or {"missing": card_id}


_SELECTION_SHOWN = """el => [...el.querySelectorAll('.point path')].some(p => {
    const o = parseFloat(p.style.opacity || getComputedStyle(p).opacity); return o < 1; })"""


def _click_bar_until_lit(pg, chart, bar, card_id: str, tries: int = 3) -> dict:
    """Click ``bar`` and wait for its card to light up.  On a busy machine a click can land before plotly
    listens; it is lost then, and plotly shows no selection (it dims the other bars once one is picked).  Only
    then is the bar clicked again: a second click on a selected bar would deselect it."""
    state: dict = {}
    pg.evaluate(_WATCH_CARD, card_id)
    for attempt in range(tries):
        box = bar.bounding_box()
        pg.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        state = _lit_card(pg, card_id, timeout_ms=10_000)
        if state.get("jumped"):
            return state
        if chart.evaluate(_SELECTION_SHOWN):  # the click was taken: its rerun is slow, wait for it
            return _lit_card(pg, card_id)
    return state


def test_clicking_a_bar_of_an_answers_chart_jumps_to_its_source_card(page):
    chart = page.locator(ANSWER_CHART).last
    chart.scroll_into_view_if_needed()
    time.sleep(1)
    # the first bar that carries a card id (a source; cut candidates have no card): trace t, point i
    t, i, card_id = chart.evaluate("""el => { const gd = el.querySelector('.js-plotly-plot');
        for (let t = 0; t < gd.data.length; t++) { const ids = gd.data[t].customdata || [];
            for (let i = 0; i < ids.length; i++) { if (ids[i]) { return [t, i, ids[i]]; } } }
        return [-1, -1, '']; }""")
    assert card_id.startswith("src-"), "no bar of the answer's chart carries a card id"
    bar = chart.locator("g.trace.bars").nth(t).locator(".point path").nth(i)
    state = _click_bar_until_lit(page, chart, bar, card_id)
    assert state.get("jumped") and state["top"] < state["height"] and state["bottom"] > 0 and state["lit"] == 1, state
    _shot(page, page.locator(f"#{card_id}"), "chat_bar_jump.png")


def test_side_by_side_shows_both_columns_and_the_comparison(page):
    page.get_by_role("radio", name="Side by side").click()
    time.sleep(1)
    before = page.locator(".dm-verdict").count()
    _ask(page, "Compare the maximum power draw of the Nimbus N1 and the Nimbus N2.", before + 2)  # q06
    page.wait_for_selector("text=Comparison", timeout=30_000)
    columns = page.locator('[data-testid="stColumn"]:has(.dm-verdict)')
    assert columns.count() >= 2
    _shot(page, columns.last, "side_by_side.png")
    comparison = page.locator('[data-testid="stVerticalBlock"][class*="st-key-cmp-"]:has(.dm-diff)').last
    assert comparison.locator(".dm-diff").is_visible()  # "Answer diff" is the first tab
    comparison.get_by_role("tab", name="Tool calls").click()
    table = comparison.locator('[role="tabpanel"]:visible [data-testid="stDataFrame"]').last
    table.wait_for(timeout=10_000)
    fits = table.evaluate("""el => { const box = el.getBoundingClientRect();
                                     const panel = el.closest('[role="tabpanel"]').getBoundingClientRect();
                                     return {right: box.right, panelRight: panel.right, width: box.width}; }""")
    assert fits["width"] > 0 and fits["right"] <= fits["panelRight"] + 1, fits  # the table fits its container
    _shot(page, comparison, "side_by_side_comparison.png")
    comparison.get_by_role("tab", name="Answer diff").click()
    page.get_by_role("radio", name="Auto").click()
    time.sleep(1)


def test_uploaded_script_tag_is_shown_as_text_and_never_runs(page):
    page.get_by_role("link", name="Knowledge bases").click()
    page.wait_for_selector('[data-testid="stFileUploaderDropzoneInput"]', state="attached", timeout=30_000)
    _upload(page, "zephyr<script>.md", EVIL_DOC)
    page.wait_for_selector('[data-testid="stAlertContentSuccess"]', timeout=ANSWER_TIMEOUT_MS)
    _shot(page, page.locator('[data-testid="stAlertContentSuccess"]').first, "kb_upload.png")

    page.get_by_role("link", name="Chat").click()
    page.wait_for_selector('[data-testid="stChatInputTextArea"]', timeout=30_000)
    before = page.locator(".dm-verdict").count()
    _ask(page, "How long does the Zephyr Q7 sensor calibration take?", before + 1)
    cards = page.locator(".dm-source", has_text="Zephyr")
    assert cards.count() >= 1
    text = cards.first.inner_text()
    assert "<script>" in text  # shown as text
    assert page.evaluate("document.querySelectorAll('.dm-source script, .dm-source img, .dm-answer script').length") \
        == 0
    time.sleep(1)
    assert page.dialogs == [], page.dialogs
    _shot(page, cards.first, "escaped_script.png")


def _upload(pg, name: str, body: bytes) -> None:
    """Hand the uploader one file and press Ingest once the file is uploaded: the upload goes to the server
    on its own, and a click before it lands ingests nothing (seen under load)."""
    pg.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(
        files=[{"name": name, "mimeType": "text/markdown", "buffer": body}])
    pg.locator('[data-testid="stFileUploader"]', has_text=name).wait_for(timeout=30_000)
    pg.get_by_role("button", name="Ingest").click()


def _goto_kb_page(pg) -> None:
    pg.get_by_role("link", name="Knowledge bases").click()
    pg.wait_for_selector('[data-testid="stFileUploaderDropzoneInput"]', state="attached", timeout=30_000)


def test_an_upload_survives_navigating_away_and_its_job_finishes(page):
    _goto_kb_page(page)
    body = ("# Quasar field log\n\n" + "".join(
        f"Quasar unit {i} passed the thermal test at {40 + i % 9} degrees. " for i in range(1500))).encode()
    jobs_before = page.locator('[class*="st-key-dm-job-"]').count()
    _upload(page, "quasar_log.md", body)
    page.wait_for_function(f"document.querySelectorAll('[class*=\"st-key-dm-job-\"]').length > {jobs_before}",
                           timeout=30_000)  # its job is listed
    page.get_by_role("link", name="Chat").click()  # away while the job runs in the core
    page.wait_for_selector('[data-testid="stChatInputTextArea"]', timeout=30_000)
    time.sleep(1.5)
    _goto_kb_page(page)
    done = page.locator('[data-testid="stAlertContentSuccess"]', has_text="quasar_log.md")
    done.first.wait_for(timeout=ANSWER_TIMEOUT_MS)
    assert "StopException" not in page.content()
    assert page.locator('[data-testid="stAlertContentError"]', has_text="quasar_log.md").count() == 0
    _shot(page, done.first, "kb_job_finished.png")


def test_hit_testing_searches_the_page_kb_when_the_sidebar_selects_none(page):
    _goto_kb_page(page)
    box = page.locator('[data-testid="stSidebar"] [data-testid="stMultiSelect"]').first.locator("input")
    for _ in range(5):  # empty the sidebar's KB selection
        box.click()
        box.press("Backspace")
        time.sleep(0.5)
    page.keyboard.press("Escape")
    page.wait_for_load_state("networkidle")
    assert page.locator('[data-testid="stSidebar"] [data-baseweb="tag"]').count() == 0
    page.get_by_label("Query").fill("Nimbus N2 power draw")
    page.locator('[data-testid="stBaseButton-secondaryFormSubmit"]', has_text="Search").click()
    page.wait_for_selector(".st-key-dm_hit_chart .main-svg", timeout=ANSWER_TIMEOUT_MS)
    page.wait_for_selector('.dm-source[id^="src-hits-"]', timeout=30_000)
    assert page.locator('.dm-source[id^="src-hits-"]', has_text="Nimbus").count() >= 1
    _shot(page, page.locator(".st-key-dm_hit_chart").first, "kb_hit_testing.png")

    # a bar jumps to its candidate card: a bar's x is its candidate's rank, card n is rank n
    time.sleep(1)
    bar = page.locator(".st-key-dm_hit_chart .bars .point path").nth(2)
    rank = bar.evaluate("el => el.parentNode.__data__.x")
    bar.scroll_into_view_if_needed()
    card_id = f"src-hits-{rank}"
    state = _click_bar_until_lit(page, page.locator(".st-key-dm_hit_chart").first, bar, card_id)
    assert state["top"] < state["height"] and state["bottom"] > 0, f"the card was not scrolled into view: {state}"
    assert state.get("jumped") and state["shadow"] != "none" and state["lit"] == 1, state
    # what _click_bar_until_lit reads to tell a lost click from a slow one: a picked bar dims the others
    assert page.locator(".st-key-dm_hit_chart").first.evaluate(_SELECTION_SHOWN)
    _shot(page, page.locator(f"#{card_id}"), "kb_bar_jump.png")


def test_a_deep_link_to_traces_loads_that_page_directly(server, page):
    fresh = page.context.new_page()
    try:
        fresh.goto(server + "/traces", wait_until="domcontentloaded")
        fresh.wait_for_selector("text=What-if regrade", timeout=ANSWER_TIMEOUT_MS)
        fresh.wait_for_selector('[data-testid="stSidebar"] >> text=Knowledge bases', timeout=30_000)
        assert "/traces" in fresh.url
        assert fresh.locator('[data-testid="stSidebarNav"] >> text=auth').count() == 0
    finally:
        fresh.close()
