"""Does the offline engine's extractive answer hold the answer?  Answer containment on CMRC 2018 and HotpotQA.

    python bench/offline_reader.py [EVAL_DIR] [--sets cmrc2018,hotpotqa] [--k 5] [--baseline REF] [--limit N]

EVAL_DIR is the shared eval folder (default: ``$DOCMIND_EVAL_DIR``), read in place.  Each set's corpus is cut
into chunks as the retrieval benches cut it (``eval/beir.chunk_corpus`` with the default ``rag`` settings) and
indexed by the product's in-memory BM25 (``backends/keyword_memory.PostingsCopy``, the scores FTS5 gives); a
question's context is its top ``--k`` chunks (default: ``retrieval.final_top_k``, as many as an answer gets).
Only questions whose gold passage is in that context are scored: the measure is the reader, not retrieval.
"Gold passage in context" is read two ways: *any* gold passage (a HotpotQA question has two: the first hop
often does not hold the answer), and *answer-bearing*, the gold passage that holds a gold answer string (when
none holds one verbatim, any gold passage).  On CMRC 2018 (one gold passage) the two agree.

*Containment*: some gold answer string, normalised (NFKC, lower case, punctuation as spaces), occurs in the
normalised reply (its citation markers removed) as whole words (Chinese: as characters), and the reply does
not decline (a decline names the retrieved documents, and a HotpotQA title is often the answer).  Only factoid
questions count: HotpotQA's yes/no comparisons ("Were X and Y of the same nationality?") are left out, since
a quoting reader never says yes or no and "no" would be found inside other words.  Also printed: *supported*, the share of the reply's
cited claims the offline claim check (``answer/claims.check_claims``) accepts; *declined*, the share of
replies that say the sources do not answer; *reply chars*, the mean length of the quoted lines (a reader
that quoted more would contain more).

The questions are split by the sha256 of their id into a fit half and a report half, fixed once: the reader
is tuned on fit and reported on report.  The same run answers each question with the reader of ``--baseline``
(a git revision, default the commit before this work), loaded from git, so both rows come from one context.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import time
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["ANONYMIZED_TELEMETRY"] = "False"

BASELINE = "83755a9"  # the commit this reader work started from
READER = "docmind_core/backends/offline/extractive.py"
SETS = ("cmrc2018", "hotpotqa")
GOLD = ("any", "answer-bearing")  # which gold passage must be in the context
_MARKER = re.compile(r"\[\d+(?:\s*[,，]\s*\d+)*\]")
_DECLINED = re.compile(r"do not contain an answer|没有能回答|cannot answer|无法根据资料")


def split_of(query_id: str) -> str:
    """"fit" or "report", by the id's hash: fixed, and independent of the order of the file."""
    return "fit" if int(hashlib.sha256(query_id.encode()).hexdigest()[:8], 16) % 2 == 0 else "report"


def normalised(text: str) -> str:
    """Lower case NFKC words separated by single spaces; no space next to a CJK character."""
    text = unicodedata.normalize("NFKC", _MARKER.sub(" ", text)).lower()
    text = " ".join("".join(c if c.isalnum() else " " for c in text).split())
    return re.sub(r"(?<=[\u3400-\u9fff]) | (?=[\u3400-\u9fff])", "", text)


def contains(reply: str, answers) -> bool:
    """Some answer occurs in the reply as whole words ("no" is not found in "North")."""
    body = f" {normalised(reply)} "
    for answer in answers:
        gold = normalised(answer)
        if not gold:
            continue
        if re.search(r"[\u3400-\u9fff]", gold) and gold in body:
            return True
        if re.search(r"(?:^|[ \u3400-\u9fff])" + re.escape(gold) + r"(?:$|[ \u3400-\u9fff])", body.strip()):
            return True
    return False


def factoid(answers) -> bool:
    """An answer a reader can quote: not HotpotQA's "yes" / "no" of a comparison."""
    return not any(a.strip().lower() in ("yes", "no") for a in answers)


def load_reader(revision: str | None):
    """``extractive_answer`` of the working tree (None) or of a git revision, as a module of its own."""
    if revision is None:
        from docmind_core.backends.offline.extractive import extractive_answer
        return extractive_answer
    source = subprocess.run(["git", "show", f"{revision}:{READER}"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    with tempfile.TemporaryDirectory(prefix="reader-baseline-") as folder:
        path = Path(folder) / "extractive_baseline.py"
        path.write_text(source, encoding="utf-8")
        spec = importlib.util.spec_from_file_location("extractive_baseline", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)  # the file is read here; the module needs it no longer
    return module.extractive_answer


@dataclass
class Tally:
    n: int = 0
    contained: int = 0
    declined: int = 0
    claims: int = 0
    supported: int = 0
    chars: int = 0
    misses: list = field(default_factory=list)

    def row(self) -> str:
        share = self.contained / self.n if self.n else 0.0
        sup = f"{self.supported / self.claims:.2f}" if self.claims else "-"
        return (f"{share:.3f} ({self.contained}/{self.n}) | {sup} | {self.declined / max(self.n, 1):.2f} | "
                f"{self.chars / max(self.n, 1):.0f}")


def contexts(name: str, eval_dir: Path, k: int | None, limit: int | None):
    """(query, top-k chunks as RetrievedChunk, answer-bearing gold passage in them) for each factoid query
    whose gold passage is in them (k: the product's ``retrieval.final_top_k`` when None)."""
    from docmind_core.backends.keyword_index import index_terms
    from docmind_core.backends.keyword_memory import PostingsCopy
    from docmind_core.eval.beir import chunk_corpus, load_beir
    from docmind_core.settings import Settings
    from docmind_core.values import RetrievedChunk

    settings = Settings()
    k = k or settings.retrieval.final_top_k
    stem = settings.keyword.english_stemming
    dataset = load_beir(eval_dir / name)
    chunks = chunk_corpus(dataset, settings.rag.chunk_tokens, settings.rag.chunk_overlap_tokens)
    number = {doc: i for i, doc in enumerate(dataset.corpus)}
    index = PostingsCopy.build(0, [" ".join(index_terms(c.text, stem)) for c in chunks],
                               [c.chunk_id for c in chunks], [number[c.doc_id] for c in chunks])
    by_id = {c.chunk_id: c for c in chunks}
    queries = [q for q in dataset.queries if q.answers and factoid(q.answers)]
    if limit:
        queries = queries[:limit]
    found = []
    for q in queries:
        hits = index.search(index_terms(q.text, stem), k)
        ranked = [by_id[cid] for cid, _ in hits]
        gold = {d for d, grade in dataset.qrels.get(q.id, {}).items() if grade > 0}
        if not any(c.doc_id in gold for c in ranked):
            continue
        # the gold passage that holds an answer string (HotpotQA's other one is the first hop); when none
        # holds one verbatim (a free-form answer), any gold passage
        bearing = {d for d in gold if contains(" ".join(dataset.corpus[d]), q.answers)} or gold
        found.append((q, bearing & {c.doc_id for c in ranked} != set(), [RetrievedChunk(chunk_id=c.chunk_id, doc_id=number[c.doc_id], kb_id=1,
                                         document=dataset.corpus[c.doc_id][0] or c.doc_id, text=c.text,
                                         chunk_index=int(c.chunk_id.rsplit("#", 1)[1]))
                                   for c in ranked]))
    return found, len(queries), k


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("eval_dir", nargs="?", default=os.environ.get("DOCMIND_EVAL_DIR"))
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--k", type=int, default=None,
                        help="chunks in a question's context (default: retrieval.final_top_k)")
    parser.add_argument("--baseline", default=BASELINE, help="git revision of the baseline reader ('' for none)")
    parser.add_argument("--limit", type=int, default=None, help="the first N questions of each set")
    parser.add_argument("--show", type=int, default=0, help="print N misses of each set (fit split only)")
    args = parser.parse_args()
    if not args.eval_dir:
        parser.error("give EVAL_DIR or set DOCMIND_EVAL_DIR to the shared eval folder")
    from docmind_core.answer.claims import check_claims
    from docmind_core.text.tokens import detect_language

    import functools

    from docmind_core.backends.embedders import Usem3Embedder

    reader = load_reader(None)
    # as the product runs it: the offline engine reads with the bundled encoder (units in the other language)
    readers = {"this tree, words only": reader,
               "this tree": functools.partial(reader, encoder=Usem3Embedder())}
    if args.baseline:
        readers = {f"baseline {args.baseline}": load_reader(args.baseline), **readers}
    print("| set | gold passage in context | split | reader | containment | cited claims supported | declined "
          "| reply chars |")
    print("|---|---|---|---|---:|---:|---:|---:|")
    for name in args.sets.split(","):
        start = time.perf_counter()
        found, asked, k = contexts(name, Path(args.eval_dir), args.k, args.limit)
        tallies = {(gold, label, split): Tally() for gold in GOLD for label in readers for split in ("fit", "report")}
        for q, bearing_in, chunks in found:
            language = "zh" if detect_language(q.text) == "zh" else "en"
            split = split_of(q.id)
            for label, reader in readers.items():
                reply = reader(q.text, chunks, language)
                # a reply that declines names the retrieved documents, and a HotpotQA title is often the
                # answer itself ("Clint Eastwood"): a decline never counts as containing the answer
                hit = contains(reply, q.answers) and not _DECLINED.search(reply)
                claims = [c for c in check_claims(reply, chunks) if _MARKER.search(c.text)]
                for gold in GOLD if bearing_in else GOLD[:1]:
                    t = tallies[(gold, label, split)]
                    t.n += 1
                    t.contained += hit
                    t.declined += bool(_DECLINED.search(reply))
                    t.claims += len(claims)
                    t.supported += sum(c.status == "supported" for c in claims)
                    t.chars += len(_MARKER.sub("", reply.partition("\n")[2]))
                    if not hit and split == "fit" and gold == GOLD[1]:
                        t.misses.append((q.text, q.answers, reply))
        for (gold, label, split), t in tallies.items():
            print(f"| {name} | {gold} | {split} | {label} | {t.row()} |")
        print(f"<!-- {name}: {len(found)} of {asked} factoid questions have a gold passage in the top {k} chunks; "
              f"{time.perf_counter() - start:.0f} s -->")
        if args.show:
            t = tallies[(GOLD[1], "this tree", "fit")]
            for text, answers, reply in t.misses[: args.show]:
                print(f"\nQ: {text}\nGOLD: {answers}\n{reply}")


if __name__ == "__main__":
    main()
