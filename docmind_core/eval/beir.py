"""BEIR-format datasets, the chunking used to index them, and a cache of their embeddings.

A BEIR folder holds ``corpus.jsonl`` (id, title, text), ``queries.jsonl`` (id,
text, optional answers) and ``qrels.tsv`` (query-id, corpus-id, score).  The
evaluation indexes *chunks*, so chunk-level answer recall means what it says;
document metrics take a document's best chunk.  :func:`chunk_text` packs whole
sentences into windows of ``rag.chunk_tokens`` with ``rag.chunk_overlap_tokens``
of overlap and no parent blocks.  The ingestor (``ingest/chunking.py``) cuts
children inside parent blocks of ``rag.parent_tokens``: the two agree on a
document that fits in one child and differ on longer ones, so these benchmarks
measure retrieval over this chunking, not over an ingested KB's.

Encoding a corpus with the bundled encoder takes minutes, so the vectors are
kept on disk under ``<home>/cache/embeddings``, keyed by the embedder id and
the sha256 of the corpus file plus the chunking parameters.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from docmind_core.errors import CallerError
from docmind_core.text.tokens import count_tokens, split_sentences, truncate_to_tokens


@dataclass(frozen=True)
class BeirQuery:
    id: str
    text: str
    answers: tuple[str, ...] = ()


@dataclass(frozen=True)
class EvalChunk:
    chunk_id: str
    doc_id: str
    text: str


@dataclass
class BeirDataset:
    name: str
    corpus: dict[str, tuple[str, str]]  # doc id -> (title, text), file order
    queries: list[BeirQuery]
    qrels: dict[str, dict[str, int]]  # query id -> {doc id: grade}
    corpus_sha256: str = ""
    chunks: list[EvalChunk] = field(default_factory=list)


def load_beir(folder: Path, limit: int | None = None) -> BeirDataset:
    """Read a BEIR folder; ``limit`` keeps the first N judged queries (the corpus stays whole)."""
    folder = Path(folder)
    paths = {name: folder / name for name in ("corpus.jsonl", "queries.jsonl", "qrels.tsv")}
    missing = [name for name, p in paths.items() if not p.is_file()]
    if missing:
        raise CallerError(f"{folder} is not a BEIR folder: missing {', '.join(missing)}")
    raw = paths["corpus.jsonl"].read_bytes()
    corpus: dict[str, tuple[str, str]] = {}
    for line in raw.decode("utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            corpus[str(row["id"])] = (row.get("title") or "", row.get("text") or "")
    qrels: dict[str, dict[str, int]] = {}
    with paths["qrels.tsv"].open(encoding="utf-8") as fh:
        for n, line in enumerate(fh):
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3 or (n == 0 and not parts[2].strip().lstrip("-").isdigit()):
                continue  # header or blank line
            # a query judged only non-relevant is still judged: it scores 0, as in BEIR (its qrels keep it)
            judged = qrels.setdefault(parts[0], {})
            if int(parts[2]) > 0:
                judged[parts[1]] = int(parts[2])
    queries: list[BeirQuery] = []
    with paths["queries.jsonl"].open(encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            row = json.loads(line)
            qid = str(row["id"])
            if qid in qrels:  # unjudged queries cannot be scored
                queries.append(BeirQuery(qid, row["text"], tuple(row.get("answers") or ())))
    if limit:
        queries = queries[:limit]
    return BeirDataset(folder.name, corpus, queries, qrels, hashlib.sha256(raw).hexdigest())


def chunk_text(text: str, max_tokens: int, overlap: int) -> list[str]:
    """Pack whole sentences into windows of at most ``max_tokens``; ``max_tokens <= 0`` keeps the text whole."""
    if max_tokens <= 0 or count_tokens(text) <= max_tokens:
        return [text]
    pieces: list[tuple[str, int]] = []
    for a, b in split_sentences(text):
        sent = text[a:b].strip()
        if not sent:
            continue
        while count_tokens(sent) > max_tokens:  # an over-long sentence is cut at token boundaries
            head = truncate_to_tokens(sent, max_tokens)
            if not head:
                break
            pieces.append((head, count_tokens(head)))
            sent = sent[len(head):].strip()
        if sent:
            pieces.append((sent, count_tokens(sent)))
    chunks: list[str] = []
    i = 0
    while i < len(pieces):
        j, used = i, 0
        while j < len(pieces) and used + pieces[j][1] <= max_tokens:
            used += pieces[j][1]
            j += 1
        j = max(j, i + 1)
        chunks.append(_join([p for p, _ in pieces[i:j]]))
        if j >= len(pieces):
            break
        # step back over whole sentences worth at most ``overlap`` tokens
        back, k = 0, j
        while k - 1 > i and back + pieces[k - 1][1] <= overlap:
            k -= 1
            back += pieces[k][1]
        i = k
    return chunks


def _join(parts: list[str]) -> str:
    out = ""
    for p in parts:
        if out and re.match(r"[A-Za-z0-9(]", p) and not re.search(r"[\u3400-\u9fff]$", out):
            out += " "
        out += p
    return out


def chunk_corpus(dataset: BeirDataset, max_tokens: int, overlap: int) -> list[EvalChunk]:
    chunks: list[EvalChunk] = []
    for doc_id, (title, text) in dataset.corpus.items():
        body = f"{title}\n{text}" if title else text
        for n, piece in enumerate(chunk_text(body, max_tokens, overlap)):
            chunks.append(EvalChunk(f"{doc_id}#{n}", doc_id, piece))
    dataset.chunks = chunks
    return chunks


class EmbeddingCache:
    """Vectors of one dataset's chunks (or queries) for one embedder, stored as .npy files."""

    def __init__(self, directory: Path):
        self.directory = Path(directory) / "embeddings"

    def _path(self, embedder_id: str, key: str) -> Path:
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", embedder_id)[-60:]
        return self.directory / slug / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.npy"

    def get_or_compute(self, embedder_id: str, key: str, texts: list[str],
                       encode: Callable[[list[str]], np.ndarray], batch: int = 256,
                       progress: Callable[[int, int], None] | None = None) -> np.ndarray:
        path = self._path(embedder_id, key)
        if path.is_file():
            vecs = np.load(path)
            if vecs.shape[0] == len(texts):
                return vecs
        parts = []
        for start in range(0, len(texts), batch):
            parts.append(np.asarray(encode(texts[start:start + batch]), dtype=np.float32))
            if progress:
                progress(min(start + batch, len(texts)), len(texts))
        vecs = np.concatenate(parts) if parts else np.zeros((0, 1), dtype=np.float32)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npy")
        np.save(tmp, vecs)
        tmp.replace(path)  # atomic: a killed run never leaves a truncated cache file
        return vecs


def corpus_cache_key(dataset: BeirDataset, max_tokens: int, overlap: int) -> str:
    return f"corpus:{dataset.corpus_sha256}:chunks={max_tokens}/{overlap}:v1"


def queries_cache_key(dataset: BeirDataset) -> str:
    digest = hashlib.sha256("\n".join(q.text for q in dataset.queries).encode()).hexdigest()
    return f"queries:{dataset.corpus_sha256}:{digest}:v1"
