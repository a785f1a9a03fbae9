"""The model judge (grader.judge): the configured model grades the evidence and checks the cited claims.

Driven through the answer pipeline against the fake OpenAI server, which speaks the real protocol (log-probabilities
included): a good judge, a wrong one, a malformed reply, a slow judge held to the run's deadline, and servers with
and without logprobs."""

from __future__ import annotations

import json
import threading
import time

import pytest

from docmind_core.answer.agentic import AgenticPath
from docmind_core.answer.grade import CragGrader, judged_grade
from docmind_core.answer.judge import (
    PASSAGE_CHARS, ClaimToCheck, ModelJudge, claims_to_check, closest_span, judged_citations, parse_claims_reply,
    parse_evidence_reply, resolve_judge,
)
from docmind_core.backends.protocols import Completion
from docmind_core.answer.citations import parse_citations
from docmind_core.answer.rule_planner import RulePlannerPath
from docmind_core.answer.pipeline import AnswerPipeline, AskRequest
from docmind_core.backends.chat_openai import OpenAIChatModel
from docmind_core.backends.offline.chat import OfflineLanguageModel
from docmind_core.errors import ConfigError, ModelOutputError
from docmind_core.events import Done, Fallback, Judged
from docmind_core.values import ClaimVerdict, EvidenceVerdict, RequestedMode
from docmind_core.prompts import PromptLibrary
from docmind_core.reports.run_summary import summarise, timeline_lines
from docmind_core.settings import Settings
from docmind_core.reports.timeline import RunDigest
from docmind_core.answer.tools import Toolbox
from docmind_ui.html_views import glance_html
from tests.agentic_world import CORPUS, FixtureRetriever, make_refiner
from tests.fakes.openai_server import FakeOpenAIServer, Reply, scored, status, text

PROMPTS = PromptLibrary()
QUESTION = "What flow rate does the DM-3000 pump have?"
UNDERSTANDING = {
    "rewrittenQuery": "DM-3000 pump flow rate", "intent": "factoid", "complexity": "SIMPLE",
    "specificity": "PRECISE", "timeAware": False, "memoryAware": False, "isAmbiguous": False,
    "scope": "knowledge_query", "scopeConfidence": 0.95, "memoryWriteHints": [],
}
RIGHT = "The DM-3000 pump runs at 40 litres per minute [1]."
WRONG = "The DM-3000 pump runs at 65 litres per minute [1]."
# A gray zone that leaves the overlap reranker's scores AMBIGUOUS, so a judge's "answers" can lift them.
GRAY = {"grader.gray_zone_mode": "rerank_only", "grader.high_threshold": 0.99}
# Thresholds under which the same evidence is HIGH, so a judge's "no" can cap it.
EASY_HIGH = {"grader.high_threshold": 0.4, "grader.high_min_coverage": 0.3}


def evidence_reply(verdict: str, p_yes: float | None, reason: str = '[1] "runs at 40 litres per minute"',
                   delay: float = 0.0) -> Reply:
    """A judge's JSON verdict; with ``p_yes`` its tokens carry log-probabilities at the verdict, as llama-server
    sends them (the value's first token holds the quote: '":"' then 'yes')."""
    content = json.dumps({"verdict": verdict, "reason": reason})
    if p_yes is None:
        return text(content, delay=delay)
    head = '{"verdict": "'
    tokens = [('{"', {'{"': 1.0}), ("verdict", {"verdict": 1.0}), ('": "', {'": "': 1.0}),
              (verdict, {"yes": p_yes, "no": 1 - p_yes}), (content[len(head) + len(verdict):], {})]
    return scored(content, tokens, delay=delay)


def plain_reply(word: str, p_yes: float | None, reason: str = '[1] "runs at 40 litres per minute"') -> Reply:
    """The reply the evidence prompt asks for, "yes: <the deciding words>", with the verdict word's
    log-probabilities when ``p_yes`` is given."""
    content = f"{word}: {reason}"
    if p_yes is None:
        return text(content)
    return scored(content, [(word, {"yes": p_yes, "no": 1 - p_yes}), (f": {reason}", {})])


def claims_reply(*statuses: str) -> Reply:
    return text(json.dumps({"claims": [{"n": n, "status": s, "reason": f"claim {n} is {s}"}
                                       for n, s in enumerate(statuses, start=1)]}))


class Judge:
    """What the fake server answers to each kind of call of one run."""

    def __init__(self, evidence: Reply | None = None, claims: Reply | None = None, answer: str = RIGHT,
                 refuse_logprobs: bool = False, rewritten: str = UNDERSTANDING["rewrittenQuery"]):
        self.understanding = {**UNDERSTANDING, "rewrittenQuery": rewritten}
        self.evidence = evidence or evidence_reply("yes", 0.93)
        self.claims = claims or claims_reply("supported")
        self.answer = answer
        self.refuse_logprobs = refuse_logprobs
        self.kinds: list[str] = []

    def __call__(self, body: dict) -> Reply:
        last = body["messages"][-1]["content"]
        if body.get("stream"):
            kind, reply = "answer", text(self.answer)
        elif "Do these passages state the answer" in last:
            kind, reply = "evidence", self.evidence
            if self.refuse_logprobs and body.get("logprobs"):
                kind, reply = "evidence_refused", status(400, "logprobs is not supported by this server")
        elif "Check every claim" in last:
            kind, reply = "claims", self.claims
        else:
            kind, reply = "understanding", text(json.dumps(self.understanding))
        self.kinds.append(kind)
        return reply


def model_of(server: FakeOpenAIServer, timeout_s: float = 5.0) -> OpenAIChatModel:
    return OpenAIChatModel(server.base_url, "test-key", "fake-model", timeout_s=timeout_s, max_retries=0,
                           prompts=PROMPTS)


def pipeline_of(llm, judge: ModelJudge | None) -> AnswerPipeline:
    toolbox, refiner, grader = Toolbox(FixtureRetriever(CORPUS)), make_refiner(), CragGrader()
    rule_planner = RulePlannerPath(toolbox, refiner, grader)
    agentic = AgenticPath(llm, toolbox, refiner, grader, PROMPTS, rule_planner)
    return AnswerPipeline(llm=llm, fallback_llm=OfflineLanguageModel(PROMPTS), prompts=PROMPTS, store=None,
                          reranker=refiner.reranker, rule_planner=rule_planner, agentic=agentic, grader=grader,
                          memory=None, judge=judge)


def ask(server: FakeOpenAIServer, script: Judge, question: str = QUESTION, timeout_s: float = 5.0, **overrides):
    server.respond_with(script)
    model = model_of(server, timeout_s)
    cfg = Settings().with_overrides({"llm.max_retries": 0, **overrides})
    request = AskRequest(question=question, kb_ids=[1], requested_mode=RequestedMode.RULE_PLANNER)
    events = list(pipeline_of(model, ModelJudge(model, PROMPTS)).ask(request, cfg, [], threading.Event()))
    assert isinstance(events[-1], Done), [e.kind for e in events]
    return events, events[-1]


def judged(events, target: str) -> Judged:
    found = [e for e in events if isinstance(e, Judged) and e.target == target]
    assert len(found) == 1, [e.kind for e in events]
    return found[0]


def judge_requests(server: FakeOpenAIServer) -> list[dict]:
    return [b for b in server.requests if not b.get("stream") and "Passage" in b["messages"][-1]["content"]]


# --------------------------------------------------------------------------
# The evidence judge and the tier
# --------------------------------------------------------------------------

def test_a_confident_judge_lifts_a_gray_zone_tier_to_high_and_is_shown_in_the_timeline_and_json(server):
    offline_events, offline = ask(server, Judge(), **GRAY, **{"grader.judge": "off"})
    assert offline.grade.tier.value == "AMBIGUOUS"  # what the lexical signals say on their own
    assert not any(isinstance(e, Judged) for e in offline_events)

    events, done = ask(server, Judge(evidence_reply("yes", 0.93)), **GRAY)
    verdict = judged(events, "evidence")
    assert verdict.via == "llm" and verdict.evidence.verdict == "answers"
    assert verdict.evidence.scored_by == "logprobs" and verdict.evidence.p_yes == pytest.approx(0.93)
    assert (verdict.tier_before, verdict.tier_after) == ("AMBIGUOUS", "HIGH")
    assert done.grade.tier.value == "HIGH"
    assert "judge: answers (P(yes) 0.93), its quote found in [1], lifted to HIGH" in done.grade.reason
    assert verdict.evidence.quote == "runs at 40 litres per minute" and verdict.evidence.quote_verified
    summary = summarise(events)
    assert summary.tier == "HIGH"
    assert [j["target"] for j in summary.judge] == ["evidence", "claims"]
    assert summary.judge[0]["evidence"]["p_yes"] == pytest.approx(0.93)
    # ask --json carries what the quote check found
    assert summary.judge[0]["evidence"]["quote_verified"] is True
    assert summary.judge[0]["evidence"]["quote"] == "runs at 40 litres per minute"
    assert any("Judge (evidence): answers" in line and "AMBIGUOUS -> HIGH" in line for line in timeline_lines(events))
    glance = glance_html(RunDigest.from_events(events))  # the chat page's always-visible line
    assert ("<b>judge (evidence)</b> answers (P(yes) 0.93), its quote checked in the passage, AMBIGUOUS → HIGH"
            in glance)
    assert any("quote=found: its quote is in passage [1], in a sentence about the question" in line
               for line in timeline_lines(events))
    assert "<b>judge (claims)</b> 1 supported" in glance


def test_the_evidence_call_asks_one_short_plain_reply_with_logprobs(server):
    ask(server, Judge(), **GRAY)
    call = judge_requests(server)[0]
    assert call["logprobs"] is True and call["top_logprobs"] == 5
    assert call["max_tokens"] <= 24 and call["temperature"] == 0.0
    # no JSON frame: the reply's first token is the verdict, where P(yes) is read
    assert "response_format" not in call
    assert "40 litres per minute" in call["messages"][-1]["content"]  # the top evidence is what it reads


def test_a_judge_that_says_no_caps_a_high_tier_at_ambiguous(server):
    _, offline = ask(server, Judge(), **EASY_HIGH, **{"grader.judge": "off"})
    assert offline.grade.tier.value == "HIGH"
    events, done = ask(server, Judge(evidence_reply("no", 0.08, "the passages name the pump but no flow rate")),
                       **EASY_HIGH)
    verdict = judged(events, "evidence")
    assert verdict.evidence.verdict == "no" and (verdict.tier_before, verdict.tier_after) == ("HIGH", "AMBIGUOUS")
    assert done.grade.tier.value == "AMBIGUOUS" and "capped at AMBIGUOUS" in done.grade.reason
    assert verdict.reason == "the passages name the pump but no flow rate"
    assert next(e for e in events if e.kind == "start").prompt == "low_confidence"


@pytest.mark.parametrize("low_threshold, offline_tier", [(0.25, "LOW"), (0.1, "AMBIGUOUS")])
def test_evidence_the_lexical_signals_find_weak_is_not_judged_since_no_verdict_could_lift_it(server, low_threshold,
                                                                                              offline_tier):
    # a judge that says "yes" to everything, asked about an entity the corpus does not hold
    question = "How long is the warranty of the ZX-9 turbine?"
    overrides = {**GRAY, "grader.low_threshold": low_threshold}
    script = Judge(evidence_reply("yes", 0.97), rewritten=question)
    events, done = ask(server, script, question=question, **overrides)
    verdict = judged(events, "evidence")
    assert verdict.via == "skipped" and verdict.evidence is None
    assert "no verdict changes that" in verdict.reason
    assert "evidence" not in script.kinds  # the call (~8 s on a small local model) is not made
    assert verdict.tier_before == verdict.tier_after == done.grade.tier.value == offline_tier
    assert done.grade.lex_coverage < 0.3
    # had it been asked, its "yes" would not have lifted the tier either
    assert judged_grade(done.grade, EvidenceVerdict(verdict="answers", p_yes=0.97), Settings().with_overrides(
        overrides).grader).tier.value == offline_tier
    assert any("Judge (evidence): not asked" in line for line in timeline_lines(events))
    assert "not asked" in glance_html(RunDigest.from_events(events))


def test_without_logprobs_the_stated_verdict_counts(server):
    events, done = ask(server, Judge(evidence_reply("yes", None)), **GRAY)
    verdict = judged(events, "evidence")
    assert verdict.evidence.scored_by == "verbal" and verdict.evidence.p_yes is None
    assert verdict.evidence.verdict == "answers" and done.grade.tier.value == "HIGH"


def test_a_plain_reply_is_scored_at_its_first_token_and_its_deciding_words_are_the_reason(server):
    events, done = ask(server, Judge(plain_reply("yes", 0.91)), **GRAY)
    verdict = judged(events, "evidence")
    assert verdict.evidence.scored_by == "logprobs" and verdict.evidence.p_yes == pytest.approx(0.91)
    assert (verdict.tier_before, verdict.tier_after) == ("AMBIGUOUS", "HIGH") and done.grade.tier.value == "HIGH"
    assert verdict.reason == '[1] "runs at 40 litres per minute"'

    events, _ = ask(server, Judge(plain_reply("no", 0.12, "[1] names the pump, not its flow rate")), **GRAY)
    verdict = judged(events, "evidence")
    assert verdict.evidence.verdict == "no" and verdict.reason == "[1] names the pump, not its flow rate"


@pytest.mark.parametrize("reply, verdict, reason", [
    ("yes: [2] says \"45 W at full load\"", "answers", '[2] says "45 W at full load"'),
    ("No. [1] names the N2 but gives no price", "no", "[1] names the N2 but gives no price"),
    ("**Yes** - passage 1, \"90 days\"", "answers", 'passage 1, "90 days"'),
    ("no", "no", ""),
    ('{"verdict": "yes", "reason": "[3] states it"}', "answers", "[3] states it"),
])
def test_a_plain_or_json_evidence_reply_without_logprobs_counts_its_stated_verdict(reply, verdict, reason):
    read = parse_evidence_reply(Completion(text=reply), Settings().grader)
    assert (read.verdict, read.scored_by, read.p_yes, read.reason) == (verdict, "verbal", None, reason)


@pytest.mark.parametrize("reply", ["I think yes.", "Yesterday's release notes", "maybe: [1]", ""])
def test_an_evidence_reply_that_does_not_start_with_its_verdict_is_malformed(reply):
    with pytest.raises(ModelOutputError):
        parse_evidence_reply(Completion(text=reply), Settings().grader)


def test_logprobs_decide_over_the_stated_word(server):
    # the model writes "yes" but P(yes) is between judge_yes_low and judge_yes_high, and its deciding words are
    # its own, not the passage's: "partly", which moves nothing
    events, done = ask(server, Judge(evidence_reply("yes", 0.58, "passage 1 gives 40 litres per minute")), **GRAY)
    verdict = judged(events, "evidence")
    assert verdict.evidence.verdict == "partly" and verdict.tier_after == "AMBIGUOUS"
    assert not verdict.evidence.quote_verified


def test_a_yes_whose_quote_is_in_place_answers_whatever_its_p_yes(server):
    # the same uncertain P(yes), but the words it quotes stand in passage [1]'s sentence about the pump
    events, done = ask(server, Judge(plain_reply("yes", 0.52)), **GRAY)
    verdict = judged(events, "evidence")
    assert verdict.evidence.p_yes == pytest.approx(0.52) and verdict.evidence.quote_verified
    assert verdict.evidence.verdict == "answers" and (verdict.tier_before, verdict.tier_after) == ("AMBIGUOUS", "HIGH")
    assert "its quote found in [1], lifted to HIGH" in done.grade.reason
    # ... and such a "yes" does not cap a HIGH tier either, though P(yes) alone reads as "no"
    events, done = ask(server, Judge(plain_reply("yes", 0.30)), **EASY_HIGH)
    verdict = judged(events, "evidence")
    assert verdict.evidence.verdict == "answers" and verdict.tier_after == "HIGH" == done.grade.tier.value


@pytest.mark.parametrize("reason, why", [
    ("passage 1 gives 40 litres per minute", "not word for word in passage [1]"),  # its own words
    ('[1] "the pump moves 40 litres each minute"', "not word for word in passage [1]"),  # a paraphrase
    ('[1] "runs at 65 litres per minute"', "not word for word in passage [1]"),  # not in the passage it names
    ('[2] "runs at 65 litres per minute"', "is said of DM-4000, not of DM-3000"),  # the other pump's value
])
def test_a_confident_yes_without_its_words_in_the_passage_does_not_lift(server, reason, why):
    events, done = ask(server, Judge(plain_reply("yes", 0.95, reason)), **GRAY)
    verdict = judged(events, "evidence")
    assert not verdict.evidence.quote_verified and verdict.evidence.verdict == "partly"
    assert verdict.tier_after == "AMBIGUOUS" == done.grade.tier.value
    assert why in verdict.evidence.quote_note or why in done.grade.reason
    # the setting restores the probability alone as ground for a lift
    events, done = ask(server, Judge(plain_reply("yes", 0.95, reason)), **GRAY,
                       **{"grader.judge_lift_needs_quote": False})
    assert judged(events, "evidence").evidence.verdict == "answers" and done.grade.tier.value == "HIGH"


def test_a_server_that_refuses_logprobs_is_asked_again_without_and_not_asked_for_them_again(server):
    script = Judge(evidence_reply("yes", None), refuse_logprobs=True)
    server.respond_with(script)
    model = model_of(server)
    cfg = Settings().with_overrides({"llm.max_retries": 0, **GRAY})
    pipeline = pipeline_of(model, ModelJudge(model, PROMPTS))
    for _ in range(2):
        events = list(pipeline.ask(AskRequest(question=QUESTION, kb_ids=[1], requested_mode=RequestedMode.RULE_PLANNER),
                                   cfg, [], threading.Event()))
        assert judged(events, "evidence").evidence.verdict == "answers"
    assert script.kinds.count("evidence_refused") == 1 and script.kinds.count("evidence") == 2


# --------------------------------------------------------------------------
# Failures fall back to the offline checks, visibly
# --------------------------------------------------------------------------

@pytest.mark.parametrize("reply", [text("I think the passages probably answer it."), text('{"verdict": "maybe"}'),
                                   text(""), status(500, "judge exploded")])
def test_a_malformed_or_failed_evidence_reply_keeps_the_offline_tier_and_says_so(server, reply):
    _, offline = ask(server, Judge(), **GRAY, **{"grader.judge": "off"})
    events, done = ask(server, Judge(evidence=reply), **GRAY)
    verdict = judged(events, "evidence")
    assert verdict.via == "offline" and verdict.evidence is None and verdict.reason
    assert done.grade.tier == offline.grade.tier and done.grade.reason == offline.grade.reason
    fallbacks = [e for e in events if isinstance(e, Fallback) and e.stage == "judge (evidence)"]
    assert fallbacks and fallbacks[0].to == "offline checks"
    assert done.answer == RIGHT  # the model still wrote the answer
    assert summarise(events).fallbacks[0]["stage"] == "judge (evidence)"


@pytest.mark.slow  # waits out a judge held to its share of a real deadline
def test_a_slow_judge_is_cut_off_by_the_run_deadline_and_the_model_still_writes_the_answer(server):
    deadline = {"run.deadline_ms": 8000, "run.answer_reserve_ms": 4000}
    started = time.perf_counter()
    events, done = ask(server, Judge(evidence_reply("yes", 0.9, delay=6.0)), timeout_s=30.0, **GRAY, **deadline)
    verdict = judged(events, "evidence")
    assert verdict.via == "offline" and "timeout" in verdict.reason
    assert verdict.duration_ms < 2600  # a quarter of what was left of the 8 s run, not llm.timeout_s (30 s)
    assert done.answer == RIGHT and done.backend.startswith("openai:")  # the breaker stayed closed
    assert time.perf_counter() - started < 8.0


# --------------------------------------------------------------------------
# The claim judge
# --------------------------------------------------------------------------

def test_a_contradicted_claim_pulls_the_band_to_low_and_marks_the_answer_ungrounded(server):
    _, right = ask(server, Judge(claims=claims_reply("supported"), answer=RIGHT))
    events, wrong = ask(server, Judge(claims=claims_reply("contradicted"), answer=WRONG))
    verdicts = judged(events, "claims").claims
    assert [(v.claim, v.source, v.status) for v in verdicts] == [
        ("The DM-3000 pump runs at 65 litres per minute.", 1, "contradicted")]
    assert wrong.confidence.band == "LOW" and wrong.confidence.ungrounded
    assert right.confidence.band != "LOW" and not right.confidence.ungrounded
    assert wrong.confidence.score < right.confidence.score
    assert any("Judge (claims): 0 supported, 1 contradicted" in line for line in timeline_lines(events))
    call = judge_requests(server)[-1]
    assert "Claim 1: The DM-3000 pump runs at 65 litres per minute." in call["messages"][-1]["content"]
    assert "40 litres per minute" in call["messages"][-1]["content"]  # the cited span


def test_a_claim_the_source_does_not_state_keeps_the_answer_out_of_band_high(server):
    _, done = ask(server, Judge(claims=claims_reply("not_found")))
    assert done.confidence.band != "HIGH" and done.confidence.ungrounded


def test_a_malformed_claim_reply_keeps_the_offline_confidence(server):
    _, offline = ask(server, Judge(), **{"grader.judge": "off"})
    # an evidence verdict of "partly" leaves the tier as the offline grade set it
    events, done = ask(server, Judge(evidence=evidence_reply("yes", 0.58, "passage 1 gives 40 litres per minute"),
                                     claims=text('{"claims": "all fine"}')))
    verdict = judged(events, "claims")
    assert verdict.via == "offline" and "malformed" in verdict.reason
    assert done.confidence == offline.confidence
    assert any(isinstance(e, Fallback) and e.stage == "judge (claims)" for e in events)


def test_a_run_makes_at_most_two_judge_calls(server):
    script = Judge()
    ask(server, script, **GRAY)
    assert sorted(script.kinds) == ["answer", "claims", "evidence", "understanding"]


def test_the_claim_call_is_skipped_when_judge_claims_is_off_and_in_the_small_model_profile(server):
    """local_small: a 1.5B claim judge tightened no offline status on the held-out claims, and costs a call."""
    script = Judge()
    events, done = ask(server, script, **GRAY, **{"grader.judge_claims": False})
    assert sorted(script.kinds) == ["answer", "evidence", "understanding"]
    assert not [e for e in events if isinstance(e, Judged) and e.target == "claims"]
    assert done.citations.claims  # the offline claim checks still run
    profile = Settings().with_overrides({"llm.profile": "local_small"})
    assert profile.grader.judge_claims is False and profile.citation.rescue_failed_answer is True


TABLE = "| Model | Power | Storage |\n" + "\n".join(f"| Nimbus N{i} | {10 * i} W | {i} TB |" for i in range(1, 40))
TABLE_ANSWER = ("Hello. The Nimbus N37 draws 370 W [1]. The Nimbus N12 draws 999 W [1]. "
                "The Nimbus N5 is quiet and reliable in use [1]. Out of range claim here [4].")


def test_the_judge_reads_each_checkable_claim_against_the_span_of_the_source_it_names():
    source = CORPUS[0].model_copy(update={"text": TABLE})
    claims = claims_to_check(parse_citations(TABLE_ANSWER, [source]), [source])
    assert [(c.claim, c.source) for c in claims] == [
        ("The Nimbus N37 draws 370 W.", 1), ("The Nimbus N12 draws 999 W.", 1),
        ("The Nimbus N5 is quiet and reliable in use.", 1)]
    # the row the offline check read, under its header; a claim it found no row for: the closest lines
    assert claims[0].span == "| Model | Power | Storage |\n| Nimbus N37 | 370 W | 37 TB |"
    assert claims[1].span.endswith("| Nimbus N12 | 120 W | 12 TB |")
    assert "| Nimbus N5 | 50 W | 5 TB |" in claims[2].span and len(claims[2].span) <= 500


def test_the_judge_can_flag_a_claim_the_offline_check_passed_but_never_pass_one_it_flagged():
    source = CORPUS[0].model_copy(update={"text": TABLE})
    offline = parse_citations(TABLE_ANSWER, [source])
    assert [c.status for c in offline.claims[:3]] == ["supported", "contradicted", "unsupported"]
    claims = claims_to_check(offline, [source])
    # a judge that says "supported" to everything (as the 1.5B model did to content-free claims)
    verdicts = [ClaimVerdict(claim=c.claim, source=c.source, status="supported", reason="the row says so")
                for c in claims]
    judged_result = judged_citations(offline, claims, verdicts, TABLE_ANSWER, [source])
    statuses = [(c.status, c.via) for c in judged_result.claims]
    assert statuses[:3] == [("supported", "llm"), ("contradicted", "llm"), ("unsupported", "llm")]
    assert statuses[3] == ("unsupported", "offline")  # the out-of-range marker names no source to read
    assert judged_result.coverage == offline.coverage
    assert all("the judge said supported" in c.reason for c in judged_result.claims[1:3])
    # a judge that finds the first claim's value missing from its row flags it
    flagged = [v.model_copy(update={"status": "not_found"}) if i == 0 else v for i, v in enumerate(verdicts)]
    judged_result = judged_citations(offline, claims, flagged, TABLE_ANSWER, [source])
    assert judged_result.claims[0].status == "unsupported" and judged_result.coverage < offline.coverage


# --------------------------------------------------------------------------
# The setting
# --------------------------------------------------------------------------

def test_the_setting_is_typed_and_validated():
    assert Settings().grader.judge == "auto"
    with pytest.raises(ConfigError, match="grader.judge"):
        Settings().with_overrides({"grader.judge": "maybe"})
    with pytest.raises(ConfigError, match="judge_yes_low"):
        Settings().with_overrides({"grader.judge_yes_low": 0.7, "grader.judge_yes_high": 0.6})


def test_auto_judges_with_an_openai_model_and_not_with_the_offline_engine(server):
    judge = ModelJudge(model_of(server), PROMPTS)
    assert resolve_judge("auto", judge) == (judge, "")
    assert resolve_judge("off", judge) == (None, "")
    assert resolve_judge("auto", None) == (None, "")


def test_an_explicit_llm_judge_with_the_offline_engine_is_reported_unavailable():
    offline = OfflineLanguageModel(PROMPTS)
    cfg = Settings().with_overrides({"grader.judge": "llm"})
    events = list(pipeline_of(offline, None).ask(AskRequest(question=QUESTION, kb_ids=[1]), cfg, [],
                                                 threading.Event()))
    fallback = next(e for e in events if isinstance(e, Fallback) and e.stage == "judge")
    assert "no OpenAI-compatible model is configured" in fallback.reason
    assert not any(isinstance(e, Judged) for e in events)
    assert isinstance(events[-1], Done) and events[-1].answer


# --------------------------------------------------------------------------
# The failures of issue 20 on the demo KB, through `docmind ask --json` and Engine.ask
# --------------------------------------------------------------------------

N2 = "What is the maximum power draw of the Nimbus N2?"
N2_DATASHEET = "nimbus_n2_datasheet.pdf"
# The answers, each citing the N2 datasheet chunk: offline they all got confidence 0.5614.
N2_ANSWERS = {
    "right": "The maximum power draw of the Nimbus N2 is 45 W at full load [{n}].",
    "swapped": "The maximum power draw of the Nimbus N2 is 2 TB NVMe [{n}].",
    "idle value": "The maximum power draw of the Nimbus N2 is 28 W [{n}].",
    "made up": "The maximum power draw of the Nimbus N2 is 9,999 W [{n}].",
    "content-free": "Based on the sources [{n}], the answer is in the documents.",
}


class DemoModel:
    """The fake model of a demo run: it cites the N2 datasheet's number in the answer prompt, and its judge
    reads each claim as a careful reader would (45 W is on the datasheet; 2 TB, 28 W and 9,999 W are not its
    maximum power draw; the content-free sentence states nothing)."""

    def __init__(self, answer: str, evidence: Reply | None = None):
        self.answer = answer
        self.evidence = evidence or evidence_reply("yes", 0.9)

    def __call__(self, body: dict) -> Reply:
        last = body["messages"][-1]["content"]
        if body.get("stream"):
            prompt = "\n".join(str(m.get("content")) for m in body["messages"])
            # "(document: nimbus_n2_datasheet.pdf, p. 1)": the source is named with its page
            cited = next((n for n in range(1, 20) if f"[{n}] (document: {N2_DATASHEET}" in prompt), 1)
            return text(self.answer.format(n=cited))
        if "Do these passages state the answer" in last:
            return self.evidence
        if "Check every claim" in last:
            claim = last.split("Claim 1: ", 1)[1].split("\n", 1)[0]
            status = "supported" if "45 W" in claim else "not_found" if "documents" in claim else "contradicted"
            return claims_reply(status)
        return text(json.dumps({**UNDERSTANDING, "rewrittenQuery": "Nimbus N2 maximum power draw"}))


@pytest.fixture
def demo_server(demo_home):
    from docmind_core.engine import Engine

    with FakeOpenAIServer() as fake:
        config = Engine.open(demo_home, env={}, warm=False).config
        config.set_many({"llm.base_url": fake.base_url, "llm.max_retries": 0, "llm.timeout_s": 10.0}, by="test")
        try:
            yield fake
        finally:
            config.reset_all()


def ask_json(home, question: str) -> dict:
    from click.testing import CliRunner

    from docmind_core import cli as cli_module

    result = CliRunner().invoke(cli_module.cli, ["--home", str(home), "ask", question, "--kb", "demo",
                                                 "--mode", "rule", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.mark.slow  # ingests the demo KB
def test_wrong_values_citing_the_n2_datasheet_no_longer_share_the_right_answers_confidence(demo_home, demo_server):
    runs = {}
    for name, answer in N2_ANSWERS.items():
        demo_server.respond_with(DemoModel(answer))
        runs[name] = ask_json(demo_home, N2)
    for name, summary in runs.items():
        assert summary["answer"] == N2_ANSWERS[name].format(n=summary["citations"][0]["index"]), name
        assert summary["citations"][0]["document"] == N2_DATASHEET
        claims = next(j for j in summary["judge"] if j["target"] == "claims")
        assert claims["via"] == "llm" and len(claims["claims"]) == 1
    right = runs.pop("right")
    assert right["judge"][-1]["claims"][0]["status"] == "supported" and not right["ungrounded"]
    for name, summary in runs.items():
        status = summary["judge"][-1]["claims"][0]["status"]
        assert status == ("not_found" if name == "content-free" else "contradicted"), name
        assert summary["ungrounded"], name
        assert summary["band"] != "HIGH" and summary["confidence"] < right["confidence"], name
        if status == "contradicted":
            assert summary["band"] == "LOW", name


@pytest.mark.slow  # ingests the demo KB
def test_q01_with_its_gold_left_out_is_not_high_once_the_judge_reads_the_pricing_row(demo_home, demo_server):
    from docmind_core.engine import Engine

    engine = Engine.open(demo_home, warm=False)
    kb = engine.store.find_kb("demo")
    gold = [d.id for d in engine.store.list_documents(kb.id) if d.name == N2_DATASHEET]
    # offline (judge off), the pricing row that says "see the N2 datasheet" was graded HIGH
    settings = engine.settings
    demo_server.respond_with(DemoModel(N2_ANSWERS["right"]))
    offline = list(engine.ask(N2, [kb.id], exclude_doc_ids=gold, mode="rule",
                              settings=settings.with_overrides({"grader.judge": "off"})))
    assert offline[-1].grade.tier.value == "HIGH"

    demo_server.respond_with(DemoModel(N2_ANSWERS["right"],
                                       evidence_reply("no", 0.06, "the pricing row only points to the datasheet")))
    events = list(engine.ask(N2, [kb.id], exclude_doc_ids=gold, mode="rule", settings=settings))
    verdict = judged(events, "evidence")
    assert (verdict.tier_before, verdict.tier_after) == ("HIGH", "AMBIGUOUS")
    assert events[-1].grade.tier.value == "AMBIGUOUS"


def test_a_claim_reply_cut_short_keeps_the_verdicts_it_holds_whole():
    claims = [ClaimToCheck("The N2 draws 45 W.", 1, "| N2 | 45 W |"), ClaimToCheck("It has 2 TB.", 1, "| N2 | 2 TB |"),
              ClaimToCheck("It costs $9,999.", 2, "| N2 | $1,299 |")]
    cut = ('{"claims": [{"n": 1, "status": "supported", "reason": "the row says \\"45 W\\""}, '
           '{"n": 2, "status": "supported", "reason": "same row"}, {"n": 3, "status": "contra')
    verdicts = parse_claims_reply(cut, claims)
    assert [(v.claim, v.status, v.reason) for v in verdicts] == [
        ("The N2 draws 45 W.", "supported", 'the row says "45 W"'), ("It has 2 TB.", "supported", "same row")]
    with pytest.raises(ModelOutputError):
        parse_claims_reply('{"claims": [{"n": 1, "stat', claims)


def test_the_evidence_judge_reads_the_sentences_of_a_long_paragraph_closest_to_the_question():
    filler = "Aurora Cloud is a hosted analytics service with dashboards and alerts. " * 8
    paragraph = filler + "By default Aurora keeps ingested data for 90 days. " + filler  # one line, no breaks
    span = closest_span("How long does Aurora keep data by default?", paragraph, PASSAGE_CHARS)
    assert "keeps ingested data for 90 days" in span and len(span) <= PASSAGE_CHARS
    short = "The DM-3000 pump runs at 40 litres per minute."
    assert closest_span("DM-3000 flow rate?", short, PASSAGE_CHARS) == short
