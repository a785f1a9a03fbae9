"""Issue 19 item 7: an answer over a KB that is still being ingested never says "nothing relevant".

Driven through ``docmind ask`` (CliRunner on a real engine home). A few seconds into a 300-file ingest job
nothing has landed: the answer says the KB is still being ingested, how many documents are pending and what
was searched, and ``--json`` carries the count. Without the job the same question gets the plain "nothing
relevant" reply, so the test tells the two apart. An answer from what has landed says what was not searched.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from docmind_core.cli import cli
from docmind_core.engine import Engine
from docmind_core.store.db import Database
from tests.paths import write_texts
from tests.pending_jobs import pending_job

UNANSWERED = "When does the Orion probe launch?"
ANSWERED = "How long does the Aurora X2 battery last?"
DOCS = {"aurora.md": "# Aurora X2\n\nThe Aurora X2 battery lasts 18 hours on a single charge. It charges over "
                     "USB-C in 90 minutes.\n"}


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("pending") / "home"
    engine = Engine.open(home, env={}, warm=False)
    kb = engine.create_kb("manuals")
    outcomes = engine.ingest(kb.id, write_texts(home.parent / "docs", DOCS))
    assert [o.status for o in outcomes] == ["added"]
    return home, kb.id, engine.create_kb("incoming").id


def _ask(home, question, *extra, kb="incoming"):
    result = CliRunner().invoke(cli, ["--home", str(home), "ask", question, "--kb", kb, *extra])
    assert result.exit_code == 0, result.output
    return result.output


def test_ask_over_a_kb_being_ingested_says_pending_not_nothing_relevant(home):
    path, _, kb_id = home
    with pending_job(Database(path / "docmind.db"), kb_id, 300):
        text = _ask(path, UNANSWERED, "--no-timeline")
        data = json.loads(_ask(path, UNANSWERED, "--json"))
    assert "nothing relevant" not in text
    assert "still being ingested" in text and "300 document(s) pending" in text
    assert "searched the 0 document(s) already indexed" in text
    assert data["pending_documents"] == 300
    assert data["pending"] == [{"kb_id": kb_id, "kb_name": "incoming", "pending_documents": 300,
                                "searched_documents": 0, "embedding_chunks": 0}]
    assert "nothing relevant" not in data["answer"] and "300 document(s) pending" in data["answer"]


def test_an_answer_with_evidence_says_what_was_not_searched(home):
    path, kb_id, _ = home
    with pending_job(Database(path / "docmind.db"), kb_id, 12):
        answered = json.loads(_ask(path, ANSWERED, "--json", kb="manuals"))
        unanswered = json.loads(_ask(path, UNANSWERED, "--json", kb="manuals"))
    note = ("Note: 'manuals' is still being ingested: 12 document(s) pending were not searched; the answer "
            "below uses only the 1 document(s) indexed there so far.")
    # said in a notice beside the answer, never in it (issue 34: DocMind's own words are not graded)
    assert answered["notices"] == [{"code": "ingest_pending", "text": note}] and "18 hours" in answered["answer"]
    assert note not in answered["answer"]
    # weak evidence: the reader still learns what was not searched
    assert unanswered["notices"] == [{"code": "ingest_pending", "text": note}]
    assert answered["pending_documents"] == unanswered["pending_documents"] == 12


def test_without_pending_documents_the_reply_is_unchanged(home):
    path, _, _ = home
    data = json.loads(_ask(path, UNANSWERED, "--json"))
    assert "nothing relevant" in data["answer"] and data["pending_documents"] == 0 and data["pending"] == []


def test_the_pending_notice_in_chinese_never_reads_as_nothing_relevant():
    from docmind_core.answer.generate import pending_notice
    from docmind_core.values import PendingIngest

    pending = [PendingIngest(kb_id=3, kb_name="手册", pending_documents=300, searched_documents=0)]
    text = pending_notice("DM-3000 的保修期是多久？", pending, evidence=False)
    assert "仍在导入中" in text and "300 个文档" in text and "0 个文档" in text
    assert "没有找到与这个问题相关" not in text  # the offline engine's "nothing relevant" in Chinese
