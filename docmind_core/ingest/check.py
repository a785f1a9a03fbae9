"""``docmind kb check``: compare a KB's chunk rows, keyword rows and vectors per document, and repair them.

SQLite's chunk rows are the truth.  Each child chunk of a complete document
should have exactly one keyword row and one vector; anything else in the
indexes is an orphan.  Documents that a live operation (another process's
ingest) owns are in flux and left out of the comparison.  A document left
``embedding`` by an owner that has exited (a process killed while its vectors
were written) is half-written: it is reported, compared like a complete one
(its keyword rows must be there, its vectors are what is missing), and the
repair takes it over, writes its missing vectors and completes it.  The repair re-adds
missing vectors from the chunk rows' stored vector copies (migration m007) or,
without a copy, by embedding the stored chunk text; re-adds missing keyword rows
from the stored tokens; removes orphans and duplicate keyword rows; removes the
rows of documents whose owner died half-way; and refills missing vector copies
from the vector store.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import TYPE_CHECKING

import numpy as np
from pydantic import BaseModel, Field

from docmind_core.backends.protocols import IndexedChunk
from docmind_core.ingest.indexing import IndexWriter
from docmind_core.store.db import utcnow

if TYPE_CHECKING:
    from docmind_core.ingest.leases import LeaseBook
    from docmind_core.store.kb_store import KnowledgeStore

log = logging.getLogger(__name__)

_SAMPLE = 10  # chunk ids listed per difference (the counts are always complete)
_BATCH = 256


class DocumentCheck(BaseModel):
    """One document whose stores disagree."""

    doc_id: int
    name: str
    status: str
    chunks: int  # child chunk rows in SQLite
    vectors: int
    keyword_rows: int | None  # None when the keyword backend keeps no rows of its own (rank_bm25)
    missing_vectors: int = 0
    missing_keyword_rows: int = 0
    duplicate_keyword_rows: int = 0
    missing_vector_copies: int = 0  # chunk rows without their stored vector copy
    note: str = ""


class KbCheckReport(BaseModel):
    kb_id: int
    kb_name: str
    embedder_id: str
    checked_at: str
    documents: int  # documents compared: complete ones and half-written ones
    chunks: int  # their child chunk rows
    vectors: int  # entries in the vector store, all documents
    keyword_rows: int | None
    missing_vectors: int = 0
    missing_keyword_rows: int = 0
    duplicate_keyword_rows: int = 0
    missing_vector_copies: int = 0
    orphan_vectors: int = 0  # vectors of no child chunk of a complete (or live) document
    orphan_keyword_rows: int = 0
    interrupted_documents: list[str] = Field(default_factory=list)  # pending with a gone owner, or failed with rows
    # left ``embedding`` (searchable by keyword, vectors missing) by an owner that is gone: one line each
    half_written_documents: list[str] = Field(default_factory=list)
    in_progress_documents: int = 0  # pending or embedding under a live owner: not compared
    differences: list[DocumentCheck] = Field(default_factory=list)
    samples: dict[str, list[str]] = Field(default_factory=dict)  # difference -> some chunk ids
    repaired: list[str] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)  # what the repair could not fix, and why
    repair_verified: bool | None = None  # after --repair: did a fresh check find nothing left?

    @property
    def ok(self) -> bool:
        return not (self.missing_vectors or self.missing_keyword_rows or self.duplicate_keyword_rows
                    or self.orphan_vectors or self.orphan_keyword_rows or self.interrupted_documents
                    or self.half_written_documents or self.missing_vector_copies)

    def lines(self) -> list[str]:
        """The report as text, one finding per line."""
        kw = "n/a (in-memory backend)" if self.keyword_rows is None else str(self.keyword_rows)
        out = [f"{self.kb_name}: {self.documents} documents, {self.chunks} chunk rows, {kw} keyword rows, "
               f"{self.vectors} vectors ({self.embedder_id})"]
        findings = [("missing vectors", self.missing_vectors), ("missing keyword rows", self.missing_keyword_rows),
                    ("duplicate keyword rows", self.duplicate_keyword_rows),
                    ("chunk rows without a vector copy", self.missing_vector_copies),
                    ("orphan vectors", self.orphan_vectors), ("orphan keyword rows", self.orphan_keyword_rows)]
        out += [f"  {label}: {n}" + (f" (e.g. {', '.join(self.samples.get(label, [])[:3])})"
                                     if self.samples.get(label) else "") for label, n in findings if n]
        out += [f"  interrupted document: {name}" for name in self.interrupted_documents]
        out += [f"  half-written document: {line}" for line in self.half_written_documents]
        if self.in_progress_documents:
            out.append(f"  {self.in_progress_documents} documents are being written by a live process: not compared")
        for d in self.differences[:50]:
            parts = [f"{label} {n}" for label, n in (("missing vectors", d.missing_vectors),
                                                     ("missing keyword rows", d.missing_keyword_rows),
                                                     ("duplicate keyword rows", d.duplicate_keyword_rows),
                                                     ("no vector copy", d.missing_vector_copies)) if n]
            out.append(f"  [{d.status}] {d.name}: {d.chunks} chunks, {d.vectors} vectors, "
                       f"{'-' if d.keyword_rows is None else d.keyword_rows} keyword rows; " + ", ".join(parts))
        if len(self.differences) > 50:
            out.append(f"  ... and {len(self.differences) - 50} more documents")
        out += [f"  repaired: {line}" for line in self.repaired]
        out += [f"  not repaired: {line}" for line in self.problems]
        if self.repair_verified is not None:
            out.append("  after the repair: " + ("consistent" if self.repair_verified else "still inconsistent"))
        elif self.ok:
            out.append("  consistent")
        return out


class _Snapshot:
    """What the three stores hold for one KB, read in one pass."""

    def __init__(self, store: "KnowledgeStore", vector_store, keyword_index, leases: "LeaseBook", kb_id: int,
                 own_lease: int | None):
        self.rows = store.child_chunk_index(kb_id)  # (chunk id, doc id, has vector copy), any status
        self.vectors: dict[str, int] = vector_store.entries(kb_id)
        entries = getattr(keyword_index, "entries", None)
        self.keyword: list[tuple[str, int]] | None = entries(kb_id) if entries is not None else None
        # Statuses after the listings: a document that began meanwhile is pending-live (left out), one
        # that completed meanwhile is complete (and was fully indexed before it completed).
        self.states = store.document_states(kb_id)
        self.live: set[int] = set()  # pending or embedding under a live owner: in flux, not compared
        self.gone: dict[int, str] = {}  # pending docs whose owner is gone -> why
        self.half_written: dict[int, str] = {}  # embedding docs whose owner is gone -> why
        for doc_id, (status, owner) in self.states.items():
            if status == "pending":
                reason = None if owner == own_lease else leases.owner_gone(owner)
                found = self.gone
            elif status == "embedding":
                # under our own lease only while this repair writes it: one it could not finish stays half-written
                reason = ("this repair could not write its vectors" if owner is not None and owner == own_lease
                          else leases.owner_gone(owner))
                found = self.half_written
            else:
                continue
            if reason is None:
                self.live.add(doc_id)
            else:
                found[doc_id] = reason
        compared = {doc for doc, (status, _owner) in self.states.items() if status == "complete"}
        self.expected: dict[str, int] = {cid: doc for cid, doc, _ in self.rows
                                         if doc in compared or doc in self.half_written}
        self.keyword_counts: Counter[str] = Counter(cid for cid, _ in self.keyword or [])

    def leave_alone(self, doc_id: int) -> None:
        """A half-written document another process took over since this snapshot: in flux, not compared."""
        self.half_written.pop(doc_id, None)
        self.live.add(doc_id)
        self.expected = {cid: doc for cid, doc in self.expected.items() if doc != doc_id}

    def missing_vectors(self) -> list[str]:
        return [cid for cid in self.expected if cid not in self.vectors]

    def missing_copies(self) -> list[str]:
        return [cid for cid, _doc, has in self.rows if cid in self.expected and not has]

    def orphan_vectors(self) -> list[str]:
        return [cid for cid, doc in self.vectors.items() if cid not in self.expected and doc not in self.live]

    def missing_keyword(self) -> list[str]:
        if self.keyword is None:
            return []
        return [cid for cid in self.expected if cid not in self.keyword_counts]

    def duplicate_keyword(self) -> list[str]:
        return [cid for cid, n in self.keyword_counts.items() if n > 1 and cid in self.expected]

    def orphan_keyword(self) -> list[str]:
        if self.keyword is None:
            return []
        return list(dict.fromkeys(cid for cid, doc in self.keyword if cid not in self.expected
                                  and doc not in self.live))


class KbChecker:
    def __init__(self, store: "KnowledgeStore", embedder, vector_store, keyword_index, leases: "LeaseBook"):
        self.store = store
        self.embedder = embedder
        self.vector_store = vector_store
        self.keyword_index = keyword_index
        self.leases = leases
        self.writer = IndexWriter(store, embedder, vector_store, keyword_index)

    # -- check ---------------------------------------------------------------
    def check(self, kb_id: int, own_lease: int | None = None) -> KbCheckReport:
        kb = self.store.get_kb(kb_id)
        snap = _Snapshot(self.store, self.vector_store, self.keyword_index, self.leases, kb_id, own_lease)
        return self._report(kb, snap)

    def _report(self, kb, snap: _Snapshot) -> KbCheckReport:
        missing_vectors, missing_keyword = snap.missing_vectors(), snap.missing_keyword()
        duplicates, copies = snap.duplicate_keyword(), snap.missing_copies()
        orphan_vectors, orphan_keyword = snap.orphan_vectors(), snap.orphan_keyword()
        docs = {d.id: d for d in self.store.list_documents(kb.id)}
        per_doc: dict[int, DocumentCheck] = {}

        # per-document counts once (a KB whose vectors are all missing differs in every document)
        chunk_counts = Counter(d for _c, d, _h in snap.rows)
        vector_counts = Counter(snap.vectors.values())
        keyword_counts = None if snap.keyword is None else Counter(d for _c, d in snap.keyword)

        def entry(doc_id: int) -> DocumentCheck:
            if doc_id not in per_doc:
                doc = docs.get(doc_id)
                per_doc[doc_id] = DocumentCheck(
                    doc_id=doc_id, name=doc.name if doc else f"document {doc_id}",
                    status=doc.status if doc else "gone", chunks=chunk_counts[doc_id],
                    vectors=vector_counts[doc_id],
                    keyword_rows=None if keyword_counts is None else keyword_counts[doc_id])
            return per_doc[doc_id]

        for field, ids in (("missing_vectors", missing_vectors), ("missing_keyword_rows", missing_keyword),
                           ("duplicate_keyword_rows", duplicates), ("missing_vector_copies", copies)):
            for cid in ids:
                check = entry(snap.expected[cid])
                setattr(check, field, getattr(check, field) + 1)
        interrupted = [f"{docs[d].name} (pending: {reason})" for d, reason in snap.gone.items() if d in docs]
        interrupted += [f"{d.name} (failed, {d.chunk_count} chunk rows left)" for d in docs.values()
                        if d.status == "failed" and d.chunk_count]
        without_vector = Counter(doc for cid, doc in snap.expected.items() if cid not in snap.vectors)
        half_written = [f"{docs[d].name}: searchable by keyword only, {without_vector[d]} of {chunk_counts[d]} chunks "
                        f"without a vector (left embedding: {reason})" for d, reason in snap.half_written.items()
                        if d in docs]
        compared = {doc for doc, (status, _owner) in snap.states.items() if status == "complete"}
        compared |= set(snap.half_written)
        return KbCheckReport(
            kb_id=kb.id, kb_name=kb.name, embedder_id=kb.embedder_id, checked_at=utcnow(), documents=len(compared),
            chunks=len(snap.expected), vectors=len(snap.vectors),
            keyword_rows=None if snap.keyword is None else len(snap.keyword),
            missing_vectors=len(missing_vectors), missing_keyword_rows=len(missing_keyword),
            duplicate_keyword_rows=sum(snap.keyword_counts[c] - 1 for c in duplicates),
            missing_vector_copies=len(copies), orphan_vectors=len(orphan_vectors),
            orphan_keyword_rows=len(orphan_keyword), interrupted_documents=interrupted,
            half_written_documents=sorted(half_written),
            in_progress_documents=len(snap.live), differences=sorted(per_doc.values(), key=lambda d: d.name),
            samples={label: ids[:_SAMPLE] for label, ids in (
                ("missing vectors", missing_vectors), ("missing keyword rows", missing_keyword),
                ("duplicate keyword rows", duplicates), ("chunk rows without a vector copy", copies),
                ("orphan vectors", orphan_vectors), ("orphan keyword rows", orphan_keyword)) if ids})

    # -- repair --------------------------------------------------------------
    def repair(self, kb_id: int, lease_id: int) -> KbCheckReport:
        """Check, fix what differs, then check again (``repair_verified``)."""
        kb = self.store.get_kb(kb_id)
        snap = _Snapshot(self.store, self.vector_store, self.keyword_index, self.leases, kb_id, lease_id)
        report = self._report(kb, snap)
        repaired, problems = report.repaired, report.problems
        taken = self._take_half_written(snap, lease_id)
        for doc_id, reason in snap.gone.items():
            # the owner judged gone, not a fresh read: one that took the document over since is alive, and
            # the compare-and-set must fail against it
            owner = snap.states[doc_id][1]
            if self.writer.remove_interrupted(kb_id, doc_id, lease_id, owner):
                repaired.append(f"removed interrupted document {doc_id} ({reason})")
        for doc in self.store.list_documents(kb_id, status="failed"):
            if self.writer.clear_failed(doc, lease_id):
                repaired.append(f"removed the chunk rows of failed document '{doc.name}'")
        orphans = snap.orphan_vectors()
        if orphans:
            self.vector_store.delete_chunks(kb_id, orphans)
            repaired.append(f"removed {len(orphans)} orphan vectors")
        missing = snap.missing_vectors()
        if missing:
            if kb.embedder_id != self.embedder.id or kb.embedding_dim != self.embedder.dim:
                problems.append(f"{len(missing)} missing vectors: the KB is indexed with {kb.embedder_id} but the "
                                f"configured embedder is {self.embedder.id}; run `docmind kb reindex {kb.name}`")
            else:
                from_copies, embedded = self._add_vectors(kb_id, missing)
                repaired.append(f"added {len(missing)} missing vectors ({from_copies} from stored copies, "
                                f"{embedded} re-embedded from the chunk text)")
        just_added = set(missing)
        copies = [c for c in snap.missing_copies() if c not in just_added]
        if copies and kb.embedder_id == self.embedder.id:
            filled = self._fill_copies(kb_id, copies)
            repaired.append(f"stored {filled} missing vector copies from the vector store")
        if snap.keyword is not None:
            orphan_rows, duplicates = snap.orphan_keyword(), snap.duplicate_keyword()
            if orphan_rows or duplicates:
                self.keyword_index.delete_chunks(kb_id, orphan_rows + duplicates)
            readd = duplicates + snap.missing_keyword()
            if readd:
                self.keyword_index.add([IndexedChunk(cid, kb_id, doc, text, terms)
                                        for cid, _kb, doc, text, terms in self.store.child_chunks(readd)])
            if orphan_rows:
                repaired.append(f"removed {len(orphan_rows)} orphan keyword rows")
            if duplicates:
                repaired.append(f"rewrote {len(duplicates)} chunks that had duplicate keyword rows")
            if len(readd) > len(duplicates):
                repaired.append(f"added {len(readd) - len(duplicates)} missing keyword rows")
        self._complete_half_written(kb, taken, lease_id, repaired, problems)
        after = self.check(kb_id, own_lease=lease_id)
        report.repair_verified = after.ok
        if not after.ok and not problems:
            problems.extend(line.strip() for line in after.lines()[1:] if line.strip() != "consistent")
        for line in repaired:
            log.warning("kb check %s: %s", kb.name, line)
        return report

    def _take_half_written(self, snap: _Snapshot, lease_id: int) -> dict[int, str]:
        """Take the half-written documents over from the owners judged gone (compare-and-set: one another process
        took since is left to it); doc id -> why it was half-written."""
        taken: dict[int, str] = {}
        for doc_id, reason in list(snap.half_written.items()):
            if self.store.claim_embedding(doc_id, lease_id, snap.states[doc_id][1]):
                taken[doc_id] = reason
            else:
                snap.leave_alone(doc_id)
        return taken

    def _complete_half_written(self, kb, taken: dict[int, str], lease_id: int, repaired: list[str],
                               problems: list[str]) -> None:
        """Complete the taken documents whose vectors are all stored now (the missing ones were written with the
        rest of the KB's); one the embedder cannot serve is completed as finish_embedding does, its vectors left
        to the re-index the problems line names."""
        if not taken:
            return
        names = {d.id: d.name for d in self.store.list_documents(kb.id)}
        same = kb.embedder_id == self.embedder.id and kb.embedding_dim == self.embedder.dim
        left = self.store.missing_vector_counts(list(taken))
        for doc_id, reason in taken.items():
            name = names.get(doc_id, f"document {doc_id}")
            if same and left.get(doc_id):
                problems.append(f"half-written document '{name}': {left[doc_id]} chunks still without a vector")
                continue
            if self.store.complete_document(doc_id, lease_id):
                repaired.append(f"finished half-written document '{name}' (left embedding: {reason})"
                                + ("" if same else f"; its vectors follow at `docmind kb reindex {kb.name}`"))

    def restore_vectors(self, kb_id: int) -> int:
        """Add the vectors the vector store lacks for chunks that have a stored copy; returns how many."""
        vectors = self.vector_store.entries(kb_id)
        missing = [cid for cid, _doc, _text in self.store.child_texts(kb_id) if cid not in vectors]
        if not missing:
            return 0
        from_copies, _embedded = self._add_vectors(kb_id, missing)
        return from_copies

    def _add_vectors(self, kb_id: int, chunk_ids: list[str]) -> tuple[int, int]:
        """Give these chunks their vectors: the stored copy when it has the right size, else a fresh
        embedding of the stored text (whose copy is then stored too); returns (from copies, embedded)."""
        from_copies = embedded = 0
        for start in range(0, len(chunk_ids), _BATCH):
            rows = self.store.child_chunks(chunk_ids[start:start + _BATCH])
            copies = self.store.chunk_vectors(cid for cid, *_ in rows)
            with_copy = [r for r in rows if r[0] in copies and copies[r[0]].shape == (self.embedder.dim,)]
            without = [r for r in rows if not (r[0] in copies and copies[r[0]].shape == (self.embedder.dim,))]
            if with_copy:
                self.vector_store.add([IndexedChunk(cid, kb, doc, text) for cid, kb, doc, text, _t in with_copy],
                                      np.stack([copies[r[0]] for r in with_copy]))
                from_copies += len(with_copy)
            if without:
                self.writer.embed([IndexedChunk(cid, kb, doc, text) for cid, kb, doc, text, _t in without])
                embedded += len(without)
        return from_copies, embedded

    def _fill_copies(self, kb_id: int, chunk_ids: list[str]) -> int:
        filled = 0
        for start in range(0, len(chunk_ids), _BATCH):
            part = chunk_ids[start:start + _BATCH]
            got = self.vector_store.get_embeddings(kb_id, part)
            ids = [cid for cid in part if cid in got]
            if ids:
                self.store.set_chunk_vectors(ids, np.stack([got[cid] for cid in ids]))
                filled += len(ids)
        return filled
