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

Usage: python bench/judge_tiers.py --base-url http://127.0.0.1:8080/v1 --model qwen2.5-coder-1.5b-instruct
       [--eval-dir ../shared/eval] [--sets demo,cmrc2018,hotpotqa,scifact] [--split report] [--limit 20]
       [--timeout 120] [--set key=value ...] [--dump FILE.jsonl]
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

from docmind_core.answer.grade import judged_grade  # noqa: E402
from docmind_core.answer.judge import ModelJudge  # noqa: E402
from docmind_core.backends.chat_openai import OpenAIChatModel  # noqa: E402
from docmind_core.backends.protocols import UsageMeter  # noqa: E402
from docmind_core.models import GradeResult  # noqa: E402
from docmind_core.prompts import PromptLibrary  # noqa: E402
from docmind_core.settings import Settings  # noqa: E402

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

    def __init__(self, judge: ModelJudge, settings: Settings, timeout_s: float):
        self.judge = judge
        self.settings = settings
        self.timeout_s = timeout_s
        self.calls: list[JudgeCall] = []
        self.offline_tiers: list[str] = []  # one per graded run, judged or not (grader_tiers makes one row each)

    def __call__(self, question: str, chunks: list, grade: GradeResult) -> GradeResult:
        self.offline_tiers.append(grade.tier.value)
        if not chunks:  # a run without evidence is not judged (nor is it in DocMind)
            return grade
        started = time.perf_counter()
        try:
            verdict = self.judge.judge_evidence(question, chunks, self.settings.grader, UsageMeter(), self.timeout_s)
        except Exception as exc:  # noqa: BLE001 - counted; the offline tier stands, as in a run
            self.calls.append(JudgeCall(question, grade.tier.value, grade.tier.value, "failed", None, "",
                                        _ms(started), f"{type(exc).__name__}: {exc}"))
            return grade
        judged = judged_grade(grade, verdict, self.settings.grader)
        self.calls.append(JudgeCall(question, grade.tier.value, judged.tier.value, verdict.verdict, verdict.p_yes,
                                    verdict.scored_by, _ms(started)))
        return judged


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
    ap.add_argument("--base-url", required=True, help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8080/v1")
    ap.add_argument("--model", required=True)
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
    args = ap.parse_args()

    overrides = dict(o.split("=", 1) for o in args.overrides)
    settings = Settings().with_overrides(overrides) if overrides else Settings()
    model = OpenAIChatModel(args.base_url, args.api_key, args.model, timeout_s=args.timeout, max_retries=0)
    judge = TimedJudge(ModelJudge(model, PromptLibrary()), settings, args.timeout)
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
    print("\nJudge calls")
    for name, calls in calls_by_set.items():
        print(f"- {name}: {latency_line(calls)}")
    if args.dump:
        with args.dump.open("w", encoding="utf-8") as fh:
            for r in judged_rows:
                fh.write(json.dumps({"run": asdict(r)}, ensure_ascii=False) + "\n")
            for c in judge.calls:
                fh.write(json.dumps({"judge": asdict(c)}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
