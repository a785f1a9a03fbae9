"""Web search through the real tavily-python SDK against a fake Tavily server on 127.0.0.1."""

from __future__ import annotations

import time

import pytest

from docmind_core.backends.factory import build_web_search
from docmind_core.backends.web_search import (
    TavilyWebSearch,
    UnavailableWebSearch,
    web_chunk_id,
)
from docmind_core.settings import Settings
from tests.fakes.tavily_server import ScriptedReply, result


def test_results_are_mapped_to_web_chunks(tavily):
    tavily.default_results = [
        result("DocMind 2026 release", "https://example.org/release", "DocMind 2.0 shipped in March 2026."),
        result("没有正文", "https://example.org/empty", ""),  # no content: dropped
        result("Duplicate", "https://example.org/release", "same URL again"),  # same page: deduped
        result("", "https://example.org/untitled", "A page without a title."),
    ]
    web = TavilyWebSearch("tvly-test", base_url=tavily.base_url, timeout_s=5)
    out = web.search("latest DocMind release", max_results=5)

    assert out.available and out.message == "2 web results"
    first, second = out.chunks
    assert first.origin == "web" and second.origin == "web"
    assert first.document == "DocMind 2026 release"
    assert first.url == "https://example.org/release"
    assert first.text == "DocMind 2.0 shipped in March 2026."
    assert first.chunk_id == web_chunk_id("https://example.org/release")
    assert first.chunk_id.startswith("web:") and len(first.chunk_id) == 4 + 40
    assert second.document == "https://example.org/untitled"  # the URL stands in for a missing title

    sent = tavily.requests[-1]
    assert sent.path == "/search"
    assert sent.headers["Authorization"] == "Bearer tvly-test"
    assert sent.body["query"] == "latest DocMind release"
    assert sent.body["max_results"] == 5


def test_max_results_is_respected(tavily):
    tavily.default_results = [result(f"page {i}", f"https://example.org/{i}", f"text {i}") for i in range(8)]
    web = TavilyWebSearch("tvly-test", base_url=tavily.base_url)
    assert len(web.search("pages", max_results=3).chunks) == 3


def test_no_key_means_unavailable_not_an_exception():
    web = build_web_search(Settings().web, env={})
    assert isinstance(web, UnavailableWebSearch)
    out = web.search("anything", 5)
    assert out.available is False and out.chunks == []
    assert out.message == "web search unavailable: set TAVILY_API_KEY"
    status = web.status()
    assert status.live is False and "TAVILY_API_KEY" in status.how_to_enable


def test_provider_off_wins_over_a_key():
    web = build_web_search(Settings().with_overrides({"web.provider": "off"}).web, env={"TAVILY_API_KEY": "k"})
    assert "turned off" in web.search("q", 3).message


def test_build_uses_key_and_configured_base_url(tavily):
    tavily.default_results = [result("t", "https://example.org/a", "body")]
    settings = Settings().with_overrides({"web.tavily_base_url": tavily.base_url})
    web = build_web_search(settings.web, env={"TAVILY_API_KEY": "tvly-test"})
    assert isinstance(web, TavilyWebSearch) and web.status().live
    assert len(web.search("q", 3).chunks) == 1


def test_server_error_gives_a_clear_message(tavily):
    tavily.reply(ScriptedReply(status=500, error="boom"))
    out = TavilyWebSearch("tvly-test", base_url=tavily.base_url).search("q", 3)
    assert out.chunks == [] and out.message == "web search failed: Tavily server error (HTTP 500)"


@pytest.mark.parametrize("status, expected", [
    (429, "usage limit reached (429): slow down"),
    (400, "rejected the query (400): slow down"),
])
def test_client_errors_are_explained(tavily, status, expected):
    tavily.reply(ScriptedReply(status=status, error="slow down"))
    out = TavilyWebSearch("tvly-test", base_url=tavily.base_url).search("q", 3)
    assert expected in out.message


def test_wrong_key_is_explained(tavily):
    out = TavilyWebSearch("tvly-wrong", base_url=tavily.base_url).search("q", 3)
    assert "API key was refused" in out.message


def test_timeout_is_bounded_and_reported(tavily):
    tavily.reply(ScriptedReply(delay_s=2.0, results=[result("t", "https://example.org/a", "late")]))
    web = TavilyWebSearch("tvly-test", base_url=tavily.base_url, timeout_s=0.5)
    started = time.monotonic()
    out = web.search("q", 3)
    assert time.monotonic() - started < 1.8
    assert out.chunks == [] and "did not answer within 0.5 s" in out.message


def test_unreachable_server_is_reported():
    web = TavilyWebSearch("tvly-test", base_url="http://127.0.0.1:9", timeout_s=2)
    out = web.search("q", 3)
    assert out.chunks == [] and "cannot reach Tavily" in out.message


def test_parallel_searches_from_several_threads(tavily):
    from concurrent.futures import ThreadPoolExecutor

    tavily.default_results = [result("t", "https://example.org/a", "body")]
    web = TavilyWebSearch("tvly-test", base_url=tavily.base_url, timeout_s=5)
    with ThreadPoolExecutor(max_workers=6) as pool:
        outs = list(pool.map(lambda i: web.search(f"query {i}", 3), range(12)))
    assert all(len(o.chunks) == 1 for o in outs)
    assert sorted(r.body["query"] for r in tavily.requests) == sorted(f"query {i}" for i in range(12))
