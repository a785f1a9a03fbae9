"""Labels out of DocMind: one JSONL line per labelled run, or the items of a Langfuse dataset.

Each exported label carries what the analyst judged: the run's question, KBs, answer and the verdict it was
shown with, its evidence (the sources it used), its config snapshot, and the label itself (right / partly /
wrong / should abstain, and the right source when one was named).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from docmind_core.answer.verdict import verdict_of
from docmind_core.errors import DatasetError
from docmind_core.experiments.datasets import RunLabel
from docmind_core.store.traces import TraceRecord


@dataclass(frozen=True)
class LabelRow:
    """A label with what a reviewer reads beside it (the run's question and KB names)."""

    label: RunLabel
    question: str
    kb_names: list[str]


def label_document(row: LabelRow, record: TraceRecord | None) -> dict[str, Any]:
    """One label and its run as a JSON-ready dict (the run's part empty when its trace is gone)."""
    label = row.label
    done = record.done if record is not None else None
    verdict = verdict_of(done) if done is not None else None
    return {
        "run_id": label.run_id, "question": row.question, "kbs": row.kb_names, "kb_ids": label.kb_ids,
        "label": "right" if label.verdict == "correct" else label.verdict,
        "right_source": {"documents": label.gold_doc_ids, "chunks": label.gold_chunk_ids},
        "labelled_at": label.labelled_at, "labelled_by": label.labelled_by,
        "answer": done.answer if done is not None else "",
        "verdict": {"level": verdict.level, "label": verdict.label, "score": verdict.score} if verdict else
        {"level": label.answer_verdict},
        "evidence": [{"index": i, "chunk_id": c.chunk_id, "document": c.document, "text": c.text}
                     for i, c in enumerate(done.sources, start=1)] if done is not None else [],
        "mode": record.meta.mode if record is not None else "",
        "config": record.config if record is not None else {},
    }


def label_rows_jsonl(rows: Sequence[LabelRow], records: Mapping[str, TraceRecord]) -> str:
    """The labels as JSONL (one object a line, UTF-8 text kept as it is)."""
    return "".join(json.dumps(label_document(row, records.get(row.label.run_id)), ensure_ascii=False) + "\n"
                   for row in rows)


@dataclass(frozen=True)
class LangfuseKeys:
    public_key: str
    secret_key: str
    host: str

    @classmethod
    def from_env(cls, env: Mapping[str, str], host_setting: str = "") -> "LangfuseKeys":
        """The keys the tracing exporter uses (backends/factory.py); refused with how to set them when absent."""
        public_key = (env.get("LANGFUSE_PUBLIC_KEY") or "").strip()
        secret_key = (env.get("LANGFUSE_SECRET_KEY") or "").strip()
        if not public_key or not secret_key:
            raise DatasetError("Langfuse is not configured: set LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY "
                               "(and LANGFUSE_HOST or tracing.langfuse_host)")
        host = (host_setting or env.get("LANGFUSE_HOST") or env.get("LANGFUSE_BASE_URL")
                or "https://cloud.langfuse.com").rstrip("/")
        return cls(public_key, secret_key, host)


def push_to_langfuse(keys: LangfuseKeys, dataset_name: str, rows: Sequence[LabelRow],
                     records: Mapping[str, TraceRecord], timeout_s: float = 10.0) -> int:
    """Create the Langfuse dataset ``dataset_name`` (when missing) and one item per label, keyed by run id
    (so exporting again updates the items instead of adding copies); returns how many items were sent."""
    # The SDK's REST client, not ``Langfuse``: that one shares its OpenTelemetry resources per public key with
    # the trace exporter (backends/tracing.py), and shutting it down here would stop the exporter.
    from langfuse.api.client import LangfuseAPI

    api = LangfuseAPI(base_url=keys.host, username=keys.public_key, password=keys.secret_key,
                      x_langfuse_public_key=keys.public_key, x_langfuse_sdk_name="python", timeout=timeout_s)
    api.datasets.create(name=dataset_name, description="Answers labelled in DocMind", metadata={"source": "docmind"})
    for row in rows:
        document = label_document(row, records.get(row.label.run_id))
        api.dataset_items.create(
            dataset_name=dataset_name, id=f"docmind-{row.label.run_id}",
            input={"question": document["question"], "kbs": document["kbs"]},
            expected_output={"label": document["label"], "right_source": document["right_source"],
                             "answer": document["answer"] if document["label"] == "right" else None},
            metadata={k: document[k] for k in ("run_id", "verdict", "mode", "labelled_at")})
    return len(rows)
