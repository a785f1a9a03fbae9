"""Keyword-first ingestion of a large text file (issue 23 item 3).

One job of a generated ~10 MB text file and two 100-byte files, ingested into a fresh KB of a temp home with
the default settings (the bundled encoder), while this process searches the KB by keyword every
``--poll-s`` seconds for a phrase that only the LAST sentence of the large file holds.  Reported:

* ``keyword-searchable``: seconds from the start of the ingest until that keyword search finds the phrase
  (the whole file parsed, chunked and written with its keyword entries);
* ``small files done``: seconds until each 100-byte file is complete (searched by keyword and by vector);
* ``embedded chunks/s``: the job's chunks over the seconds of the vector backfill (from its first
  encoder batch to the last vector stored), against ``encoder chunks/s``: ``Embedder.embed`` alone on the
  first ``--sample`` chunks of the same file in batches of ``embedding.batch_size``, measured in the same run
  just before; ``ratio`` = embedded / encoder; ``end_to_end chunks/s``: the same chunks over the whole
  ingest (parsing and keyword indexing included); ``encoder share``: the part of the backfill's wall time
  spent inside ``Embedder.embed`` (timed around each call of the ingest thread), the steadier figure on a
  shared machine, where the encoder alone and the backfill run under different loads minutes apart;
* ``ETA``: the job-style ETA (chunks left at the measured pace) read at 10 %, 50 % and 90 % of the backfill,
  with the seconds that were actually left then.

``--budget-s`` stops the backfill there (the run's cancel path) and reports the rate so far.

    .venv/bin/python bench/ingest_keyword_first.py --mb 10
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.ingest_throughput import synthetic_pieces  # noqa: E402
from docmind_core.engine import Engine  # noqa: E402
from docmind_core.errors import IngestCancelled  # noqa: E402
from docmind_core.ingest.chunking import iter_chunk_blocks  # noqa: E402

END_PHRASE = "Quillfeather"
END_SENTENCE = f" The last record names the {END_PHRASE} Z88 relief valve, serial QZ-88017."


def write_file(path: Path, lang: str, megabytes: float) -> int:
    with path.open("w", encoding="utf-8") as out:
        for piece in synthetic_pieces(lang, megabytes):
            out.write(piece)
        out.write(END_SENTENCE)
    return path.stat().st_size


def encoder_rate(engine: Engine, path: Path, sample: int) -> float:
    """Chunks/s of the encoder alone on the file's first ``sample`` chunks."""
    settings = engine.settings
    with path.open(encoding="utf-8") as head:
        text = head.read(max(20_000, sample * settings.rag.chunk_tokens * 8))
    chunks: list[str] = []
    for _, kids in iter_chunk_blocks(0, path.name, text, settings.rag.chunk_tokens,
                                     settings.rag.chunk_overlap_tokens, settings.rag.parent_tokens):
        chunks.extend(c.text for c in kids)
        if len(chunks) >= sample:
            break
    chunks = chunks[:sample]
    batch = settings.embedding.batch_size
    engine.embedder.embed(chunks[:batch])  # warm
    started = time.perf_counter()
    for i in range(0, len(chunks), batch):
        engine.embedder.embed(chunks[i:i + batch])
    return len(chunks) / (time.perf_counter() - started)


def run(args: argparse.Namespace, work: Path) -> dict:
    engine = Engine.open(work / "home", env={}, warm=False)
    big = work / f"synthetic-{args.lang}-{args.mb:g}mb.txt"
    size = write_file(big, args.lang, args.mb)
    small = []
    for name, text in (("aurora.txt", "The Aurora X2 battery lasts 18 hours; it charges over USB-C in 90 minutes."),
                       ("borealis.txt", "The Borealis B1 weighs 1.2 kg and ships with firmware 4.0.2 in June.")):
        small.append(work / name)
        small[-1].write_text(text.ljust(100), encoding="utf-8")
    encoder = encoder_rate(engine, big, args.sample)
    kb = engine.create_kb("bench-keyword-first")
    embedder = engine.ingestor.embedder
    real_embed = embedder.embed
    inside = {"s": 0.0, "thread": None}

    def timed_embed(texts):
        if threading.current_thread() is not inside["thread"]:
            return real_embed(texts)  # the keyword poll's question encoding is not the backfill's
        t0 = time.perf_counter()
        try:
            return real_embed(texts)
        finally:
            inside["s"] += time.perf_counter() - t0

    embedder.embed = timed_embed
    cancel = threading.Event()
    marks: dict[str, float] = {}
    pace: list[tuple[float, int, int]] = []  # (seconds, embedded, to embed) at each backfill report
    started = time.perf_counter()

    def on_progress(p) -> None:
        now = time.perf_counter() - started
        if p.run_to_embed is not None:
            pace.append((now, p.run_embedded or 0, p.run_to_embed))
        if p.stage == "done":
            marks.setdefault(f"done {p.name}", now)
        if args.budget_s and pace and now - pace[0][0] > args.budget_s:
            cancel.set()

    result: dict = {}

    def ingest() -> None:
        try:
            result["outcomes"] = engine.ingest(kb.id, [big, *small], progress=on_progress, cancel=cancel)
        except IngestCancelled:
            result["cancelled"] = True
        except BaseException as exc:  # reported below
            result["error"] = repr(exc)

    thread = threading.Thread(target=ingest, daemon=True)
    inside["thread"] = thread
    thread.start()
    while thread.is_alive():
        if "keyword" not in marks:
            hits = engine.retriever.keyword_candidates(f"{END_PHRASE} Z88 relief valve", [kb.id], 3)
            if any(END_PHRASE in c.text for c in hits):
                marks["keyword"] = time.perf_counter() - started
        thread.join(args.poll_s)
    if "error" in result:
        raise RuntimeError(result["error"])
    total = pace[-1][2] if pace else 0
    embedded = pace[-1][1] if pace else 0
    backfill_s = (pace[-1][0] - pace[0][0]) if len(pace) > 1 else 0.0
    rate = embedded / backfill_s if backfill_s else 0.0
    etas = []
    for share in (0.1, 0.5, 0.9):  # the ETA a job would show then, and the time that was left
        at = next((r for r in pace if r[1] >= share * total and r[1] > 0), None)
        if at is not None and at[0] > pace[0][0] and not result.get("cancelled"):
            eta = (total - at[1]) * (at[0] - pace[0][0]) / at[1]
            etas.append({"at": f"{share:.0%}", "eta_s": round(eta, 1), "actual_left_s": round(pace[-1][0] - at[0], 1)})
    return {"lang": args.lang, "mb": args.mb, "bytes": size, "chunks": total, "embedded": embedded,
            "finished": not result.get("cancelled"),
            "keyword_searchable_s": round(marks.get("keyword", float("nan")), 1),
            "small_files_done_s": [round(marks.get(f"done {p.name}", float("nan")), 1) for p in small],
            "large_file_done_s": round(marks.get(f"done {big.name}", float("nan")), 1),
            "backfill_s": round(backfill_s, 1), "embedded_chunks_per_s": round(rate, 1),
            "end_to_end_chunks_per_s": round(total / marks[f"done {big.name}"], 1)
            if marks.get(f"done {big.name}") else None,
            "encoder_chunks_per_s": round(encoder, 1), "ratio": round(rate / encoder, 2) if encoder else None,
            "encoder_share": round(inside["s"] / backfill_s, 3) if backfill_s else None,
            "eta_checks": etas}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=10.0, help="size of the large file in MB")
    parser.add_argument("--lang", default="en", choices=("en", "zh"))
    parser.add_argument("--sample", type=int, default=256, help="chunks timed on the raw encoder")
    parser.add_argument("--poll-s", type=float, default=0.5, help="how often the keyword search runs")
    parser.add_argument("--budget-s", type=float, default=0.0, help="stop the vector backfill after this long")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="docmind-keyword-first-") as tmp:
        print(json.dumps(run(args, Path(tmp)), indent=2))


if __name__ == "__main__":
    main()
