"""MemoryStore with the bundled encoder: per-user isolation, dedupe, similarity threshold."""

from __future__ import annotations

import numpy as np
import pytest

from docmind_core.errors import NotFound
from docmind_core.answer.memory import MemoryStore, RecalledMemory


@pytest.fixture
def memory(db, embedder):
    return MemoryStore(db, embedder)


def test_recall_never_returns_another_users_memory(memory):
    memory.add(1, "I work in the finance department.", source="memory_command")
    memory.add(2, "I work in the sales department.", source="memory_command")
    memory.add(2, "我喜欢简短的回答。", source="hint")

    alice = memory.recall(1, "which department do I work in?", top_k=5, min_similarity=0.0)
    bob = memory.recall(2, "which department do I work in?", top_k=5, min_similarity=0.0)
    assert [m.text for m in alice] == ["I work in the finance department."]
    assert "I work in the sales department." in [m.text for m in bob]
    assert all("finance" not in m.text for m in bob)
    assert memory.recall(3, "which department do I work in?", top_k=5, min_similarity=0.0) == []
    assert [m.text for m in memory.list(1)] == ["I work in the finance department."]
    assert [m.text for m in memory.list(2)] == ["我喜欢简短的回答。", "I work in the sales department."]


def test_recall_ranks_and_applies_the_similarity_threshold(memory):
    memory.add(1, "My favourite colour is blue.")
    memory.add(1, "My project is called Falcon.")
    memory.add(1, "The DM-3000 warranty lasts two years.")
    hits = memory.recall(1, "what is my project called?", top_k=5, min_similarity=0.0)
    assert hits[0].text == "My project is called Falcon."
    assert [h.similarity for h in hits] == sorted((h.similarity for h in hits), reverse=True)
    assert isinstance(hits[0], RecalledMemory)
    text, similarity = hits[0]  # unpacks as (text, similarity)
    assert text == hits[0].text and similarity == hits[0].similarity

    strict = memory.recall(1, "what is my project called?", top_k=5, min_similarity=hits[0].similarity - 1e-6)
    assert [h.text for h in strict] == ["My project is called Falcon."]
    assert memory.recall(1, "what is my project called?", top_k=5, min_similarity=0.999) == []
    assert len(memory.recall(1, "what is my project called?", top_k=2, min_similarity=0.0)) == 2
    assert memory.recall(1, "   ", top_k=5, min_similarity=0.0) == []


def test_near_identical_memories_are_deduplicated_per_user(memory):
    first = memory.add(1, "I prefer short answers.")
    assert first.duplicate is False
    again = memory.add(1, "  i prefer SHORT answers ")  # case, spacing, punctuation
    reworded = memory.add(1, "I like short answers.")
    assert again.duplicate and again.memory.id == first.memory.id
    assert reworded.duplicate and reworded.memory.id == first.memory.id
    assert memory.add(1, "我喜欢简短的回答。").duplicate is False
    assert memory.add(1, "我喜欢简短的回答").duplicate is True
    # A different fact is not a duplicate, and another user's identical memory is their own.
    assert memory.add(1, "I work in the sales department.").duplicate is False
    assert memory.add(2, "I prefer short answers.").duplicate is False
    assert len(memory.list(1)) == 3 and len(memory.list(2)) == 1


def test_embeddings_are_stored_as_float32_blobs(memory, db, embedder):
    memory.add(1, "I prefer short answers.", source="hint")
    blob, embedder_id, source = db.db.execute("SELECT embedding, embedder_id, source FROM memories").fetchone()
    vector = np.frombuffer(blob, dtype=np.float32)
    assert vector.shape == (embedder.dim,) and embedder_id == embedder.id and source == "hint"
    assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-3


def test_delete_only_touches_the_owners_memory(memory):
    mine = memory.add(1, "My favourite colour is blue.").memory
    with pytest.raises(NotFound):
        memory.delete(2, mine.id)
    assert len(memory.list(1)) == 1
    memory.delete(1, mine.id)
    assert memory.list(1) == []
    with pytest.raises(NotFound):
        memory.delete(1, mine.id)


def test_single_user_mode_and_clear(memory):
    memory.add(None, "My favourite colour is blue.")
    assert [m.text for m in memory.list(None)] == ["My favourite colour is blue."]
    assert memory.recall(1, "favourite colour", 5, 0.0) == []
    assert memory.clear(None) == 1 and memory.list(None) == []
    with pytest.raises(ValueError):
        memory.add(1, "   ")


def test_memories_from_another_embedder_are_re_embedded(memory, db, embedder):
    memory.add(1, "My project is called Falcon.")
    with db.transaction() as conn:  # as if stored under a previously configured embedder
        conn.execute("UPDATE memories SET embedder_id = 'old-model', embedding = ?", [np.zeros(3, np.float32).tobytes()])
    hits = memory.recall(1, "what is my project called?", top_k=3, min_similarity=0.3)
    assert [h.text for h in hits] == ["My project is called Falcon."]
    assert db.db.execute("SELECT embedder_id FROM memories").fetchone()[0] == embedder.id
