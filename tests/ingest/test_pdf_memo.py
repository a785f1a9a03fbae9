"""The memo case: a two-page PDF memo states a project's budget and its lead across line wraps; asked in
its own new KB beside another KB, the answer states both, each cited with the page it is on."""

from __future__ import annotations

import re

import pytest

from docmind_core.accounts.apikeys import ResolvedKey
from docmind_core.accounts.rate_limit import SlidingWindowLimiter
from docmind_core.accounts.users import LOCAL_USER
from docmind_core.engine import Engine
from docmind_core.errors import NotFound
from docmind_core.mcp_server import McpToolService
from docmind_core.reports.run_summary import summarise
from docmind_core.workbench import Workbench
from docmind_ui.citation_html import source_card_html
from tests.ingest.test_pdf_text import BUDGET, LEAD
from tests.pdf_docs import memo_pdf

pytestmark = pytest.mark.slow  # a real engine ingests two KBs


@pytest.fixture(scope="module")
def memo_world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("memo")
    engine = Engine.open(tmp / "home", env={}, warm=False)
    bench = Workbench(engine, LOCAL_USER)
    other = bench.create_kb("careers")
    glossary = tmp / "roles.txt"
    glossary.write_text("A lead programmer is a software engineer who leads the programming team of a project. "
                        "A budget analyst prepares the budget reports of an organisation.", encoding="utf-8")
    assert [o.status for o in bench.ingest(other.id, [glossary])] == ["added"]
    kb = bench.create_kb("falcon memos")
    memo = memo_pdf(tmp / "memo.pdf", [["# Budget", BUDGET], ["# Lead", LEAD]])
    assert [o.status for o in bench.ingest(kb.id, [memo])] == ["added"]
    return engine, bench, kb, other


def _cited(done) -> dict[int, str]:
    """The answer's citation numbers, each with how its source is named ("memo.pdf, p. 2")."""
    return {n: done.sources[n - 1].cited_as for n in map(int, re.findall(r"\[(\d+)\]", done.answer))}


def test_budget_and_lead_are_answered_with_their_pages(memo_world):
    _engine, bench, kb, other = memo_world
    conversation = bench.start_conversation()
    events = list(bench.ask("What is the budget and who leads it?", [kb.id, other.id], mode="rule",
                            conversation_id=conversation))
    done = events[-1]
    assert done.kind == "done"
    assert "412,000 EUR" in done.answer, done.answer
    assert "Mireille Okafor" in done.answer, done.answer
    cited = set(_cited(done).values())
    assert {"memo.pdf, p. 1", "memo.pdf, p. 2"} <= cited, (done.answer, cited)
    assert "lead programmer" not in done.answer
    # the places travel everywhere a source is named: ask --json, the source card, the Markdown export
    sources = {(s.document, s.location) for s in summarise(events).sources}
    assert {("memo.pdf", "p. 1"), ("memo.pdf", "p. 2")} <= sources
    cards = "".join(source_card_html(n, s, answer=done.answer) for n, s in enumerate(done.sources, start=1))
    assert "memo.pdf, p. 2" in cards
    assert "**memo.pdf, p. 2**" in bench.export_conversation(conversation)


def test_search_names_the_page(memo_world):
    _engine, bench, kb, _other = memo_world
    result = bench.search("Who leads Project Falcon?", [kb.id])
    top = result.chunks[0]
    assert "Okafor" in top.text and top.location == "p. 2" and top.cited_as == "memo.pdf, p. 2"


def test_the_mcp_search_tool_names_the_page(memo_world):
    engine, bench, kb, _other = memo_world
    service = McpToolService(engine, SlidingWindowLimiter(60.0))
    found = service.search_docs(ResolvedKey(key_id=1, user=LOCAL_USER), "Who leads Project Falcon?", [kb.id], 3)
    top = found["chunks"][0]
    assert "Okafor" in top["text"] and top["location"] == "p. 2" and top["cited_as"] == "memo.pdf, p. 2"


def test_the_cited_page_is_shown_with_the_passage_marked(memo_world):
    pytest.importorskip("pypdfium2")  # the pages extra; `make test` installs it
    _engine, bench, kb, other = memo_world
    memo = next(d for d in bench.list_documents(kb.id) if d.name == "memo.pdf")
    image = bench.page_image(memo.id, 2, "Project Falcon is led by Dr. Mireille Okafor, head of platform engineering")
    assert image.marked and image.page == 2
    glossary = bench.list_documents(other.id)[0]
    with pytest.raises(NotFound, match="no page images"):
        bench.page_image(glossary.id, 1)
