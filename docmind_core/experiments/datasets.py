"""Labelled datasets: questions with their knowledge base, gold documents or chunks, gold answers and
whether the KB answers them at all.

A dataset is owned and shared like a knowledge base (owner, department, visibility).  Items come from
a JSONL file (one ``{question, kb, gold_doc_ids | gold_chunk_ids, answers[], answerable, type}`` per
line), a BEIR folder (queries + qrels, answers when the queries carry them) or labels given to runs in
Chat, on the Traces page or with ``dataset label`` (each labeller's dataset per KB: "labels of KB by NAME").

Gold documents are named the way the KB names them: a gold id matches a document whose name is the id
or whose name without its extension is the id (a BEIR corpus id ``d3`` ingested as ``d3.txt``).  An
answer is a string, or a list of strings that must all appear ("1,490" and "2,390").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Literal, NamedTuple, Sequence

from pydantic import BaseModel, Field, ValidationError, field_validator

from docmind_core.errors import DatasetError, NotFound
from docmind_core.store.db import Database, utcnow


class LabelTally(NamedTuple):
    """How many labelled runs asked these KBs, were shown with this verdict and got this label (what the
    store counts for a KB's badge, ``experiments/badge.py``)."""

    kb_ids: tuple[int, ...]
    answer_verdict: str
    verdict: str
    runs: int


# "partly": some of the answer is right, not all of it; counted as not right wherever a rate is stated
Verdict = Literal["correct", "partly", "wrong", "should_abstain"]
VERDICTS: tuple[str, ...] = ("correct", "partly", "wrong", "should_abstain")
VERDICT_ALIASES = {"right": "correct"}  # the word the pages use for a correct answer
MAX_ITEMS = 100_000


class DatasetItem(BaseModel):
    """One labelled question."""

    id: int | None = None
    external_id: str = ""
    question: str
    kb: str = ""  # knowledge base name; "" = the dataset's default KB
    gold_doc_ids: list[str] = Field(default_factory=list)
    gold_chunk_ids: list[str] = Field(default_factory=list)
    answers: list[str | list[str]] = Field(default_factory=list)
    answerable: bool = True
    type: str = ""
    source_run_id: str | None = None

    @field_validator("question")
    @classmethod
    def _question(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the question is empty")
        return value.strip()

    @property
    def has_gold(self) -> bool:
        return bool(self.gold_doc_ids or self.gold_chunk_ids)


class Dataset(BaseModel):
    """A dataset's row; ``owner_id``/``department``/``visibility`` mean what they mean for a KB."""

    id: int
    name: str
    description: str = ""
    owner_id: int | None = None
    department: str = ""
    visibility: str = "private"
    source: str = ""
    kb_name: str = ""
    created_at: str = ""
    item_count: int = 0


class RunLabel(BaseModel):
    """An analyst's verdict on one run's answer and, optionally, the right source (a chunk or a document)."""

    run_id: str
    verdict: Verdict
    gold_chunk_ids: list[str] = Field(default_factory=list)
    gold_doc_ids: list[str] = Field(default_factory=list)  # document names, as a dataset item names them
    labelled_by: int | None = None
    labelled_at: str = ""
    dataset_item_id: int | None = None
    answer_verdict: str = ""  # the verdict level the answer was shown with (answer/verdict.py), "" if none
    kb_ids: list[int] = Field(default_factory=list)  # the KBs the run asked


# --------------------------------------------------------------------------
# Reading files
# --------------------------------------------------------------------------

_ALIASES = {"gold_docs": "gold_doc_ids", "gold_chunks": "gold_chunk_ids", "id": "external_id",
            "query": "question", "knowledge_base": "kb"}


def parse_jsonl(text: str, origin: str = "file") -> list[DatasetItem]:
    """Items of a JSONL file; a bad line is refused with its number and the reason."""
    items: list[DatasetItem] = []
    first_line: dict[str, int] = {}  # external id -> the line that gave it
    # Lines end at \n only: str.splitlines also splits at U+2028, U+0085 ..., which JSON strings may hold.
    for number, line in enumerate(text.removeprefix("\ufeff").split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{origin} line {number}: not JSON ({exc.msg})") from None
        except (ValueError, RecursionError):  # an integer of thousands of digits, or nesting too deep
            raise DatasetError(f"{origin} line {number}: not JSON DocMind can read (a number too long or "
                               f"nesting too deep)") from None
        if not isinstance(row, dict):
            raise DatasetError(f"{origin} line {number}: expected a JSON object")
        row = {_ALIASES.get(k, k): v for k, v in row.items()}
        row.pop("notes", None)
        if "external_id" in row:
            if not isinstance(row["external_id"], (str, int)) or isinstance(row["external_id"], bool):
                raise DatasetError(f"{origin} line {number}: id: expected a string or a number")
            row["external_id"] = str(row["external_id"])
            if row["external_id"] in first_line:
                raise DatasetError(f"{origin} line {number}: id {row['external_id']!r} was already used on line "
                                   f"{first_line[row['external_id']]}")
            first_line[row["external_id"]] = number
        try:
            items.append(DatasetItem.model_validate(row))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            reason = str(first["msg"]).removeprefix("Value error, ")  # pydantic's prefix says nothing to a reader
            raise DatasetError(f"{origin} line {number}: {where}: {reason}") from None
        if len(items) > MAX_ITEMS:
            raise DatasetError(f"{origin}: more than {MAX_ITEMS} items")
    if not items:
        raise DatasetError(f"{origin} holds no question")
    return items


def read_jsonl_file(path: Path) -> list[DatasetItem]:
    """:func:`parse_jsonl` of a UTF-8 file (a byte-order mark allowed), refusing other bytes with their place."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[:exc.start].count(b"\n") + 1
        raise DatasetError(f"{path.name} line {line}: not UTF-8 text ({exc.reason})") from None
    return parse_jsonl(text, origin=path.name)


def read_beir(folder: Path | str, limit: int | None = None) -> list[DatasetItem]:
    """Items of a BEIR folder: each judged query with its relevant corpus ids as gold documents."""
    from docmind_core.eval.beir import load_beir

    folder = Path(folder)
    dataset = load_beir(folder, limit=limit)
    types: dict[str, str] = {}
    with (folder / "queries.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                if row.get("type"):
                    types[str(row["id"])] = str(row["type"])
    return [DatasetItem(external_id=q.id, question=q.text, gold_doc_ids=sorted(dataset.qrels.get(q.id, {})),
                        answers=list(q.answers), answerable=True, type=types.get(q.id, ""))
            for q in dataset.queries if dataset.qrels.get(q.id)]  # a query with nothing relevant has no gold


def beir_corpus_files(folder: Path | str, out_dir: Path, doc_ids: Iterable[str] | None = None) -> list[Path]:
    """Write a BEIR corpus (or the given documents of it) as one ``<id>.txt`` per document, for ingestion."""
    wanted = set(doc_ids) if doc_ids is not None else None
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    with (Path(folder) / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            row = json.loads(line)
            doc_id = str(row["id"])
            if wanted is not None and doc_id not in wanted:
                continue
            title, body = row.get("title") or "", row.get("text") or ""
            path = out_dir / f"{doc_id}.txt"
            path.write_text(f"{title}\n{body}" if title else body, encoding="utf-8")
            paths.append(path)
    return paths


def matches_gold(ref: str, name: str) -> bool:
    """A gold reference names a KB document by its name, or by its name without the extension."""
    return ref == name or ("." in name and name.rsplit(".", 1)[0] == ref)


def gold_document_ids(gold: Sequence[str], documents: dict[str, int]) -> set[int]:
    """KB document ids of the gold references (``documents``: KB document name -> id): every document the
    metrics count as gold, so leave-gold-out leaves out exactly those."""
    return {doc_id for name, doc_id in documents.items() if any(matches_gold(ref, name) for ref in gold)}


# --------------------------------------------------------------------------
# The store
# --------------------------------------------------------------------------

_DATASET_COLUMNS = "id, name, description, owner_id, department, visibility, source, kb_name, created_at"
_ITEM_COLUMNS = ("id, external_id, question, kb_name, gold_doc_ids, gold_chunk_ids, answers, answerable, type, "
                 "source_run_id")


class DatasetStore:
    """Datasets, their items and run labels (schema: store/db.py m010).  Unchecked: the facade decides access."""

    def __init__(self, db: Database):
        self._db = db

    # -- datasets --------------------------------------------------------------
    def create(self, name: str, items: Sequence[DatasetItem], *, description: str = "", owner_id: int | None = None,
               department: str = "", visibility: str = "private", source: str = "", kb_name: str = "") -> Dataset:
        name = name.strip()
        if not name:
            raise DatasetError("a dataset needs a name")
        with self._db.transaction() as db:
            if db.execute("SELECT 1 FROM datasets WHERE name = ?", [name]).fetchone():
                raise DatasetError(f"a dataset named '{name}' already exists")
            cursor = db.execute(
                "INSERT INTO datasets (name, description, owner_id, department, visibility, source, kb_name, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [name, description, owner_id, department, visibility, source, kb_name, utcnow()])
            dataset_id = int(cursor.lastrowid)
            self._insert_items(db, dataset_id, items, 0)
        return self.get(dataset_id)

    def get(self, dataset_id: int) -> Dataset:
        row = self._db.db.execute(f"SELECT {_DATASET_COLUMNS}, (SELECT COUNT(*) FROM dataset_items i "
                                  f"WHERE i.dataset_id = datasets.id) FROM datasets WHERE id = ?",
                                  [int(dataset_id)]).fetchone()
        if row is None:
            raise NotFound(f"dataset #{dataset_id} does not exist")
        return _dataset(row)

    def find(self, name: str) -> Dataset | None:
        row = self._db.db.execute("SELECT id FROM datasets WHERE name = ?", [name]).fetchone()
        return self.get(row[0]) if row else None

    def list(self) -> list[Dataset]:
        rows = self._db.db.execute(f"SELECT {_DATASET_COLUMNS}, (SELECT COUNT(*) FROM dataset_items i "
                                   f"WHERE i.dataset_id = datasets.id) FROM datasets ORDER BY name").fetchall()
        return [_dataset(r) for r in rows]

    def update(self, dataset_id: int, **fields: Any) -> None:
        allowed = {"visibility", "department", "description", "kb_name"}
        sets = {k: v for k, v in fields.items() if k in allowed}
        if not sets:
            return
        with self._db.transaction() as db:
            db.execute(f"UPDATE datasets SET {', '.join(f'{k} = ?' for k in sets)} WHERE id = ?",
                       [*sets.values(), int(dataset_id)])

    def delete(self, dataset_id: int) -> None:
        with self._db.transaction() as db:
            if db.execute("DELETE FROM datasets WHERE id = ?", [int(dataset_id)]).rowcount == 0:
                raise NotFound(f"dataset #{dataset_id} does not exist")

    # -- items -----------------------------------------------------------------
    def items(self, dataset_id: int, limit: int | None = None) -> list[DatasetItem]:
        sql = f"SELECT {_ITEM_COLUMNS} FROM dataset_items WHERE dataset_id = ? ORDER BY position, id"
        params: list[Any] = [int(dataset_id)]
        if limit:
            sql += " LIMIT ?"
            params.append(int(limit))
        return [_item(r) for r in self._db.db.execute(sql, params).fetchall()]

    def add_items(self, dataset_id: int, items: Sequence[DatasetItem]) -> list[int]:
        with self._db.transaction() as db:
            start = db.execute("SELECT COALESCE(MAX(position) + 1, 0) FROM dataset_items WHERE dataset_id = ?",
                               [int(dataset_id)]).fetchone()[0]
            return self._insert_items(db, dataset_id, items, int(start))

    def replace_item(self, item_id: int, item: DatasetItem) -> None:
        with self._db.transaction() as db:
            db.execute("UPDATE dataset_items SET question = ?, kb_name = ?, gold_doc_ids = ?, gold_chunk_ids = ?, "
                       "answers = ?, answerable = ?, type = ? WHERE id = ?",
                       [item.question, item.kb, json.dumps(item.gold_doc_ids), json.dumps(item.gold_chunk_ids),
                        json.dumps(item.answers, ensure_ascii=False), int(item.answerable), item.type, int(item_id)])

    @staticmethod
    def _insert_items(db, dataset_id: int, items: Sequence[DatasetItem], start: int) -> list[int]:
        ids = []
        for position, item in enumerate(items, start=start):
            cursor = db.execute(
                "INSERT INTO dataset_items (dataset_id, position, external_id, question, kb_name, gold_doc_ids, "
                "gold_chunk_ids, answers, answerable, type, source_run_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [int(dataset_id), position, item.external_id, item.question, item.kb,
                 json.dumps(item.gold_doc_ids, ensure_ascii=False), json.dumps(item.gold_chunk_ids),
                 json.dumps(item.answers, ensure_ascii=False), int(item.answerable), item.type, item.source_run_id])
            ids.append(int(cursor.lastrowid))
        return ids

    # -- labels given to runs -----------------------------------------------------
    def set_label(self, label: RunLabel) -> RunLabel:
        """Store (or replace: a correction) the label of ``label.run_id``."""
        with self._db.transaction() as db:
            db.execute(f"INSERT INTO run_labels ({_LABEL_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                       "ON CONFLICT (run_id) DO UPDATE SET verdict = excluded.verdict, "
                       "gold_chunk_ids = excluded.gold_chunk_ids, labelled_by = excluded.labelled_by, "
                       "labelled_at = excluded.labelled_at, dataset_item_id = excluded.dataset_item_id, "
                       "gold_doc_ids = excluded.gold_doc_ids, answer_verdict = excluded.answer_verdict, "
                       "kb_ids = excluded.kb_ids",
                       [label.run_id, label.verdict, json.dumps(label.gold_chunk_ids), label.labelled_by,
                        label.labelled_at or utcnow(), label.dataset_item_id,
                        json.dumps(label.gold_doc_ids, ensure_ascii=False), label.answer_verdict,
                        json.dumps(sorted(label.kb_ids))])
        return self.label(label.run_id)  # type: ignore[return-value]

    def label(self, run_id: str) -> RunLabel | None:
        row = self._db.db.execute(f"SELECT {_LABEL_COLUMNS} FROM run_labels WHERE run_id = ?", [run_id]).fetchone()
        return _label(row) if row is not None else None

    def labels(self, run_ids: Iterable[str] | None = None) -> list[RunLabel]:
        """Every label (``run_ids`` None) or the labels of these runs, oldest first."""
        if run_ids is None:
            rows = self._db.db.execute(f"SELECT {_LABEL_COLUMNS} FROM run_labels ORDER BY labelled_at, run_id")
            return [_label(r) for r in rows.fetchall()]
        wanted = list(dict.fromkeys(run_ids))
        found: list[RunLabel] = []
        for start in range(0, len(wanted), 500):  # SQLite's limit on bound parameters
            batch = wanted[start:start + 500]
            rows = self._db.db.execute(f"SELECT {_LABEL_COLUMNS} FROM run_labels WHERE run_id IN "
                                       f"({', '.join('?' * len(batch))}) ORDER BY labelled_at, run_id", batch)
            found += [_label(r) for r in rows.fetchall()]
        return found

    def label_tallies(self) -> "list[LabelTally]":
        """Every label counted by (the run's KBs, the verdict it was shown with, the label): what a KB badge
        needs, without reading each label."""

        rows = self._db.db.execute("SELECT kb_ids, answer_verdict, verdict, COUNT(*) FROM run_labels "
                                   "GROUP BY kb_ids, answer_verdict, verdict").fetchall()
        return [LabelTally(tuple(sorted(json.loads(r[0] or "[]"))), r[1] or "", r[2], int(r[3])) for r in rows]

    def delete_label(self, run_id: str) -> RunLabel:
        """Remove a run's label and the dataset item it added; returns what was removed."""
        label = self.label(run_id)
        if label is None:
            raise NotFound(f"run {run_id} has no label")
        with self._db.transaction() as db:
            db.execute("DELETE FROM run_labels WHERE run_id = ?", [run_id])
            if label.dataset_item_id is not None:
                db.execute("DELETE FROM dataset_items WHERE id = ? AND source_run_id = ?",
                           [label.dataset_item_id, run_id])
        return label


_LABEL_COLUMNS = ("run_id, verdict, gold_chunk_ids, labelled_by, labelled_at, dataset_item_id, gold_doc_ids, "
                  "answer_verdict, kb_ids")


def _label(row: Sequence[Any]) -> RunLabel:
    return RunLabel(run_id=row[0], verdict=row[1], gold_chunk_ids=json.loads(row[2] or "[]"), labelled_by=row[3],
                    labelled_at=row[4], dataset_item_id=row[5], gold_doc_ids=json.loads(row[6] or "[]"),
                    answer_verdict=row[7] or "", kb_ids=json.loads(row[8] or "[]"))


def _dataset(row: Sequence[Any]) -> Dataset:
    return Dataset(id=row[0], name=row[1], description=row[2], owner_id=row[3], department=row[4],
                   visibility=row[5], source=row[6], kb_name=row[7], created_at=row[8], item_count=row[9])


def _item(row: Sequence[Any]) -> DatasetItem:
    return DatasetItem(id=row[0], external_id=row[1], question=row[2], kb=row[3],
                       gold_doc_ids=json.loads(row[4] or "[]"), gold_chunk_ids=json.loads(row[5] or "[]"),
                       answers=json.loads(row[6] or "[]"), answerable=bool(row[7]), type=row[8],
                       source_run_id=row[9])
