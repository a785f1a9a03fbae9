"""Side-by-side pairs named for a person: the question, when it ran, and the experiment row it belongs to.

A pair id is a machine key ("pair-3f2a…", "experiment-1-item-4-0"); the Traces page's picker shows this
label instead.  Pure text: no Streamlit.
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence

from docmind_core.text.excerpt import clip_words
from docmind_core.store.traces import TraceSummary

QUESTION_CHARS = 60
_EXPERIMENT_PAIR = re.compile(r"^experiment-(\d+)-item-(\d+)-([01])$")


def experiment_of(pair_id: str) -> tuple[int, int, bool] | None:
    """(experiment id, dataset item id, gold left out) of an experiment's pair id, else None."""
    m = _EXPERIMENT_PAIR.match(pair_id)
    return (int(m.group(1)), int(m.group(2)), m.group(3) == "1") if m else None


def pair_label(pair_id: str, runs: Sequence[TraceSummary], experiment_names: Mapping[int, str]) -> str:
    """“question” · time · experiment name, item (gold left out) — from the pair's runs (any order)."""
    first = min(runs, key=lambda s: s.started_at) if runs else None
    bits = []
    if first is not None:
        bits.append(f"“{clip_words(first.question, QUESTION_CHARS, flatten=True)}”")
        bits.append(first.started_at[:16].replace("T", " "))
    found = experiment_of(pair_id)
    if found is not None:
        experiment_id, item_id, gold_out = found
        name = experiment_names.get(experiment_id)
        where = f"experiment #{experiment_id}" + (f" “{clip_words(name, 40, flatten=True)}”" if name else "")
        bits.append(f"{where}, item #{item_id}" + (", gold left out" if gold_out else ""))
    return " · ".join(bits) or pair_id


def pair_labels(summaries: Sequence[TraceSummary], experiment_names: Mapping[int, str]) -> dict[str, str]:
    """A label for each pair id of the listed runs; two pairs that would read the same get their id's tail."""
    runs: dict[str, list[TraceSummary]] = {}
    for s in summaries:
        if s.pair_id:
            runs.setdefault(s.pair_id, []).append(s)
    labels = {pid: pair_label(pid, found, experiment_names) for pid, found in runs.items()}
    seen: dict[str, int] = {}
    for label in labels.values():
        seen[label] = seen.get(label, 0) + 1
    return {pid: label if seen[label] == 1 else f"{label} · {pid[-6:]}" for pid, label in labels.items()}
