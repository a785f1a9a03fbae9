"""kill -9 during an ingest, at random instants, then ``kb check`` and ``kb check --repair`` (issue 40 failure 5).

For each of ``--runs`` instants: a fresh home, ``docmind ingest`` of a generated corpus of ``--docs`` small
Markdown files (the bundled encoder, small chunks so each file is a few encoder batches), killed with SIGKILL
once the database shows a randomly drawn state (k documents searchable by keyword, v chunk vectors stored, or k
documents complete; the draw is seeded by ``--seed``), polled every 20 ms.  What was half-written is read from
the database right after the kill (documents ``pending`` or ``embedding``; their process has exited).  Then:

* ``docmind kb check crash --json`` (a new process, whose start removes what was left ``pending`` and says so
  on stderr): ``exact`` when the documents it reports half-written are the ones left ``embedding``, except
  those its own start's background worker finished before the check read them (complete when it returns), and
  when its start reported removing exactly the ones left ``pending``;
* ``docmind kb check crash --repair``: ``left`` = documents still ``pending`` or ``embedding`` afterwards
  (must be 0) and whether a last ``kb check`` says consistent.

    .venv/bin/python bench/ingest_crash.py --runs 10
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from docmind_core.store.config_store import ConfigStore  # noqa: E402
from docmind_core.store.db import Database  # noqa: E402

WORDS = ("pump valve seal bearing filter intake station reading operator visit pressure flow gauge rotor "
         "housing gasket").split()
SETTINGS = {"rag.chunk_tokens": 40, "rag.chunk_overlap_tokens": 0, "rag.parent_tokens": 120,
            "embedding.batch_size": 8}


def docmind(home: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ANONYMIZED_TELEMETRY": "False", "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "docmind_core.cli", "--home", str(home), *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout)


def write_corpus(folder: Path, docs: int) -> None:
    folder.mkdir(parents=True)
    for i in range(docs):
        sentences = [f"The {WORDS[(i + j) % len(WORDS)]} of station S{i:03d} was checked on visit {j}, reading "
                     f"{(i * 37 + j * 11) % 900} units." for j in range(30 + 10 * (i % 3))]
        (folder / f"doc{i:03d}.md").write_text(f"# Station S{i:03d}\n\n" + " ".join(sentences), encoding="utf-8")


def state(home: Path) -> dict[str, int]:
    path = home / "docmind.db"
    if not path.exists():
        return {}
    with closing(sqlite3.connect(path, timeout=10)) as conn:
        try:
            found = dict(conn.execute("SELECT status, COUNT(*) FROM documents GROUP BY status").fetchall())
            found["vectors"] = conn.execute("SELECT COUNT(*) FROM chunks WHERE is_parent = 0 AND vector IS NOT NULL"
                                            ).fetchone()[0]
            found["chunks"] = conn.execute("SELECT COUNT(*) FROM chunks WHERE is_parent = 0").fetchone()[0]
        except sqlite3.OperationalError:  # no schema yet
            return {}
    return found


def statuses(home: Path) -> dict[str, str]:
    with closing(sqlite3.connect(home / "docmind.db", timeout=10)) as conn:
        return dict(conn.execute("SELECT name, status FROM documents").fetchall())


def draw_instant(rng: random.Random, docs: int, chunks_guess: int) -> tuple[str, str, int]:
    kind = rng.choice(["embedding", "vectors", "complete"])
    if kind == "vectors":
        return f"{kind} >= {(n := rng.randint(1, max(1, chunks_guess * 3 // 4)))}", kind, n
    return f"{kind} >= {(n := rng.randint(1, max(1, docs * 3 // 4)))}", kind, n


def one_run(workdir: Path, corpus: Path, docs: int, instant: tuple[str, str, int]) -> dict:
    label, kind, n = instant
    home = workdir / "home"
    home.mkdir(parents=True)
    ConfigStore(Database(home / "docmind.db")).set_many(SETTINGS, by="bench")  # what `docmind config set` stores
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ANONYMIZED_TELEMETRY": "False", "HF_HUB_OFFLINE": "1"}
    child = subprocess.Popen([sys.executable, "-m", "docmind_core.cli", "--home", str(home), "ingest", str(corpus),
                              "--kb", "crash", "--no-progress"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    try:
        while True:
            now = state(home)
            if now.get(kind, 0) >= n:
                break
            if child.poll() is not None or time.monotonic() > deadline:
                return {"instant": label, "skipped": "the ingest ended before the instant came"}
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(30)
    at_kill = statuses(home)
    embedding = {name for name, s in at_kill.items() if s == "embedding"}
    pending = {name for name, s in at_kill.items() if s == "pending"}

    started = time.monotonic()
    check = docmind(home, "kb", "check", "crash", "--json")
    check_s = time.monotonic() - started
    report = json.loads(check.stdout)
    reported = {line.split(":")[0] for line in report["half_written_documents"]}
    removed = {line.split("'")[1] for line in check.stderr.splitlines() if "removed interrupted document" in line}
    after_check = statuses(home)
    finished_meanwhile = {name for name in embedding - reported if after_check.get(name) == "complete"}
    exact = reported <= embedding and reported | finished_meanwhile == embedding and removed == pending

    started = time.monotonic()
    repair = docmind(home, "kb", "check", "crash", "--repair")
    repair_s = time.monotonic() - started
    left = sum(1 for s in statuses(home).values() if s in ("pending", "embedding"))
    final = docmind(home, "kb", "check", "crash")
    return {"instant": label, "at_kill": {"pending": len(pending), "embedding": len(embedding),
                                          "complete": sum(1 for s in at_kill.values() if s == "complete"),
                                          "not_started": docs - len(at_kill)},
            "check": {"half_written_reported": len(reported), "finished_by_its_start": len(finished_meanwhile),
                      "pending_removed_by_its_start": len(removed), "exact": exact, "seconds": round(check_s, 1)},
            "repair": {"exit": repair.returncode, "left_half_written": left,
                       "consistent_after": final.returncode == 0 and "consistent" in final.stdout,
                       "seconds": round(repair_s, 1)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--docs", type=int, default=16)
    parser.add_argument("--seed", type=int, default=40)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    results = []
    with tempfile.TemporaryDirectory(prefix="docmind-crash-") as tmp:
        corpus = Path(tmp) / "corpus"
        write_corpus(corpus, args.docs)
        chunks_guess = args.docs * 12
        for run in range(args.runs):
            instant = draw_instant(rng, args.docs, chunks_guess)
            result = one_run(Path(tmp) / f"run{run}", corpus, args.docs, instant)
            results.append(result)
            print(json.dumps(result), flush=True)
    done = [r for r in results if "skipped" not in r]
    exact = sum(r["check"]["exact"] for r in done)
    clean = sum(r["repair"]["left_half_written"] == 0 and r["repair"]["consistent_after"] for r in done)
    half = sum(r["at_kill"]["pending"] + r["at_kill"]["embedding"] for r in done)
    print(f"{len(done)} of {len(results)} instants reached ({half} documents half-written in all): kb check exact "
          f"at {exact} of {len(done)}, --repair left 0 half-written and consistent at {clean} of {len(done)}")


if __name__ == "__main__":
    main()
