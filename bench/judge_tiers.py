"""CRAG tiers with the model judge (grader.judge llm) against an OpenAI-compatible endpoint.

The runs are those of bench/grader_tiers.py (same splits, same retrieval, same offline grade; its code is
reused): each question asked as is ("answerable"; "gold in context" when every gold document is among the
graded chunks) and with its gold documents left out ("unanswerable").  Each graded run is then shown to the
model judge exactly as a DocMind run shows it (``ModelJudge.judge_evidence`` on the graded chunks, the verdict
combined with the lexical signals by ``judged_grade``), and the table is printed twice: the offline tier and
the judged tier.

Targets (issue 20): with the judge, answerable with gold in context -> HIGH >= 0.70 and unanswerable -> not
HIGH >= 0.90 (demo set, 1.5B model).  Also reported: the judge's latency per call, how many replies carried
log-probabilities, and how many calls failed (the offline tier then stands, as in a run).

Sets: the demo set (data/demo_labelled.jsonl, its files ingested into a temp home) and, when EVAL_DIR holds
them, the shared BEIR sets (cmrc2018, hotpotqa, scifact; ``--limit`` questions of the report split each).

Calls are slow on a small local model, so a run can be kept and re-read: ``--dump FILE`` keeps each run's
offline grade and the judge's verdict (with P(yes)); ``--replay FILE...`` recomputes both tables from dumps
under the thresholds given with ``--set`` (no call), and ``--sweep`` adds the grid of ``judge_yes_low`` /
``judge_yes_high`` over them: fit the thresholds on dumps of the fit split, then replay the report split and
the demo set under the chosen ones.  ``--decisive-only`` sends only the runs whose tier some verdict can
change (an offline LOW, or a gray zone too weak to lift, keeps its tier whatever the judge says).

Usage: python bench/judge_tiers.py --base-url http://127.0.0.1:8080/v1 --model qwen2.5-coder-1.5b-instruct
       [--eval-dir ../shared/eval] [--sets demo,cmrc2018,hotpotqa,scifact] [--split report] [--limit 20]
       [--timeout 120] [--set key=value ...] [--dump FILE.jsonl] [--decisive-only]
       python bench/judge_tiers.py --replay DUMP.jsonl [DUMP.jsonl ...] [--set key=value ...] [--sweep]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import grader_tiers  # noqa: E402  (bench/grader_tiers.py: the runs, the splits and the tables)

from docmind_core.answer.grade import judge_can_move, judged_grade  # noqa: E402
from docmind_core.answer.grade import chunk_score  # noqa: E402
from docmind_core.answer.judge import EVIDENCE_SOURCES, ModelJudge, settled_verdict, verdict_of  # noqa: E402
from docmind_core.answer.quote_check import check_quote  # noqa: E402
from docmind_core.backends.chat_openai import OpenAIChatModel  # noqa: E402
from docmind_core.backends.protocols import UsageMeter  # noqa: E402
from docmind_core.values import EvidenceVerdict, GradeResult, RetrievedChunk  # noqa: E402
from docmind_core.prompts import PromptLibrary  # noqa: E402
from docmind_core.settings import GraderSettings, Settings  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class JudgeCall:
    question: str
    offline_tier: str
    judged_tier: str
    verdict: str  # answers / partly / no, or "failed"
    p_yes: float | None
    scored_by: str
    latency_ms: float
    error: str = ""


class TimedJudge:
    """The regrade hook of grader_tiers: judge a graded run, remember the call, return the judged grade."""

    def __init__(self, judge: ModelJudge, settings: Settings, timeout_s: float, decisive_only: bool = False):
        self.judge = judge
        self.settings = settings
        self.timeout_s = timeout_s
        self.decisive_only = decisive_only
        self.not_asked = 0  # runs whose tier no verdict could change (--decisive-only)
        self.calls: list[JudgeCall] = []
        self.offline_tiers: list[str] = []  # one per graded run, judged or not (grader_tiers makes one row each)
        # the same runs: grade, verdict, question, the passages shown to the judge (for --replay's quote checks)
        self.verdicts: list[tuple[GradeResult, EvidenceVerdict | None, str, list]] = []

    def __call__(self, question: str, chunks: list, grade: GradeResult) -> GradeResult:
        self.offline_tiers.append(grade.tier.value)
        self.verdicts.append((grade, None, question, []))
        if not chunks:  # a run without evidence is not judged (nor is it in DocMind)
            return grade
        if self.decisive_only and not judge_can_move(grade, self.settings.grader):
            self.not_asked += 1
            return grade
        started = time.perf_counter()
        try:
            verdict = self.judge.judge_evidence(question, chunks, self.settings.grader, UsageMeter(), self.timeout_s)
        except Exception as exc:  # noqa: BLE001 - counted; the offline tier stands, as in a run
            self.calls.append(JudgeCall(question, grade.tier.value, grade.tier.value, "failed", None, "",
                                        _ms(started), f"{type(exc).__name__}: {exc}"))
            return grade
        judged = judged_grade(grade, verdict, self.settings.grader)
        self.verdicts[-1] = (grade, verdict, question, sorted(chunks, key=chunk_score, reverse=True)[:EVIDENCE_SOURCES])
        self.calls.append(JudgeCall(question, grade.tier.value, judged.tier.value, verdict.verdict, verdict.p_yes,
                                    verdict.scored_by, _ms(started)))
        return judged


def replayable(grade: GradeResult, verdict: EvidenceVerdict | None, question: str = "",
               shown: list | tuple = ()) -> dict:
    """What a dump keeps of a run so its judged tier can be recomputed under other thresholds (--replay): with
    the question and the passages the judge was shown, its quote is checked again under the replay's settings."""
    out = {"offline_grade": grade.model_dump(mode="json"),
           "verdict": verdict.model_dump(mode="json") if verdict is not None else None}
    if verdict is not None and shown:
        out["question"] = question
        out["shown"] = [{"text": c.text, "document": c.document} for c in shown]
    return out


def replay(record: dict, grader: GraderSettings) -> tuple[grader_tiers.RunRow, grader_tiers.RunRow]:
    """A dumped run (see ``replayable``) as (offline row, judged row) under ``grader``: P(yes) read against its
    thresholds as ``parse_evidence_reply`` reads it, then ``judged_grade``.  No call is made."""
    grade = GradeResult.model_validate(record["offline_grade"])
    row = grader_tiers.RunRow(**record["run"])
    offline = replace(row, tier=grade.tier.value)
    if record.get("verdict") is None:
        return offline, offline
    verdict = EvidenceVerdict.model_validate(record["verdict"])
    if verdict.p_yes is not None:
        verdict = verdict.model_copy(update={"verdict": verdict_of(verdict.p_yes, grader)})
    if record.get("shown"):  # dumps made before the quote check keep their verdict as it was read then
        shown = [RetrievedChunk(chunk_id=f"shown-{n}", kb_id=1, doc_id=1, document=s["document"], text=s["text"])
                 for n, s in enumerate(record["shown"], start=1)]
        if verdict.scored_by == "verbal" and verdict.stated:
            verdict = verdict.model_copy(update={"verdict": {"yes": "answers"}.get(verdict.stated, verdict.stated)})
        verdict = settled_verdict(verdict, check_quote(record["question"], verdict.reason, shown,
                                                       grader.judge_quote_min_coverage), grader)
    return offline, replace(row, tier=judged_grade(grade, verdict, grader).tier.value)


def rates(records: list[dict], grader: GraderSettings, floor: float = 0.90) -> dict:
    """The two rates of the judged tiers of ``records`` replayed under ``grader``."""
    rows = [replay(r, grader)[1] for r in records]
    unans = [r for r in rows if not r.answerable and not r.answer_in_evidence]  # as grader_tiers.table
    gic = [r for r in rows if r.answerable and r.gold_in_context]
    safe = sum(r.tier != "HIGH" for r in unans) / len(unans) if unans else 1.0
    recall = sum(r.tier == "HIGH" for r in gic) / len(gic) if gic else 0.0
    return {"unanswerable_not_high": round(safe, 3), "gold_in_context_high": round(recall, 3),
            "keeps_floor": safe >= floor, "n_unanswerable": len(unans), "n_gold_in_context": len(gic)}


def sweep_quote(records: list[dict], grader: GraderSettings, floor: float = 0.90) -> list[dict]:
    """``grader.judge_quote_min_coverage`` over a 0.1 grid (and the lift without a quote check), the P(yes)
    thresholds as given; best first by the rule of ``sweep`` (then the stricter coverage)."""
    out = [{"judge_lift_needs_quote": False, "judge_quote_min_coverage": None,
            **rates(records, grader.model_copy(update={"judge_lift_needs_quote": False}), floor)}]
    for step in range(11):
        theta = round(0.1 * step, 1)
        g = grader.model_copy(update={"judge_lift_needs_quote": True, "judge_quote_min_coverage": theta})
        out.append({"judge_lift_needs_quote": True, "judge_quote_min_coverage": theta, **rates(records, g, floor)})
    out.sort(key=lambda t: (not t["keeps_floor"], -t["gold_in_context_high"], -t["unanswerable_not_high"],
                            -(t["judge_quote_min_coverage"] if t["judge_quote_min_coverage"] is not None else 2)))
    return out


def sweep(records: list[dict], grader: GraderSettings, floor: float = 0.90) -> list[dict]:
    """Every (judge_yes_low, judge_yes_high) pair of a 0.05 grid over the dumped runs: the two rates, pooled,
    and whether "unanswerable -> not HIGH" stays at or above ``floor``; best first (most answerable runs with
    gold in context HIGH among the pairs that keep the floor, then the higher floor rate)."""
    grid = [round(0.05 * i, 2) for i in range(1, 20)]
    out = []
    for low in grid:
        for high in grid:
            if low >= high:
                continue
            g = grader.model_copy(update={"judge_yes_low": low, "judge_yes_high": high})
            out.append({"judge_yes_low": low, "judge_yes_high": high, **rates(records, g, floor)})
    # among equals, the widest "partly" band in the middle: the least confident reading of P(yes)
    out.sort(key=lambda t: (not t["keeps_floor"], -t["gold_in_context_high"], -t["unanswerable_not_high"],
                            -(t["judge_yes_high"] - t["judge_yes_low"]), abs(t["judge_yes_high"] + t["judge_yes_low"] - 1)))
    return out


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)


def latency_line(calls: list[JudgeCall]) -> str:
    if not calls:
        return "no judge calls"
    ms = sorted(c.latency_ms for c in calls)
    p90 = ms[min(len(ms) - 1, int(0.9 * len(ms)))]
    with_logprobs = sum(c.scored_by == "logprobs" for c in calls)
    failed = [c for c in calls if c.verdict == "failed"]
    verdicts = {v: sum(c.verdict == v for c in calls) for v in ("answers", "partly", "no")}
    line = (f"{len(calls)} judge calls: median {statistics.median(ms):.0f} ms, p90 {p90:.0f} ms; "
            f"scored by logprobs {with_logprobs}/{len(calls)}; verdicts {verdicts}; failed {len(failed)}")
    if failed:
        line += f" (first: {failed[0].error})"
    return line


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base-url", help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8080/v1")
    ap.add_argument("--model", default="")
    ap.add_argument("--api-key", default="not-needed")
    ap.add_argument("--eval-dir", type=Path, default=ROOT.parent / "shared" / "eval",
                    help="folder of the shared BEIR sets (skipped when absent)")
    ap.add_argument("--sets", default="demo,cmrc2018,hotpotqa,scifact")
    ap.add_argument("--split", choices=("fit", "report", "both"), default="report")
    ap.add_argument("--limit", type=int, default=20, help="questions per split per BEIR set (each gives two runs)")
    ap.add_argument("--demo-limit", type=int, default=None, help="demo questions (default: all 16)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per judge call")
    ap.add_argument("--cache", type=Path, default=Path("data/cache"), help="embedding cache folder")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--dump", type=Path, default=None, help="write every run and judge call as JSON lines")
    ap.add_argument("--decisive-only", action="store_true",
                    help="judge only runs whose tier a verdict can change (the others keep their tier either way; "
                         "saves calls on a slow server)")
    ap.add_argument("--replay", type=Path, nargs="+", default=None, metavar="DUMP",
                    help="no calls: the tables of earlier --dump files under the settings given (--set)")
    ap.add_argument("--sweep", action="store_true",
                    help="with --replay: the judge_yes_low / judge_yes_high grid over the dumped runs (fit only)")
    args = ap.parse_args()

    overrides = dict(o.split("=", 1) for o in args.overrides)
    settings = Settings().with_overrides(overrides) if overrides else Settings()
    if args.replay:
        replay_main(args.replay, settings, args.sweep)
        return
    if not args.base_url or not args.model:
        ap.error("--base-url and --model are needed (or --replay DUMP)")
    model = OpenAIChatModel(args.base_url, args.api_key, args.model, timeout_s=args.timeout, max_retries=0)
    judge = TimedJudge(ModelJudge(model, PromptLibrary()), settings, args.timeout, args.decisive_only)
    splits = ["fit", "report"] if args.split == "both" else [args.split]

    offline_rows: list[grader_tiers.RunRow] = []
    judged_rows: list[grader_tiers.RunRow] = []
    calls_by_set: dict[str, list[JudgeCall]] = {}
    for name in args.sets.split(","):
        before, runs_before = len(judge.calls), len(judge.offline_tiers)
        if name in grader_tiers.BEIR_SETS:
            if not (args.eval_dir / name).is_dir():
                print(f"[{name}] skipped: {args.eval_dir / name} not found", file=sys.stderr)
                continue
            rows = grader_tiers.beir_runs(args.eval_dir, name, splits, args.limit, settings, args.cache,
                                          regrade=judge)
        elif name == "demo":
            rows = grader_tiers.demo_runs(settings, args.demo_limit, regrade=judge)
        else:
            raise SystemExit(f"unknown set {name!r}")
        calls = judge.calls[before:]
        calls_by_set[name] = calls
        judged_rows += rows
        # the same runs with the tier the offline grade gave them before the judge
        offline_rows += [replace(r, tier=tier) for r, tier in zip(rows, judge.offline_tiers[runs_before:])]

    for title, rows in (("offline grade (grader.judge off)", offline_rows),
                        (f"with the model judge ({args.model})", judged_rows)):
        grader_tiers.print_table(title, grader_tiers.table(rows))
    print("\nJudge calls" + (f" ({judge.not_asked} runs not sent: no verdict could change their tier)"
                              if args.decisive_only else ""))
    for name, calls in calls_by_set.items():
        print(f"- {name}: {latency_line(calls)}")
    if args.dump:
        with args.dump.open("w", encoding="utf-8") as fh:
            for r, (grade, verdict, question, shown) in zip(judged_rows, judge.verdicts):
                fh.write(json.dumps({"run": asdict(r), **replayable(grade, verdict, question, shown)},
                                    ensure_ascii=False) + "\n")
            for c in judge.calls:
                fh.write(json.dumps({"judge": asdict(c)}, ensure_ascii=False) + "\n")


def replay_main(paths: list[Path], settings: Settings, show_sweep: bool) -> None:
    records = [json.loads(line) for path in paths for line in path.read_text("utf-8").splitlines()
               if line.strip() and '"offline_grade"' in line]
    g = settings.grader
    pairs = [replay(r, g) for r in records]
    print(f"replayed {len(records)} runs of {', '.join(p.name for p in paths)}; judge_yes_low {g.judge_yes_low}, "
          f"judge_yes_high {g.judge_yes_high}, judge_lift_min_coverage {g.judge_lift_min_coverage}, "
          f"judge_lift_needs_quote {g.judge_lift_needs_quote}, judge_quote_min_coverage {g.judge_quote_min_coverage}")
    for title, rows in (("offline grade (grader.judge off)", [o for o, _ in pairs]),
                        ("with the model judge", [j for _, j in pairs])):
        grader_tiers.print_table(title, grader_tiers.table(rows))
    judged = [r for r in records if r.get("verdict")]
    print(f"\n{len(judged)} runs judged; P(yes) by group: "
          + "; ".join(f"{name} {_p_yes_summary([r for r in judged if pick(r['run'])])}" for name, pick in (
              ("gold in context", lambda run: run["answerable"] and run["gold_in_context"]),
              ("unanswerable", lambda run: not run["answerable"] and not run["answer_in_evidence"]))))
    if show_sweep:
        print("\n| judge_yes_low | judge_yes_high | unanswerable -> not HIGH | gold in context -> HIGH |")
        print("|---:|---:|---:|---:|")
        for t in sweep(records, g)[:12]:
            print(f"| {t['judge_yes_low']} | {t['judge_yes_high']} | {t['unanswerable_not_high']} "
                  f"(n={t['n_unanswerable']}) | {t['gold_in_context_high']} (n={t['n_gold_in_context']}) |")
        print("\n| judge_lift_needs_quote | judge_quote_min_coverage | unanswerable -> not HIGH | "
              "gold in context -> HIGH |")
        print("|---|---:|---:|---:|")
        for t in sweep_quote(records, g):
            print(f"| {t['judge_lift_needs_quote']} | {t['judge_quote_min_coverage']} | {t['unanswerable_not_high']} "
                  f"(n={t['n_unanswerable']}) | {t['gold_in_context_high']} (n={t['n_gold_in_context']}) |")
        print("\nper run (judged): set qid answerable gold-in-context offline -> judged  verdict P(yes)  quote check")
        for r in records:
            if not r.get("verdict"):
                continue
            _, j = replay(r, g)
            v = r["verdict"]
            check = (check_quote(r["question"], v["reason"], [RetrievedChunk(
                chunk_id="s", kb_id=1, doc_id=1, document=s["document"], text=s["text"]) for s in r["shown"]],
                g.judge_quote_min_coverage).note if r.get("shown") else "")
            print(f"  {j.dataset} {j.qid} {'A' if j.answerable else 'U'} {'G' if j.gold_in_context else '-'} "
                  f"{r['offline_grade']['tier']} -> {j.tier}  {v.get('stated') or v['verdict']} {v.get('p_yes')}  "
                  f"{v['reason'][:60]!r}  {check}")


def _p_yes_summary(records: list[dict]) -> str:
    values = sorted(r["verdict"]["p_yes"] for r in records if r["verdict"].get("p_yes") is not None)
    if not values:
        return "none"
    return f"median {statistics.median(values):.2f} (min {values[0]:.2f}, max {values[-1]:.2f}, n={len(values)})"


if __name__ == "__main__":
    main()
