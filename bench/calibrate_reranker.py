"""Fit the OfflineReranker's logistic weights and print them.

Data (kept apart from every figure reported in bench/RESULTS.md except
hybrid_rerank on the full sets, where it is flagged):

* HotpotQA queries 401-500 of shared/eval/hotpotqa (comparison questions):
  every chunk of the question's own distractor-setting paragraphs; chunks of
  the 2 supporting paragraphs are relevant, the distractors are hard
  negatives; plus chunks of 8 random paragraphs of other questions (unrelated).
* CMRC 2018 queries 2920-3219: the chunks of the gold passage that contain a
  gold answer are relevant; its other chunks and 4 chunks of other passages
  sharing the most character bigrams with the question are hard negatives;
  plus 4 random chunks (unrelated).

Features are computed exactly as at query time (``rerankers.relevance_features``,
with --titles also the document title, as the evaluation names documents),
with the cosine from the cached chunk embeddings and the keyword signal as the
chunk's BM25 score (rank_bm25 over the dataset's chunks, top 100 kept, like the
keyword retriever's depth) divided by the best score in the candidate batch.

The fit: L2-regularised logistic regression (Newton steps), classes balanced
by sample weights.  Afterwards the intercept is lowered, if needed, until at
most 20% of the unrelated pairs score above 0.25.

Usage: python bench/calibrate_reranker.py EVAL_DIR [--cache DIR] [--titles]
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from docmind_core.backends.embedders import Usem3Embedder  # noqa: E402
from docmind_core.backends.rerankers import FEATURES, analyse_query, logistic, relevance_features  # noqa: E402
from docmind_core.eval.beir import (EmbeddingCache, chunk_corpus, corpus_cache_key, load_beir,  # noqa: E402
                                    queries_cache_key)
from docmind_core.settings import Settings  # noqa: E402
from docmind_core.text.tokens import keyword_tokens  # noqa: E402

HOTPOT_HELD_OUT = range(400, 500)
CMRC_HELD_OUT = range(2919, 3219)
KEYWORD_DEPTH = 100
USE_TITLES = False  # --titles: count the document title towards coverage (OfflineReranker(use_titles=True))


def _load(eval_dir: Path, name: str, cache: EmbeddingCache, embedder):
    s = Settings()
    ds = load_beir(eval_dir / name)
    chunks = chunk_corpus(ds, s.rag.chunk_tokens, s.rag.chunk_overlap_tokens)
    vecs = cache.get_or_compute(embedder.id, corpus_cache_key(ds, s.rag.chunk_tokens, s.rag.chunk_overlap_tokens),
                                [c.text for c in chunks], embedder.embed)
    qvecs = cache.get_or_compute(embedder.id, queries_cache_key(ds), [q.text for q in ds.queries], embedder.embed)
    return ds, chunks, vecs, qvecs


def _bm25(chunks):
    from rank_bm25 import BM25Okapi

    return BM25Okapi([keyword_tokens(c.text, stem=True) or ["_"] for c in chunks])


def _rows(query, qvec, cand_idx, labels, kinds, chunks, vecs, bm25, titles):
    scores = bm25.get_scores(keyword_tokens(query, stem=True))
    top = set(np.argsort(-scores)[:KEYWORD_DEPTH].tolist())
    kw = [scores[i] if i in top and scores[i] > 0 else 0.0 for i in cand_idx]
    best = max(kw) if max(kw, default=0) > 0 else 1.0
    terms = analyse_query(query)
    out = []
    for i, label, kind, k in zip(cand_idx, labels, kinds, kw):
        title = titles.get(chunks[i].doc_id, "") if USE_TITLES else ""
        out.append((relevance_features(terms, chunks[i].text, float(vecs[i] @ qvec), k / best, title=title),
                    label, kind))
    return out


def _chunks_by_doc(chunks) -> dict[str, list[int]]:
    by_doc: dict[str, list[int]] = {}
    for i, c in enumerate(chunks):
        by_doc.setdefault(c.doc_id, []).append(i)
    return by_doc


def hotpot_rows(eval_dir, cache, embedder, rng):
    ds, chunks, vecs, qvecs = _load(eval_dir, "hotpotqa", cache, embedder)
    by_doc = _chunks_by_doc(chunks)
    cands: dict[str, list[str]] = {}
    with (eval_dir / "hotpotqa" / "distractor_candidates.tsv").open() as fh:
        next(fh)
        for line in fh:
            q, d = line.rstrip("\n").split("\t")
            cands.setdefault(q, []).append(d)
    bm25 = _bm25(chunks)
    titles = {d: t for d, (t, _x) in ds.corpus.items()}  # the document name the chunk carries at query time
    all_docs = list(ds.corpus)
    rows = []
    for qi in HOTPOT_HELD_OUT:
        q = ds.queries[qi]
        rel = {d for d, grade in ds.qrels.get(q.id, {}).items() if grade > 0}  # a grade-0 judgment is not relevant
        if not rel:  # judged only non-relevant: nothing to label as relevant
            continue
        own = cands[q.id]
        others = [d for d in rng.sample(all_docs, 12) if d not in own][:8]
        idx, labels, kinds = [], [], []
        for d in own + others:
            for i in by_doc[d]:
                idx.append(i)
                labels.append(1 if d in rel else 0)
                kinds.append("relevant" if d in rel else ("hard" if d in own else "unrelated"))
        rows += _rows(q.text, qvecs[qi], idx, labels, kinds, chunks, vecs, bm25, titles)
    return rows


def cmrc_rows(eval_dir, cache, embedder, rng):
    ds, chunks, vecs, qvecs = _load(eval_dir, "cmrc2018", cache, embedder)
    by_doc = _chunks_by_doc(chunks)
    bigrams = [{a + b for a, b in zip(c.text, c.text[1:])} for c in chunks]
    bm25 = _bm25(chunks)
    titles = {d: t for d, (t, _x) in ds.corpus.items()}
    rows = []
    for qi in CMRC_HELD_OUT:
        q = ds.queries[qi]
        gold = next((d for d, grade in ds.qrels.get(q.id, {}).items() if grade > 0), None)
        if gold is None:  # judged only non-relevant: no gold passage to label chunks from
            continue
        answers = [a for a in q.answers if a.strip()]
        own = by_doc[gold]
        labels = [1 if any(a in chunks[i].text for a in answers) else 0 for i in own]
        if not any(labels):
            continue  # no verbatim answer: the positive chunk is unknown
        qb = {a + b for a, b in zip(q.text, q.text[1:])}
        near = sorted((i for i in range(len(chunks)) if chunks[i].doc_id != gold),
                      key=lambda i: -len(qb & bigrams[i]))[:4]
        rand = [i for i in rng.sample(range(len(chunks)), 6) if chunks[i].doc_id != gold][:4]
        idx = own + near + rand
        labs = labels + [0] * (len(near) + len(rand))
        kinds = ["relevant" if l else "hard" for l in labels] + ["hard"] * len(near) + ["unrelated"] * len(rand)
        rows += _rows(q.text, qvecs[qi], idx, labs, kinds, chunks, vecs, bm25, titles)
    return rows


def fit_logistic(X: np.ndarray, y: np.ndarray, l2: float = 1e-2, steps: int = 50) -> np.ndarray:
    Xb = np.hstack([np.ones((len(X), 1)), X])
    pos = y.mean()
    sw = np.where(y == 1, 0.5 / pos, 0.5 / (1 - pos))  # balanced classes
    w = np.zeros(Xb.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(Xb @ w)))
        grad = Xb.T @ (sw * (p - y)) + l2 * np.r_[0, w[1:]]
        H = (Xb * (sw * p * (1 - p))[:, None]).T @ Xb + l2 * np.diag(np.r_[0, np.ones(len(w) - 1)])
        w -= np.linalg.solve(H, grad)
    return w


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("eval_dir", type=Path)
    ap.add_argument("--cache", type=Path, default=Path("data/cache"))
    ap.add_argument("--titles", action="store_true", help="fit the title-aware variant")
    args = ap.parse_args()
    global USE_TITLES
    USE_TITLES = args.titles
    rng = random.Random(13)
    embedder = Usem3Embedder()
    cache = EmbeddingCache(args.cache)
    rows = hotpot_rows(args.eval_dir, cache, embedder, rng) + cmrc_rows(args.eval_dir, cache, embedder, rng)
    X = np.array([r[0] for r in rows])
    y = np.array([r[1] for r in rows], dtype=float)
    kinds = np.array([r[2] for r in rows])
    w = fit_logistic(X, y)
    weights = {"bias": float(w[0]), **{f: float(v) for f, v in zip(FEATURES, w[1:])}}
    probs = lambda ws: np.array([logistic(x, ws) for x in X])  # noqa: E731
    p = probs(weights)
    while np.mean(p[kinds == "unrelated"] > 0.25) > 0.2:
        weights["bias"] -= 0.1
        p = probs(weights)
    print(f"pairs: {len(rows)} ({int(y.sum())} relevant, {int((kinds == 'hard').sum())} hard negatives, "
          f"{int((kinds == 'unrelated').sum())} unrelated)")
    print("WEIGHTS = {" + ", ".join(f'"{k}": {v:.3f}' for k, v in weights.items()) + "}")
    print("(the committed WEIGHTS replace 'code' by a hand-set prior of 0.8: this data holds no product codes)")
    for kind in ("relevant", "hard", "unrelated"):
        v = p[kinds == kind]
        print(f"{kind:9s} n={len(v):5d}  median={np.median(v):.3f}  >=0.65: {np.mean(v >= 0.65):.2f}  "
              f"<=0.25: {np.mean(v <= 0.25):.2f}")


if __name__ == "__main__":
    main()
