"""Routing pins: the offline engine's decision for a small fixed subset of the routing bench (bench/routing.py).

Each row is what ``docmind ask`` decides offline for the question: the path, and whether web search is planned
(the RULE_PLANNER plan, or the agentic loop's first round with a web backend configured).  A change that flips
one of them fails here, in the fast tier, instead of showing up later as a lower ratio in ``make bench``.  If a
flip is intended, change the row and say why in the commit.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from docmind_core.settings import Settings

BENCH = Path(__file__).resolve().parents[2] / "bench" / "routing.py"


def _bench():
    spec = importlib.util.spec_from_file_location("routing_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


routing_bench = _bench()

PINS = [
    # time-aware: relative dates and explicit years, both languages -> web planned
    ("上个月发布了哪些新功能？", "RULE_PLANNER", True),
    ("这周有什么重要公告？", "RULE_PLANNER", True),
    ("公司2024年的营收是多少？", "RULE_PLANNER", True),
    ("What changed in the release notes last quarter?", "RULE_PLANNER", True),
    ("What happened at the conference yesterday?", "RULE_PLANNER", True),
    # comparisons of named entities -> AGENTIC, both languages, two or three sides
    ("北京和上海哪个人口多？", "AGENTIC", False),
    ("苹果、香蕉和橘子哪个维生素C含量最高？", "AGENTIC", False),
    ("Nimbus N1 vs N2: which has the longer battery life?", "AGENTIC", False),
    ("What is the difference between TCP and UDP?", "AGENTIC", False),
    ("Who was born first, Marie Curie or Albert Einstein?", "AGENTIC", False),
    # a time-aware comparison: AGENTIC, and the loop's first round searches the web
    ("Nimbus N1 和 N2 今年哪个卖得更好？", "AGENTIC", True),
    # a multi-hop question (a relative clause names the bridge) -> AGENTIC, so the loop can hop
    ("The football manager who recruited David Beckham managed Manchester United during what timeframe?",
     "AGENTIC", False),
    # plain one-hop questions stay on the one-shot path without the web
    ("Nimbus N2 的最大功耗是多少？", "RULE_PLANNER", False),
    ("那个广茂铁路全长大概多少公里来着？", "RULE_PLANNER", False),
    ("DM-2024 说明书在哪里下载？", "RULE_PLANNER", False),
]


@pytest.mark.parametrize("question, mode, web", PINS)
def test_pinned_routing_decision(question, mode, web):
    probe = routing_bench.probe_route(question, Settings())
    assert (probe.mode, probe.web_planned) == (mode, web), probe.explanation

