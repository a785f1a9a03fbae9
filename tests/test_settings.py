"""settings.py: the keys of issue 21 (top_k range, tool rounds, understanding) and the local_small profile."""

from __future__ import annotations

import pytest

from docmind_core.errors import ConfigError
from docmind_core.settings import Settings


def test_a_top_k_floor_above_the_ceiling_is_refused():
    with pytest.raises(ConfigError, match="search_top_k_min .* must not exceed"):
        Settings().with_overrides({"agentic.search_top_k_min": 9, "agentic.search_top_k_max": 8})


def test_local_small_shortens_tool_rounds_and_skips_confident_understanding():
    small = Settings().with_overrides({"llm.profile": "local_small"})
    assert (small.agentic.round_max_tokens, small.agentic.compact_tools, small.llm.understanding) == (
        128, True, "rules_when_confident")
    assert small.agentic.search_top_k_min == small.agentic.search_top_k == 5 and small.agentic.search_question
    assert small.rag.context_max_tokens < Settings().rag.context_max_tokens
    mine = Settings().with_overrides({"llm.profile": "local_small", "llm.understanding": "model"})
    assert mine.llm.understanding == "model"  # a key set by hand wins over the profile
