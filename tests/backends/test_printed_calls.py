"""Tool calls printed as text, in every dialect small local models use (backends/openai_parsing.py).

The contents are what Qwen2.5-Coder 0.5B / 1.5B (llama-server --jinja) and similar models print instead of
sending ``tool_calls``: ``<tools>`` blocks (Qwen2.5-Coder's habit), ``<tool_call>`` tags (Qwen's template),
``<function=name>`` blocks (with JSON or ``<parameter=...>`` pairs), fenced and bare JSON, lists, and floods
of blocks cut off by ``max_tokens``.
"""

from __future__ import annotations

import pytest

from docmind_core.backends.openai_parsing import CALL_STOP_SEQUENCES, calls_from_content
from docmind_core.answer.tools import loop_tool_specs

TOOLS = loop_tool_specs(sandbox_enabled=False)

# What the 1.5B printed for "What is the maximum power draw of the Nimbus N2?" with max_tokens 384 (issue 21):
# a <tools> block for every tool, then again with variant queries, until the tokens ran out mid-call.
FLOOD = (
    "<tools>\n"
    '{"name": "searchDocs", "arguments": {"query": "Nimbus N2 maximum power draw", "top_k": 1}}\n'
    "</tools>\n"
    "<tools>\n"
    '{"name": "keywordSearch", "arguments": {"query": "Nimbus N2 power", "top_k": 1}}\n'
    "</tools>\n"
    "<tools>\n"
    '{"name": "webSearch", "arguments": {"query": "Nimbus N2 maximum power draw"}}\n'
    "</tools>\n"
    "<tools>\n"
    '{"name": "recall_memory", "arguments": {"query": "Nimbus N2"}}\n'
    "</tools>\n"
    "<tools></tools>\n"
    "<tools>\n"
    '{"name": "searchDocs", "arguments": {"query": "Nimbus N2 maximum power draw", "top_k": 1}}\n'
    "</tools>\n"
    "<tools>\n"
    '{"name": "searchDocs", "arguments": {"query": "Nimbus N2 power consumption watts", "top_k": 1}}\n'
    "</tools>\n"
    "<tools></tools>\n"
    "<tools>\n"
    '{"name": "keywordSearch", "arguments": {"query": "N2 W'
)


def summary(calls):
    return [(c.name, c.arguments, c.repaired_from) for c in calls]


def test_a_flood_of_tools_blocks_gives_every_complete_call_in_order_and_a_clean_thought():
    calls, thought = calls_from_content(FLOOD, TOOLS)
    assert summary(calls) == [
        ("searchDocs", {"query": "Nimbus N2 maximum power draw", "top_k": 1}, "tools_tags"),
        ("keywordSearch", {"query": "Nimbus N2 power", "top_k": 1}, "tools_tags"),
        ("webSearch", {"query": "Nimbus N2 maximum power draw"}, "tools_tags"),
        ("recall_memory", {"query": "Nimbus N2"}, "tools_tags"),
        ("searchDocs", {"query": "Nimbus N2 maximum power draw", "top_k": 1}, "tools_tags"),
        ("searchDocs", {"query": "Nimbus N2 power consumption watts", "top_k": 1}, "tools_tags"),
    ]
    assert thought == ""  # no leftover <tools></tools> pairs, no cut-off JSON


def test_calls_to_tools_not_offered_are_not_calls_and_their_blocks_leave_the_thought():
    offered = [t for t in TOOLS if t.name in ("searchDocs", "keywordSearch")]
    calls, thought = calls_from_content("I will search.\n" + FLOOD, offered)
    assert [c.name for c in calls] == ["searchDocs", "keywordSearch", "searchDocs", "searchDocs"]
    assert thought == "I will search."


@pytest.mark.parametrize("content, expected", [
    ('<tool_call>\n{"name": "searchDocs", "arguments": {"query": "a"}}\n</tool_call>\n'
     '<tool_call>\n{"name": "keywordSearch", "arguments": {"query": "b"}}\n</tool_call>',
     [("searchDocs", {"query": "a"}, "tool_call_tags"), ("keywordSearch", {"query": "b"}, "tool_call_tags")]),
    ('<function=searchDocs>{"query": "Nimbus 默认管理地址"}</function>',
     [("searchDocs", {"query": "Nimbus 默认管理地址"}, "function_tags")]),
    ('<function=searchDocs>{"name": "searchDocs", "arguments": {"query": "a"}}</function>',
     [("searchDocs", {"query": "a"}, "function_tags")]),
    ("<function=searchDocs>\n<parameter=query>\nNimbus N2 power\n</parameter>\n<parameter=top_k>\n6\n"
     "</parameter>\n</function>",
     [("searchDocs", {"query": "Nimbus N2 power", "top_k": 6}, "function_parameters")]),
    ('```json\n[{"name": "searchDocs", "arguments": {"query": "a"}}, '
     '{"name": "searchDocs", "arguments": {"query": "b"}}]\n```',
     [("searchDocs", {"query": "a"}, "fenced_json"), ("searchDocs", {"query": "b"}, "fenced_json")]),
    ('[{"name": "searchDocs", "arguments": {"query": "a"}}, {"name": "keywordSearch", "parameters": {"query": "b"}}]',
     [("searchDocs", {"query": "a"}, "content_json"), ("keywordSearch", {"query": "b"}, "content_json")]),
    ('<tools>\n[{"name": "searchDocs", "arguments": {"query": "a"}}, '
     '{"name": "searchDocs", "arguments": {"query": "b"}}]\n</tools>',
     [("searchDocs", {"query": "a"}, "tools_tags"), ("searchDocs", {"query": "b"}, "tools_tags")]),
])
def test_every_dialect_is_read(content, expected):
    calls, thought = calls_from_content(content, TOOLS)
    assert summary(calls) == expected and thought == ""


def test_dialects_mixed_in_one_message_keep_the_printed_order():
    content = ('First {"name": "keywordSearch", "arguments": {"query": "one"}}\n'
               '<tools>{"name": "searchDocs", "arguments": {"query": "two"}}</tools>\n'
               "<function=searchDocs><parameter=query>three</parameter></function>\n"
               '```json\n{"name": "keywordSearch", "arguments": {"query": "four"}}\n```\n'
               '<tool_call>{"name": "searchDocs", "arguments": {"query": "five"}}</tool_call> done')
    calls, thought = calls_from_content(content, TOOLS)
    assert [(c.arguments["query"], c.repaired_from) for c in calls] == [
        ("one", "content_json"), ("two", "tools_tags"), ("three", "function_parameters"),
        ("four", "fenced_json"), ("five", "tool_call_tags")]
    assert thought.split() == ["First", "done"]


def test_a_block_cut_by_a_stop_sequence_is_still_a_call():
    """A request's stop sequence ends the text before the closing tag (the server does not send it)."""
    for closing in CALL_STOP_SEQUENCES:
        opening = {"</tools>": "<tools>", "</tool_call>": "<tool_call>",
                   "</function>": "<function=searchDocs>"}[closing]
        body = '{"query": "x"}' if closing == "</function>" else '{"name": "searchDocs", "arguments": {"query": "x"}}'
        calls, thought = calls_from_content(f"{opening}\n{body}\n", TOOLS)
        assert [(c.name, c.arguments) for c in calls] == [("searchDocs", {"query": "x"})] and thought == ""


def test_a_call_cut_off_before_its_arguments_closed_is_not_a_call():
    calls, thought = calls_from_content('<function=searchDocs>{"query": "Nim', TOOLS)
    assert calls == [] and thought == '<function=searchDocs>{"query": "Nim'  # nothing recovered: text unchanged
