"""ConversationStore: owner checks, context-free history, Markdown export."""

from __future__ import annotations

import pytest

from docmind_core.values import Turn
from docmind_core.errors import AccessDenied, NotFound
from docmind_core.values import RetrievedChunk
from docmind_core.store.conversations import ConversationStore
from docmind_core.store.db import Database


@pytest.fixture
def store(tmp_path):
    return ConversationStore(Database(tmp_path / "docmind.db"))


def test_create_list_and_title_from_first_question(store):
    first = store.create(user_id=1)
    second = store.create(user_id=1, title="Pricing")
    store.add_message(first, "user", "What does the DM-3000 warranty cover?")
    store.add_message(first, "assistant", "Two years of parts [1].", run_id="r1")
    listed = store.list(1)
    assert [c.id for c in listed] == [first, second]  # most recently active first
    assert listed[0].title == "What does the DM-3000 warranty cover?"
    assert listed[0].message_count == 2 and listed[1].title == "Pricing"
    assert len(first) == 32 and int(first, 16) >= 0  # uuid4 hex
    assert store.list(2) == []


def test_owner_check(store):
    alice = store.create(user_id=1, title="alice's")
    single = store.create(user_id=None)
    assert store.get(alice, 1).title == "alice's"
    with pytest.raises(AccessDenied):
        store.get(alice, 2)
    with pytest.raises(AccessDenied):
        store.get(alice, None)
    with pytest.raises(AccessDenied):
        store.delete(alice, user_id=2)
    with pytest.raises(AccessDenied):
        store.get(single, 1)
    with pytest.raises(NotFound):
        store.get("0" * 32, 1)
    assert store.get(alice, 1).title == "alice's"
    assert [c.id for c in store.list(None)] == [single]


def test_delete(store):
    conv = store.create(user_id=3, title="Greetings")
    store.add_message(conv, "user", "hello")
    assert store.get(conv, 3).title == "Greetings"
    store.delete(conv, user_id=3)
    with pytest.raises(NotFound):
        store.get(conv, 3)
    assert store.messages(conv) == []


def test_messages_keep_order_roles_and_run_ids(store):
    conv = store.create()
    store.add_message(conv, "user", "问题一")
    store.add_message(conv, "assistant", "回答一[1]。", run_id="run-a")
    msgs = store.messages(conv)
    assert [(m.role, m.content, m.run_id) for m in msgs] == [("user", "问题一", None), ("assistant", "回答一[1]。", "run-a")]
    with pytest.raises(ValueError):
        store.add_message(conv, "system", "no")
    with pytest.raises(NotFound):
        store.add_message("missing", "user", "no")


def test_history_turns_hold_no_retrieved_context(store):
    conv = store.create()
    for i in range(1, 5):
        store.add_message(conv, "user", f"question {i}")
        store.add_message(conv, "assistant", f"answer {i} [1][3], see also [1,2].", run_id=f"r{i}")
    turns = store.history_turns(conv, 3)
    assert turns == [
        Turn("assistant", "answer 3, see also."),
        Turn("user", "question 4"),
        Turn("assistant", "answer 4, see also."),
    ]
    assert store.history_turns(conv, 0) == []
    # Only question and answer text is stored: nothing else to leak into a prompt.
    assert all(set(m.model_dump()) == {"id", "conversation_id", "role", "content", "run_id", "created_at"}
               for m in store.messages(conv))


def test_markdown_export_numbers_sources_per_answer(store):
    conv = store.create(user_id=1)
    store.add_message(conv, "user", "Warranty of the DM-3000?")
    store.add_message(conv, "assistant", "Two years [1]; extended plans exist [2].", run_id="r1")
    store.add_message(conv, "user", "Thanks!")
    store.add_message(conv, "assistant", "You're welcome.", run_id="r2")
    sources = {"r1": [
        RetrievedChunk(chunk_id="c1", kb_id=1, doc_id=1, document="manual.pdf", text="The DM-3000 has a two-year warranty."),
        RetrievedChunk(chunk_id="web:x", document="Vendor blog", text="Extended plans " + "x" * 400,
                       origin="web", url="https://example.org/plans"),
    ]}
    md = store.export_markdown(conv, sources)
    assert md.startswith("# Warranty of the DM-3000?\n")
    assert "### **You**\n\nWarranty of the DM-3000?" in md
    assert "Two years [1]; extended plans exist [2]." in md
    assert "1. **manual.pdf** — The DM-3000 has a two-year warranty." in md
    assert "2. **web: [Vendor blog](https://example.org/plans)** — Extended plans" in md
    assert "…" in md  # long excerpts are shortened
    assert md.count("Sources:") == 1  # the second answer had no sources
    assert md.index("Sources:") < md.index("Thanks!")


def test_markdown_export_can_check_the_owner(store):
    conv = store.create(user_id=1)
    with pytest.raises(AccessDenied):
        store.export_markdown(conv, {}, user_id=2, check_owner=True)
    assert store.export_markdown(conv, {}, user_id=1, check_owner=True).startswith("# Conversation")


def test_history_turns_drop_every_marker_form_the_parser_counts(store):
    conv = store.create()
    store.add_message(conv, "user", "question")
    store.add_message(conv, "assistant", "answer ［1］，more 【2】 and [1、3].", run_id="r1")
    assert store.history_turns(conv, 1) == [Turn("assistant", "answer，more and.")]
