"""Issue 34 on the rendered run (the chat page's and the Traces page's ``render_run``): one verdict above the
answer, DocMind's notices beside the answer and not in it, and a greeting without claim chips."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def _page(kind: str) -> None:
    from docmind_core.answer.verdict import verdict_for
    from docmind_core.events import AppNotice, Done
    from docmind_core.reports.timeline import RunDigest
    from docmind_core.values import CitationResult, ClaimCheck, Confidence, GradeResult, Scope, Tier
    from docmind_ui.run_view import render_run

    if kind == "greeting":
        done = Done(run_id="g", answer="Hello! I'm DocMind.", mode="NONE", scope=Scope.CHITCHAT)
    else:
        grade = GradeResult(tier=Tier.AMBIGUOUS, top_score=0.95, lex_coverage=0.5, kb_entity_weak=False,
                            web_compensation_needed=False, reason="gray_zone_coverage_mid")
        done = Done(run_id="a", answer="The pump runs at 40 litres per minute.", mode="RULE_PLANNER", grade=grade,
                    citations=CitationResult(coverage=1.0, supported_claims=1, claims=[ClaimCheck(
                        text="The pump runs at 40 litres per minute.", char_start=0, char_end=38, status="supported",
                        source_index=1)]), confidence=Confidence(score=0.95, band="MEDIUM"),
                    notices=[AppNotice(code="ingest_pending", text="Note: 7 chunk(s) in 'pumps' are still embedding.")])
    render_run(RunDigest.from_events([done.model_copy(update={"verdict": verdict_for(done)})]), key=kind)


def _run(kind: str) -> AppTest:
    at = AppTest.from_function(_page, args=(kind,), default_timeout=60).run()
    assert not at.exception, at.exception
    return at


def test_the_verdict_stands_above_the_answer_and_the_notice_beside_it():
    at = _run("answer")
    html = "\n".join(m.value for m in at.markdown)
    assert 'data-verdict="partly_supported"' in html and "Partly supported" in html and "0.59" in html
    assert "evidence grade AMBIGUOUS" in html  # the reason the number is held, beside it
    [notice] = [i.value.replace("\\", "") for i in at.info]  # escaped as Markdown
    assert notice == "Note: 7 chunk(s) in 'pumps' are still embedding."
    answer = next(m.value for m in at.markdown if "40 litres" in m.value)
    assert "still embedding" not in answer


def test_a_greeting_shows_no_claim_chip_and_no_number():
    html = "\n".join(m.value for m in _run("greeting").markdown)
    assert 'data-verdict="not_checked"' in html and "unsupported" not in html
    assert "dm-verdict-score" not in html
