"""An analyst's tuning session in one sitting, in a real browser: import a labelled set through the Experiments
page (a bad line first: the error names the uploaded file), run rule against agentic (one variant with an
override typed in the shown syntax) under a name, read the metrics, the per-question table and one question's
comparison, sweep the grader thresholds, apply the recommendation (the live row and the Config page show it),
run the experiment again and find the tier counts the sweep predicted.

The home starts with grader.high_threshold too lax (0.6), so that questions asked without their gold come
out HIGH: what an analyst tunes away.  Each
step asserts what the page says in words.  Uses /usr/bin/chromium (tests/browser_support.py); skips, saying
why, only when it is missing.  Screenshots go to artifacts/ (git-ignored)."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from docmind_core.settings import GRAY_ZONE_MODES
from tests.browser_support import (
    ARTIFACTS, ROOT, browser_page, prepare_demo_home, require_chromium, streamlit_server,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

FIXTURES = ROOT / "tests" / "fixtures" / "tuning_walk"
WAIT_MS = 120_000  # generous: the machine is shared, and a loaded page draws Plotly slowly
RUN_TIMEOUT_S = 300
START_HIGH = 0.6  # too lax: questions asked without their gold come out HIGH
# (with the asked-target check off: it keeps a left-out question's neighbouring fact from HIGH at any threshold,
# and the walk needs some to tune away)
ANSWERABLE, UNANSWERABLE = 3, 2  # walk_set.jsonl
RUNS = 2 * (ANSWERABLE + UNANSWERABLE + ANSWERABLE)  # two variants, each answerable one again without its gold
VARIANTS = "rule:RULE_PLANNER\nagentic:AGENTIC:grader.high_min_coverage=0.6"
RAW_FLOAT = re.compile(r"\d\.\d{5,}")  # what an analyst should never read: 0.43525922298431396
CODES = ("None", "nan", "-")
CODE = re.compile(r"\b[a-z]+_[a-z_]+\b")  # a reason code such as model_done (a gray-zone mode is a config value)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    require_chromium()
    from tests.ui.test_pages import demo_files

    base = tmp_path_factory.mktemp("browser-tuning-walk")
    prepare_demo_home(base / "home", demo_files(base / "docs"),
                      then=f"e.config.set_many({{'grader.high_threshold': {START_HIGH}, "
                           f"'grader.require_asked_target': False}}, by='walk')")
    with streamlit_server(base / "home", base / "streamlit.log") as url:
        yield url


def _settled(page) -> None:
    """Wait until the page's script run has finished: while Streamlit reruns a page the previous run's
    elements stay on screen."""
    page.wait_for_function("document.querySelector('[data-test-script-state=\"notRunning\"]') !== null",
                           timeout=WAIT_MS)


def _table(page, *needles: str):
    """The settled dataframe holding every needle (its grid is a canvas; its accessible table mirrors it)."""
    page.wait_for_function(
        """(needles) => document.querySelector('[data-test-script-state="notRunning"]') !== null &&
               [...document.querySelectorAll('[data-testid="stDataFrame"]')].some(
                   el => needles.every(n => el.textContent.includes(n)))""",
        arg=list(needles), timeout=WAIT_MS)
    table = page.locator('[data-testid="stDataFrame"]')
    for needle in needles:
        table = table.filter(has_text=needle)
    return table.first


def _rows(table) -> list[list[str]]:
    """The table's cells, row by row (header first), as the accessible grid gives them."""
    return table.evaluate("""el => [...el.querySelectorAll('[role="row"], tr')].map(
        r => [...r.querySelectorAll('[role="gridcell"], [role="columnheader"], td, th')].map(c => c.textContent.trim()))
        .filter(r => r.length)""")


def _record(table) -> list[dict[str, str]]:
    rows = _rows(table)
    header = rows[0]
    return [dict(zip(header, r)) for r in rows[1:]]


def _shot(page, locator, name: str) -> None:
    locator.evaluate("el => el.scrollIntoView({block: 'start'})")
    page.screenshot(path=str(ARTIFACTS / name))


def _wait_done(page, runs: int) -> str:
    done = page.locator('[data-testid="stProgress"]', has_text=f"done: {runs} of {runs} runs")
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline and done.count() == 0:
        page.wait_for_timeout(1000)  # polling the progress the page redraws by itself
    bar = page.locator('[data-testid="stProgress"]')
    text = bar.first.inner_text() if bar.count() else "(no progress bar)"
    assert done.count() == 1, f"the experiment did not finish in {RUN_TIMEOUT_S} s: {text}"
    assert "(0 failed)" in text and "ETA" not in text, text
    return text


def _upload(form, name: str) -> None:
    """Hand the import form one file; wait until the uploader lists it (a click before lands nothing)."""
    # while a rerun redraws the form, the previous run's uploader can stand beside the new one for a moment
    dropzone = form.locator('[data-testid="stFileUploaderDropzoneInput"]')
    deadline = time.monotonic() + WAIT_MS / 1000
    while dropzone.count() != 1 and time.monotonic() < deadline:
        time.sleep(0.25)
    dropzone.set_input_files(str(FIXTURES / name))
    form.locator('[data-testid="stFileUploader"]', has_text=name).wait_for(timeout=WAIT_MS)


def _predicted(text: str, rate: str) -> tuple[int, int]:
    """(count, of) after the arrow of one predicted rate: "<rate>: 0 of 6 runs (0.0%) → 3 of 6 runs (50.0%) ..." """
    line = next(ln for ln in text.splitlines() if ln.startswith(rate + ":"))
    match = re.search(r"→ (\d+) of (\d+) runs", line)
    assert match, line
    return int(match.group(1)), int(match.group(2))


def _tier_counts(page, variants: int) -> dict[str, dict[str, int]]:
    """answerability row -> tier -> runs, summed over the variants' tier-confusion tables."""
    _table(page, "answerability", "unanswerable")
    # one table per variant, drawn one after the other: under load the second can come a while after the first
    found = page.locator('[data-testid="stDataFrame"]').filter(has_text="answerability")
    deadline = time.monotonic() + WAIT_MS / 1000
    while found.count() < variants and time.monotonic() < deadline:
        time.sleep(0.25)
    tables = found.all()
    assert len(tables) == variants, len(tables)
    total: dict[str, dict[str, int]] = {}
    for table in tables:
        for row in _record(table):
            cells = total.setdefault(row["answerability"], {})
            for tier in ("HIGH", "AMBIGUOUS", "LOW", "none"):
                cells[tier] = cells.get(tier, 0) + int(row[tier])
    return total


def test_an_analyst_imports_runs_reads_sweeps_applies_and_reruns(server):
    started = time.monotonic()
    with browser_page() as page:
        page.set_default_timeout(WAIT_MS)
        page.goto(server + "/experiments", wait_until="domcontentloaded")
        page.wait_for_selector("text=Labelled questions", timeout=WAIT_MS)

        # -- 1. import: a bad line is refused naming the uploaded file, then the good set lands ----------------
        form = page.locator('[data-testid="stForm"]', has_text="Dataset name")
        _upload(form, "walk_bad.jsonl")
        form.get_by_role("button", name="Import").click()
        error = page.locator('[data-testid="stAlertContentError"]', has_text="line 2")
        error.wait_for(timeout=WAIT_MS)
        assert "walk_bad.jsonl line 2" in error.inner_text(), error.inner_text()
        _settled(page)  # the error is drawn before the run that draws it has finished
        _upload(form, "walk_set.jsonl")
        form.get_by_label("Dataset name").fill("demo walk")
        form.get_by_role("button", name="Import").click()
        page.wait_for_selector('[data-testid="stAlertContentSuccess"] >> text=Imported 5 questions as demo walk',
                               timeout=WAIT_MS)
        # the list above the form counts it at once (it said "Datasets (0)" until the next rerun)
        page.get_by_text("Datasets (1)").wait_for(timeout=WAIT_MS)
        _settled(page)  # a click while the import's rerun still draws can land on an element being replaced

        # -- 2. run: rule against agentic with an override, under a name -----------------------------------
        page.get_by_text("New experiment").click()
        form = page.locator('[data-testid="stForm"]', has_text="Create and run")
        variants = form.locator("textarea").first
        expect(variants).to_have_value("rule:RULE_PLANNER\nagentic:AGENTIC", timeout=WAIT_MS)
        syntax = form.locator('[data-testid="stWidgetLabel"]', has_text="Variants, one per line").first
        assert "NAME:MODE[:key=value,...]" in syntax.inner_text()
        expect(form.get_by_label("Also ask with the gold documents left out")).to_be_checked()
        form.get_by_label("Experiment name (empty: the dataset and variant names)").fill("strict start")
        variants.fill(VARIANTS)
        expect(variants).to_have_value(VARIANTS, timeout=WAIT_MS)
        _settled(page)
        form.get_by_role("button", name="Create and run").click()
        page.wait_for_selector('[data-testid="stAlertContentSuccess"] >> text=Experiment #1 was started',
                               timeout=WAIT_MS)
        expect(page.get_by_role("combobox", name="Experiment", exact=True)).to_have_value("#1 strict start")
        _wait_done(page, RUNS)

        # -- 3. read: description, metrics, per-question table, one question's comparison ---------------------
        description = page.locator('[data-testid="stCaptionContainer"]', has_text="Variants: rule").first
        words = description.inner_text()
        assert "rule: RULE_PLANNER; agentic: AGENTIC, grader.high_min_coverage=0.6" in words, words
        assert f"grader.high_threshold={START_HIGH}" in words and "gold documents left out" in words, words
        metrics = _table(page, "gold-in-context recall", "agentic", f"(n={ANSWERABLE})")
        assert re.search(r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\] \(n=3\)", metrics.text_content())
        ops = _table(page, "stop reasons", "AGENTIC")
        ops_rows = {r["variant"]: r for r in _record(ops)}
        assert ops_rows["agentic"]["mode"] == "AGENTIC" and ops_rows["rule"]["mode"] == "RULE_PLANNER"
        assert "model stopped searching" in ops_rows["agentic"]["stop reasons"], ops_rows["agentic"]
        _table(page, "B − A", "abstention accuracy")
        questions = _table(page, "gold left out", "evidence grade · rule", "evidence grade · agentic")
        rows = _record(questions)
        assert len(rows) == ANSWERABLE + UNANSWERABLE + ANSWERABLE, rows
        assert {r["contains · rule"] for r in rows} <= {"yes", "no", "n/a"}, rows
        for table in page.locator('[data-testid="stDataFrame"]').all():
            cells = [c for row in _rows(table) for c in row]
            bad = [c for c in cells if RAW_FLOAT.search(c) or c in CODES
                   or (CODE.search(c) and c not in GRAY_ZONE_MODES)]
            assert not bad, (bad, cells)
        _shot(page, questions, "walk_questions.png")
        # the first question asked without its gold: the second row
        box = questions.bounding_box()
        header = page.locator('[data-testid="stMarkdownContainer"]', has_text="Gold left out:")
        for _ in range(3):  # a click before the grid listens is lost on a busy machine
            page.mouse.click(box["x"] + 16, box["y"] + 35 + 35 + 17)
            try:
                header.first.wait_for(timeout=30_000)
                break
            except Exception:  # noqa: BLE001 - clicked too early: click the row again
                continue
        said = header.first.inner_text()
        first = rows[1]
        assert f"Question (item #{first['item']}): {first['question']}" in said, said
        assert "Gold left out: yes: asked without its gold documents" in said, said
        page.get_by_text("Comparison — A: rule · B: agentic").wait_for(timeout=WAIT_MS)
        _shot(page, header.first, "walk_comparison.png")

        # -- 4. sweep: the objective in one line, the predicted change of both rates above the floor ---------
        page.get_by_text("f1 (chosen): F1 of HIGH on answerable questions").wait_for(timeout=WAIT_MS)
        best = _table(page, "recommended", "not HIGH on unanswerable")
        points = {r[""]: r for r in _record(best)}
        assert float(points["live"]["high"]) == pytest.approx(START_HIGH), points
        high = float(points["recommended"]["high"])
        assert high > START_HIGH, points  # too lax: the sweep raises it
        assert not any(RAW_FLOAT.search(c) for r in points.values() for c in r.values()), points
        assert points["live"]["recall"].endswith("%"), points
        reason = page.get_by_text("The best f1 among points keeping unanswerable questions not HIGH in at least "
                                  "90% of their runs.")
        reason.wait_for(timeout=WAIT_MS)
        change = page.locator('[data-testid="stMarkdownContainer"]', has_text="Predicted change if applied")
        prediction = change.first.inner_text()
        positives_high, positives = _predicted(prediction, "answerable with gold in context: HIGH")
        unanswerable_not_high, unanswerable = _predicted(prediction, "unanswerable: not HIGH")
        assert unanswerable_not_high / unanswerable >= 0.9, prediction  # the safety floor holds
        assert positives_high > 0, prediction
        _shot(page, best, "walk_sweep.png")

        # -- 5. apply: the live row is the recommendation at once; the Config page holds it --------------------
        page.get_by_role("button", name=re.compile("Apply recommended thresholds")).click()
        page.get_by_text(f"Applied grader.high_threshold = {points['recommended']['high']}").wait_for(
            timeout=WAIT_MS)
        live = {r[""]: r for r in _record(_table(page, "live", "not HIGH on unanswerable"))}["live"]
        assert (live["high"], live["low"], live["mode"]) == (points["recommended"]["high"],
                                                             points["recommended"]["low"],
                                                             points["recommended"]["mode"]), live
        page.get_by_role("link", name="Config").click()
        high_box = page.get_by_label("high_threshold", exact=True)
        expect(high_box).to_have_value(f"{high:.3f}", timeout=WAIT_MS)
        expect(page.get_by_label("low_threshold", exact=True)).to_have_value(
            f"{float(points['recommended']['low']):.3f}", timeout=WAIT_MS)

        # -- 6. run again: the tier counts are those the sweep predicted ------------------------------------
        page.get_by_role("link", name="Experiments").click()
        page.get_by_text("Run again").first.wait_for(timeout=WAIT_MS)
        page.get_by_text("Run again").first.click()
        again = page.locator('[data-testid="stForm"]', has_text="Run again with")
        again.get_by_label("Name of the new experiment").fill("after tuning")
        again.get_by_role("button", name=re.compile("Run again with")).click()
        expect(page.get_by_role("combobox", name="Experiment", exact=True)).to_have_value(
            "#2 after tuning", timeout=WAIT_MS)
        _wait_done(page, RUNS)
        description = page.locator('[data-testid="stCaptionContainer"]', has_text="Variants: rule").first
        assert f"grader.high_threshold={high}" in description.inner_text(), description.inner_text()
        _table(page, "gold-in-context recall", "agentic", f"(n={ANSWERABLE})")
        _settled(page)
        counts = _tier_counts(page, 2)
        measured_high = counts["answerable, gold in context"]["HIGH"]
        measured_positives = sum(counts["answerable, gold in context"].values())
        row = counts["unanswerable"]
        measured_unanswerable = sum(row.values())
        assert (measured_high, measured_positives) == (positives_high, positives), (counts, prediction)
        assert (measured_unanswerable - row["HIGH"], measured_unanswerable) == (unanswerable_not_high,
                                                                                 unanswerable), (counts, prediction)
        _shot(page, page.get_by_text("Evidence grade confusion").first, "walk_rerun_tiers.png")
    print(f"tuning walk: {time.monotonic() - started:.0f} s")
