"""Are PDF facts answered, and is the cited page right?  Generated memos, offline engine, end to end.

    python bench/pdf_citations.py [--projects 16] [--seed 7] [--split report|fit|all]

Each project gets a three-page PDF memo (fpdf2) with a running header and footer, wrapped paragraphs of
filler, and four facts on pages drawn at random: its budget, its lead, its end date, and a table of
quarterly costs.  One fact in three is set to cross a page break, and one memo in three sets its second page
in two columns written line by line across both (as many generators do).  All memos go into one new KB of a
fresh engine home; each question ("What is the budget of Project Kestrel?") is asked with the offline engine
(``mode=rule``).  Measured per question:

* *answered*: the fact's value is in the reply;
* *page right*: the reply cites, on the line that states the value, a source whose place includes the
  fact's page (a fact across a break: either of its pages) and spans at most two pages;
* *HIGH wrong*: the reply lacks the value but its confidence is HIGH.

The projects are split by the hash of their name into "fit" and "report" halves; nothing was tuned on
either (the reading was built on the unit tests' own documents), and the report half is what is reported.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["ANONYMIZED_TELEMETRY"] = "False"

NAMES = ("Kestrel", "Osprey", "Heron", "Falcon", "Plover", "Curlew", "Merlin", "Harrier", "Bittern", "Dunlin",
         "Avocet", "Gannet", "Puffin", "Shrike", "Wryneck", "Siskin", "Linnet", "Redpoll", "Whimbrel", "Godwit")
PEOPLE = ("Mireille Okafor", "Tomasz Lindqvist", "Priya Raman", "Jonas Achterberg", "Keiko Tanabe", "Rafael Souza",
          "Ingrid Halvorsen", "Samuel Adeyemi", "Lucia Ferrante", "Oren Mizrahi", "Annika Berg", "Dmitri Volkov")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
FILLER = (
    "The steering group reviewed the risks of the migration and agreed that the old systems stay online until "
    "the last customer has moved.",
    "Training for the support staff is planned in small groups, so that the help desk stays open during the "
    "whole period of the change.",
    "Security reviews take place before each release, and any finding rated high must be closed before the "
    "next stage can start.",
    "The team keeps a shared log of decisions, which the auditors may read at any time without asking for "
    "permission first.",
    "Suppliers were asked to confirm their delivery dates in writing, and two of them have already done so "
    "for the first phase.",
    "Progress is reported in the monthly operations meeting, together with the open questions that need a "
    "decision from the board.",
)


@dataclass
class Fact:
    question: str
    value: str
    page: int
    crossing: bool


def _sentences(rng: random.Random, name: str) -> tuple[dict[str, str], dict[str, Fact]]:
    budget = f"{rng.randint(120, 980)},{rng.randint(0, 999):03d} EUR"
    lead = rng.choice(PEOPLE)
    end = f"{rng.randint(1, 28)} {rng.choice(MONTHS)} {rng.randint(2027, 2029)}"
    texts = {
        "budget": f"For the coming year the approved budget of Project {name} is {budget}, which covers "
                  f"contractors, licences and the hardware of the second data centre in full.",
        "lead": f"After the review in the spring the board confirmed that Project {name} is led by {lead}, "
                f"who reports on its progress to the steering group every month.",
        "end": f"Under the current plan the work on Project {name} ends on {end}, when the last of the old "
               f"systems is switched off and the contracts for them run out.",
    }
    facts = {"budget": Fact(f"What is the budget of Project {name}?", budget, 0, False),
             "lead": Fact(f"Who leads Project {name}?", lead, 0, False),
             "end": Fact(f"When does Project {name} end?", end, 0, False)}
    return texts, facts


def make_memo(path: Path, name: str, rng: random.Random) -> list[Fact]:
    from fpdf import FPDF

    texts, facts = _sentences(rng, name)
    q3 = f"{rng.randint(20, 90)},{rng.randint(0, 999):03d} EUR"
    costs = [["Quarter", "Cost", "Share of budget"]] + [
        [f"Q{q}", q3 if q == 3 else f"{rng.randint(20, 90)},{rng.randint(0, 999):03d} EUR", f"{rng.randint(10, 40)}%"]
        for q in range(1, 5)]
    facts["costs"] = Fact(f"How much did Project {name} cost in Q3?", q3, 0, False)
    pages: list[list[str]] = [[], [], []]
    for key in ("budget", "lead", "end", "costs"):
        facts[key].page = rng.randint(1, 3)
        pages[facts[key].page - 1].append(key)
    crossing = rng.choice(["budget", "lead", "end", None]) if rng.random() < 0.5 else None
    two_columns = rng.random() < 0.33

    class Memo(FPDF):
        def header(self) -> None:
            self.set_font("Helvetica", size=9)
            self.cell(0, 6, f"Project {name} - internal memo - confidential", new_x="LMARGIN", new_y="NEXT", align="C")
            self.ln(4)

        def footer(self) -> None:
            self.set_y(-15)
            self.set_font("Helvetica", size=9)
            self.cell(0, 8, f"Page {self.page_no()} of 3", align="C")

    pdf = Memo()
    pdf.set_auto_page_break(True, margin=22)
    for number, keys in enumerate(pages, start=1):
        if pdf.page < number:  # a sentence run on over a break has opened this page already
            pdf.add_page()
        pdf.set_font("Helvetica", size=11)
        paragraphs = [rng.choice(FILLER) + " " + rng.choice(FILLER) for _ in range(2)]
        for key in keys:
            if key == "costs":
                continue
            paragraphs.insert(rng.randint(0, len(paragraphs)), texts[key])
        if number == 2 and two_columns:
            _columns(pdf, paragraphs)
        else:
            for paragraph in paragraphs:
                if crossing and number < 3 and texts[crossing] == paragraph:
                    continue  # written at the end of the page below, over the break
                pdf.multi_cell(0, 6, paragraph, new_x="LMARGIN", new_y="NEXT")
                pdf.ln(3)
        if "costs" in keys:
            pdf.ln(2)
            for row in costs:
                for width, cell in zip((40, 40, 40), row):
                    pdf.cell(width, 8, cell, border=1)
                pdf.ln(8)
        if crossing and crossing in keys and number < 3 and not (number == 2 and two_columns):
            pdf.set_y(pdf.h - 22 - 7)  # one line left: the sentence runs on over the break
            pdf.multi_cell(0, 6, texts[crossing], new_x="LMARGIN", new_y="NEXT")
            pdf.ln(3)
            facts[crossing].crossing = True
    pdf.output(str(path))
    return list(facts.values())


def _columns(pdf, paragraphs: list[str]) -> None:
    column = (pdf.w - pdf.l_margin - pdf.r_margin - 10) / 2
    half = (len(paragraphs) + 1) // 2
    left = pdf.multi_cell(column, 6, " ".join(paragraphs[:half]), dry_run=True, output="LINES")
    right = pdf.multi_cell(column, 6, " ".join(paragraphs[half:]), dry_run=True, output="LINES")
    top = pdf.get_y()
    for row in range(max(len(left), len(right))):
        for lines, x in ((left, pdf.l_margin), (right, pdf.l_margin + column + 10)):
            if row < len(lines):
                pdf.set_xy(x, top + 6 * row)
                pdf.cell(column, 6, lines[row])
    pdf.set_y(top + 6 * max(len(left), len(right)) + 4)


def split_of(name: str) -> str:
    return "fit" if int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) % 2 == 0 else "report"


def _page_right(answer: str, value: str, fact: Fact, sources) -> bool:
    for line in answer.split("\n"):
        if value not in line:
            continue
        for n in map(int, re.findall(r"\[(\d+)\]", line)):
            if not 1 <= n <= len(sources):
                continue
            src = sources[n - 1]
            match = re.fullmatch(r"pp?\. (\d+)(?:–(\d+))?", src.location or "")
            if not match:
                continue
            first, last = int(match.group(1)), int(match.group(2) or match.group(1))
            pages = {fact.page, fact.page + 1} if fact.crossing else {fact.page}
            if last - first <= 1 and any(first <= p <= last for p in pages):
                return True
    return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--projects", type=int, default=16)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--split", choices=("report", "fit", "all"), default="report")
    parser.add_argument("--show", action="store_true", help="print each question that is missed, with its reply")
    args = parser.parse_args()

    from docmind_core.accounts.users import LOCAL_USER
    from docmind_core.engine import Engine
    from docmind_core.process import prepare_process
    from docmind_core.workbench import Workbench

    prepare_process()
    rng = random.Random(args.seed)
    names = [n for n in NAMES[:args.projects] if args.split == "all" or split_of(n) == args.split]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "memos"
        folder.mkdir()
        facts = {name: make_memo(folder / f"{name.lower()}_memo.pdf", name, rng) for name in NAMES[:args.projects]}
        engine = Engine.open(Path(tmp) / "home", env={}, warm=False)
        bench = Workbench(engine, LOCAL_USER)
        kb = bench.create_kb("memos")
        started = time.perf_counter()
        outcomes = bench.ingest(kb.id, sorted(folder.glob("*.pdf")))
        ingest_s = time.perf_counter() - started
        failed = [o for o in outcomes if o.status != "added"]
        if failed:
            raise SystemExit(f"ingest failed: {failed}")
        rows = []
        for name in names:
            for fact in facts[name]:
                done = list(bench.ask(fact.question, [kb.id], mode="rule"))[-1]
                answered = fact.value in done.answer
                band = done.confidence.band if done.confidence is not None else ""
                if args.show and not (answered and _page_right(done.answer, fact.value, fact, done.sources)):
                    print(f"-- {fact.question} want {fact.value!r} on p. {fact.page}{' (across)' * fact.crossing}\n"
                          f"{done.answer}\n   sources: {[s.cited_as for s in done.sources]}")
                rows.append((name, fact, answered, answered and _page_right(done.answer, fact.value, fact, done.sources),
                             not answered and str(band).lower() == "high"))
    kinds = ("budget", "lead", "end", "costs")
    print(f"{len(names)} projects ({args.split} split), {len(rows)} questions, ingest {ingest_s:.1f} s for "
          f"{args.projects} PDFs")
    for label, chosen in [("all", rows)] + [(k, [r for r in rows if r[1].question.split()[0:2] == _lead(k)])
                                             for k in kinds] + [("across a break", [r for r in rows if r[1].crossing])]:
        if not chosen:
            continue
        answered = sum(r[2] for r in chosen)
        right = sum(r[3] for r in chosen)
        print(f"  {label:<15} answered {answered}/{len(chosen)}  cited page right {right}/{answered or 1}"
              f"  HIGH wrong {sum(r[4] for r in chosen)}")


def _lead(kind: str) -> list[str]:
    return {"budget": ["What", "is"], "lead": ["Who", "leads"], "end": ["When", "does"], "costs": ["How", "much"]}[kind]


if __name__ == "__main__":
    main()
