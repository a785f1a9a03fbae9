"""Claim-support benchmark: does the offline claim check (docmind_core.answer.claims) accept true claims and flag
false ones?  Issue 20, part 1.

Claims are generated from source text, never written by hand:

* the demo KB (data/demo, each file loaded and chunked as ingestion does) and
* the shared evaluation sets beside the repository (``../shared/eval``: hotpotqa and scifact passages in
  English, cmrc2018 in Chinese), read in place, never copied.

From each source sentence or table row that states a value, the generator makes

* ``true``: the sentence as a claim (led by a word of no content, so it is not a verbatim quote), or "the
  <column> of <row> is <cell>" for a table row;
* ``row_swap`` (false): a table row's claim with the value of the same column of another row;
* ``other_entity`` (false): the claim with its subject replaced by another entity of the same source set
  (another model name, another page title);
* ``made_up`` (false): the claim with its value replaced by a made-up one of the same unit;
* ``spliced`` (false): the claim's value replaced by a value of the same unit from another source, and the
  two halves of two sources' sentences joined into one;
* ``content_free`` (false): text that states nothing ("Based on the sources [1], the answer is in the
  documents.", a bare file name).

Each claim is checked against four sources: the one it was made from and three others of the same set.  Half
the claims (seeded) cite their source with ``[n]``, the other half cite nothing and are checked against all
four.  A false claim counts as flagged when it is unsupported or contradicted; a true claim counts as
accepted when it is supported.  Targets: >= 95% of false claims flagged, >= 90% of true claims accepted.

Split: each source passage goes, by a seeded hash of its id, to ``fit`` (thresholds were tuned there) or
``held_out`` (reported, not looked at while tuning); both are printed.

A model judge can be measured the same way: ``--judge module:function`` names a function
``judge(claim: str, sources: list[RetrievedChunk], cited: list[int], offline: ClaimCheck) -> ClaimCheck``
(its status replaces the offline one); :func:`evaluate` takes the same function as ``judge=``.

    python bench/claim_support.py [--per-set 120] [--seed 20] [--json out.json] [--judge mod:fn]
                                  [--split both|fit|held_out] [--sample N]

``bench/claim_judge_llm.py`` is such a judge: the claim-judge path of a DocMind run against an
OpenAI-compatible server (one call per claim, so ``--split held_out --sample N`` keeps it short).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import random
import re
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from docmind_core.answer.claims import check_claim, source_names, source_units, values_in  # noqa: E402
from docmind_core.values import ClaimCheck, RetrievedChunk  # noqa: E402
from docmind_core.text.tokens import split_sentences  # noqa: E402

# the shared sets sit beside the repository (a worktree one level further down finds them too)
SHARED = next((p for p in (ROOT.parent / "shared" / "eval", ROOT.parent.parent / "shared" / "eval") if p.is_dir()),
              ROOT.parent / "shared" / "eval")
KINDS_FALSE = ("row_swap", "other_entity", "made_up", "spliced", "content_free")
Judge = Callable[[str, list[RetrievedChunk], list[int], ClaimCheck], ClaimCheck]


@dataclass
class Item:
    kind: str  # "true" or one of KINDS_FALSE
    set_name: str
    claim: str
    source_id: str  # the passage the claim was made from
    split: str = ""
    sources: list[RetrievedChunk] = field(default_factory=list)
    cited: list[int] = field(default_factory=list)

    @property
    def truth(self) -> bool:
        return self.kind == "true"


# --------------------------------------------------------------------------
# Source passages
# --------------------------------------------------------------------------


def demo_chunks() -> list[RetrievedChunk]:
    from docmind_core.ingest.chunking import chunk_document
    from docmind_core.ingest.loaders import load_document
    from docmind_core.settings import RagSettings

    rag = RagSettings()
    out = []
    for path in sorted((ROOT / "data" / "demo").iterdir()):
        if path.suffix.lower() not in {".md", ".txt", ".pdf", ".docx", ".html"} or path.name == "QUESTIONS.md":
            continue
        text = load_document(path).text
        _, children = chunk_document(0, path.name, text, rag.chunk_tokens, rag.chunk_overlap_tokens,
                                     rag.parent_tokens)
        out += [RetrievedChunk(chunk_id=c.id, document=path.name, text=c.text) for c in children]
    return out


def shared_passages(name: str, limit: int, rng: random.Random, shared: Path = SHARED) -> list[RetrievedChunk]:
    path = shared / name / "corpus.jsonl"
    if not path.exists():
        print(f"({name}: {path} not found, skipped)", file=sys.stderr)
        return []
    rows = [json.loads(line) for line in path.open(encoding="utf-8")]
    rows = [r for r in rows if len(values_in(r["text"])) >= 2 and 200 <= len(r["text"]) <= 1500]
    rng.shuffle(rows)
    title = (lambda r: "") if name == "cmrc2018" else (lambda r: r["title"] + "\n")
    return [RetrievedChunk(chunk_id=r["id"], document=r["title"] or r["id"], text=title(r) + r["text"])
            for r in rows[:limit]]


# --------------------------------------------------------------------------
# Claims made from a passage
# --------------------------------------------------------------------------

_LEAD = {"en": "Note that ", "zh": "其中，"}
_SKIP_VALUE_KINDS = {"date", "version", "ip"}


def _language(text: str) -> str:
    return "zh" if re.search(r"[\u4e00-\u9fff]", text) else "en"


def _fact_sentences(chunk: RetrievedChunk) -> list[str]:
    """Sentences of the passage that state a value and read as a statement (not headings or table rows)."""
    out = []
    for line in chunk.text.split("\n"):
        if "|" in line or line.lstrip().startswith("#"):
            continue
        for a, b in split_sentences(line):
            s = line[a:b].strip()
            if 25 <= len(s) <= 260 and values_in(s) and not s.endswith((":", "：")) and s[0] not in "-*0123456789":
                out.append(s)
    return out


def _rows(chunk: RetrievedChunk) -> list[tuple[str, str, str, list[tuple[str, str]]]]:
    """(row subject, column, cell, the row's other (column, cell)) for each table cell holding a value."""
    out = []
    for unit in source_units(chunk.text, chunk.document):
        if not unit.cells or not any(unit.headers):
            continue
        subject = unit.cells[0]
        for j, cell in enumerate(unit.cells[1:], start=1):
            if j < len(unit.headers) and unit.headers[j] and values_in(cell):
                out.append((subject, unit.headers[j], cell, list(zip(unit.headers, unit.cells))))
    return out


def _replace_value(sentence: str, new: str, rng: random.Random) -> tuple[str, str] | None:
    """The sentence with one of its values (not a date, version or address) replaced by ``new``."""
    values = [v for v in values_in(sentence) if v.kind not in _SKIP_VALUE_KINDS]
    if not values:
        return None
    v = rng.choice(values)
    return sentence[:v.start] + new + sentence[v.end:], v.text


def _made_up(value_text: str, rng: random.Random) -> str:
    m = re.search(r"\d[\d,]*(?:\.\d+)?", value_text)
    if not m:
        return value_text
    number = float(m.group(0).replace(",", ""))
    made = number * rng.choice((3, 7, 0.25)) + rng.choice((11, 37, 123))
    shown = f"{made:,.0f}" if number >= 1000 or "," in m.group(0) else (f"{made:.1f}" if "." in m.group(0)
                                                                        else f"{made:.0f}")
    return value_text[:m.start()] + shown + value_text[m.end():]


_NAME_RE = re.compile(r"\b[A-Z][a-z]+ [A-Z]\d\b|\b[A-Z][a-z]+(?: (?:of |de |the )?[A-Z][a-z]+)+\b")


def _entities(chunks: Sequence[RetrievedChunk]) -> list[str]:
    """Names a claim's subject can be swapped for: model names ("Nimbus N2") and proper names of two or more
    capitalised words ("Grand Canyon")."""
    names = set()
    for c in chunks:
        names.update(n for n in _NAME_RE.findall(c.text) if not n.startswith(("The ", "In ", "A ", "An ")))
    return sorted(names)


def make_items(set_name: str, chunks: list[RetrievedChunk], rng: random.Random, per_passage: int = 2) -> list[Item]:
    items: list[Item] = []
    entities = _entities(chunks)
    by_unit: dict[str, list[str]] = defaultdict(list)  # value unit -> value texts over all passages
    for c in chunks:
        for s in _fact_sentences(c):
            for v in values_in(s):
                if v.kind and v.kind not in _SKIP_VALUE_KINDS:
                    by_unit[v.kind].append((c.chunk_id, v.text))
    for c in chunks:
        lang = _language(c.text)
        lead = _LEAD[lang]
        sentences = _fact_sentences(c)
        rng.shuffle(sentences)
        for s in sentences[:per_passage]:
            items.append(Item("true", set_name, lead + s, c.chunk_id))
            replaced = _replace_value(s, "", rng)
            if replaced is not None:
                _, old = replaced
                made = _replace_value(s, _made_up(old, rng), rng)
                if made and made[0] != s:
                    items.append(Item("made_up", set_name, lead + made[0], c.chunk_id))
                kind = next((v.kind for v in values_in(old)), "")
                pool = [t for cid, t in by_unit.get(kind, []) if cid != c.chunk_id and values_in(t)[0].key
                        != values_in(old)[0].key] if kind else []
                if pool:
                    spliced = _replace_value(s, rng.choice(pool), rng)
                    if spliced and spliced[0] != s:
                        items.append(Item("spliced", set_name, lead + spliced[0], c.chunk_id))
            own = [e for e in _NAME_RE.findall(s) if e in entities]
            others = [e for e in entities if e not in s and e not in c.text]
            if own and others:
                items.append(Item("other_entity", set_name, lead + s.replace(own[0], rng.choice(others)),
                                  c.chunk_id))
        # two sources' halves joined: the first half of this sentence, the second of another passage's
        other = rng.choice(chunks)
        other_sentences = _fact_sentences(other) if other is not c else []
        if sentences and other_sentences:
            a, b = sentences[0], rng.choice(other_sentences)
            cut_a, cut_b = len(a) // 2, len(b) // 2
            joined = a[:a.rfind(" ", 0, cut_a) if lang == "en" else cut_a].rstrip(", ") + \
                (" " if lang == "en" else "") + b[b.find(" ", cut_b) + 1 if lang == "en" else cut_b:]
            if values_in(b[cut_b:]) and joined not in (a, b):
                items.append(Item("spliced", set_name, lead + joined, c.chunk_id))
        rows = _rows(c)
        for subject, column, cell, _ in rows:
            items.append(Item("true", set_name, f"The {column.lower()} of the {subject} is {cell}.", c.chunk_id))
            swaps = [other_cell for s2, col2, other_cell, _ in rows
                     if col2 == column and s2 != subject and values_in(other_cell)
                     and values_in(other_cell)[0].key != values_in(cell)[0].key]
            if swaps:
                items.append(Item("row_swap", set_name,
                                  f"The {column.lower()} of the {subject} is {rng.choice(swaps)}.", c.chunk_id))
            other_columns = [(col2, c2) for s2, col2, c2, _ in rows if s2 == subject and col2 != column
                             and values_in(c2) and values_in(c2)[0].kind != values_in(cell)[0].kind]
            if other_columns:  # a value of another cell of the same row under this column's name
                items.append(Item("row_swap", set_name,
                                  f"The {column.lower()} of the {subject} is {rng.choice(other_columns)[1]}.",
                                  c.chunk_id))
    content_free = {
        "en": ["Based on the sources [1], the answer is in the documents.",
               "The provided documents contain the relevant information about this question.",
               "According to the sources, see the details above."],
        "zh": ["根据资料[1]，答案在文档中。", "相关信息请参考以上资料。"],
    }
    for c in chunks[: max(1, len(chunks) // 4)]:
        lang = _language(c.text)
        items.append(Item("content_free", set_name, rng.choice(content_free[lang]), c.chunk_id))
        items.append(Item("content_free", set_name, f"（1）[1]{re.sub(r'[^A-Za-z0-9]+', '_', c.document)[:30]}.md",
                          c.chunk_id))
    return items


def assign_sources(items: list[Item], chunks: list[RetrievedChunk], rng: random.Random, seed: int) -> None:
    by_id = {c.chunk_id: c for c in chunks}
    for item in items:
        own = by_id[item.source_id]
        others = rng.sample([c for c in chunks if c.chunk_id != own.chunk_id], k=min(3, len(chunks) - 1))
        sources = others + [own]
        rng.shuffle(sources)
        item.sources = sources
        position = sources.index(own) + 1
        item.claim = re.sub(r"\[1\]", f"[{position}]", item.claim)
        cites = rng.random() < 0.5 or "[" in item.claim
        item.cited = [position] if cites else []
        # by passage, so no passage feeds both splits; the demo KB (one pricing table) by claim instead
        key = item.claim if item.set_name == "demo" else item.source_id
        digest = hashlib.sha256(f"{seed}:{item.set_name}:{key}".encode()).digest()
        item.split = "fit" if digest[0] % 2 == 0 else "held_out"


# --------------------------------------------------------------------------
# Scoring
# --------------------------------------------------------------------------


def check(item: Item, judge: Judge | None = None) -> ClaimCheck:
    text = item.claim
    if item.cited and not re.search(r"\[\d+\]", text):
        text = f"{text.rstrip('.。')} [{item.cited[0]}]."
    result = check_claim(text, item.sources, item.cited, source_names(item.sources))
    return judge(text, item.sources, item.cited, result) if judge is not None else result


def evaluate(items: Iterable[Item], judge: Judge | None = None) -> dict[str, dict[str, dict[str, float]]]:
    """Per split and kind: n, and the share accepted (true) or flagged (false)."""
    tally: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for item in items:
        status = check(item, judge).status
        good = status == "supported" if item.truth else status in ("unsupported", "contradicted")
        for key in ((item.split, item.kind), (item.split, "all false" if not item.truth else "all true")):
            if key[1] == "all true" and item.kind == "true":
                continue
            tally[key][0] += 1
            tally[key][1] += int(good)
    out: dict[str, dict[str, dict[str, float]]] = defaultdict(dict)
    for (split, kind), (n, good) in sorted(tally.items()):
        out[split][kind] = {"n": n, "share": round(good / n, 4) if n else 0.0}
    return out


def examples(items: Iterable[Item], kind: str, split: str, limit: int = 8) -> list[dict]:
    """Misread claims of one kind in one split, for tuning (fit only)."""
    out = []
    for item in items:
        if item.kind != kind or item.split != split:
            continue
        result = check(item)
        good = result.status == "supported" if item.truth else result.status in ("unsupported", "contradicted")
        if not good:
            out.append({"claim": item.claim, "status": result.status, "reason": result.reason,
                        "evidence": result.evidence, "set": item.set_name})
        if len(out) >= limit:
            break
    return out


def build(per_set: int, seed: int, shared: Path = SHARED) -> list[Item]:
    rng = random.Random(seed)
    items: list[Item] = []
    sets = {"demo": demo_chunks()}
    for name in ("hotpotqa", "scifact", "cmrc2018"):
        sets[name] = shared_passages(name, per_set, rng, shared)
    for name, chunks in sets.items():
        if len(chunks) < 4:
            continue
        made = make_items(name, chunks, rng)
        assign_sources(made, chunks, rng, seed)
        items += made
    return items


def _once(judge: Judge) -> Judge:
    """``judge`` asked once per claim and source set (the tables read each claim twice)."""
    seen: dict[tuple, ClaimCheck] = {}

    def once(claim: str, sources: list[RetrievedChunk], cited: list[int], offline: ClaimCheck) -> ClaimCheck:
        key = (claim, tuple(c.chunk_id for c in sources), tuple(cited))
        if key not in seen:
            seen[key] = judge(claim, sources, cited, offline)
        return seen[key]
    once.calls = getattr(sys.modules.get(getattr(judge, "__module__", "")), "calls", None)  # type: ignore[attr-defined]
    return once


def _load_judge(spec: str) -> Judge:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name or "judge")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-set", type=int, default=120, help="passages taken from each shared set")
    parser.add_argument("--seed", type=int, default=20)
    parser.add_argument("--shared", type=Path, default=SHARED, help="the shared evaluation sets (read in place)")
    parser.add_argument("--judge", default="", help="module:function of a claim judge (see the module notes)")
    parser.add_argument("--show", default="", help="print misread fit-split claims of this kind (tuning)")
    parser.add_argument("--json", default="", help="write the table as JSON here")
    parser.add_argument("--split", choices=("both", "fit", "held_out"), default="both",
                        help="score one split only (a model judge makes one call per claim)")
    parser.add_argument("--sample", type=int, default=0, help="score a seeded sample of this many claims")
    args = parser.parse_args(argv)
    items = build(args.per_set, args.seed, args.shared)
    if args.split != "both":
        items = [item for item in items if item.split == args.split]
    if args.sample and args.sample < len(items):  # seeded, in the order built (a model judge is slow)
        picked = sorted(random.Random(args.seed).sample(range(len(items)), args.sample))
        items = [items[i] for i in picked]
    if args.show:
        for row in examples(items, args.show, "fit", 15):
            print(json.dumps(row, ensure_ascii=False))
        return 0
    judge = _once(_load_judge(args.judge)) if args.judge else None
    table = evaluate(items, judge)
    kinds = ["true", *KINDS_FALSE, "all false"]
    print(f"claim support ({'judge ' + args.judge if judge else 'offline'}), seed {args.seed}; "
          "true: share supported (target >= 0.90); false kinds: share unsupported or contradicted (target >= 0.95)")
    print("| kind | fit n | fit | held-out n | held-out |")
    print("|---|---:|---:|---:|---:|")
    for kind in kinds:
        fit, held = table.get("fit", {}).get(kind), table.get("held_out", {}).get(kind)
        cell = lambda r: (f"{r['n']} | {r['share']:.3f}" if r else "0 | —")  # noqa: E731
        print(f"| {kind} | {cell(fit)} | {cell(held)} |")
    per_set: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for item in items:
        if item.split != "held_out":
            continue
        status = check(item, judge).status
        good = status == "supported" if item.truth else status in ("unsupported", "contradicted")
        row = per_set[item.set_name]["true" if item.truth else "false"]
        row[0] += 1
        row[1] += int(good)
    print("\nheld-out by set: | set | true accepted | false flagged |")
    for name, rows in per_set.items():
        t, f = rows["true"], rows["false"]
        print(f"| {name} | {t[1]}/{t[0]} | {f[1]}/{f[0]} |")
    if judge is not None and getattr(judge, "calls", None) is not None:
        print("\njudge calls:", dict(sorted(judge.calls.items())))
    if args.json:
        Path(args.json).write_text(json.dumps({"table": table, "seed": args.seed}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
