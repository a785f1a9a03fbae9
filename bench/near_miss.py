"""Near-miss benchmark (issue 34, item 5): does a question the corpus does not answer, asked next to one it does,
ever get a HIGH answer?  And do answerable questions still reach HIGH with the right value?

Near-miss kinds:

* ``wrong_variant``: a product variant the corpus never names ("Nimbus N1 Lite", "N2 Pro");
* ``wrong_qualifier``: another condition of a stated value ("idle" where the source states "maximum");
* ``swapped_attribute``: a value stated for B only, asked of A (the N2's weight asked of the N1);
* ``version_not_listed``: a version the release notes do not list ("firmware 3.3.0");
* ``wrong_place``: a place the price or head count is not stated for;
* ``wrong_entity`` (shared sets): a question whose name is replaced by the title of a passage of another
  question (HotpotQA) or by a proper noun of another article (CMRC 2018), so the passages at hand, which do
  answer the original, no longer name what is asked.

Two levels:

1. ``demo``: whole runs of the product, offline (``Engine.ask`` on the demo KB built as tests/demo_world.py
   builds it), over the questions of ``DEMO`` below: answerable ones (precise and paraphrased, comparisons,
   both languages) and near misses.  "HIGH" is the answer's band (``confidence.band``); the evidence tier is
   reported beside it.
2. ``hotpotqa`` / ``cmrc2018``: the offline reader and the answer checks over each question's gold passages
   plus distractors (no index: the passages are given, with evidence graded HIGH at top score 1.0, so only the
   answer-side checks decide the band).  Answerable: the original question; near miss: ``wrong_entity``.

Right: an answerable answer holds every gold string; a near-miss answer that is not HIGH and says what is
stated instead or that the value is not stated counts as "says so".

Split: each question goes by a seeded hash to ``fit`` or ``report``; the six demo questions of issue 34 are
always ``fit`` (the rules were written looking at them).  Print both; quote ``report``.

    python bench/near_miss.py [--sets demo,hotpotqa,cmrc2018] [--per-set 80] [--split report|fit|both]
                              [--json out.json] [--eval-dir ../shared/eval] [--show]
                              [--base-url http://127.0.0.1:8080/v1 --model M --profile local_small --kinds near]

Run it on two trees to compare (the base commit unpacked elsewhere, with PYTHONPATH pointing at it): the script
reads the confidence fields it needs with getattr, so an older tree runs it too.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path and not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, str(ROOT))

SHARED = next((p for p in (ROOT.parent / "shared" / "eval", ROOT.parent.parent / "shared" / "eval") if p.is_dir()),
              ROOT.parent / "shared" / "eval")
ISSUE_QUESTIONS = frozenset({
    "What is the idle power draw of the Nimbus N1?", "What is the maximum power draw of the Nimbus N1 Lite?",
    "Nimbus N1 的重量是多少？", "What did firmware 3.3.0 fix?", "Compare the Aurora Team and Business plans",
    "N1 和 N2 的内存和存储有什么区别？"})

# (kind, question, gold strings that must all be in a right answer; empty for a near miss)
DEMO: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("answerable", "What is the maximum power draw of the Nimbus N2?", ("45 W",)),
    ("answerable", "What is the peak power draw of the Nimbus N2?", ("45 W",)),
    ("answerable", "What is the idle power draw of the Nimbus N2?", ("18 W",)),
    ("answerable", "How much power does the Nimbus N2 draw while idle?", ("18 W",)),
    ("answerable", "What is the maximum power draw of the Nimbus N1?", ("28 W",)),
    ("answerable", "How much does the Nimbus N1 cost?", ("1,490",)),
    ("answerable", "Nimbus N2 的价格是多少？", ("2,390",)),
    ("answerable", "How much memory does the Nimbus N2 have?", ("32 GB",)),
    ("answerable", "Nimbus N1 的内存是多少？", ("16 GB",)),
    ("answerable", "How heavy is the Nimbus N2?", ("1.9 kg",)),
    ("answerable", "Nimbus N2 的重量是多少？", ("1.9",)),
    ("answerable", "What is the price of the Aurora Business plan?", ("29 USD",)),
    ("answerable", "How much storage does the Aurora Team plan include?", ("100 GB",)),
    ("answerable", "When was Nimbus firmware 3.2.1 released?", ("2026-02-10",)),
    ("answerable", "When was Aurora 4.1 released?", ("2025-09-02",)),
    ("answerable", "What is the default management address of a Nimbus appliance?", ("192.168.50.1",)),
    ("answerable", "Aurora 默认的数据保留期是多久？", ("180",)),
    ("answerable", "What is the minimum number of users for the Aurora Enterprise plan?", ("200",)),
    ("answerable", "How much does the extended warranty cost per year for the N2?", ("390 USD",)),
    ("answerable", "Compare the Aurora Team and Business plans", ("12 USD", "29 USD")),
    ("answerable", "N1 和 N2 的内存和存储有什么区别？", ("16 GB", "32 GB")),
    ("answerable", "Compare the price of the Nimbus N1 and the Nimbus N2.", ("1,490", "2,390")),
    ("answerable", "What did firmware 3.2.1 fix?", ("fan",)),
    ("answerable", "海岚数据有多少员工？", ("240",)),
    ("answerable", "What is the operating temperature range of the Nimbus N2?", ("40",)),
    ("answerable", "How many documents can one Nimbus N2 index?", ("2 million",)),
    ("wrong_variant", "What is the maximum power draw of the Nimbus N1 Lite?", ()),
    ("wrong_variant", "How much does the Nimbus N2 Pro cost?", ()),
    ("wrong_variant", "Nimbus N1 Lite 的内存是多少？", ()),
    ("wrong_variant", "How heavy is the Nimbus N2 Mini?", ()),
    ("wrong_variant", "What is the price of the Nimbus N1 Plus?", ()),
    ("wrong_qualifier", "What is the idle power draw of the Nimbus N1?", ()),
    ("wrong_qualifier", "What is the average power draw of the Nimbus N2?", ()),
    ("wrong_qualifier", "What is the minimum power draw of the Nimbus N2?", ()),
    ("wrong_qualifier", "Nimbus N1 的待机功耗是多少？", ()),
    ("wrong_qualifier", "What is the typical power draw of the Nimbus N1?", ()),
    ("wrong_qualifier", "Nimbus N2 的平均功耗是多少？", ()),
    ("swapped_attribute", "Nimbus N1 的重量是多少？", ()),
    ("swapped_attribute", "How heavy is the Nimbus N1?", ()),
    ("swapped_attribute", "What are the dimensions of the Nimbus N1?", ()),
    ("swapped_attribute", "How many documents can one Nimbus N1 index?", ()),
    ("swapped_attribute", "What is the operating temperature range of the Nimbus N1?", ()),
    ("swapped_attribute", "How many search queries per second does the Nimbus N1 answer?", ()),
    ("version_not_listed", "What did firmware 3.3.0 fix?", ()),
    ("version_not_listed", "When was Nimbus firmware 3.0.0 released?", ()),
    ("version_not_listed", "What was new in Aurora 4.3?", ()),
    ("version_not_listed", "When was Aurora 3.9 released?", ()),
    ("version_not_listed", "Nimbus 固件 3.4.0 修复了什么？", ()),
    ("version_not_listed", "What known issue did firmware 3.2.2 have?", ()),
    ("wrong_place", "How much does Aurora cost in Japan?", ()),
    ("wrong_place", "海岚数据法兰克福办事处有多少员工？", ()),
    ("wrong_place", "What is the price of the Aurora Team plan in China?", ()),
)

_SAYS_SO = re.compile(r"\bnot\b|\bno\b|do not|does not|没有|不是|未|无法", re.IGNORECASE)


@dataclass
class Row:
    set_name: str
    kind: str
    question: str
    gold: tuple[str, ...]
    split: str
    band: str = ""
    tier: str = ""
    answer: str = ""
    note: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def answerable(self) -> bool:
        return self.kind == "answerable"

    @property
    def right(self) -> bool:
        text = self.answer.replace("\u202f", " ")
        return bool(self.gold) and all(g.lower() in text.lower() for g in self.gold)

    @property
    def says_so(self) -> bool:
        return self.band != "HIGH" and bool(self.note or _SAYS_SO.search(self.answer))


def split_of(question: str, seed: int) -> str:
    if question in ISSUE_QUESTIONS:
        return "fit"
    digest = hashlib.sha256(f"{seed}:{question}".encode()).digest()
    return "fit" if digest[0] % 2 == 0 else "report"


# --------------------------------------------------------------------------
# Level 1: whole runs on the demo KB
# --------------------------------------------------------------------------


def run_demo(seed: int, llm: dict | None = None, kinds: str = "all", split: str = "both") -> list[Row]:
    """``llm``: dotted settings for a real model ({"llm.base_url": ..., "llm.model": ..., "llm.profile": ...});
    ``kinds``: "near" asks only the near misses (a real model takes 15-40 s a question)."""
    from docmind_core.engine import Engine
    from docmind_core.events import Done
    from tests.demo_world import open_demo_engine

    rows = []
    with tempfile.TemporaryDirectory(prefix="near-miss-") as home:
        engine, kb = open_demo_engine(Path(home))
        if llm:
            engine = Engine.open(Path(home), overrides=llm, env={"OPENAI_API_KEY": "none"})
        for kind, question, gold in DEMO:
            if kinds == "near" and kind == "answerable":
                continue
            if split != "both" and split_of(question, seed) != split:
                continue
            done = None
            for event in engine.ask(question, [kb]):
                if isinstance(event, Done):
                    done = event
            conf = done.confidence
            rows.append(Row("demo", kind, question, gold, split_of(question, seed),
                            band=conf.band if conf else "", tier=done.grade.tier.value if done.grade else "",
                            answer=done.answer, note=getattr(conf, "target_note", "") or ""))
    return rows


# --------------------------------------------------------------------------
# Level 2: the reader and the checks over given passages (shared sets)
# --------------------------------------------------------------------------


def _jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _chunk(doc: dict, n: int):
    from docmind_core.values import RetrievedChunk

    text = f"{doc['title']}\n{doc['text']}" if doc.get("title") else doc["text"]
    return RetrievedChunk(chunk_id=f"{doc['id']}#{n}", doc_id=0, kb_id=0, document=doc.get("title") or doc["id"],
                          text=text)


def _answer_and_band(question: str, sources) -> tuple[str, str, str]:
    from docmind_core.answer.citations import confidence_from, parse_citations
    from docmind_core.backends.offline.extractive import extractive_answer
    from docmind_core.settings import CitationSettings
    from docmind_core.text.tokens import detect_language
    from docmind_core.values import Tier

    answer = extractive_answer(question, sources, detect_language(question))
    citations = parse_citations(answer, sources)
    try:
        conf = confidence_from(citations, 1.0, Tier.HIGH, CitationSettings(), question=question, sources=sources)
    except TypeError:  # a tree before issue 34
        conf = confidence_from(citations, 1.0, Tier.HIGH, CitationSettings(), question=question)
    return answer, conf.band, getattr(conf, "target_note", "") or ""


def _replace_once(question: str, old: str, new: str) -> str:
    return question.replace(old, new, 1) if old in question else ""


def hotpot_items(limit: int, rng: random.Random) -> list[tuple[str, str, tuple[str, ...], list[dict]]]:
    folder = SHARED / "hotpotqa"
    docs = {d["id"]: d for d in _jsonl(folder / "corpus.jsonl")}
    queries = _jsonl(folder / "queries.jsonl")
    gold: dict[str, list[str]] = defaultdict(list)
    for line in (folder / "qrels.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        q, d, _s = line.split("\t")
        gold[q].append(d)
    candidates: dict[str, list[str]] = defaultdict(list)
    for line in (folder / "distractor_candidates.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        q, d = line.split("\t")
        candidates[q].append(d)
    titles = [d["title"] for d in docs.values() if d.get("title")]
    rng.shuffle(queries)
    out = []
    for q in queries[:limit]:
        answers = tuple(a for a in q.get("answers", []) if a)[:1]
        if not answers or answers[0].lower() in ("yes", "no"):
            continue
        passages = [docs[d] for d in gold[q["id"]]] + [docs[d] for d in candidates[q["id"]]
                                                        if d not in gold[q["id"]]][:2]
        out.append(("answerable", q["text"], answers, passages))
        here = " ".join(p["title"] + " " + p["text"] for p in passages)
        named = [p["title"] for p in passages[:2] if p.get("title") and p["title"] in q["text"]]
        if not named:
            continue
        other = next((t for t in rng.sample(titles, 50) if t not in here and len(t.split()) <= 4), "")
        changed = _replace_once(q["text"], named[0], other) if other else ""
        if changed:
            out.append(("wrong_entity", changed, (), passages))
    return out


def cmrc_items(limit: int, rng: random.Random) -> list[tuple[str, str, tuple[str, ...], list[dict]]]:
    from docmind_core.text.tokens import part_of_speech

    folder = SHARED / "cmrc2018"
    docs = {d["id"]: d for d in _jsonl(folder / "corpus.jsonl")}
    doc_ids = list(docs)
    queries = _jsonl(folder / "queries.jsonl")
    gold: dict[str, str] = {}
    for line in (folder / "qrels.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        q, d, _s = line.split("\t")
        gold[q] = d
    rng.shuffle(queries)
    names_pool: list[str] = []
    for d in rng.sample(doc_ids, 60):
        names_pool += [w for w, f in part_of_speech(docs[d]["text"][:400]) if f in ("nr", "ns") and len(w) >= 2]
    out = []
    for q in queries[:limit]:
        answers = tuple(a for a in q.get("answers", []) if a)[:1]
        if not answers or q["id"] not in gold:
            continue
        others = [docs[d] for d in rng.sample(doc_ids, 3) if d != gold[q["id"]]][:2]
        passages = [docs[gold[q["id"]]]] + others
        out.append(("answerable", q["text"], answers, passages))
        here = " ".join(p["title"] + p["text"] for p in passages)
        named = [w for w, f in part_of_speech(q["text"]) if f in ("nr", "ns", "nt", "nz") and len(w) >= 2]
        named = [w for w in named if w in passages[0]["text"]]
        if not named:
            continue
        other = next((n for n in rng.sample(names_pool, min(30, len(names_pool))) if n not in here), "")
        changed = _replace_once(q["text"], named[0], other) if other else ""
        if changed:
            out.append(("wrong_entity", changed, (), passages))
    return out


def run_shared(name: str, limit: int, seed: int) -> list[Row]:
    rng = random.Random(seed)
    items = hotpot_items(limit, rng) if name == "hotpotqa" else cmrc_items(limit, rng)
    rows = []
    for kind, question, gold, passages in items:
        sources = [_chunk(p, i) for i, p in enumerate(passages)]
        answer, band, note = _answer_and_band(question, sources)
        rows.append(Row(name, kind, question, gold, split_of(question, seed), band=band, tier="HIGH",
                        answer=answer, note=note))
    return rows


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------


def summarise(rows: list[Row], split: str) -> dict:
    out: dict = {}
    for set_name in dict.fromkeys(r.set_name for r in rows):
        mine = [r for r in rows if r.set_name == set_name and (split == "both" or r.split == split)]
        answerable = [r for r in mine if r.answerable]
        near = [r for r in mine if not r.answerable]
        by_kind = defaultdict(list)
        for r in near:
            by_kind[r.kind].append(r)
        out[set_name] = {
            "answerable": len(answerable),
            "answerable_high": sum(r.band == "HIGH" for r in answerable),
            "answerable_right": sum(r.right for r in answerable),
            "answerable_high_and_right": sum(r.band == "HIGH" and r.right for r in answerable),
            "near_miss": len(near),
            "near_miss_high": sum(r.band == "HIGH" for r in near),
            "near_miss_tier_high": sum(r.tier == "HIGH" for r in near) if set_name == "demo" else None,
            "near_miss_says_so": sum(r.says_so for r in near),
            "by_kind": {k: {"n": len(v), "high": sum(r.band == "HIGH" for r in v)} for k, v in by_kind.items()},
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="demo,hotpotqa,cmrc2018")
    parser.add_argument("--per-set", type=int, default=80, help="questions drawn from each shared set")
    parser.add_argument("--seed", type=int, default=34)
    parser.add_argument("--split", default="both", choices=("both", "fit", "report"))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--show", action="store_true", help="print each near miss shown HIGH")
    parser.add_argument("--eval-dir", type=Path, default=None, help="the shared eval folder (default: ../shared/eval)")
    parser.add_argument("--base-url", default="", help="demo runs with this OpenAI-compatible model server")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--profile", default="local_small")
    parser.add_argument("--kinds", default="all", choices=("all", "near"), help="near: demo near misses only")
    args = parser.parse_args()
    global SHARED
    SHARED = args.eval_dir or SHARED
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    rows: list[Row] = []
    started = time.perf_counter()
    for name in [s.strip() for s in args.sets.split(",") if s.strip()]:
        if name == "demo":
            llm = {"llm.base_url": args.base_url, "llm.model": args.model, "llm.profile": args.profile} \
                if args.base_url else None
            rows += run_demo(args.seed, llm, args.kinds, args.split)
        elif (SHARED / name).is_dir():
            rows += run_shared(name, args.per_set, args.seed)
        else:
            print(f"{name}: not found under {SHARED.name}/, skipped")
    splits = ("fit", "report") if args.split == "both" else (args.split,)
    report = {s: summarise(rows, s) for s in splits}
    for s in splits:
        print(f"== split {s}")
        for set_name, r in report[s].items():
            tier = f", evidence tier HIGH {r['near_miss_tier_high']}" if r["near_miss_tier_high"] is not None else ""
            print(f"{set_name:9} answerable {r['answerable']:3}: HIGH {r['answerable_high']}, right "
                  f"{r['answerable_right']}, HIGH and right {r['answerable_high_and_right']} | near miss "
                  f"{r['near_miss']:3}: HIGH {r['near_miss_high']}{tier}, says so {r['near_miss_says_so']} | "
                  + ", ".join(f"{k} {v['high']}/{v['n']}" for k, v in r["by_kind"].items()))
    if args.show:
        for r in rows:
            if not r.answerable and r.band == "HIGH":
                print(f"[{r.split}] {r.set_name} {r.kind}: {r.question}\n    {r.answer[:300]!r}")
    print(f"({time.perf_counter() - started:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps({"report": report, "rows": [r.__dict__ | {"right": r.right} for r in rows]},
                                        ensure_ascii=False, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
