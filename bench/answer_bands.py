"""The confidence band against correctness, recomputed from stored runs of ``docmind eval answers``.

Each question's latest run per mode (traces labelled by ``docmind eval answers``) is read back from a DocMind
home: its answer, sources and evidence grade.  The band is recomputed twice with the current offline claim
checks, without and with the question's answer-type check (docmind_core/answer/answer_type.py), and set against
correctness (the answer holds every gold fact of its labelled question, or abstains on an unanswerable one),
so a change of the check can be measured on answers a real model wrote without running the model again.

The model judge's claim verdicts, if the runs had them, are not replayed: the offline checks decide.

``--rescue`` replays ``citation.rescue_failed_answer`` (docmind_core/answer/answer_check.py) on the stored
answers: where the model's answer fails the checks, the offline reading of the run's own evidence is computed
and shown instead when the rule allows, and correctness is counted again on the answer that would be shown.

Usage: python bench/answer_bands.py HOME DATASET.jsonl [--label "eval answers (configured)"] [--rescue]
       [--since T] [--until T] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import threading  # noqa: E402

from docmind_core.answer.answer_check import second_opinion  # noqa: E402
from docmind_core.answer.citations import confidence_from, parse_citations  # noqa: E402
from docmind_core.answer.generate import build_answer_prompt  # noqa: E402
from docmind_core.backends.offline.chat import OfflineLanguageModel  # noqa: E402
from docmind_core.backends.protocols import UsageMeter  # noqa: E402
from docmind_core.events import AnswerStarted  # noqa: E402
from docmind_core.engine import Engine  # noqa: E402
from docmind_core.experiments.metrics import abstained, contains_answer  # noqa: E402
from docmind_core.settings import Settings  # noqa: E402
from docmind_core.reports.timeline import RunDigest  # noqa: E402

BANDS = ("HIGH", "MEDIUM", "LOW", "-")


def rescued(question: str, answer: str, events: list, done, settings, offline_model: OfflineLanguageModel) -> str:
    """The answer ``citation.rescue_failed_answer`` would show for this stored run ("" when the model's stands)."""
    template = next((e.prompt for e in events if isinstance(e, AnswerStarted)), "")
    if template not in ("knowledge_qa", "low_confidence"):
        return ""

    def offline_reading() -> str:
        prompt = build_answer_prompt(template, question, done.sources, [], [], offline_model.prompts)
        return "".join(offline_model.stream_answer(prompt, UsageMeter(), threading.Event()))

    return second_opinion(question, answer, done.sources, settings.coverage_min_sentence_len, done.grade.tier,
                          offline_reading).replacement


def rebanded(home: Path, dataset: Path, label: str, rescue: bool = False, since: str = "",
             until: str = "") -> list[dict]:
    gold = {}
    for line in dataset.read_text(encoding="utf-8").splitlines():
        if line.strip():
            item = json.loads(line)
            gold[item["question"]] = item
    engine = Engine.open(home, env={}, warm=False)
    latest = {}
    for s in engine.traces.list(label=label):
        key = (s.question, s.requested_mode)
        if since and str(s.started_at) < since or until and str(s.started_at) >= until:
            continue
        if s.question in gold and (key not in latest or s.started_at > latest[key].started_at):
            latest[key] = s
    settings = Settings().citation
    offline_model = OfflineLanguageModel(engine.prompts)
    rows = []
    for (question, mode), s in sorted(latest.items(), key=lambda kv: (gold[kv[0][0]]["id"], kv[0][1])):
        events = engine.traces.get(s.run_id).events
        digest = RunDigest.from_events(events)
        done, item = digest.done, gold[question]
        if done is None or done.grade is None:
            continue
        right = abstained(digest) if not item["answerable"] else contains_answer(done.answer, item["answers"])
        shown = rescued(question, done.answer, events, done, settings, offline_model) if rescue else ""
        citations = parse_citations(shown or done.answer, done.sources, settings.coverage_min_sentence_len)
        if shown:  # correctness, claims and band of the answer the rescue would show
            done = done.model_copy(update={"answer": shown, "citations": citations})
            digest.done = done
            right = abstained(digest) if not item["answerable"] else contains_answer(shown, item["answers"])
        without = confidence_from(citations, done.grade.top_score, done.grade.tier, settings)
        with_check = confidence_from(citations, done.grade.top_score, done.grade.tier, settings, question=question,
                                     stand_in=bool(shown))
        rows.append({"item": item["id"], "mode": mode, "right": right, "tier": done.grade.tier.value,
                     "band_recorded": done.confidence.band if done.confidence else "-",
                     "band_claims": without.band, "band": with_check.band,
                     "unanswered": with_check.unanswered, "answer": done.answer, "rescued": bool(shown)})
    return rows


def confusion(rows: list[dict], mode: str, key: str) -> str:
    counts = Counter((r[key], r["right"]) for r in rows if r["mode"] == mode)
    return ", ".join(f"{b} {counts[(b, True)]}/{counts[(b, False)]}" for b in BANDS
                     if counts[(b, True)] or counts[(b, False)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("home", type=Path)
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--label", default="eval answers (configured)")
    parser.add_argument("--rescue", action="store_true", help="replay citation.rescue_failed_answer")
    parser.add_argument("--since", default="", help="only runs started at or after this time (as stored)")
    parser.add_argument("--until", default="", help="only runs started before this time (as stored)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = rebanded(args.home, args.dataset, args.label, args.rescue, args.since, args.until)
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    print("| mode | band (right / wrong), claim checks only | with the answer-type check | wrong in HIGH |")
    print("|---|---|---|---:|")
    for mode in sorted({r["mode"] for r in rows}):
        wrong_high = sum(1 for r in rows if r["mode"] == mode and r["band"] == "HIGH" and not r["right"])
        print(f"| {mode} | {confusion(rows, mode, 'band_claims')} | {confusion(rows, mode, 'band')} | {wrong_high} |")
    for mode in sorted({r["mode"] for r in rows}):
        right = sum(1 for r in rows if r["mode"] == mode and r["right"])
        total = sum(1 for r in rows if r["mode"] == mode)
        rescued_ids = [r["item"] for r in rows if r["mode"] == mode and r["rescued"]]
        print(f"- {mode}: {right}/{total} right" + (f"; rescued: {', '.join(rescued_ids)}" if args.rescue else ""))
    changed = [r for r in rows if r["band"] != r["band_claims"]]
    print(f"\n{len(changed)} of {len(rows)} runs change band with the answer-type check:")
    for r in changed:
        print(f"- {r['item']} {r['mode']} ({'right' if r['right'] else 'wrong'}): {r['band_claims']} -> {r['band']}"
              f" (no supported claim states {', '.join(r['unanswered'])})")


if __name__ == "__main__":
    main()
