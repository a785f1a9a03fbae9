"""The model judge: the configured language model reads the evidence and the answer's claims.

Word overlap cannot tell a passage that states the answer from one that only
shares its words, nor a claim that copies its source's value from one that
swaps it.  When ``grader.judge`` resolves to ``llm`` (by default whenever an
OpenAI-compatible model is configured), a run makes at most two extra calls:

* the **evidence judge**, after retrieval: do the top passages (the part of
  each closest to the question) state the answer?  One plain line, the verdict
  first ("yes: [n] "<words>"" / "no: <what is missing>"; a JSON verdict is read
  too).  When the server returns log-probabilities, P(yes) at the verdict
  token is the score ("answers" at or above
  ``grader.judge_yes_high``, "no" at or below ``grader.judge_yes_low``, "partly"
  between): a small model's stated verdict separates answerable from
  unanswerable evidence far worse than that probability.  Without
  log-probabilities the stated verdict counts.  The words a "yes" quotes are
  then read against the passage it names (``answer/quote_check.py``,
  :func:`settled_verdict`): a quote found in place makes it "answers" whatever
  its P(yes); without one it lifts nothing.  The verdict joins the lexical
  signals in :func:`docmind_core.answer.grade.judged_grade`.  Documents the user
  selected (SELECTED_DOC) are not judged: their relevance is the user's choice.
  Nor is evidence whose tier no verdict can move (an offline LOW, or a gray
  zone too weak to lift): the run records a ``Judged`` event with
  ``via="skipped"`` instead of paying for the call.
* the **claim judge**, after the answer: each claim the offline checks
  (``docmind_core/answer/claims.py``) tied to a source, against that source's span,
  batched in one JSON reply (supported / contradicted / not found).  Its verdicts
  become the claims' statuses (``via="llm"``, "not found" as unsupported)
  before coverage and confidence are computed, except that an offline
  "contradicted" is never cleared.

Each call is bounded by the run's deadline (the evidence judge by a share of
what is left, so the answer keeps its time) and never opens the run's breaker.
A timeout, an error or a malformed reply leaves the offline checks in place and
says so: a ``Judged`` event with ``via="offline"`` and a ``Fallback`` event.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass
from typing import Generator, Sequence

from docmind_core.answer.grade import chunk_score, judge_can_move, judged_grade
from docmind_core.answer.run_context import RunContext
from docmind_core.backends.protocols import Completion, CompletingModel, TokenAlternatives, UsageMeter
from docmind_core.answer.citations import with_claims
from docmind_core.answer.quote_check import QuoteCheck, check_quote
from docmind_core.deadline import LLM, RunGuard, elapsed_ms
from docmind_core.errors import ModelOutputError
from docmind_core.events import Event, Fallback, Judged
from docmind_core.values import (
    CitationResult,
    ClaimCheck,
    ClaimVerdict,
    EvidenceVerdict,
    GradeResult,
    RetrievedChunk,
    Tier,
)
from docmind_core.prompts import PromptLibrary, source_label
from docmind_core.settings import GraderSettings, JudgeMode
from docmind_core.text.tokens import CITATION_MARKER_RE, keyword_tokens, split_sentences

# What the judge reads and may write.  Of each of the top three passages, the ~320 characters closest to the
# question: a 1.5B model on one thread reads ~5-50 prompt tokens a second, and the evidence judge has a quarter
# of the run's time.  More claims than MAX_CLAIMS are not judged (the offline checks keep them).
EVIDENCE_SOURCES = 3
PASSAGE_CHARS = 320
SPAN_CHARS = 500
MAX_CLAIMS = 6
TOP_LOGPROBS = 5
EVIDENCE_MAX_TOKENS = 24  # "yes: [2] says ..." in at most fifteen words
CLAIM_MAX_TOKENS = 32  # per claim, plus CLAIM_MAX_TOKENS for the reply's frame
REASON_CHARS = 200
# The evidence judge may use this share of the run's time left, so that the answer (and the claim judge) keep
# the rest; a call given less than MIN_CALL_S is not made.
EVIDENCE_SHARE = 0.25
MIN_CALL_S = 0.5


@dataclass(frozen=True)
class ClaimToCheck:
    """One claim of the answer and the span of the source it is read against."""

    claim: str  # without its [n] markers
    source: int  # 1-based, as the answer numbers its sources
    span: str
    position: int = 0  # its index in ``CitationResult.claims``


class ModelJudge:
    """The two judge calls over one model that can answer short scored questions."""

    def __init__(self, model: CompletingModel, prompts: PromptLibrary):
        self.model = model
        self.prompts = prompts

    @property
    def name(self) -> str:
        return self.model.name

    def judge_evidence(self, question: str, sources: Sequence[RetrievedChunk], grader: GraderSettings,
                       meter: UsageMeter, timeout_s: float) -> EvidenceVerdict:
        """Raises BackendUnavailable (no reply in time, an error) or ModelOutputError (a malformed reply)."""
        top = sorted(sources, key=chunk_score, reverse=True)[:EVIDENCE_SOURCES]
        passages = "\n\n".join(f"[{n}] ({source_label(c)})\n{closest_span(question, c.text, PASSAGE_CHARS)}"
                               for n, c in enumerate(top, start=1))
        messages = self.prompts.render_messages("judge_evidence", question=question.strip(), sources=passages)
        # a plain reply, not JSON: its first token is the verdict, so P(yes) is read where the model commits
        reply = self.model.complete(messages, meter, purpose="judge_evidence", timeout_s=timeout_s,
                                    max_tokens=EVIDENCE_MAX_TOKENS, top_logprobs=TOP_LOGPROBS, json_object=False)
        verdict = parse_evidence_reply(reply, grader)
        return settled_verdict(verdict, check_quote(question, verdict.reason, top, grader.judge_quote_min_coverage),
                               grader)

    def judge_claims(self, claims: Sequence[ClaimToCheck], meter: UsageMeter, timeout_s: float,
                     max_tokens: int) -> list[ClaimVerdict]:
        """One verdict per claim the reply covers (a claim it skips is left to the offline checks)."""
        listed = "\n\n".join(f"Claim {n}: {c.claim}\nPassage {n} (source [{c.source}]): {c.span}"
                             for n, c in enumerate(claims, start=1))
        messages = self.prompts.render_messages("judge_claims", claims=listed)
        budget = min(max_tokens, CLAIM_MAX_TOKENS * (len(claims) + 1))
        reply = self.model.complete(messages, meter, purpose="judge_claims", timeout_s=timeout_s,
                                    max_tokens=budget)
        return parse_claims_reply(reply.text, claims)


def resolve_judge(mode: JudgeMode, judge: ModelJudge | None) -> tuple[ModelJudge | None, str]:
    """The judge one run uses under ``grader.judge``, and why there is none when ``llm`` was asked for.

    ``judge`` is what the engine built at start-up: a judge over the configured model, or None when the
    language model is the offline engine.  ``auto`` uses it when there is one."""
    if mode == "off":
        return None, ""
    if judge is None:
        return None, ("grader.judge is llm, but no OpenAI-compatible model is configured (the offline engine "
                      "cannot judge); set llm.base_url or OPENAI_API_KEY, or grader.judge off") if mode == "llm" else ""
    return judge, ""


# --------------------------------------------------------------------------
# The two steps of a run
# --------------------------------------------------------------------------


def evidence_step(judge: ModelJudge, question: str, grade: GradeResult, sources: Sequence[RetrievedChunk],
                  run: RunContext) -> Generator[Event, None, GradeResult]:
    """Judge the evidence and return the grade with the verdict; on any failure the grade unchanged.  Inside an
    answer run: the call's budget is read from the run's deadline (``run.guard``)."""
    settings, meter, guard = run.settings, run.meter, run.guard
    started = time.perf_counter()
    if not judge_can_move(grade, settings.grader):
        why = ("the offline grade is LOW" if grade.tier is Tier.LOW else
               "the judge only caps a HIGH here (grader.judge_lifts is off)" if not settings.grader.judge_lifts else
               "no top passage states the value the question asks for" if grade.unstated_kinds else
               "the lexical signals are too weak for a lift to HIGH")
        yield Judged(target="evidence", via="skipped", reason=f"not asked: {why}, and no verdict changes that",
                     tier_before=grade.tier.value, tier_after=grade.tier.value, duration_ms=elapsed_ms(started))
        return grade
    budget = min(settings.llm.timeout_s, guard.remaining() * EVIDENCE_SHARE)
    skipped = _why_not_call(guard, budget)
    if skipped:
        yield from _fell_back("evidence", skipped, started)
        return grade
    try:
        verdict = judge.judge_evidence(question, sources, settings.grader, meter, budget)
    except Exception as exc:  # noqa: BLE001 - a judge must never sink the run: the offline grade stands
        yield from _fell_back("evidence", _failure(exc, budget, "a quarter of the time left in the run"), started)
        return grade
    judged = judged_grade(grade, verdict, settings.grader)
    yield Judged(target="evidence", via="llm", reason=verdict.reason, evidence=verdict,
                 tier_before=grade.tier.value, tier_after=judged.tier.value, duration_ms=elapsed_ms(started))
    return judged


def claims_step(judge: ModelJudge, claims: Sequence[ClaimToCheck],
                run: RunContext) -> Generator[Event, None, list[ClaimVerdict]]:
    """Judge the answer's claims; on any failure no verdict (the offline checks stand).  Inside an answer run,
    as :func:`evidence_step`."""
    settings, meter, guard = run.settings, run.meter, run.guard
    if not claims:
        return []
    started = time.perf_counter()
    budget = min(settings.llm.timeout_s, guard.remaining())
    skipped = _why_not_call(guard, budget)
    if skipped:
        yield from _fell_back("claims", skipped, started)
        return []
    try:
        verdicts = judge.judge_claims(claims, meter, budget, settings.llm.max_tokens)
    except Exception as exc:  # noqa: BLE001 - as above
        yield from _fell_back("claims", _failure(exc, budget, "the time left in the run"), started)
        return []
    left = len(claims) - len(verdicts)
    reason = f"the judge skipped {left} of {len(claims)} claims; the offline checks keep them" if left else ""
    yield Judged(target="claims", via="llm", reason=reason, claims=verdicts, duration_ms=elapsed_ms(started))
    return verdicts


def _why_not_call(guard: RunGuard, budget_s: float) -> str:
    if not guard.usable(LLM):
        return f"not called: {guard.breaker.reason(LLM)}"
    if budget_s < MIN_CALL_S:
        return "not called: no time left in the run (run.deadline_ms)"
    return ""


def _failure(exc: BaseException, budget_s: float, share: str) -> str:
    if isinstance(exc, ModelOutputError):
        return f"malformed reply: {exc}"
    return f"{type(exc).__name__}: {exc} [the judge's call had {budget_s:.1f}s: {share}, at most llm.timeout_s]"


def _fell_back(target: str, reason: str, started: float) -> Generator[Event, None, None]:
    yield Judged(target=target, via="offline", reason=reason, duration_ms=elapsed_ms(started))
    yield Fallback(stage=f"judge ({target})", reason=reason, to="offline checks")


# --------------------------------------------------------------------------
# Claims of an answer, and what their verdicts do to its confidence
# --------------------------------------------------------------------------


def claims_to_check(citations: CitationResult, sources: Sequence[RetrievedChunk]) -> list[ClaimToCheck]:
    """The answer's checkable claims (from the offline checks, ``citations.claims``) that name a source: the one
    the offline check read them against, else the first they cite; with that source's span (the offline
    check's evidence, else the part of the source closest to the claim).  At most MAX_CLAIMS."""
    out: list[ClaimToCheck] = []
    for position, claim in enumerate(citations.claims):
        if claim.status == "not_checkable":
            continue
        source = claim.source_index or (claim.cited[0] if claim.cited else None)
        if source is None or not 1 <= source <= len(sources):
            continue
        text = _plain_claim(claim.text)
        source_text = sources[source - 1].text
        span = with_table_header(claim.evidence, source_text) if claim.evidence and claim.source_index == source \
            else closest_span(text, source_text)
        out.append(ClaimToCheck(text, source, _cut(span, SPAN_CHARS), position))
        if len(out) == MAX_CLAIMS:
            break
    return out


def with_table_header(span: str, source_text: str) -> str:
    """A table row with its table's header line before it: a row alone does not say which column is what."""
    if not span.lstrip().startswith("|"):
        return span
    header = next((line.strip() for line in source_text.splitlines() if line.strip().startswith("|")), "")
    return span if not header or header in span else f"{header}\n{span}"


def _plain_claim(text: str) -> str:
    """A claim without its ``[n]`` markers, as the judge reads it."""
    return _SPACE_BEFORE_PUNCTUATION_RE.sub(r"\1", " ".join(CITATION_MARKER_RE.sub("", text).split()))


def closest_span(claim: str, text: str, limit: int = SPAN_CHARS) -> str:
    """The window of ``text``'s lines (up to ``limit`` characters) that shares the most words with ``claim``;
    a line longer than ``limit`` (a paragraph) is read sentence by sentence."""
    lines = [part for line in text.splitlines() for part in _pieces(line.strip(), limit) if part]
    if not lines:
        return ""
    if len(" ".join(lines)) <= limit:
        return "\n".join(lines)
    wanted = set(keyword_tokens(claim))
    best, best_hits = 0, -1
    for i, line in enumerate(lines):
        hits = len(wanted & set(keyword_tokens(line)))
        if hits > best_hits:
            best, best_hits = i, hits
    start = end = best
    size = len(lines[best])
    while True:  # grow around the best line, one line each side in turn, while it fits
        grown = False
        if end + 1 < len(lines) and size + len(lines[end + 1]) + 1 <= limit:
            end, size, grown = end + 1, size + len(lines[end + 1]) + 1, True
        if start > 0 and size + len(lines[start - 1]) + 1 <= limit:
            start, size, grown = start - 1, size + len(lines[start - 1]) + 1, True
        if not grown:
            break
    return _cut("\n".join(lines[start:end + 1]), limit)


def _pieces(line: str, limit: int) -> list[str]:
    if len(line) <= limit:
        return [line]
    return [line[a:b].strip() for a, b in split_sentences(line)]


# the judge's verdict as a claim status; "not found" is what the offline checks call unsupported
_STATUS_OF_VERDICT = {"supported": "supported", "contradicted": "contradicted", "not_found": "unsupported"}


def judged_citations(citations: CitationResult, checked: Sequence[ClaimToCheck], verdicts: Sequence[ClaimVerdict],
                     answer: str, sources: Sequence[RetrievedChunk]) -> CitationResult:
    """``citations`` with the judge's verdicts as the statuses of the claims it read (``via="llm"``); coverage,
    inferred citations and counts follow (``citations.with_claims``).  The judge can flag a claim the offline
    check passed, never pass one it flagged: a claim found contradicted stays contradicted (its reading of a
    value against the same row is exact), and one found unsupported stays unsupported.  A 1.5B model said
    "supported" to 24 of 27 benchmark claims, content-free text and another entity's name among them
    (bench/RESULTS.md, claim support with the model claim judge): its "supported" alone clears nothing."""
    if not verdicts:
        return citations
    by_claim = {(v.claim, v.source): v for v in verdicts}
    claims: list[ClaimCheck] = list(citations.claims)
    for item in checked:
        verdict = by_claim.get((item.claim, item.source))
        if verdict is None:
            continue
        claim = claims[item.position]
        status = _STATUS_OF_VERDICT[verdict.status]
        reason = f"judge: {verdict.status.replace('_', ' ')}" + (f" ({verdict.reason})" if verdict.reason else "")
        if claim.status in ("contradicted", "unsupported") and status == "supported" or \
                claim.status == "contradicted" and status != "contradicted":
            status, reason = claim.status, f"{claim.reason}; the judge said {verdict.status.replace('_', ' ')}"
        claims[item.position] = claim.model_copy(update={
            "status": status, "via": "llm", "reason": reason, "source_index": item.source,
            "evidence": item.span if claim.source_index != item.source else claim.evidence})
    return with_claims(citations, answer, claims, sources)


# --------------------------------------------------------------------------
# Reading the replies
# --------------------------------------------------------------------------

_SPACE_BEFORE_PUNCTUATION_RE = re.compile(r"\s+([.,;:!?。，；：！？])")  # where a removed marker stood
_VERDICTS = {"yes": "answers", "answers": "answers", "partly": "partly", "partial": "partly", "no": "no"}
_STATED = {"yes": "yes", "answers": "yes", "partly": "partly", "partial": "partly", "no": "no"}
_CLAIM_STATUSES = {"supported": "supported", "contradicted": "contradicted", "not_found": "not_found",
                   "not found": "not_found", "notfound": "not_found", "unsupported": "not_found"}
_VERDICT_KEY_RE = re.compile(r'"verdict"\s*:\s*"')
_VERDICT_RE = re.compile(r'"verdict"\s*:\s*"([A-Za-z_ ]+)"')
_CLAIM_ENTRY_RE = re.compile(r'\{\s*"n"\s*:\s*(\d+)\s*,\s*"status"\s*:\s*"([A-Za-z_ ]+)"'
                             r'(?:\s*,\s*"reason"\s*:\s*"((?:[^"\\]|\\.)*)")?\s*\}')
_REASON_RE = re.compile(r'"reason"\s*:\s*"((?:[^"\\]|\\.)*)')
# a reply that starts with its verdict word, then (after a colon, dash or full stop) the words that decide it
_PLAIN_VERDICT_RE = re.compile(r'\s*["\'*]*(yes|no|partly)\b["\'*]*\s*[:.,;\-–—]?\s*(.*)\Z',
                               re.IGNORECASE | re.DOTALL)


def parse_evidence_reply(reply: Completion, grader: GraderSettings) -> EvidenceVerdict:
    """The verdict of an evidence-judge reply: from P(yes) when the reply has log-probabilities at its verdict,
    else from the verdict it states.  Raises ModelOutputError when it states none."""
    data = _json_object(reply.text)
    stated = str(data.get("verdict", "")).strip().lower() if data is not None else ""
    reason = str(data.get("reason", "")) if data is not None else ""
    if data is None:  # a reply cut short (max_tokens) can still hold its verdict and part of its reason
        match = _VERDICT_RE.search(reply.text)
        stated = match.group(1).strip().lower() if match else ""
        found = _REASON_RE.search(reply.text)
        reason = _json_string(found.group(1)) if found else ""
        plain = _PLAIN_VERDICT_RE.match(reply.text) if match is None else None
        if plain:  # the plain form the prompt asks for: "yes: [2] says ..."
            stated, reason = plain.group(1).lower(), plain.group(2) or ""
    reason = _one_line(reason)
    said = _STATED.get(stated, "")
    p_yes = verdict_probability(reply.logprobs)
    if p_yes is not None:
        return EvidenceVerdict(verdict=verdict_of(p_yes, grader), p_yes=round(p_yes, 4), scored_by="logprobs",
                               reason=reason, stated=said)
    if stated not in _VERDICTS:
        raise ModelOutputError(f"no yes/no verdict in the evidence judge's reply: {_one_line(reply.text)!r}")
    return EvidenceVerdict(verdict=_VERDICTS[stated], scored_by="verbal", reason=reason, stated=said)


def verdict_of(p_yes: float, grader: GraderSettings) -> str:
    """The verdict P(yes) reads as under the grader's thresholds."""
    return "answers" if p_yes >= grader.judge_yes_high else "no" if p_yes <= grader.judge_yes_low else "partly"


def settled_verdict(verdict: EvidenceVerdict, quote: QuoteCheck, grader: GraderSettings) -> EvidenceVerdict:
    """The verdict once its quote is read against the passage it names (``answer/quote_check.py``).

    A "yes" whose quote is verified is "answers", whatever its P(yes): the passage holds the quoted words in a
    sentence about the question, which is firmer ground than a small model's probability.  With
    ``grader.judge_lift_needs_quote`` an "answers" whose quote is not verified is only "partly": it may not lift
    a tier (a paraphrase, a quote the passage lacks, or one from an unrelated sentence)."""
    name = verdict.verdict
    if verdict.stated == "yes" and quote.verified:
        name = "answers"
    elif name == "answers" and grader.judge_lift_needs_quote and not quote.verified:
        name = "partly"
    return verdict.model_copy(update={"verdict": name, "quote": quote.quote, "quote_source": quote.source,
                                      "quote_verified": quote.verified, "quote_note": quote.note})


def verdict_probability(logprobs: Sequence[TokenAlternatives] | None) -> float | None:
    """P(yes) / (P(yes) + P(no)) at the token where the reply's verdict value starts (the first token reaching
    past ``"verdict": "``; in a reply without that key, its first yes/no token); None when the reply has no
    log-probabilities or none for yes or no there."""
    if not logprobs:
        return None
    key = _VERDICT_KEY_RE.search("".join(t.token for t in logprobs))
    position = 0
    for token in logprobs:
        position += len(token.token)
        if key is None:
            if _word(token.token) in ("yes", "no"):
                return _yes_share(token)
        elif position > key.end():
            return _yes_share(token)
    return None


def _yes_share(token: TokenAlternatives) -> float | None:
    alternatives = token.top or ((token.token, token.logprob),)
    yes = sum(math.exp(lp) for alt, lp in alternatives if _word(alt) == "yes")
    no = sum(math.exp(lp) for alt, lp in alternatives if _word(alt) == "no")
    if yes + no <= 0:
        return None
    return yes / (yes + no)


def _word(token: str) -> str:
    return token.strip().strip('"\':,.{} ').lower()


def parse_claims_reply(text: str, claims: Sequence[ClaimToCheck]) -> list[ClaimVerdict]:
    """The verdict of each claim a claim-judge reply covers.  Raises ModelOutputError when it covers none."""
    data = _json_object(text)
    entries = data.get("claims") if data is not None else None
    if data is None:  # a reply cut short (max_tokens) still holds its first entries whole
        entries = [{"n": int(m.group(1)), "status": m.group(2), "reason": _json_string(m.group(3) or "")}
                   for m in _CLAIM_ENTRY_RE.finditer(text)] or None
    if not isinstance(entries, list):
        raise ModelOutputError(f"no \"claims\" list in the claim judge's reply: {_one_line(text)!r}")
    verdicts: dict[int, ClaimVerdict] = {}
    for position, entry in enumerate(entries, start=1):
        if not isinstance(entry, dict):
            continue
        n = entry.get("n", position)
        status = _CLAIM_STATUSES.get(str(entry.get("status", "")).strip().lower())
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= len(claims) or status is None \
                or n in verdicts:
            continue
        claim = claims[n - 1]
        verdicts[n] = ClaimVerdict(claim=claim.claim, source=claim.source, status=status,
                                   reason=_one_line(str(entry.get("reason", ""))))
    if not verdicts:
        raise ModelOutputError(f"no usable claim verdict in the claim judge's reply: {_one_line(text)!r}")
    return [verdicts[n] for n in sorted(verdicts)]


def _json_object(text: str) -> dict | None:
    body = text.strip()
    if body.startswith("```"):
        body = body.strip("`").removeprefix("json").strip()
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        data = json.loads(body[start:end + 1])
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _json_string(raw: str) -> str:
    """The text of a JSON string's body (escapes decoded), as far as it is whole."""
    try:
        return json.loads(f'"{raw}"')
    except ValueError:
        return raw.replace('\\"', '"')


def _one_line(text: str) -> str:
    return _cut(" ".join(text.split()), REASON_CHARS)


def _cut(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
