"""Feedback on answers through the Workbench: a label is stored with its run and lands in the KB's labelled
dataset, a second label corrects the first, labels are exported (JSONL, a Langfuse dataset), the KB badge
counts them, and a member labels only runs they may read."""

from __future__ import annotations

import json

import pytest

from docmind_core.errors import AccessDenied, DatasetError
from docmind_core.experiments.records import Variant
from docmind_core.workbench import Workbench
from tests.access_world import build_engine_world
from tests.fakes.langfuse_datasets import FakeLangfuseDatasets


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = tmp_path_factory.mktemp("feedback")
    files = base / "files"
    files.mkdir()
    engine, alice, bob, private, public = build_engine_world(base / "home", files)
    return engine, Workbench(engine, alice, "cli"), Workbench(engine, bob, "cli"), private, public


def _ask(bench: Workbench, question: str, kb_id: int):
    done = list(bench.ask(question, [kb_id]))[-1]
    assert done.kind == "done"
    return done


def test_a_label_is_stored_with_its_run_and_lands_in_the_kbs_dataset(world):
    engine, alice, _bob, private, _public = world
    done = _ask(alice, "When does the zephyr project launch?", private.id)
    label = alice.label_run(done.run_id, "right")
    assert label.verdict == "correct" and label.kb_ids == [private.id] and label.labelled_by == alice.user.id
    assert label.answer_verdict == done.verdict.level  # the verdict the answer was shown with
    assert alice.run_label(done.run_id) == label
    dataset = alice.get_dataset("labels of alice-notes by alice")
    assert dataset.kb_name == "alice-notes" and dataset.owner_id == alice.user.id
    item = next(i for i in alice.dataset_items(dataset.id) if i.source_run_id == done.run_id)
    assert item.question == "When does the zephyr project launch?" and item.kb == "alice-notes"
    assert item.answers == [done.answer] and item.answerable
    made = alice.create_experiment("", dataset.id, [Variant(name="rule", mode="rule")])  # Experiments run it
    assert alice.run_experiment(made.id).done == dataset.item_count


def test_a_second_label_corrects_the_first(world):
    _engine, alice, _bob, private, _public = world
    done = _ask(alice, "What is the zephyr budget?", private.id)
    alice.label_run(done.run_id, "right")
    corrected = alice.label_run(done.run_id, "wrong", gold_doc_ids=["plan.txt"])
    assert corrected.verdict == "wrong" and corrected.gold_doc_ids == ["plan.txt"]
    dataset = alice.get_dataset("labels of alice-notes by alice")
    items = [i for i in alice.dataset_items(dataset.id) if i.source_run_id == done.run_id]
    assert len(items) == 1  # corrected in place, not added again
    assert items[0].gold_doc_ids == ["plan.txt"] and items[0].answers == []
    rows = [r for r in alice.list_labels([private.id]) if r.label.run_id == done.run_id]
    assert [r.label.verdict for r in rows] == ["wrong"] and rows[0].kb_names == ["alice-notes"]
    partly = alice.label_run(done.run_id, "partly")
    assert partly.verdict == "partly" and partly.gold_doc_ids == []


def test_the_right_source_must_be_a_document_of_the_runs_kbs(world):
    _engine, alice, _bob, private, _public = world
    done = _ask(alice, "When does the zephyr project launch?", private.id)
    with pytest.raises(DatasetError, match="guide.txt"):
        alice.label_run(done.run_id, "wrong", gold_doc_ids=["guide.txt"])  # bob's public KB's document
    with pytest.raises(DatasetError, match="verdict"):
        alice.label_run(done.run_id, "maybe")
    assert alice.run_label(done.run_id) is None  # a refused label stores nothing


def test_labels_export_as_jsonl_with_their_runs(world):
    _engine, alice, _bob, private, _public = world
    done = _ask(alice, "When does the zephyr project launch?", private.id)
    chunk = done.sources[0].chunk_id
    alice.label_run(done.run_id, "right", gold_chunk_ids=[chunk])
    lines = [json.loads(line) for line in alice.export_labels([private.id]).splitlines()]
    assert len(lines) == len(alice.list_labels([private.id]))
    mine = next(line for line in lines if line["run_id"] == done.run_id)
    assert mine["label"] == "right" and mine["right_source"] == {"documents": [], "chunks": [chunk]}
    assert mine["question"] == "When does the zephyr project launch?" and mine["kbs"] == ["alice-notes"]
    assert mine["answer"] == done.answer and mine["verdict"]["level"] == done.verdict.level
    assert mine["evidence"][0]["chunk_id"] == chunk and mine["config"]["grader.high_threshold"] is not None


def test_labels_export_as_a_langfuse_dataset(world, monkeypatch):
    engine, alice, _bob, private, _public = world
    done = _ask(alice, "When does the zephyr project launch?", private.id)
    alice.label_run(done.run_id, "right")
    with pytest.raises(DatasetError, match="Langfuse is not configured"):
        alice.export_labels_to_langfuse([private.id])
    with FakeLangfuseDatasets() as langfuse:
        for key, value in (("LANGFUSE_PUBLIC_KEY", "pk-test"), ("LANGFUSE_SECRET_KEY", "sk-test"),
                           ("LANGFUSE_HOST", langfuse.url)):
            monkeypatch.setitem(engine.env, key, value)
        name, sent = alice.export_labels_to_langfuse([private.id])
        assert name == "docmind labels: alice-notes" and sent == len(alice.list_labels([private.id]))
        item = langfuse.items[f"docmind-{done.run_id}"]
        assert item["datasetName"] == name and item["input"]["question"] == "When does the zephyr project launch?"
        assert item["expectedOutput"]["label"] == "right" and item["expectedOutput"]["answer"] == done.answer
        assert {r["user"] for r in langfuse.requests} == {"pk-test"}
        alice.export_labels_to_langfuse([private.id])  # again: the same items, updated
        assert len(langfuse.items) == sent


def test_the_badge_counts_a_new_label(world):
    _engine, alice, _bob, private, _public = world
    before = alice.kb_badge([private.id])
    done = _ask(alice, "When does the zephyr project launch?", private.id)
    alice.label_run(done.run_id, "wrong")
    after = alice.kb_badge([private.id])
    assert after.labelled_runs == before.labelled_runs + 1
    if done.verdict.level == "supported":
        assert (after.labelled, after.right) == (before.labelled + 1, before.right)
        assert after.needed == before.needed - 1 and after.statement != before.statement


def test_another_members_private_kb_run_cannot_be_labelled(world):
    _engine, alice, bob, private, _public = world
    done = _ask(alice, "When does the zephyr project launch?", private.id)
    with pytest.raises(AccessDenied):
        bob.label_run(done.run_id, "wrong")
    with pytest.raises(AccessDenied):
        bob.run_label(done.run_id)
    with pytest.raises(AccessDenied):
        bob.remove_label(done.run_id)
    with pytest.raises(AccessDenied):
        bob.kb_badge([private.id])  # not even counts of a KB bob may not read
    alice.label_run(done.run_id, "right")
    assert done.run_id not in {r.label.run_id for r in bob.list_labels()}
    assert done.run_id not in bob.export_labels()
    assert bob.run_labels([done.run_id]) == {}
    assert alice.run_labels([done.run_id])[done.run_id].verdict == "correct"


def test_a_label_can_be_taken_back(world):
    _engine, alice, _bob, private, _public = world
    done = _ask(alice, "When does the zephyr project launch?", private.id)
    alice.label_run(done.run_id, "right")
    alice.remove_label(done.run_id)
    assert alice.run_label(done.run_id) is None
    dataset = alice.get_dataset("labels of alice-notes by alice")
    assert all(i.source_run_id != done.run_id for i in alice.dataset_items(dataset.id))
