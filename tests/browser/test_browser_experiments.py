"""The Experiments page in a real browser: start a small experiment (three questions of the shipped demo
set, rule against agentic) on the demo KB, wait until it has run, and read the per-variant metrics and the
paired differences the page then shows.  Uses /usr/bin/chromium (tests/browser_support.py); skips, saying
why, only when it is missing.  Screenshots go to artifacts/ (git-ignored)."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from tests.browser_support import (
    ARTIFACTS, ROOT, browser_page, prepare_demo_home, require_chromium, streamlit_server,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PAGE_TIMEOUT_MS = 90_000
RUN_TIMEOUT_S = 240  # six offline runs; generous for a loaded 2-core machine
QUESTIONS = 3


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    require_chromium()
    from tests.ui.test_pages import demo_files

    base = tmp_path_factory.mktemp("browser-experiments")
    prepare_demo_home(base / "home", demo_files(base / "docs"), then=(
        "from docmind_core.accounts.users import LOCAL_USER; from docmind_core.workbench import Workbench; "
        f"Workbench(e, LOCAL_USER, 'cli').import_dataset('demo', {str(ROOT / 'data' / 'demo_labelled.jsonl')!r}, "
        "kb='demo')"))
    with streamlit_server(base / "home", base / "streamlit.log") as url:
        yield url


@pytest.fixture(scope="module")
def page(server):
    with browser_page() as pg:
        pg.goto(server + "/experiments", wait_until="domcontentloaded")
        pg.wait_for_selector("text=New experiment", timeout=PAGE_TIMEOUT_MS)
        yield pg


def _grid_text(frame) -> str:
    """The cells a dataframe shows (its grid is drawn on a canvas; the accessible table mirrors it)."""
    return frame.evaluate("el => Array.from(el.querySelectorAll('[role=\"gridcell\"], [role=\"columnheader\"], "
                          "td, th')).map(c => c.textContent).join(' | ')")


def _settled_table(page, *needles: str):
    """The dataframe holding every needle, once the page's script run has finished: while Streamlit reruns a
    page it keeps the previous run's elements on screen, so a table read mid-run can be the stale one."""
    page.wait_for_function(
        """(needles) => document.querySelector('[data-test-script-state="notRunning"]') !== null &&
               [...document.querySelectorAll('[data-testid="stDataFrame"]')].some(
                   el => needles.every(n => el.textContent.includes(n)))""",
        arg=list(needles), timeout=PAGE_TIMEOUT_MS)
    table = page.locator('[data-testid="stDataFrame"]')
    for needle in needles:
        table = table.filter(has_text=needle)
    return table.first


def test_an_experiment_runs_and_its_metrics_and_differences_appear(page):
    page.get_by_text("New experiment").click()
    form = page.locator('[data-testid="stForm"]', has_text="Create and run")
    form.wait_for(timeout=30_000)
    variants = form.locator("textarea").first  # the form's one text area: the variants
    # a loaded machine draws the widgets' skeletons first: wait for the value, do not read it at once
    expect(variants).to_have_value("rule:RULE_PLANNER\nagentic:AGENTIC", timeout=PAGE_TIMEOUT_MS)
    # the label as drawn: Markdown once swallowed the override syntax and showed "NAME:MODE"
    label = form.locator('[data-testid="stWidgetLabel"]', has_text="Variants, one per line").first.inner_text()
    assert "NAME:MODE[:key=value,...]" in label, label
    form.get_by_text("Also ask with the gold documents left out").click()  # three questions, six runs
    form.get_by_label("Questions (0 = all)").fill(str(QUESTIONS))
    form.get_by_role("button", name="Create and run").click()
    page.wait_for_selector('[data-testid="stAlertContentSuccess"] >> text=started', timeout=PAGE_TIMEOUT_MS)

    # the progress panel polls the runner; once the runs are done the page redraws the metrics by itself
    done = page.locator('[data-testid="stProgress"]', has_text=re.compile(r"done: 6 of 6 runs"))
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline and done.count() == 0:
        time.sleep(1.0)
    progress = page.locator('[data-testid="stProgress"]').first.inner_text() \
        if page.locator('[data-testid="stProgress"]').count() else "(no progress bar)"
    assert done.count() == 1, f"the experiment did not finish in {RUN_TIMEOUT_S} s: {progress}"
    assert "0 failed" in progress

    # wait for what is asserted, an interval over the three questions: the labels alone are also in the table
    # drawn before any run was done (every metric n/a), which can still be on screen
    metrics = _settled_table(page, "gold-in-context recall", "measured on", "agentic", "(n=3)")
    cells = _grid_text(metrics)
    assert "rule" in cells and "agentic" in cells
    assert re.search(r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\] \(n=3\)", cells), cells  # an interval over 3 questions
    metrics.evaluate("el => el.scrollIntoView({block: 'start'})")
    page.screenshot(path=str(ARTIFACTS / "experiment_metrics.png"))

    diffs = _settled_table(page, "B − A", "abstention accuracy")
    diff_cells = _grid_text(diffs)
    assert "rule" in diff_cells and "agentic" in diff_cells and "abstention accuracy" in diff_cells
    diffs.evaluate("el => el.scrollIntoView({block: 'start'})")
    page.screenshot(path=str(ARTIFACTS / "experiment_differences.png"))
