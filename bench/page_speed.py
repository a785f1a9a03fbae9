"""Page speed in a real browser: first page interactive after server start, page switch, deep link, first
offline answer on the demo KB (issue 15 targets: 3 s / 1 s / 2 s).

    .venv/bin/python bench/page_speed.py [--rounds 3] [--json]
    .venv/bin/python bench/page_speed.py --against REV [--runs 3]   # this tree against a git revision

With ``--against``, the revision's code (``git archive``, into a temporary folder, run with this venv) and this
tree are measured in turns, ``--runs`` times each, and the medians and their ratio (this tree / the revision)
are printed: on a shared machine the load changes from minute to minute, so only a ratio measured in one run
means something.

Uses Debian's chromium through playwright (never `playwright install`) and `streamlit run app.py` on a free
loopback port over a fresh home with the demo corpus ingested (in its own process, before the server starts),
the same way the browser tests do (tests/browser_support.py).

"Interactive" means the page's own last element is drawn AND Streamlit reports the script run finished
(``data-test-script-state="notRunning"`` on the app root), so a page that is still rendering does not count.

* first page: from launching the server process to the Chat page interactive in a browser that was already
  open (the browser's own start is not counted); the first request is retried until the server answers;
* page switch: a click on a navigation link to that page interactive (median over --rounds per page);
* deep link: a new tab opening /traces (and /config) by URL to interactive;
* first answer: Enter on a demo question to its CRAG badge drawn, to its score chart's element arriving and
  to the chart drawn by plotly.js (the first question of the server, then a second one).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.browser_support import (  # noqa: E402
    CHROMIUM, CHROMIUM_ARGS, free_port, home_env, require_chromium,
)

TARGETS_S = {"first_page": 3.0, "page_switch": 1.0, "first_answer": 2.0}
PAGES = {  # navigation label -> URL path, and an element drawn last on that page
    "Chat": ("", '[data-testid="stChatInputTextArea"]'),
    "Knowledge bases": ("knowledge_bases", "text=Hit testing"),
    "Config": ("config", "text=Change history"),
    "Traces": ("traces", "text=What-if regrade"),
    "Experiments": ("experiments", "h1:has-text('Experiments')"),
}
QUESTIONS = ["What is the maximum power draw of the Nimbus N2?", "Nimbus 的默认管理地址是什么？"]
TIMEOUT_MS = 120_000
ANSWER_CHART = '[class*=\\"st-key-run-\\"] [data-testid=\\"stPlotlyChart\\"]'  # not the hidden preload chart

INGEST = ("import sys; from docmind_core.engine import Engine; e = Engine.open(warm=False); "
          "kb = e.create_kb('demo', 'Demo corpus: the fictional Aurora and Nimbus products'); "
          "out = e.ingest(kb.id, sys.argv[1:]); assert all(o.status != 'failed' for o in out), out")


def demo_files() -> list[str]:
    skip = {"QUESTIONS.md", "README.md"}
    return [str(p) for p in sorted((ROOT / "data" / "demo").glob("*"))
            if p.is_file() and not p.name.startswith(".") and p.name not in skip]


def wait_interactive(page, selector: str) -> None:
    page.wait_for_selector(selector, timeout=TIMEOUT_MS)
    page.wait_for_function("() => { const app = document.querySelector('[data-testid=\"stApp\"]');"
                           " return app && app.getAttribute('data-test-script-state') === 'notRunning'; }",
                           timeout=TIMEOUT_MS)


def tree_env(home: Path, code: Path) -> dict[str, str]:
    """The browser tests' environment, with ``code`` as the DocMind code that runs."""
    return {**home_env(home), "PYTHONPATH": str(code)}


def measure(rounds: int, code: Path = ROOT) -> dict:
    """One server over a fresh demo home, running the DocMind code in ``code`` (this tree by default)."""
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    results: dict = {"targets_s": TARGETS_S}
    with tempfile.TemporaryDirectory(prefix="docmind-page-speed-") as tmp:
        home = Path(tmp) / "home"
        # the home is made by the code measured (an older revision may not read a newer schema)
        subprocess.run([sys.executable, "-c", INGEST, *demo_files()], env=tree_env(home, code), cwd=code,
                       check=True, timeout=300)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        with sync_playwright() as pw, open(Path(tmp) / "streamlit.log", "wb") as log:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_context(viewport={"width": 1500, "height": 1100}).new_page()
            started = time.perf_counter()
            proc = subprocess.Popen(
                [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
                 "--server.address", "127.0.0.1", "--server.port", str(port), "--browser.gatherUsageStats",
                 "false", "--server.fileWatcherType", "none"], cwd=code, env=tree_env(home, code), stdout=log,
                stderr=subprocess.STDOUT)
            try:
                deadline = time.time() + TIMEOUT_MS / 1000
                while True:
                    try:
                        page.goto(url, wait_until="domcontentloaded", timeout=5_000)
                        break
                    except PlaywrightError:
                        if time.time() > deadline or proc.poll() is not None:
                            raise
                        time.sleep(0.05)
                wait_interactive(page, PAGES["Chat"][1])
                results["first_page_s"] = round(time.perf_counter() - started, 2)

                switches: dict[str, list[float]] = {}
                for _ in range(rounds):
                    for label in ["Config", "Traces", "Knowledge bases", "Experiments", "Chat"]:
                        t = time.perf_counter()
                        page.get_by_role("link", name=label).click()
                        wait_interactive(page, PAGES[label][1])
                        switches.setdefault(label, []).append(time.perf_counter() - t)
                results["page_switch_s"] = {k: round(statistics.median(v), 2) for k, v in switches.items()}
                results["page_switch_max_s"] = round(max(v for vs in switches.values() for v in vs), 2)
                results["page_switch_all_s"] = {k: [round(x, 2) for x in v] for k, v in switches.items()}

                deep: dict[str, float] = {}
                for label in ["Traces", "Config"]:
                    tab = page.context.new_page()
                    t = time.perf_counter()
                    tab.goto(f"{url}/{PAGES[label][0]}", wait_until="domcontentloaded")
                    wait_interactive(tab, PAGES[label][1])
                    deep[label] = round(time.perf_counter() - t, 2)
                    tab.close()
                results["deep_link_s"] = deep

                answers = []
                for n, question in enumerate(QUESTIONS, start=1):
                    box = page.locator('[data-testid="stChatInputTextArea"]')
                    box.fill(question)
                    t = time.perf_counter()
                    box.press("Enter")
                    page.wait_for_function(f"document.querySelectorAll('.dm-tier').length >= {n}",
                                           timeout=TIMEOUT_MS)
                    badge = time.perf_counter() - t
                    page.wait_for_function(  # the chart's element has arrived from the server ...
                        f"document.querySelectorAll('{ANSWER_CHART}').length >= {n}",
                        timeout=TIMEOUT_MS)
                    element = time.perf_counter() - t
                    page.wait_for_function(  # ... and plotly.js has drawn it
                        f"document.querySelectorAll('{ANSWER_CHART} .main-svg').length >= {n}",
                        timeout=TIMEOUT_MS)
                    chart = time.perf_counter() - t
                    wait_interactive(page, PAGES["Chat"][1])
                    answers.append({"question": question, "answer_s": round(badge, 2),
                                    "chart_element_s": round(element, 2), "chart_s": round(chart, 2),
                                    "run_finished_s": round(time.perf_counter() - t, 2)})
                results["answers"] = answers
                results["first_answer_s"] = answers[0]["answer_s"]
            finally:
                browser.close()
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
    results["met"] = {
        "first_page": results["first_page_s"] <= TARGETS_S["first_page"],
        "page_switch": results["page_switch_max_s"] <= TARGETS_S["page_switch"],
        "first_answer": results["first_answer_s"] <= TARGETS_S["first_answer"],
    }
    return results


HEADLINES = {  # what a comparison reports: label -> how to read it from one measure()
    "first page interactive": lambda r: r["first_page_s"],
    "slowest page switch": lambda r: r["page_switch_max_s"],
    "page switch to Config, slowest": lambda r: max(r["page_switch_all_s"]["Config"]),
    "deep link /config": lambda r: r["deep_link_s"]["Config"],
    "first answer (badge)": lambda r: r["first_answer_s"],
    "first answer's chart drawn": lambda r: r["answers"][0]["chart_s"],
}


def compare(revision: str, runs: int, rounds: int) -> dict:
    """This tree against ``revision``, measured in turns; medians and ratios (this tree / revision)."""
    with tempfile.TemporaryDirectory(prefix="docmind-page-speed-rev-") as tmp:
        archive = subprocess.run(["git", "archive", revision], cwd=ROOT, check=True, capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        samples: dict[str, list[dict]] = {revision: [], "this tree": []}
        for _ in range(runs):
            samples[revision].append(measure(rounds, Path(tmp)))
            samples["this tree"].append(measure(rounds))
    table = {}
    for label, read in HEADLINES.items():
        before = statistics.median(read(r) for r in samples[revision])
        after = statistics.median(read(r) for r in samples["this tree"])
        table[label] = {"revision_s": round(before, 2), "this_tree_s": round(after, 2),
                        "ratio": round(after / before, 2) if before else None,
                        "revision_all_s": [round(read(r), 2) for r in samples[revision]],
                        "this_tree_all_s": [round(read(r), 2) for r in samples["this tree"]]}
    return {"against": revision, "runs": runs, "load_average": os.getloadavg(), "measures": table}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="page switches per page (median reported)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--against", metavar="REV", help="also measure this git revision, in turns with this tree")
    parser.add_argument("--runs", type=int, default=3, help="servers started per tree with --against")
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        sys.exit(f"{CHROMIUM} is missing; run scripts/browser_deps.sh (apt-get install chromium)")
    try:
        require_chromium()
    except BaseException as exc:  # pytest.skip outside pytest: say why and stop
        sys.exit(f"cannot run: {exc}")
    if args.against:
        report = compare(args.against, max(1, args.runs), max(1, args.rounds))
        if args.json:
            print(json.dumps(report, indent=2))
            return
        print(f"this tree against {args.against}, {args.runs} servers each, in turns (medians; load average "
              f"at the end {report['load_average'][0]:.1f}):")
        for label, row in report["measures"].items():
            print(f"{label:<32} {row['revision_s']:>5.2f} s -> {row['this_tree_s']:>5.2f} s  ratio "
                  f"{row['ratio']}  ({row['revision_all_s']} -> {row['this_tree_all_s']})")
        return
    results = measure(max(1, args.rounds))
    if args.json:
        print(json.dumps(results, ensure_ascii=False, indent=2))
        return
    print(f"first page interactive after server start: {results['first_page_s']:.2f} s "
          f"(target {TARGETS_S['first_page']} s)")
    for label, seconds in results["page_switch_s"].items():
        print(f"page switch to {label:<16} {seconds:.2f} s (median)")
    print(f"page switch, slowest of all:       {results['page_switch_max_s']:.2f} s (target "
          f"{TARGETS_S['page_switch']} s)")
    for label, seconds in results["deep_link_s"].items():
        print(f"deep link /{PAGES[label][0]:<15} {seconds:.2f} s")
    for a in results["answers"]:
        print(f"answer {a['question'][:40]!r}: badge {a['answer_s']:.2f} s, chart element "
              f"{a['chart_element_s']:.2f} s, chart drawn {a['chart_s']:.2f} s, "
              f"run finished {a['run_finished_s']:.2f} s")
    print(f"first offline answer: {results['first_answer_s']:.2f} s (target {TARGETS_S['first_answer']} s)")
    print("met: " + ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in results["met"].items()))


if __name__ == "__main__":
    main()
