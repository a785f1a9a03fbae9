"""Query-aware compression of the evidence to a token budget.

The chunks arrive best first.  When their total (``text.count_tokens`` summed
per chunk) exceeds the budget:

1. Water-fill: find the largest per-chunk cap ``c`` such that
   ``sum(min(tokens_i, c)) <= budget``.  Chunks under the cap stay whole;
   longer ones are shortened to at most ``c`` tokens.
2. If ``c`` would fall under ``MIN_USEFUL_TOKENS`` (too many chunks for the
   budget), the lowest-ranked chunks are dropped first (cut_by="budget").
3. Shortening keeps the chunk's sentences that best match the query (weighted
   salient-term hits, Chinese character bigrams as a fallback), in their
   original order; a single over-long sentence is cut at a token boundary.

The total never exceeds the budget, for Chinese and English alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from docmind_core.values import CutBy, RetrievedChunk
from docmind_core.text.tokens import count_tokens, is_cjk, keyword_tokens, salient_terms, split_sentences, truncate_to_tokens

MIN_USEFUL_TOKENS = 40


@dataclass
class Compression:
    chunks: list[RetrievedChunk]  # kept, possibly shortened, in input order
    dropped: list[RetrievedChunk] = field(default_factory=list)  # cut_by="budget", kept=False
    used_tokens: int = 0


def water_level(lengths: Sequence[int], budget: int) -> int:
    """The largest cap c with sum(min(l, c)) <= budget."""
    lo, hi = 0, max(lengths, default=0)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(min(n, mid) for n in lengths) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _cjk_bigrams(text: str) -> set[str]:
    chars = [c for c in text if is_cjk(c)]
    return {a + b for a, b in zip(chars, chars[1:])}


class SentenceScorer:
    """How well a sentence matches the query: weighted salient-term hits, plus Chinese bigram overlap."""

    def __init__(self, query: str):
        self.weights = salient_terms(query)
        self.stemmed = {t: (keyword_tokens(t, stem=True) or [t])[0] for t in self.weights}
        self.bigrams = _cjk_bigrams(query)

    def score(self, sentence: str) -> float:
        toks = set(keyword_tokens(sentence, stem=False)) | set(keyword_tokens(sentence, stem=True))
        low = sentence.lower()
        value = sum(w for t, w in self.weights.items()
                    if t in toks or self.stemmed[t] in toks or (is_cjk(t[0]) and t in low))
        if self.bigrams:
            value += 0.5 * len(self.bigrams & _cjk_bigrams(sentence)) / len(self.bigrams)
        return value


def shorten(text: str, cap: int, scorer: SentenceScorer) -> str:
    """At most ``cap`` tokens of ``text``: its most query-relevant sentences, in document order."""
    if count_tokens(text) <= cap:
        return text
    spans = [(a, b) for a, b in split_sentences(text) if text[a:b].strip()]
    scored = [(scorer.score(text[a:b]), -i, i) for i, (a, b) in enumerate(spans)]
    chosen: list[int] = []
    used = 0
    for _score, _neg, i in sorted(scored, reverse=True):  # best first; earlier sentence wins ties
        cost = count_tokens(text[spans[i][0]:spans[i][1]])
        if used + cost <= cap:
            chosen.append(i)
            used += cost
    if not chosen:  # every sentence is longer than the cap: cut the best one
        best = max(scored)[2]
        return truncate_to_tokens(text[spans[best][0]:spans[best][1]].strip(), cap)
    pieces = [text[spans[i][0]:spans[i][1]].strip() for i in sorted(chosen)]
    joined = ""
    for p in pieces:
        joined += ("" if not joined or is_cjk(joined[-1]) or is_cjk(p[0]) else " ") + p
    # joining never adds tokens, but guard the invariant anyway
    return joined if count_tokens(joined) <= cap else truncate_to_tokens(joined, cap)


def compress_to_budget(query: str, chunks: Sequence[RetrievedChunk], max_tokens: int) -> Compression:
    """Fit ``chunks`` (best first) into ``max_tokens``; see the module docstring."""
    kept = list(chunks)
    lengths = [count_tokens(c.text) for c in kept]
    if sum(lengths) <= max_tokens:
        return Compression(kept, [], sum(lengths))
    dropped: list[RetrievedChunk] = []
    while len(kept) > 1 and water_level(lengths, max_tokens) < min(MIN_USEFUL_TOKENS, max(lengths)):
        dropped.append(kept.pop())
        lengths.pop()
    cap = water_level(lengths, max_tokens)
    scorer = SentenceScorer(query)
    out: list[RetrievedChunk] = []
    used = 0
    for chunk, n in zip(kept, lengths):
        text = chunk.text if n <= cap else shorten(chunk.text, cap, scorer)
        if not text.strip():
            dropped.append(chunk)
            continue
        out.append(chunk if text is chunk.text else chunk.model_copy(update={"text": text, "terms": None}))
        used += count_tokens(text)
    dropped = [c.model_copy(update={"kept": False, "cut_by": CutBy.BUDGET}) for c in dropped]
    return Compression(out, dropped, used)
