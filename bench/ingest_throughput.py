"""Ingest throughput of large files against the raw encoder (issue 15).

For each size (MB) and language (zh, en) a synthetic text file is generated (seeded; Chinese without
much punctuation is the hard case: every character is a token), ingested into a fresh KB of a temp
home with the default settings, and compared with the raw encoder on the same file's chunks:

* ``ingest chunks/s``: child chunks written (SQLite rows, vectors, keyword rows) per second of wall
  time, from the start of the ingest (reading, decoding and the first chunking included);
* ``encoder chunks/s``: ``Embedder.embed`` alone on the first ``--sample`` chunks of the same file,
  in batches of ``embedding.batch_size``;
* ``ratio``: ingest / encoder (1.0 = the ingest costs no more than encoding);
* ``peak RSS``: the high-water mark of a fresh child process that measured that one file only (its
  baseline, the engine and models loaded before the file was read, is printed as ``base RSS``);
  ``--no-isolate`` measures every file in this process instead (then it is the mark over all files so far).

The file is written to disk in pieces, and the raw-encoder sample reads only its head, so the bench holds
no copy of the text itself. A file whose ingest would take longer than ``--budget-s`` is cancelled there
(the job's cancel path) and its rate is the rate over the budget, with the projected total time.

    .venv/bin/python bench/ingest_throughput.py --sizes 1,10,50 --langs zh,en --budget-s 90
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from docmind_core.engine import Engine  # noqa: E402
from docmind_core.errors import IngestCancelled  # noqa: E402
from docmind_core.ingest.chunking import iter_chunk_blocks  # noqa: E402

ZH_WORDS = ("功率 价格 电池 续航 传感器 固件 版本 接口 认证 保修 温度 湿度 设备 网络 协议 存储 显示 屏幕 "
            "相机 镜头 充电 安装 配置 错误 代码 处理 方法 用户 手册 产品 型号 规格 重量 尺寸").split()
EN_WORDS = ("power draw price battery runtime sensor firmware version interface certification warranty "
            "temperature humidity device network protocol storage display screen camera lens charging "
            "install configure error code handle method user manual product model specification weight "
            "size").split()


def synthetic_pieces(lang: str, megabytes: float, seed: int = 15) -> Iterator[str]:
    """About ``megabytes`` MB of UTF-8 in pieces: Chinese runs with rare full stops, or English sentences."""
    rng = random.Random(seed)
    target = int(megabytes * 1_000_000)
    size = 0
    while size < target:
        if lang == "zh":
            piece = "".join(rng.choice(ZH_WORDS) for _ in range(rng.randint(20, 200)))
            piece += "。" if rng.random() < 0.3 else ""  # long stretches without punctuation
        else:
            piece = " ".join(rng.choice(EN_WORDS) for _ in range(rng.randint(8, 25))).capitalize() + ". "
        yield piece
        size += len(piece.encode("utf-8"))


def synthetic_text(lang: str, megabytes: float, seed: int = 15) -> str:
    return "".join(synthetic_pieces(lang, megabytes, seed))


def write_synthetic(path: Path, lang: str, megabytes: float) -> int:
    """Write the synthetic file piece by piece; returns its size in bytes."""
    with path.open("w", encoding="utf-8") as out:
        for piece in synthetic_pieces(lang, megabytes):
            out.write(piece)
    return path.stat().st_size


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(engine: Engine, lang: str, megabytes: float, work: Path, sample: int, budget_s: float) -> dict:
    path = work / f"synthetic-{lang}-{megabytes:g}mb.txt"
    size = write_synthetic(path, lang, megabytes)
    base_rss = peak_rss_mb()
    settings = engine.settings
    # the raw encoder on the same file's first chunks (its head is enough for --sample chunks)
    with path.open(encoding="utf-8") as head:
        text = head.read(max(20_000, sample * settings.rag.chunk_tokens * 8))
    chunks = []
    for _, kids in iter_chunk_blocks(0, path.name, text, settings.rag.chunk_tokens,
                                     settings.rag.chunk_overlap_tokens, settings.rag.parent_tokens):
        chunks.extend(c.text for c in kids)
        if len(chunks) >= sample:
            break
    chunks, text = chunks[:sample], ""
    batch = settings.embedding.batch_size
    engine.embedder.embed(chunks[:batch])  # warm
    started = time.perf_counter()
    for i in range(0, len(chunks), batch):
        engine.embedder.embed(chunks[i:i + batch])
    encoder_rate = len(chunks) / (time.perf_counter() - started)
    # the ingest, cancelled at the budget
    kb = engine.create_kb(f"bench-{lang}-{megabytes:g}")
    cancel = threading.Event()
    timer = threading.Timer(budget_s, cancel.set)
    progress = {"chunks": 0, "total": 0}

    def on_progress(p) -> None:
        if p.run_embedded is not None:  # the vector backfill (keyword-first ingestion): chunks embedded so far
            progress["chunks"], progress["total"] = p.run_embedded, p.run_to_embed or 0

    started = time.perf_counter()
    timer.start()
    try:
        outcome = engine.ingest(kb.id, [path], progress=on_progress, cancel=cancel)[0]
        finished, written = True, outcome.chunks
        if outcome.status == "failed":
            raise RuntimeError(outcome.error)
    except IngestCancelled:
        finished, written = False, progress["chunks"]
    finally:
        timer.cancel()
    seconds = time.perf_counter() - started
    rate = written / seconds if seconds else 0.0
    projected = seconds * progress["total"] / written if not finished and written else seconds
    return {"lang": lang, "mb": megabytes, "bytes": size, "finished": finished,
            "chunks_written": written, "seconds": round(seconds, 1), "ingest_chunks_per_s": round(rate, 1),
            "encoder_chunks_per_s": round(encoder_rate, 1), "ratio": round(rate / encoder_rate, 2),
            "projected_total_s": round(projected), "base_rss_mb": round(base_rss),
            "peak_rss_mb": round(peak_rss_mb())}


def measure_alone(lang: str, megabytes: float, args: argparse.Namespace) -> dict:
    """Measure one file in a fresh child process, so its peak RSS is that file's alone."""
    command = [sys.executable, __file__, "--one", f"{lang}:{megabytes:g}", "--sample", str(args.sample),
               "--budget-s", str(args.budget_s)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=args.budget_s * 4 + 600)
    if done.returncode != 0:
        raise RuntimeError(f"{lang} {megabytes:g} MB failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,10,50", help="file sizes in MB, comma-separated")
    parser.add_argument("--langs", default="zh,en")
    parser.add_argument("--sample", type=int, default=256, help="chunks timed on the raw encoder")
    parser.add_argument("--budget-s", type=float, default=90.0, help="cancel one file's ingest after this long")
    parser.add_argument("--no-isolate", action="store_true", help="measure every file in this process")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # LANG:MB, the child process of measure_alone
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="docmind-ingest-bench-") as tmp:
        engine = None
        if args.one or args.no_isolate:
            engine = Engine.open(Path(tmp) / "home", env={}, warm=False)
        if args.one:
            lang, megabytes = args.one.split(":")
            print(json.dumps(measure(engine, lang, float(megabytes), Path(tmp), args.sample, args.budget_s)))
            return
        for megabytes in [float(s) for s in args.sizes.split(",")]:
            for lang in args.langs.split(","):
                row = (measure(engine, lang, megabytes, Path(tmp), args.sample, args.budget_s) if args.no_isolate
                       else measure_alone(lang, megabytes, args))
                rows.append(row)
                if not args.json:
                    print(f"{lang} {megabytes:>5g} MB: {row['chunks_written']:>6} chunks in {row['seconds']:>6.1f} s"
                          f"{'' if row['finished'] else ' (cancelled at the budget)'} -> ingest "
                          f"{row['ingest_chunks_per_s']:.1f} chunks/s, raw encoder {row['encoder_chunks_per_s']:.1f}"
                          f" chunks/s, ratio {row['ratio']:.2f}, projected {row['projected_total_s']} s, "
                          f"peak RSS {row['peak_rss_mb']} MB (base {row['base_rss_mb']} MB)", flush=True)
    if args.json:
        print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
