"""Machine reasons in words: the one place that turns a reason code into a sentence an analyst reads.

The grader (``GradeResult.reason``), the router (``PathDecision.reason``, ``Done.route_reason``), the
agentic loop (``stop_reason``), the scope check (``ScopeDecided.reason``) and the fallbacks store short
machine codes such as ``gray_zone_blend_mid:0.27`` or ``max_iterations``: they stay in traces and in
``--json`` (filters and scripts match on them).  Wherever a person reads a run (the chat page, the Traces
page, ``docmind ask``) :func:`describe_reason` shows the sentence instead.  Reasons that are already
prose pass through, with any code inside them ("the loop stopped (total_timeout) ...") put in words.
Pure text: no Streamlit, no HTML.
"""

from __future__ import annotations

import re

# -- the grader (answer/grade.py) ------------------------------------------------------------------
GRADE_WORDS: dict[str, str] = {
    "no_evidence": "nothing was retrieved, so there is no evidence to answer from",
    "rerank_high": "the top score is at or above the high threshold, and the evidence holds the question's key "
                   "terms",
    "rerank_low": "the top score is at or below the low threshold",
    "high_rerank_but_no_coverage": "the top score is high, but the evidence holds almost none of the "
                                   "question's key terms",
    "high_rerank_but_low_coverage": "the top score is high, but the evidence holds too few of the question's "
                                    "key terms",
    "low_rerank_but_rare_entity_hit": "the top score is low, but a rare name, number or code from the question "
                                      "is in the evidence",
    "high_but_no_salient_term_in_evidence": "the evidence scored well, but none of the question's key terms is "
                                            "in it, so it is not a sure answer",
    "gray_zone_no_terms": "between the thresholds, and the question has no key terms to check the evidence for",
    "gray_zone_coverage_high": "between the thresholds; the evidence holds most of the question's key terms",
    "gray_zone_coverage_low": "between the thresholds; the evidence holds few of the question's key terms",
    "gray_zone_coverage_mid": "between the thresholds; the evidence holds some of the question's key terms",
    "gray_zone_rerank_only": "between the thresholds; under the score-only gray-zone rule such a score is "
                             "always uncertain",
}
# codes with a value after the colon: "gray_zone_blend_mid:0.27", "gray_zone_error:ValueError",
# "high_but_asked_value_not_in_evidence:quantity,date"
_BLEND_BANDS = {"gray_zone_blend_high": "high", "gray_zone_blend_mid": "middle", "gray_zone_blend_low": "low"}
GRADE_PREFIXES = (*_BLEND_BANDS, "gray_zone_error", "retrieval_incomplete", "high_but_asked_value_not_in_evidence",
                  "high_but_asked_target_not_in_evidence")
KIND_WORDS_FOR_REASONS: dict[str, str] = {
    "quantity": "a quantity in the asked units", "count": "a count", "date": "a date or time", "money": "a price",
    "version": "a version", "address": "an address or command", "name": "a name",
}

# -- the router (answer/route.py) and the pipeline's no-retrieval route ----------------------------
ROUTE_WORDS: dict[str, str] = {
    "forced_rule": "the mode was chosen by the user: the rule planner",
    "forced_agentic": "the mode was chosen by the user: the agentic loop",
    "selected_doc_summary": "documents were selected and the question asks for a summary of them",
    "selected_doc_question": "documents were selected and the question is about them",
    "rule_planner": "a simple, unambiguous question: the rule planner searches for it directly",
    "agentic_disabled": "the question needs more than one search, but the agentic loop is switched off "
                        "(agentic.enabled)",
    "agentic": "the question needs more than one search or is ambiguous: the agentic loop searches for it",
}

# -- the scope check (models.Scope; "scope:<value>" is Done.route_reason of a run that did not search) --
SCOPE_WORDS: dict[str, str] = {
    "knowledge_query": "a question about the documents",
    "meta_dialogue": "a question about this conversation",
    "chitchat": "small talk",
    "memory_command": "a request to remember something",
    "capability": "a question about what DocMind can do",
    "out_of_scope": "a request outside what DocMind answers",
}
FAST_SCOPE_WORDS: dict[str, str] = {
    "regex:summarise_conversation": "the message asks to summarise this conversation, so nothing is searched",
    "regex:translate_last_answer": "the message asks to translate the last answer, so nothing is searched",
    "regex:recall_conversation": "the message asks what was said earlier in this conversation, so nothing is "
                                 "searched",
    "regex:memory_command": "the message asks to remember something, so nothing is searched",
}

# -- the agentic loop's stop (models.StopReason) -----------------------------------------------------
STOP_WORDS: dict[str, str] = {
    "model_done": "the model stopped searching: it had what it needed",
    "max_iterations": "the loop reached its limit of rounds",
    "max_tool_calls": "the loop reached its limit of tool calls",
    "iteration_timeout": "a round of the loop ran out of time",
    "total_timeout": "the loop ran out of time",
    "cancelled": "the run was stopped before it finished",
    "error": "the loop failed, and a single search ran instead",
    "incomplete": "the run ended without a final result (it was interrupted)",
}

_ALL_CODES: dict[str, str] = {**GRADE_WORDS, **ROUTE_WORDS, **STOP_WORDS, **FAST_SCOPE_WORDS}
_CODE_TOKEN = re.compile(r"(?<![\w.:])[a-z]+(?:_[a-z]+)+(?![\w.])")
_NUMBER = re.compile(r"-?\d+\.\d{3,}")


def _round_numbers(text: str) -> str:
    return _NUMBER.sub(lambda m: f"{float(m.group()):.2f}", text)


def _inline(text: str) -> str:
    """Prose with any known code inside it put in words (unknown underscored words stay as written)."""
    def words(match: re.Match[str]) -> str:
        token = match.group()
        return STOP_WORDS.get(token) or SCOPE_WORDS.get(token) or _ALL_CODES.get(token) or token
    return _round_numbers(_CODE_TOKEN.sub(words, text))


def describe_reason(code: str | None) -> str:
    """``code`` in words; "" for an empty reason.  A code it does not know is returned with its underscores
    as spaces rather than raw, and prose is returned with the codes inside it described."""
    text = (code or "").strip()
    if not text:
        return ""
    if text in _ALL_CODES:
        return _ALL_CODES[text]
    head, sep, rest = text.partition(":")
    rest = rest.strip()
    if sep:
        if head in _BLEND_BANDS:
            try:
                value = f"{float(rest):.2f}"
            except ValueError:
                value = rest
            return (f"between the thresholds; the blend of score and coverage, {value}, is in the "
                    f"{_BLEND_BANDS[head]} band")
        if head == "high_but_asked_value_not_in_evidence":
            kinds = [KIND_WORDS_FOR_REASONS.get(k, k.replace("_", " ")) for k in rest.split(",") if k]
            asked = " or ".join(kinds) or "a value"
            return (f"the evidence scored well and holds the question's key terms, but none of its top passages "
                    f"states {asked}, which the question asks for, so it is not a sure answer")
        if head == "high_but_asked_target_not_in_evidence":  # "entity Nimbus N1 Lite,qualifier idle"
            missing = " and ".join(m.strip() for m in rest.split(",") if m.strip()) or "what the question asks about"
            return (f"the evidence scored well and states a value of the asked kind, but never of what the question "
                    f"asks about ({missing}), so it is not a sure answer")
        if head == "gray_zone_error":
            return f"between the thresholds; the gray-zone rule failed ({rest or 'an error'}), so the tier is uncertain"
        if head == "retrieval_incomplete":
            missing, found, graded = rest.partition("; of what was found: ")
            words = f"not everything could be searched ({_inline(missing)})"
            return words + (f"; of what was found: {describe_reason(graded)}" if found else "")
        if head == "scope" and rest in SCOPE_WORDS:
            return f"the message is {SCOPE_WORDS[rest]}, so nothing is searched"
        if text in FAST_SCOPE_WORDS:
            return FAST_SCOPE_WORDS[text]
        if head.startswith("tier ") and rest:  # web compensation: "tier LOW: rerank_low"
            return f"{head}: {describe_reason(rest)}"
        if head == "regex":  # a fast-path scope rule without words of its own
            return f"the message matched the {rest.replace('_', ' ')} rule, so nothing is searched"
        if " " in head:  # prose with a colon ("... graded on what they hold: rerank_high")
            return f"{_inline(head)}: {describe_reason(rest)}"
    if " " in text:
        return _inline(text)
    return _round_numbers(text.replace("_", " "))

