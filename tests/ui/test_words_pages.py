"""Issue 23 item 6 through the pages (AppTest on app.py, sign-in on): destructive controls only for those who
may use them, hit testing with rounded scores and no "cited" tags, the true upload limit, and the Traces page
with stop reasons in words and pairs named by their question."""

from __future__ import annotations

import re

import pytest
from streamlit.testing.v1 import AppTest

from docmind_core.events import Done, RunStarted
from docmind_core.values import GradeResult, Tier
from docmind_core.text.reasons import STOP_WORDS
from docmind_core.accounts.users import LOCAL_USER, UserStore
from docmind_core.workbench import Workbench
from docmind_ui.auth import TOKEN_KEY
from tests.access_world import FAST_HASHER, PASSWORD
from tests.paths import ROOT

pytestmark = pytest.mark.slow  # whole app runs (AppTest) with a real engine
APP = str(ROOT / "app.py")
PAIR = "experiment-7-item-3-1"
PAIR_QUESTION = "How long does the Orion relay take to switch under full load?"


@pytest.fixture(scope="module")
def world(app_engine):
    engine = app_engine
    users = UserStore(engine.db, hasher=FAST_HASHER)
    alice = users.add("alice", PASSWORD, department="research")
    users.add("bob", PASSWORD, department="research")
    root = users.add("root", PASSWORD, role="admin")
    as_alice = Workbench(engine, alice)
    kb = as_alice.create_kb("orion-public", visibility="public")
    doc = engine.home.parent / "orion.txt"
    doc.write_text("The Orion relay switches in 3 milliseconds. Its launch budget is 4.2 million dollars. "
                   "The Orion team meets on Tuesdays to review the relay budget.", encoding="utf-8")
    as_alice.ingest(kb.id, [doc])
    for side in ("a", "b"):
        with engine.traces.recorder(run_id=f"words-{side}", question=PAIR_QUESTION, pair_id=PAIR,
                                    user_id=root.owner_key) as rec:
            rec.record(RunStarted(run_id=f"words-{side}", question=PAIR_QUESTION, kb_ids=[], requested_mode="auto",
                                  backends=[], t_ms=0.0))
            rec.record(Done(run_id=f"words-{side}", answer="3 ms", mode="AGENTIC", stop_reason="max_iterations",
                            t_ms=5.0, grade=GradeResult(tier=Tier.AMBIGUOUS, top_score=0.5, lex_coverage=0.5,
                                                        kb_entity_weak=False, web_compensation_needed=False,
                                                        reason="gray_zone_blend_mid:0.27")))
    Workbench(engine, LOCAL_USER).set_config({"auth.enabled": True})
    yield engine


def _signed_in(engine, username: str, page: str) -> AppTest:
    _, token = engine.sign_in(username, PASSWORD)
    at = AppTest.from_file(APP, default_timeout=90)
    at.session_state[TOKEN_KEY] = token
    at.run()
    assert not at.exception, at.exception
    at.switch_page(page).run()
    assert not at.exception, at.exception
    return at


def _labels(at: AppTest) -> list[str]:
    return [b.label for b in at.button]


def test_a_member_sees_no_control_they_may_not_use(world):
    at = _signed_in(world, "bob", "pages/knowledge_bases.py")
    labels = _labels(at)
    assert "Search" in labels  # hit testing: a reader may search
    for refused in ("Delete this document", "Delete knowledge base", "Ingest", "Save sharing"):
        assert refused not in labels, labels
    assert not at.get("file_uploader")
    assert any("only its owner or an admin" in c.value for c in at.caption)


def test_the_owner_sees_them_and_the_true_upload_limit(world):
    at = _signed_in(world, "alice", "pages/knowledge_bases.py")
    labels = _labels(at)
    assert {"Delete this document", "Delete knowledge base", "Ingest", "Save sharing"} <= set(labels), labels
    uploader = at.get("file_uploader")[0].proto
    limit = world.settings.ingest.max_file_mb
    assert uploader.max_upload_size_mb == int(limit)
    assert f"Up to {limit:g} MB per file" in uploader.help


def test_hit_testing_rounds_scores_and_cites_nothing(world):
    at = _signed_in(world, "alice", "pages/knowledge_bases.py")
    next(t for t in at.text_input if t.label == "Query").input("Orion relay budget")
    next(b for b in at.button if b.label == "Search").click().run()
    assert not at.exception, at.exception
    table = next(d for d in at.dataframe if "rerank" in d.value.columns).value
    assert len(table), "the hit test found nothing"
    for column in ("vector", "keyword", "fused", "rerank", "mmr"):
        for value in table[column].dropna():
            assert round(float(value), 3) == float(value), (column, value)
    cards = "".join(m.value for m in at.markdown if "dm-sources" in m.value)
    assert cards and "dm-tag-cited" not in cards and ">cited<" not in cards


def test_traces_show_stop_reasons_in_words_and_pairs_by_question(world):
    at = _signed_in(world, "root", "pages/traces.py")
    table = at.dataframe(key="dm_tr_table").value
    stops = set(table["stop reason"])
    assert STOP_WORDS["max_iterations"] in stops and "max_iterations" not in stops, stops
    options = at.selectbox(key="dm_tr_pair").options
    label = next(o for o in options if "Orion relay" in o)
    assert PAIR not in label and "experiment #7, item #3, gold left out" in label, label
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d", label), label
    at.selectbox(key="dm_tr_pair").set_value(PAIR).run()
    assert not at.exception, at.exception
    assert "Comparison" in [h.value for h in at.subheader]
    shown = "\n".join(m.value for m in at.markdown)
    assert "gray_zone_blend_mid" not in shown and "0.27, is in the middle band" in shown
