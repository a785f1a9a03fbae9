"""Example questions for an empty Chat page, taken from the selected knowledge bases.

A labelled dataset made for one of these KBs (the demo's, for the demo KB) holds questions its documents answer:
those come first.  A KB without one gets a question about each of its searchable documents, by title.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from docmind_core.workbench import Workbench

EXAMPLES = 4  # buttons offered at most
SEARCHABLE = ("complete", "embedding")  # document states whose text keyword search already finds


def example_questions(bench: Workbench, kb_ids: Sequence[int], limit: int = EXAMPLES) -> list[str]:
    """Up to ``limit`` questions about the KBs ``kb_ids``: labelled answerable questions of a dataset made for
    one of them, then questions naming their documents; none when no KB is selected."""
    if not kb_ids:
        return []
    kb_names = {kb.name for kb in bench.list_kbs() if kb.id in kb_ids}
    found: list[str] = []
    for dataset in bench.list_datasets():
        if dataset.kb_name not in kb_names:
            continue
        for item in bench.dataset_items(dataset.id, limit=limit * 3):
            if item.answerable and (not item.kb or item.kb in kb_names) and item.question not in found:
                found.append(item.question)
            if len(found) >= limit:
                return found
    for kb_id in kb_ids:
        for doc in bench.list_documents(kb_id):
            if doc.status in SEARCHABLE and len(found) < limit:
                found.append(f"What is {doc.name} about?")
    return found[:limit]
