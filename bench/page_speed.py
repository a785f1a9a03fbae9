"""Page speed in a real browser: first page interactive after server start, page switch, deep link, first
offline answer on the demo KB (issue 15 targets: 3 s / 1 s / 2 s); with sign-in on, the sign-in form's first
paint, the reload of a signed-in page and the reopening of a conversation (issue 23: something meaningful on
screen within 1 s of any navigation).

    .venv/bin/python bench/page_speed.py [--rounds 3] [--servers 3] [--json]
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

With sign-in on (a second server per round, over a home with the demo KB, an admin and a conversation of four
answered questions):

* sign-in form: from the page request that the fresh server first answers to the form drawn (``first paint``:
  the first element of the app drawn, whatever it is);
* signed-in reload: a reload of the Chat page to something meaningful (the list of pages and who is signed in)
  and to interactive (median over --rounds);
* reopen: picking the conversation in the sidebar to its first message, to all eight messages and to
  interactive (median over --rounds).

``--servers N`` starts N servers of each kind and reports the median of each figure across them.

``--floor`` also starts, in the same turns, a bare Streamlit app of two elements (a title and a chat input)
the same way and times its first page and its first paint: the host's floor, which no Streamlit app can beat.
DocMind's figures are printed against it (DocMind / floor), which is what this code can still change.
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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.browser_support import (  # noqa: E402
    CHROMIUM, CHROMIUM_ARGS, free_port, home_env, require_chromium,
)

TARGETS_S = {"first_page": 3.0, "page_switch": 1.0, "first_answer": 2.0, "first_paint": 1.0}
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


PASSWORD = "correct horse battery"
CONVERSATION = "demo talk"
CONVERSATION_QUESTIONS = ["What is the maximum power draw of the Nimbus N2?", "Aurora 默认的数据保留期是多久？",
                          "What did Nimbus firmware 3.2.1 fix?", "How much does the Nimbus N1 cost?"]
SIGNED_IN_HOME = (  # the demo KB, the admin alice, one conversation of four answers, then sign-in on
    "import sys; from docmind_core.engine import Engine; from docmind_core.accounts.users import LOCAL_USER, UserStore; "
    "from docmind_core.workbench import Workbench; e = Engine.open(warm=False); "
    "a = UserStore(e.db).add('alice', sys.argv[1], role='admin'); w = Workbench(e, a); "
    "kb = w.create_kb('demo'); out = w.ingest(kb.id, sys.argv[3:]); assert all(o.status != 'failed' for o in out); "
    f"c = w.start_conversation({CONVERSATION!r}); "
    "[list(w.ask(q, [kb.id], conversation_id=c)) for q in sys.argv[2].split('|')]; "
    "Workbench(e, LOCAL_USER).set_config({'auth.enabled': True})")
FIRST_PAINT = '[data-testid="stMainBlockContainer"] [data-testid="stElementContainer"]'  # any element of the app drawn
SIGNED_IN_FRAME = '[data-testid="stSidebar"] >> text=Signed in as'


def wait_interactive(page, selector: str) -> None:
    page.wait_for_selector(selector, timeout=TIMEOUT_MS)
    script_idle(page)


def start_server(code: Path, home: Path, port: int, log) -> subprocess.Popen:
    # the server process `docmind serve` starts (docmind_ui.serve: Streamlit with the core loaded as soon as it
    # listens); a tree without it, and the floor's bare app, are started with `streamlit run`
    server = ["docmind_ui.serve"] if (code / "docmind_ui" / "serve.py").is_file() else ["streamlit", "run"]
    return subprocess.Popen(
        [sys.executable, "-m", *server, "app.py", "--server.headless", "true",
         "--server.address", "127.0.0.1", "--server.port", str(port), "--browser.gatherUsageStats",
         "false", "--server.fileWatcherType", "none"], cwd=code, env=tree_env(home, code), stdout=log,
        stderr=subprocess.STDOUT)


def first_request(page, url: str, proc: subprocess.Popen) -> float:
    """Request the app until the fresh server answers; returns the perf_counter() of the answered request."""
    from playwright.sync_api import Error as PlaywrightError

    deadline = time.time() + TIMEOUT_MS / 1000
    while True:
        asked = time.perf_counter()
        try:
            page.goto(url, wait_until="commit", timeout=5_000)
            return asked
        except PlaywrightError:
            if time.time() > deadline or proc.poll() is not None:
                raise
            time.sleep(0.05)


def tree_env(home: Path, code: Path) -> dict[str, str]:
    """The browser tests' environment, with ``code`` as the DocMind code that runs, and Python allowed to keep
    its compiled modules as under ``make run`` (the Makefile unsets PYTHONDONTWRITEBYTECODE)."""
    return {**home_env(home), "PYTHONPATH": str(code), "PYTHONDONTWRITEBYTECODE": ""}


@contextmanager
def served(code: Path, home: Path, log_path: Path) -> Iterator[tuple]:
    """A browser page, and a fresh ``streamlit run app.py`` of ``code`` over ``home`` on a free port; yields
    (page, url, server process, perf_counter() just before the server was launched); both are stopped after."""
    from playwright.sync_api import sync_playwright

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with sync_playwright() as pw, open(log_path, "wb") as log:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1500, "height": 1100}).new_page()
        started = time.perf_counter()
        proc = start_server(code, home, port, log)
        try:
            yield page, url, proc, started
        finally:
            browser.close()
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def measure(rounds: int, code: Path = ROOT) -> dict:
    """One server over a fresh demo home, running the DocMind code in ``code`` (this tree by default)."""
    results: dict = {"targets_s": TARGETS_S}
    with tempfile.TemporaryDirectory(prefix="docmind-page-speed-") as tmp:
        home = Path(tmp) / "home"
        # the home is made by the code measured (an older revision may not read a newer schema)
        subprocess.run([sys.executable, "-c", INGEST, *demo_files()], env=tree_env(home, code), cwd=code,
                       check=True, timeout=300)
        with served(code, home, Path(tmp) / "streamlit.log") as (page, url, proc, started):
            first_request(page, url, proc)
            wait_interactive(page, PAGES["Chat"][1])
            results["first_page_s"] = round(time.perf_counter() - started, 2)

            switches: dict[str, list[float]] = {}
            titles: dict[str, list[float]] = {}  # the new page's title on screen: something meaningful
            for _ in range(rounds):
                for label in ["Config", "Traces", "Knowledge bases", "Experiments", "Chat"]:
                    t = time.perf_counter()
                    page.get_by_role("link", name=label).click()
                    page.wait_for_selector(f"h1:has-text('{label}')", timeout=TIMEOUT_MS)
                    titles.setdefault(label, []).append(time.perf_counter() - t)
                    wait_interactive(page, PAGES[label][1])
                    switches.setdefault(label, []).append(time.perf_counter() - t)
            results["page_switch_s"] = {k: round(statistics.median(v), 2) for k, v in switches.items()}
            results["page_switch_max_s"] = round(max(v for vs in switches.values() for v in vs), 2)
            results["page_switch_all_s"] = {k: [round(x, 2) for x in v] for k, v in switches.items()}
            results["page_title_max_s"] = round(max(v for vs in titles.values() for v in vs), 2)
            results["page_title_all_s"] = {k: [round(x, 2) for x in v] for k, v in titles.items()}

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
                page.wait_for_function(f"document.querySelectorAll('.dm-verdict').length >= {n}",
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
    results["met"] = {
        "first_page": results["first_page_s"] <= TARGETS_S["first_page"],
        "page_switch": results["page_switch_max_s"] <= TARGETS_S["page_switch"],
        "first_answer": results["first_answer_s"] <= TARGETS_S["first_answer"],
    }
    return results


def script_idle(page) -> None:
    page.wait_for_function("() => { const app = document.querySelector('[data-testid=\"stApp\"]');"
                           " return app && app.getAttribute('data-test-script-state') === 'notRunning'; }",
                           timeout=TIMEOUT_MS)


def measure_signed_in(rounds: int, code: Path = ROOT) -> dict:
    """Sign-in on: the form's first paint on a fresh server, signed-in reloads, reopening a conversation."""
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="docmind-page-speed-auth-") as tmp:
        home = Path(tmp) / "home"
        subprocess.run([sys.executable, "-c", SIGNED_IN_HOME, PASSWORD, "|".join(CONVERSATION_QUESTIONS),
                        *demo_files()], env=tree_env(home, code), cwd=code, check=True, timeout=600)
        with served(code, home, Path(tmp) / "streamlit.log") as (page, url, proc, started):
            asked = first_request(page, url, proc)
            page.wait_for_function(  # a visible one: an emptied placeholder is an element with no size
                f"[...document.querySelectorAll('{FIRST_PAINT}')].some(e => e.offsetHeight > 0)",
                timeout=TIMEOUT_MS)
            results["sign_in_first_paint_s"] = round(time.perf_counter() - asked, 2)
            page.wait_for_selector('button:has-text("Sign in")', timeout=TIMEOUT_MS)
            results["sign_in_form_s"] = round(time.perf_counter() - asked, 2)
            results["sign_in_form_after_start_s"] = round(time.perf_counter() - started, 2)
            page.get_by_role("textbox", name="User name").fill("alice")
            page.get_by_role("textbox", name="Password").fill(PASSWORD)
            t = time.perf_counter()
            page.locator('button:has-text("Sign in")').click()
            wait_interactive(page, PAGES["Chat"][1])
            results["sign_in_to_chat_s"] = round(time.perf_counter() - t, 2)

            reloads: dict[str, list[float]] = {"frame": [], "interactive": []}
            for _ in range(rounds):
                t = time.perf_counter()
                page.reload(wait_until="commit")
                page.wait_for_selector(SIGNED_IN_FRAME, timeout=TIMEOUT_MS)
                reloads["frame"].append(time.perf_counter() - t)
                wait_interactive(page, PAGES["Chat"][1])
                reloads["interactive"].append(time.perf_counter() - t)
            results["reload_frame_s"] = round(statistics.median(reloads["frame"]), 2)
            results["reload_interactive_s"] = round(statistics.median(reloads["interactive"]), 2)
            results["reload_all_s"] = {k: [round(x, 2) for x in v] for k, v in reloads.items()}

            reopens: dict[str, list[float]] = {"first_message": [], "all_messages": [], "interactive": []}
            messages = 2 * len(CONVERSATION_QUESTIONS)
            for _ in range(rounds):
                page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').last.click()
                t = time.perf_counter()
                page.get_by_role("option", name=CONVERSATION).first.click()
                page.wait_for_selector('[data-testid="stChatMessage"]', timeout=TIMEOUT_MS)
                reopens["first_message"].append(time.perf_counter() - t)
                page.wait_for_function(f"document.querySelectorAll('[data-testid=\"stChatMessage\"]')"
                                       f".length >= {messages}", timeout=TIMEOUT_MS)
                reopens["all_messages"].append(time.perf_counter() - t)
                script_idle(page)
                reopens["interactive"].append(time.perf_counter() - t)
                page.get_by_role("button", name="New conversation").click()
                page.wait_for_function("document.querySelectorAll('[data-testid=\"stChatMessage\"]')"
                                       ".length == 0", timeout=TIMEOUT_MS)
                script_idle(page)
            for key, values in reopens.items():
                results[f"reopen_{key}_s"] = round(statistics.median(values), 2)
            results["reopen_all_s"] = {k: [round(x, 2) for x in v] for k, v in reopens.items()}
    return results


FLOOR_APP = 'import streamlit as st\nst.title("DocMind")\nst.chat_input("Ask a question")\n'


def measure_floor() -> dict:
    """Streamlit's own floor on this host: a two-element app (a title and a chat input) started as DocMind is
    and timed the same way.  No app can be faster on this machine than Streamlit is; DocMind's figures read
    against these say what DocMind itself adds."""
    with tempfile.TemporaryDirectory(prefix="docmind-page-speed-floor-") as tmp:
        code = Path(tmp)
        (code / "app.py").write_text(FLOOR_APP, encoding="utf-8")
        with served(code, code / "home", code / "streamlit.log") as (page, url, proc, started):
            asked = first_request(page, url, proc)
            page.wait_for_function(
                f"[...document.querySelectorAll('{FIRST_PAINT}')].some(e => e.offsetHeight > 0)",
                timeout=TIMEOUT_MS)
            first_paint = time.perf_counter() - asked
            wait_interactive(page, PAGES["Chat"][1])
            return {"first_page_s": round(time.perf_counter() - started, 2), "first_paint_s": round(first_paint, 2)}


HEADLINES = {  # what a comparison reports: label -> how to read it from one measure()
    "first page interactive": lambda r: r["first_page_s"],
    "slowest page switch": lambda r: r["page_switch_max_s"],
    "page switch: new title drawn, slowest": lambda r: r.get("page_title_max_s", r["page_switch_max_s"]),
    "page switch to Config, slowest": lambda r: max(r["page_switch_all_s"]["Config"]),
    "deep link /config": lambda r: r["deep_link_s"]["Config"],
    "first answer (badge)": lambda r: r["first_answer_s"],
    "first answer's chart drawn": lambda r: r["answers"][0]["chart_s"],
}


def compare(revision: str, runs: int, rounds: int) -> dict:
    """This tree against ``revision``, measured in turns (both kinds of server); medians and ratios (this tree /
    revision).  The revision runs this file's measures over its own code."""
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="docmind-page-speed-rev-") as tmp:
        archive = subprocess.run(["git", "archive", revision], cwd=ROOT, check=True, capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        samples: dict[str, dict[str, list[dict]]] = {revision: {"off": [], "on": []}, "this tree": {"off": [], "on": []}}
        for _ in range(runs):
            for name, code in ((revision, Path(tmp)), ("this tree", ROOT)):
                samples[name]["off"].append(measure(rounds, code))
                samples[name]["on"].append(measure_signed_in(rounds, code))
    table = {}
    for kind, headlines in (("off", {**HEADLINES}), ("on", SIGNED_IN_HEADLINES)):
        for label, read in headlines.items():
            before = statistics.median(read(r) for r in samples[revision][kind])
            after = statistics.median(read(r) for r in samples["this tree"][kind])
            table[label] = {"revision_s": round(before, 2), "this_tree_s": round(after, 2),
                            "ratio": round(after / before, 2) if before else None,
                            "revision_all_s": [round(read(r), 2) for r in samples[revision][kind]],
                            "this_tree_all_s": [round(read(r), 2) for r in samples["this tree"][kind]]}
    return {"against": revision, "runs": runs, "load_average_start": load_start,
            "load_average": os.getloadavg(), "measures": table}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="page switches per page (median reported)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--against", metavar="REV", help="also measure this git revision, in turns with this tree")
    parser.add_argument("--runs", type=int, default=3, help="servers started per tree with --against")
    parser.add_argument("--servers", type=int, default=1,
                        help="servers of each kind (sign-in off, on) started; the median of each figure is printed")
    parser.add_argument("--only", choices=["sign-in-off", "sign-in-on"], help="measure one kind of server only")
    parser.add_argument("--floor", action="store_true",
                        help="also time a two-element Streamlit app started the same way (as many servers, in turns): "
                             "the host's floor for the first page and the first paint")
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
        print(f"this tree against {args.against}, {args.runs} servers of each kind each, in turns (medians; load "
              f"average at the start {report['load_average_start'][0]:.1f}, at the end "
              f"{report['load_average'][0]:.1f}):")
        for label, row in report["measures"].items():
            print(f"{label:<42} {row['revision_s']:>5.2f} s -> {row['this_tree_s']:>5.2f} s  ratio "
                  f"{row['ratio']}  ({row['revision_all_s']} -> {row['this_tree_all_s']})")
        return
    report = measure_servers(max(1, args.servers), max(1, args.rounds), args.only, floor=args.floor)
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=2))
        return
    print(f"{report['servers']} server(s) of each kind; medians across them; load average at the start "
          f"{report['load_average_start'][0]:.1f}, at the end {report['load_average_end'][0]:.1f}")
    for label, row in report["medians"].items():
        target = TARGETS_S.get(HEADLINE_TARGETS.get(label, ""))
        print(f"{label:<40} {row['median_s']:>5.2f} s{f' (target {target} s)' if target else ''}  {row['all_s']}")
    for label, row in report.get("floor", {}).items():
        ours = report["medians"].get(row["docmind"], {}).get("median_s")
        versus = f"  DocMind / floor {ours / row['median_s']:.2f}" if ours and row["median_s"] else ""
        print(f"floor (bare Streamlit): {label:<24} {row['median_s']:>5.2f} s  {row['all_s']}{versus}")


HEADLINE_TARGETS = {"first page interactive": "first_page", "sign-in form drawn (after the request)": "first_paint",
                    "page switch: new title drawn, slowest": "first_paint",
                    "signed-in reload: frame drawn": "first_paint", "reopen: first message": "first_paint",
                    "first answer (badge)": "first_answer", "slowest page switch": "page_switch"}
SIGNED_OUT_HEADLINES = {
    "first page interactive": lambda r: r["first_page_s"],
    "slowest page switch": lambda r: r["page_switch_max_s"],
    "page switch: new title drawn, slowest": lambda r: r.get("page_title_max_s", r["page_switch_max_s"]),
    "deep link /config": lambda r: r["deep_link_s"]["Config"],
    "first answer (badge)": lambda r: r["first_answer_s"],
}
SIGNED_IN_HEADLINES = {
    "sign-in: first paint (after the request)": lambda r: r["sign_in_first_paint_s"],
    "sign-in form drawn (after the request)": lambda r: r["sign_in_form_s"],
    "sign-in form drawn (after server start)": lambda r: r["sign_in_form_after_start_s"],
    "sign in -> Chat interactive": lambda r: r["sign_in_to_chat_s"],
    "signed-in reload: frame drawn": lambda r: r["reload_frame_s"],
    "signed-in reload: interactive": lambda r: r["reload_interactive_s"],
    "reopen: first message": lambda r: r["reopen_first_message_s"],
    "reopen: all messages": lambda r: r["reopen_all_messages_s"],
    "reopen: interactive": lambda r: r["reopen_interactive_s"],
}


FLOOR_HEADLINES = {  # label -> (how to read it from one measure_floor(), the DocMind headline it bounds)
    "first page interactive": (lambda r: r["first_page_s"], "first page interactive"),
    "first paint (after the request)": (lambda r: r["first_paint_s"], "sign-in: first paint (after the request)"),
}


def measure_servers(servers: int, rounds: int, only: str | None = None, code: Path = ROOT,
                    floor: bool = False) -> dict:
    """``servers`` servers of each kind, in turns; the median of each headline figure across them.  ``floor``:
    as many bare Streamlit servers too (``measure_floor``), in the same turns."""
    load_start = os.getloadavg()
    runs: dict[str, list[dict]] = {"sign-in-off": [], "sign-in-on": [], "floor": []}
    for _ in range(servers):
        if only in (None, "sign-in-off"):
            runs["sign-in-off"].append(measure(rounds, code))
        if only in (None, "sign-in-on"):
            runs["sign-in-on"].append(measure_signed_in(rounds, code))
        if floor:
            runs["floor"].append(measure_floor())
    medians = {}
    for kind, headlines in (("sign-in-off", SIGNED_OUT_HEADLINES), ("sign-in-on", SIGNED_IN_HEADLINES)):
        for label, read in headlines.items():
            values = [read(r) for r in runs[kind]]
            if values:
                medians[label] = {"median_s": round(statistics.median(values), 2), "all_s": values}
    floors = {}
    for label, (read, docmind) in FLOOR_HEADLINES.items():
        values = [read(r) for r in runs["floor"]]
        if values:
            floors[label] = {"median_s": round(statistics.median(values), 2), "all_s": values, "docmind": docmind}
    return {"servers": servers, "rounds": rounds, "load_average_start": load_start,
            "load_average_end": os.getloadavg(), "medians": medians, "floor": floors, "runs": runs}


if __name__ == "__main__":
    main()
