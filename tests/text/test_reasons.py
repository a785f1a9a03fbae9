"""Every machine reason the grader, router, scope check and agentic loop emit has words (issue 23, item 6).

The codes are read from the emitting modules' source, so a new code added without words fails here.
"""

from __future__ import annotations

import ast
import inspect
import re

import pytest

from docmind_core.answer import grade, route
from docmind_core.answer.selected_doc import QUESTION_GRADED
from docmind_core.values import Scope, StopReason
from docmind_core.text import query_signals
from docmind_core.text.reasons import describe_reason

_RAW = re.compile(r"(?<![\w.])[a-z]+(?:_[a-z]+)+(?![\w.])")


def _literal_head(node: ast.AST) -> str | None:
    """The constant text of a str literal or the leading constant of an f-string."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return node.values[0].value
    return None


def _grader_codes() -> set[str]:
    """The second element of every ``return Tier.X, "<code>"`` and every ``reason="<code>"`` in grade.py."""
    codes: set[str] = set()
    for node in ast.walk(ast.parse(inspect.getsource(grade))):
        if isinstance(node, ast.Tuple) and len(node.elts) == 2 and isinstance(node.elts[0], ast.Attribute) \
                and getattr(node.elts[0].value, "id", "") == "Tier":
            head = _literal_head(node.elts[1])
            if head is not None:
                codes.add(head)
        if isinstance(node, ast.keyword) and node.arg == "reason":
            head = _literal_head(node.value)
            if head:
                codes.add(head)
    return codes


def _route_codes() -> set[str]:
    codes = set()
    for node in ast.walk(ast.parse(inspect.getsource(route))):
        if isinstance(node, ast.keyword) and node.arg == "reason" and isinstance(node.value, ast.Constant):
            codes.add(node.value.value)
    return codes


def _fast_scope_codes() -> set[str]:
    source = inspect.getsource(query_signals.fast_scope)
    return {"regex:" + code for code in re.findall(r'"([a-z_]+)"\)', source) if "_" in code} | \
        set(re.findall(r'"(regex:[a-z_]+)"', source))


def _sample(head: str) -> str:
    """A full reason from a code's constant head (the f-string ones get a value)."""
    if head.endswith(":"):
        return head + ("0.2733333" if "blend" in head else "ValueError")
    if head.startswith("retrieval_incomplete"):
        return "retrieval_incomplete: vector search timed out; of what was found: gray_zone_blend_mid:0.27"
    return head


ALL_CODES = sorted(
    {(_sample(c), "grader") for c in _grader_codes()}
    | {(c, "router") for c in _route_codes()}
    | {(s.value, "stop") for s in StopReason}
    | {(f"scope:{s.value}", "scope") for s in Scope}
    | {(c, "fast scope") for c in _fast_scope_codes()}
    | {(f"{QUESTION_GRADED}: rerank_high", "selected documents")}
    | {("tier LOW: rerank_low", "web compensation")}
    | {("the loop stopped (total_timeout) before it found evidence", "fallback")}
    | {("model said out_of_scope with low confidence; treated as a knowledge query", "scope")})


def test_the_walk_finds_the_emitted_codes():
    found = {code for code, _ in ALL_CODES}
    assert {"rerank_high", "no_evidence", "gray_zone_blend_mid:0.2733333", "gray_zone_error:ValueError"} <= found
    assert {"agentic_disabled", "selected_doc_summary", "forced_rule"} <= found
    assert {"regex:memory_command", "regex:summarise_conversation"} <= found
    assert len(found) >= 35


@pytest.mark.parametrize(("code", "origin"), ALL_CODES)
def test_every_reason_has_words(code, origin):
    words = describe_reason(code)
    assert words and words != code, f"{origin} reason {code!r} is shown raw"
    assert not _RAW.findall(words), f"{origin} reason {code!r} leaves a code in {words!r}"
    assert not re.search(r"\d\.\d{3,}", words), f"{origin} reason {code!r} shows an unrounded number: {words!r}"


def test_blend_reason_reads_as_a_sentence_with_a_rounded_number():
    assert describe_reason("gray_zone_blend_mid:0.27") == (
        "between the thresholds; the blend of score and coverage, 0.27, is in the middle band")
    assert "0.44" in describe_reason("gray_zone_blend_high:0.43525922298431396")


def test_empty_reason_stays_empty_and_prose_passes_through():
    assert describe_reason("") == "" and describe_reason(None) == ""
    prose = "the selected documents are read directly"
    assert describe_reason(prose) == prose
