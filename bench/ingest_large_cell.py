"""Ingest time of one large text as a single CSV cell and as a .md file (issue 19, item 8).

For each size (MB) and text kind a file is written twice, as ``text\\n"<the text>"`` (one CSV cell) and as
.md, and each is ingested into a fresh KB of a temp home with the default settings. Printed per file:

* ``total``: wall time of ``Engine.ingest`` (reading, parsing, chunking, tokenising, encoding, writing);
* ``encoder``: the part spent in the embedder's ``embed``, which grows with the chunk count;
* ``rest``: total minus encoder, what reading, chunking and keyword tokenising cost. This is where a
  superlinear step shows: it should grow in proportion to the size.

Text kinds: ``prose`` (English sentences) and ``runs`` (8 KB letter runs without spaces, like a base64 blob
or a hex dump: the keyword tokeniser's code pattern was quadratic in a run's length). A file whose ingest
would take longer than ``--budget-s`` is cancelled there and marked so.

    .venv/bin/python bench/ingest_large_cell.py --sizes 1,5 --kinds prose,runs --budget-s 900
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from docmind_core.engine import Engine  # noqa: E402
from docmind_core.errors import IngestCancelled  # noqa: E402
from ingest_throughput import synthetic_pieces  # noqa: E402


def pieces(kind: str, megabytes: float) -> Iterator[str]:
    if kind == "prose":
        yield from synthetic_pieces("en", megabytes)
        return
    rng = random.Random(19)
    written, target = 0, int(megabytes * 1_000_000)
    while written < target:
        run = "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") for _ in range(8192))
        yield run + " "
        written += 8193


def write(path: Path, kind: str, megabytes: float) -> None:
    with path.open("w", encoding="utf-8") as out:
        if path.suffix == ".csv":
            out.write('text\n"')
            for piece in pieces(kind, megabytes):
                out.write(piece.replace('"', '""'))
            out.write('"\n')
        else:
            for piece in pieces(kind, megabytes):
                out.write(piece)


def measure(engine: Engine, path: Path, budget_s: float) -> dict:
    kb = engine.create_kb(f"bench-{path.stem}-{path.suffix[1:]}")
    engine.refresh()
    embedder = engine.ingestor.writer.embedder  # the engine's one embedder object: timed on this instance
    encoder = {"s": 0.0}
    real_embed = embedder.embed

    def timed_embed(texts):
        started = time.perf_counter()
        try:
            return real_embed(texts)
        finally:
            encoder["s"] += time.perf_counter() - started

    embedder.embed = timed_embed
    cancel = threading.Event()
    timer = threading.Timer(budget_s, cancel.set)
    started = time.perf_counter()
    timer.start()
    try:
        outcome = engine.ingest(kb.id, [path], cancel=cancel)[0]
        finished, chunks = True, outcome.chunks
        if outcome.status == "failed":
            raise RuntimeError(outcome.error)
    except IngestCancelled:
        finished, chunks = False, 0
    finally:
        timer.cancel()
        del embedder.embed
    total = time.perf_counter() - started
    return {"finished": finished, "chunks": chunks, "total_s": total, "encoder_s": encoder["s"],
            "rest_s": total - encoder["s"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,5", help="sizes in MB, comma-separated")
    parser.add_argument("--kinds", default="prose,runs", help="prose and/or runs")
    parser.add_argument("--formats", default="csv,md")
    parser.add_argument("--budget-s", type=float, default=900.0, help="cancel one file's ingest after this long")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="docmind-large-cell-") as tmp:
        engine = Engine.open(Path(tmp) / "home", env={}, warm=False)
        engine.embedder.embed(["warm up"])
        for kind in args.kinds.split(","):
            for megabytes in [float(s) for s in args.sizes.split(",")]:
                for fmt in args.formats.split(","):
                    path = Path(tmp) / f"{kind}-{megabytes:g}mb.{fmt}"
                    write(path, kind, megabytes)
                    row = measure(engine, path, args.budget_s)
                    path.unlink()
                    print(f"{kind:<5} {megabytes:>4g} MB .{fmt:<3}: {row['chunks']:>5} chunks, total "
                          f"{row['total_s']:7.1f} s, encoder {row['encoder_s']:7.1f} s, rest {row['rest_s']:6.1f} s"
                          f"{'' if row['finished'] else f' (cancelled at {args.budget_s:g} s)'}", flush=True)


if __name__ == "__main__":
    main()
