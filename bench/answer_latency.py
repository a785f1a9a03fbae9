"""Answer latency on the demo KB with the offline backends, measured through ``Engine.ask``.

Times, per question: the first event (what the chat shows first), the first
answer token, and the complete answer (the ``done`` event).  Engine start-up
and one warm-up question are excluded and reported apart.  The demo corpus is
ingested into a temporary home unless ``--home`` points at one that has it.

    python bench/answer_latency.py [--repeats 3] [--mode auto|rule|agentic] [--json]

Targets (issue 5): first event p50 <= 300 ms, full offline answer p50 <= 1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from docmind_core.engine import Engine  # noqa: E402

DEMO = ROOT / "data" / "demo"
NOT_DOCUMENTS = {"QUESTIONS.md", "README.md"}
FALLBACK_QUESTIONS = ["What is the maximum power draw of the Nimbus N2?", "错误代码 AUR-4012 是什么意思？怎么处理？"]
TARGET_FIRST_EVENT_MS = 300.0
TARGET_ANSWER_MS = 1000.0


def demo_questions() -> list[str]:
    """The question column of data/demo/QUESTIONS.md (| id | lang | type | question | ...)."""
    path = DEMO / "QUESTIONS.md"
    if not path.exists():
        return FALLBACK_QUESTIONS
    rows = [line.split("|") for line in path.read_text(encoding="utf-8").splitlines()
            if re.match(r"^\|\s*q\d+\s*\|", line)]
    return [cells[4].strip() for cells in rows if len(cells) > 5] or FALLBACK_QUESTIONS


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def ensure_demo_kb(engine: Engine) -> int:
    kb = engine.store.find_kb("demo")
    if kb is not None and kb.document_count:
        return kb.id
    kb = kb or engine.create_kb("demo", "Demo corpus: the fictional Aurora and Nimbus products")
    files = sorted(p for p in DEMO.glob("*") if p.is_file() and p.name not in NOT_DOCUMENTS
                   and not p.name.startswith("."))
    if not files:
        raise SystemExit("data/demo is empty: run `python scripts/make_demo_docs.py` first")
    failed = [o for o in engine.ingest(kb.id, files) if o.status == "failed"]
    if failed:
        print("warning: some demo files failed:", ", ".join(f"{o.name} ({o.error})" for o in failed), file=sys.stderr)
    return kb.id


def time_one(engine: Engine, question: str, kb_id: int, mode: str) -> dict:
    start = time.perf_counter()
    first_event = first_token = None
    tier = run_mode = ""
    for event in engine.ask(question, [kb_id], mode=mode):
        now = (time.perf_counter() - start) * 1000
        if first_event is None:
            first_event = now
        if event.kind == "token" and first_token is None:
            first_token = now
        if event.kind == "done":
            tier = event.grade.tier.value if event.grade else ""
            run_mode = event.mode
    total = (time.perf_counter() - start) * 1000
    return {"question": question, "first_event_ms": first_event, "first_token_ms": first_token or total,
            "answer_ms": total, "mode": run_mode, "tier": tier}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", help="DocMind home to use (default: a fresh temporary one)")
    parser.add_argument("--repeats", type=int, default=3, help="times each demo question is asked")
    parser.add_argument("--mode", default="auto", choices=["auto", "rule", "agentic"])
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="docmind-bench-") as tmp:
        home = Path(args.home) if args.home else Path(tmp)
        t0 = time.perf_counter()
        engine = Engine.open(home, overrides={"llm.provider": "offline", "web.provider": "off"})
        open_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        kb_id = ensure_demo_kb(engine)
        ingest_s = time.perf_counter() - t0
        questions = demo_questions()
        warm = time_one(engine, questions[0], kb_id, args.mode)  # first-use costs (jieba, caches) stay out
        runs = [time_one(engine, q, kb_id, args.mode) for _ in range(args.repeats) for q in questions]

    stats = {}
    for field in ("first_event_ms", "first_token_ms", "answer_ms"):
        values = [r[field] for r in runs]
        stats[field] = {"p50": percentile(values, 0.5), "p90": percentile(values, 0.9), "max": max(values)}
    report = {
        "runs": len(runs), "questions": len(questions), "mode": args.mode, "engine_open_s": round(open_s, 2),
        "ingest_s": round(ingest_s, 2), "warmup_answer_ms": round(warm["answer_ms"], 1),
        "stats": {k: {s: round(v, 1) for s, v in d.items()} for k, d in stats.items()},
        "targets": {"first_event_p50_ms": TARGET_FIRST_EVENT_MS, "answer_p50_ms": TARGET_ANSWER_MS},
        "meets_targets": stats["first_event_ms"]["p50"] <= TARGET_FIRST_EVENT_MS
        and stats["answer_ms"]["p50"] <= TARGET_ANSWER_MS,
        "modes": sorted({r["mode"] for r in runs}), "tiers": {t: sum(1 for r in runs if r["tier"] == t)
                                                               for t in sorted({r["tier"] for r in runs})},
    }
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=2))
        return 0
    print(f"answer latency · offline backends · demo KB · {len(runs)} runs ({len(questions)} questions x "
          f"{args.repeats}), mode {args.mode}")
    print(f"engine open {open_s:.1f} s · ingest {ingest_s:.1f} s · warm-up answer {warm['answer_ms']:.0f} ms")
    print(f"{'measure':<16}{'p50 ms':>10}{'p90 ms':>10}{'max ms':>10}{'target p50':>12}")
    targets = {"first_event_ms": TARGET_FIRST_EVENT_MS, "answer_ms": TARGET_ANSWER_MS}
    for field, label in (("first_event_ms", "first event"), ("first_token_ms", "first token"),
                         ("answer_ms", "full answer")):
        s = stats[field]
        target = f"<= {targets[field]:.0f}" if field in targets else ""
        print(f"{label:<16}{s['p50']:>10.1f}{s['p90']:>10.1f}{s['max']:>10.1f}{target:>12}")
    print("meets targets:", "yes" if report["meets_targets"] else "NO", "· routes:", ", ".join(report["modes"]),
          "· tiers:", report["tiers"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
