"""Peak memory and time of hostile uploads against one ordinary file, each ingested alone (issue 40).

Each file is ingested by its own child process into a fresh home with the default settings (the bundled
encoder), so every peak RSS is that file's alone (the child reads its own ``ru_maxrss`` at the end). The
files, written in a temp folder:

* ``ordinary.md``: 1 MB of English prose, the reference;
* ``giant-word.txt``: ``A <5 MiB of y> end``, one word with no space or stop (it once asked the encoder for
  12.5 GiB);
* ``cell-of-words.csv``: one CSV cell of 5 MB of English prose;
* ``bomb.pdf``: four pages sharing one FlateDecode text stream of 70 MB (~240 KB on disk);
* ``bomb-many-pages.pdf``: 1,000 pages sharing one stream of 1 MB (~40 KB on disk);
* ``big.txt``: 50 MB of English prose.

Printed per file: outcome, seconds, peak RSS and its ratio to the ordinary file's peak in the same run.
Targets: no file over 1.5x the ordinary file's peak, and a refusal within 30 s. A file still ingesting after
``--budget-s`` (the encoder runs at ~5-150 chunks/s depending on the host's load) is cancelled there and
marked so: its peak is that of reading, chunking and writing all its keyword rows plus the embedding so far.

    .venv/bin/python bench/adversarial_ingest.py --budget-s 180
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

MB = 1024 * 1024


def write_files(folder: Path, big_mb: float) -> list[Path]:
    from ingest_large_cell import write as write_cell
    from ingest_throughput import write_synthetic
    from tests.adversarial_files import pdf_sharing_one_stream, text_content, write_giant_word

    ordinary = folder / "ordinary.md"
    write_synthetic(ordinary, "en", 1)
    word = folder / "giant-word.txt"
    write_giant_word(word, 5 * MB)
    cell = folder / "cell-of-words.csv"
    write_cell(cell, "prose", 5)
    bomb = folder / "bomb.pdf"
    bomb.write_bytes(pdf_sharing_one_stream(4, text_content(70 * 1_000_000)))
    shared = folder / "bomb-many-pages.pdf"
    shared.write_bytes(pdf_sharing_one_stream(1000, text_content(1_000_000)))
    big = folder / "big.txt"
    write_synthetic(big, "en", big_mb)
    return [ordinary, word, cell, bomb, shared, big]


def child(path: Path, home: Path, budget_s: float) -> None:
    """Ingest one file into a fresh home; print one JSON line (outcome, seconds, own peak RSS)."""
    from docmind_core.engine import Engine
    from docmind_core.errors import IngestCancelled

    engine = Engine.open(home, env={}, warm=False)
    kb = engine.create_kb("bench")
    engine.embedder.embed(["warm up"])
    last: dict = {}

    def progress(event) -> None:
        if event.run_to_embed is not None:
            last.update(embedded=event.run_embedded, to_embed=event.run_to_embed)

    cancel = threading.Event()
    timer = threading.Timer(budget_s, cancel.set)
    started = time.perf_counter()
    timer.start()
    try:
        outcome = engine.ingest(kb.id, [path], progress=progress, cancel=cancel)[0]
        row = {"status": outcome.status, "error": outcome.error or "", "chunks": outcome.chunks or 0}
    except IngestCancelled:
        row = {"status": "cancelled", "error": "", "chunks": 0}
    finally:
        timer.cancel()
    row.update(seconds=round(time.perf_counter() - started, 1), **last,
               peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1))
    print(json.dumps(row), flush=True)


def measure(path: Path, budget_s: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="docmind-adversarial-home-") as home:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False"}
        done = subprocess.run([sys.executable, __file__, "--child", str(path), "--home", home,
                               "--budget-s", str(budget_s)], capture_output=True, text=True, env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return {"status": f"child died (exit {done.returncode})", "error": " / ".join(tail), "seconds": 0.0,
                "peak_rss_mb": 0.0}
    return json.loads(lines[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget-s", type=float, default=180.0, help="cancel one file's ingest after this long")
    parser.add_argument("--big-mb", type=float, default=50.0, help="size of the large plain text")
    parser.add_argument("--only", default="", help="comma-separated file names to run (the ordinary file always runs)")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--home", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.home, args.budget_s)
        return
    print(f"load average at the start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    with tempfile.TemporaryDirectory(prefix="docmind-adversarial-") as tmp:
        files = write_files(Path(tmp), args.big_mb)
        if args.only:
            files = [files[0]] + [f for f in files[1:] if f.name in args.only.split(",")]
        rows = []
        for path in files:
            row = measure(path, args.budget_s)
            row["size_mb"] = path.stat().st_size / MB
            rows.append((path, row))
            print(f"  {path.name}: {row['status']} in {row['seconds']} s, peak {row['peak_rss_mb']} MB", flush=True)
    reference = rows[0][1]["peak_rss_mb"] or 1.0
    print(f"\n| file | on disk | outcome | time | peak RSS | x ordinary |")
    print("|---|---|---|---|---|---|")
    failures = []
    for path, row in rows:
        ratio = row["peak_rss_mb"] / reference
        outcome = row["status"]
        if row["status"] == "cancelled":
            outcome = f"cancelled at {args.budget_s:g} s ({row.get('embedded', 0)} of {row.get('to_embed', '?')} embedded)"
        elif row["status"] == "failed":
            outcome = f"refused: {row['error'][:110]}"
        elif row.get("chunks"):
            outcome = f"{row['status']}, {row['chunks']} chunks"
        print(f"| {path.name} | {row['size_mb']:.2f} MB | {outcome} | {row['seconds']} s | {row['peak_rss_mb']} MB | {ratio:.2f} |")
        if ratio > 1.5:
            failures.append(f"{path.name} peaked at {ratio:.2f}x the ordinary file")
        if row["status"] == "failed" and row["seconds"] > 30:
            failures.append(f"{path.name} was refused only after {row['seconds']} s")
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    print("targets met (<= 1.5x the ordinary peak, refusals within 30 s)" if not failures
          else "targets missed: " + "; ".join(failures))


if __name__ == "__main__":
    main()
