"""Issue 34 item 3: one verdict per answer, derived from the evidence grade, the claim checks and the band.

The verdict follows the band, so a yellow (AMBIGUOUS) or red (LOW) evidence grade never stands beside a number
that reads as supported: the number is held inside its label's range and the reasons say what held it.  Old
traces without a verdict get one derived when read back; the Markdown export opens each answer with it."""

from __future__ import annotations

import json

from docmind_core.answer.verdict import LABELS, verdict_for, verdict_of
from docmind_core.events import AppNotice, Done, event_to_dict
from docmind_core.reports.run_summary import answer_lead_markdown, summarise
from docmind_core.reports.timeline import RunDigest
from docmind_core.settings import CitationSettings
from docmind_core.values import CitationResult, ClaimCheck, Confidence, GradeResult, RetrievedChunk, Scope, Tier
from tests.fakes.sample_events import sample_events

SOURCE = RetrievedChunk(chunk_id="c1", kb_id=1, doc_id=1, document="n2.pdf", text="Maximum power draw: 45 W.")


def _claim(status: str, text: str = "The N2 draws at most 45 W [1].") -> ClaimCheck:
    return ClaimCheck(text=text, char_start=0, char_end=len(text), status=status, source_index=1)


def _done(tier: Tier, band: str, score: float, statuses=("supported",), **confidence) -> Done:
    claims = [_claim(s) for s in statuses]
    cites = CitationResult(claims=claims, supported_claims=sum(s == "supported" for s in statuses),
                           unsupported_claims=sum(s == "unsupported" for s in statuses),
                           contradicted_claims=sum(s == "contradicted" for s in statuses), coverage=1.0)
    grade = GradeResult(tier=tier, top_score=score, lex_coverage=0.5, kb_entity_weak=False,
                        web_compensation_needed=False, reason="gray_zone_coverage_mid")
    return Done(run_id="r", answer="The N2 draws at most 45 W [1].", mode="RULE_PLANNER", sources=[SOURCE],
                citations=cites, grade=grade, confidence=Confidence(score=score, band=band, **confidence))


def test_an_ambiguous_grade_never_stands_beside_a_number_that_reads_supported():
    """The trio of the issue: a yellow AMBIGUOUS beside "0.95 MEDIUM"."""
    verdict = verdict_for(_done(Tier.AMBIGUOUS, "MEDIUM", 0.95))
    assert verdict.level == "partly_supported" and verdict.label == "Partly supported"
    assert verdict.score is not None and verdict.score < CitationSettings().band_high
    why = "; ".join(verdict.reasons)
    assert "evidence grade AMBIGUOUS" in why and "0.95" in why and "held" in why
    assert verdict.evidence_grade == "AMBIGUOUS" and verdict.meaning and verdict.score_meaning


def test_high_evidence_and_every_claim_found_is_supported():
    verdict = verdict_for(_done(Tier.HIGH, "HIGH", 0.82))
    assert verdict.level == "supported" and verdict.score == 0.82
    assert verdict.supported_claims == verdict.checked_claims == 1
    assert any("its one claim found in its source" in r for r in verdict.reasons)


def test_a_contradicted_claim_is_not_supported_and_says_so():
    verdict = verdict_for(_done(Tier.HIGH, "LOW", 0.14, statuses=("supported", "contradicted")))
    assert verdict.level == "not_supported" and verdict.score < CitationSettings().band_low
    assert any("contradicted" in r for r in verdict.reasons)


def test_a_band_capped_for_a_reason_this_module_does_not_name_shows_the_confidence_reason():
    """The entity and qualifier checks cap the band; their reason reaches the verdict through it."""
    done = _done(Tier.HIGH, "MEDIUM", 0.9, reason="the sources state the N1's maximum draw, not its idle draw")
    verdict = verdict_for(done)
    assert verdict.level == "partly_supported" and verdict.score < CitationSettings().band_high
    assert any("not its idle draw" in r for r in verdict.reasons)


def test_a_missing_asked_value_is_a_reason():
    done = _done(Tier.HIGH, "MEDIUM", 0.7, answers_question=False, unanswered=["money"])
    assert any("the question asks for" in r for r in verdict_for(done).reasons)


def test_an_abstention_and_a_greeting_carry_no_number():
    abstains = _done(Tier.LOW, "LOW", 0.0, statuses=("not_checkable",))
    assert verdict_for(abstains).level == "no_answer" and verdict_for(abstains).score is None
    hello = Done(run_id="g", answer="Hello! I'm DocMind.", mode="NONE", scope=Scope.CHITCHAT)
    assert verdict_for(hello).level == "not_checked" and verdict_for(hello).score is None


def test_a_stored_trace_without_a_verdict_gets_one_when_read_back():
    events = sample_events()
    stored = [json.loads(json.dumps(event_to_dict(e))) for e in events]
    stored[-1].pop("verdict"), stored[-1].pop("notices")  # as a trace written before verdicts
    digest = RunDigest.from_events(stored)
    assert digest.done.verdict is None
    verdict = digest.verdict
    assert verdict is not None and verdict.derived and verdict.label in LABELS.values()
    assert summarise(stored).verdict["label"] == verdict.label  # `ask --json` reads the same


def test_the_markdown_export_opens_an_answer_with_its_verdict_and_notices():
    done = _done(Tier.AMBIGUOUS, "MEDIUM", 0.95).model_copy(update={"notices": [
        AppNotice(code="ingest_pending", text="Note: 3 chunk(s) in 'n' are still embedding.")]})
    lead = "\n".join(answer_lead_markdown(done))
    assert "**Verdict: Partly supported**" in lead and "0.59" in lead
    assert "Evidence grade (how well what retrieval found matches the question): AMBIGUOUS" in lead
    assert "still embedding" in lead
    assert verdict_of(done).derived  # no recorded verdict on this hand-made event


def test_a_stored_trace_without_a_verdict_renders_one():
    from html import unescape

    from docmind_ui.html_views import evidence_grade_html, verdict_html

    stored = [json.loads(json.dumps(event_to_dict(e))) for e in sample_events()]
    stored[-1].pop("verdict")
    digest = RunDigest.from_events(stored)
    html = unescape(verdict_html(digest.verdict) + evidence_grade_html(digest.grade))
    assert f'data-verdict="{digest.verdict.level}"' in html and digest.verdict.label in html
    assert "evidence grade" in html and 'class="dm-tier' not in html


def test_an_old_greeting_trace_shows_no_claim_chips():
    """Stored before issue 34, "hello, who are you?" carried its sentences as unsupported claims."""
    from docmind_ui.html_views import claims_html

    old = Done(run_id="g", answer="I'm DocMind.", mode="NONE", scope=Scope.CHITCHAT,
               citations=CitationResult(claims=[_claim("unsupported", "I'm DocMind.")], unsupported_claims=1))
    digest = RunDigest.from_events([old])
    assert digest.verdict.level == "not_checked" and "unsupported" not in claims_html(digest)
