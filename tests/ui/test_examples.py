"""Example questions for an empty Chat (docmind_ui/examples.py), over a stand-in workbench."""

from __future__ import annotations

from types import SimpleNamespace as Row

from docmind_ui.examples import example_questions


class _Bench:
    def __init__(self, datasets, items, documents):
        self._datasets, self._items, self._documents = datasets, items, documents

    def list_kbs(self):
        return [Row(id=1, name="demo"), Row(id=2, name="other")]

    def list_datasets(self):
        return self._datasets

    def dataset_items(self, dataset_id, limit=None):
        return self._items[dataset_id][:limit]

    def list_documents(self, kb_id):
        return self._documents.get(kb_id, [])


def _item(question, kb="demo", answerable=True):
    return Row(question=question, kb=kb, answerable=answerable)


DOCS = {1: [Row(name="faq.md", status="complete"), Row(name="big.txt", status="parsing")]}


def test_a_dataset_made_for_a_selected_kb_gives_its_answerable_questions_first():
    bench = _Bench([Row(id=7, kb_name="demo"), Row(id=8, kb_name="other")],
                   {7: [_item("Q1"), _item("Q2", answerable=False), _item("Q3", kb="other"), _item("Q4")],
                    8: [_item("Not this one", kb="other")]}, DOCS)
    assert example_questions(bench, [1], limit=3) == ["Q1", "Q4", "What is faq.md about?"]


def test_without_a_dataset_the_searchable_documents_are_named_and_no_kb_gives_none():
    bench = _Bench([], {}, DOCS)
    assert example_questions(bench, [1]) == ["What is faq.md about?"]  # a document still parsing is left out
    assert example_questions(bench, []) == []
