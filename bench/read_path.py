"""What reading only complete documents costs a search (issue 12 item 2) and what the missing-vector check
costs (item 3), on a synthetic KB in a temp folder (no encoder, no vector store).

    python bench/read_path.py [--documents 1000] [--chunks-per-document 10] [--repeat 300] [--json]

Timed (median of ``--repeat`` runs):
* ``get_chunks_ready_ms`` / ``get_chunks_any_ms``: hydrating 40 random chunk ids (a search's hits), with
  the join that keeps complete documents only, and without it;
* ``ready_chunk_count_ms``: the count of a KB's ready chunks (taken again only when the KB changed);
* ``change_signature_ms``: the documents-table signature (used when the keyword backend has no generation);
* ``reindex_signature_ms``: the re-index runs signature (every search).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

from docmind_core.values import ChunkRecord
from docmind_core.store.db import Database
from docmind_core.store.kb_store import KnowledgeStore


def _median_ms(fn, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000.0)
    return round(statistics.median(samples), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=1000)
    parser.add_argument("--chunks-per-document", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=300)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store = KnowledgeStore(Database(Path(folder) / "bench.db"))
        kb = store.create_kb("bench", "bench", 4)
        ids: list[str] = []
        for d in range(args.documents):
            doc_id = store.begin_document(kb.id, f"d{d}", source_path="", content_hash="h", mime="text/plain",
                                          size=1, text="x")
            rows = [ChunkRecord(id=f"c{d}-{i}", kb_id=kb.id, doc_id=doc_id, index=i, text="word " * 300,
                                token_count=300, start=0, end=1) for i in range(args.chunks_per_document)]
            store.add_chunks(rows)
            store.set_document_status(doc_id, "complete")
            ids += [r.id for r in rows]
        rng = random.Random(1)
        result = {
            "chunks": len(ids),
            "get_chunks_ready_ms": _median_ms(lambda: store.get_chunks(rng.sample(ids, 40)), args.repeat),
            "get_chunks_any_ms": _median_ms(lambda: store.get_chunks(rng.sample(ids, 40), any_status=True),
                                            args.repeat),
            "ready_chunk_count_ms": _median_ms(lambda: store.ready_chunk_count(kb.id), max(1, args.repeat // 10)),
            "change_signature_ms": _median_ms(lambda: store.kb_change_signature(kb.id), args.repeat),
            "reindex_signature_ms": _median_ms(lambda: store.reindex_signature(kb.id), args.repeat),
        }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key:<24} {value}")


if __name__ == "__main__":
    main()
