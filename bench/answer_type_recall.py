"""How often would the answer-type check cap a right answer?  Measured on the shared QA sets, offline.

For each question of a set with gold answer strings (``../shared/eval``: hotpotqa in English, cmrc2018 in
Chinese, read in place), the right answer is played by the sentence of a gold passage that holds a gold
answer string, taken as a supported claim (what an extractive answer quotes).  The check
(docmind_core/answer/answer_type.py) then says whether the question asks for a kind of value and whether that
sentence states one.  A "missing" verdict here is a false cap: a right, supported answer that would lose
band HIGH.  Questions whose gold passages hold no answer string are skipped.

Also printed: the kinds asked, and the false caps per kind with a few examples.

Usage: python bench/answer_type_recall.py [--shared ../shared/eval] [--sets hotpotqa,cmrc2018] [--limit N]
       [--show K]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from docmind_core.answer.answer_type import check_answer_type  # noqa: E402
from docmind_core.values import ClaimCheck  # noqa: E402
from docmind_core.text.tokens import sentences  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "eval"


def load_set(folder: Path):
    corpus = {}
    for line in (folder / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            doc = json.loads(line)
            corpus[doc["_id"] if "_id" in doc else doc["id"]] = doc
    qrels: dict[str, list[str]] = {}
    for line in (folder / "qrels.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        parts = line.split("\t")
        if len(parts) >= 3 and parts[2].strip() not in ("0", ""):
            qrels.setdefault(parts[0], []).append(parts[1])
    queries = [json.loads(line) for line in (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines()
               if line.strip()]
    return corpus, qrels, queries


def answer_sentence(query: dict, corpus: dict, qrels: dict) -> str:
    answers = [a for a in query.get("answers") or [] if isinstance(a, str) and a.strip()]
    for doc_id in qrels.get(query["id"], []):
        doc = corpus.get(doc_id)
        if doc is None:
            continue
        title = doc.get("title", "")
        for sentence in sentences(doc.get("text", "")):
            if any(a.lower() in sentence.lower() for a in answers):
                return f"{title}: {sentence}" if title and title.lower() not in sentence.lower() else sentence
    return ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=SHARED)
    parser.add_argument("--sets", default="hotpotqa,cmrc2018")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--show", type=int, default=3, help="examples of false caps per kind")
    args = parser.parse_args()
    print("| set | questions with an answer sentence | asking for a value | false caps (right answer capped) |")
    print("|---|---:|---:|---:|")
    notes = []
    for name in args.sets.split(","):
        corpus, qrels, queries = load_set(args.shared / name)
        asked, capped, n = Counter(), Counter(), 0
        examples: dict[str, list[str]] = {}
        for query in queries[: args.limit]:
            sentence = answer_sentence(query, corpus, qrels)
            if not sentence:
                continue
            n += 1
            claim = ClaimCheck(text=sentence, char_start=0, char_end=len(sentence), status="supported")
            check = check_answer_type(query["text"], [claim])
            for kind in check.asked:
                asked[kind] += 1
            for kind in check.missing:
                capped[kind] += 1
                examples.setdefault(kind, []).append(f"{query['text']} -> {sentence[:160]}")
        total_asked = sum(1 for _ in asked.elements())
        total_capped = sum(capped.values())
        print(f"| {name} | {n} | {total_asked} ({dict(asked)}) | {total_capped} ({total_capped / n:.1%} of all; "
              f"{dict(capped)}) |")
        for kind, lines in examples.items():
            notes += [f"{name} {kind}: {line}" for line in lines[: args.show]]
    if notes:
        print("\nExamples of false caps:")
        print("\n".join(f"- {line}" for line in notes))


if __name__ == "__main__":
    main()
