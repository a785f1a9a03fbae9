"""The cross-language question set of bench/crosslang.py: our own questions, both directions, gold ids and short
answer spans of the gold passages (bench/crosslang_reader.py), never the passages themselves."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[2] / "bench" / "data"
# the tuning set (fits read it) and the held-out set written afterwards (reports only)
SETS = [DATA / "crosslang_questions.jsonl", DATA / "crosslang_questions_heldout.jsonl"]
CJK = re.compile(r"[\u3400-\u9fff]")


def _questions(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_the_held_out_set_shares_no_passage_with_the_tuning_set():
    tuning, held_out = (_questions(p) for p in SETS)
    assert not {g for q in tuning for g in q["gold"]} & {g for q in held_out for g in q["gold"]}
    assert not {q["id"] for q in tuning} & {q["id"] for q in held_out}


@pytest.mark.parametrize("path", SETS, ids=lambda p: p.stem)
def test_at_least_forty_questions_in_both_directions_with_gold_ids(path):
    qs = _questions(path)
    assert len(qs) >= 40 and len({q["id"] for q in qs}) == len(qs)
    zh, en = [q for q in qs if q["direction"] == "zh->en"], [q for q in qs if q["direction"] == "en->zh"]
    assert len(zh) >= 20 and len(en) >= 20 and len(zh) + len(en) == len(qs)
    for q in zh:  # a Chinese question for an English passage
        assert CJK.search(q["text"]) and q["set"] in {"hotpotqa", "scifact"}
    for q in en:  # an English question for a Chinese passage
        assert not CJK.search(q["text"]) and q["set"] == "cmrc2018"
    # questions and ids, never copies of the passages
    assert all(q["gold"] and len(q["text"]) < 160 for q in qs)
    # short answer spans in the gold passage's language (Chinese for en->zh), a reader's answer to look for
    for q in qs:
        assert 1 <= len(q["answers"]) <= 3 and all(0 < len(a) <= 120 for a in q["answers"]), q["id"]
    assert all(any(CJK.search(a) for a in q["answers"]) for q in en)


@pytest.mark.parametrize("path", SETS, ids=lambda p: p.stem)
def test_gold_ids_exist_in_the_shared_sets(path):
    folder = os.environ.get("DOCMIND_EVAL_DIR")
    if not folder or not Path(folder).is_dir():
        pytest.skip("set DOCMIND_EVAL_DIR to the shared eval folder (scifact/, hotpotqa/, cmrc2018/)")
    passages: dict[str, dict[str, str]] = {}
    for name in ("scifact", "hotpotqa", "cmrc2018"):
        with (Path(folder) / name / "corpus.jsonl").open(encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh if line.strip()]
        passages[name] = {r["id"]: f"{r.get('title', '')}\n{r['text']}" for r in rows}
    for q in _questions(path):
        assert set(q["gold"]) <= set(passages[q["set"]]), q["id"]
        gold = "\n".join(passages[q["set"]][g] for g in q["gold"])
        assert all(a in gold for a in q["answers"]), q["id"]  # copied from the passage, verbatim
