"""Web search backends: Tavily through tavily-python, or an honest "unavailable".

Both implement :class:`~docmind_core.backends.protocols.WebSearch` and never
raise: a missing key, a refused key, a timeout or a server error comes back as
a :class:`WebSearchResult` whose ``message`` says what happened, so a worker or
an agentic tool call can report it and the run carries on.

Web results become :class:`RetrievedChunk` with ``origin="web"`` and a chunk id
derived from the URL, so the same page found twice in one run dedupes.
"""

from __future__ import annotations

import hashlib
import threading

from typing import TYPE_CHECKING

from docmind_core.backends.protocols import WebSearchResult
from docmind_core.values import BackendStatus, RetrievedChunk

if TYPE_CHECKING:
    from tavily import TavilyClient

HOW_TO_ENABLE = "set TAVILY_API_KEY (and web.provider to auto or tavily)"


def web_chunk_id(url: str) -> str:
    """Stable id of a web page: the same URL always maps to the same chunk."""
    return "web:" + hashlib.sha1(url.encode("utf-8")).hexdigest()


class TavilyWebSearch:
    """Tavily's /search endpoint; ``base_url`` points the SDK at another host (tests use a local fake)."""

    name = "tavily"

    def __init__(self, api_key: str, base_url: str = "", timeout_s: float = 10.0):
        if not api_key:
            raise ValueError("TavilyWebSearch needs an API key; use UnavailableWebSearch without one")
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self._api_key = api_key
        self._local = threading.local()  # one client (one requests.Session) per thread: sessions are not thread-safe

    def _client(self) -> TavilyClient:
        client = getattr(self._local, "client", None)
        if client is None:
            # imported here, not with the module: only a configured Tavily needs the SDK (and requests), and the
            # UI's first page imports this module
            from tavily import TavilyClient

            # The SDK takes its base URL as a constructor argument; None keeps its default host.
            client = TavilyClient(api_key=self._api_key, api_base_url=self.base_url or None)
            self._local.client = client
        return client

    def search(self, query: str, max_results: int) -> WebSearchResult:
        import requests
        from tavily.errors import BadRequestError, ForbiddenError, InvalidAPIKeyError, UsageLimitExceededError
        from tavily.errors import TimeoutError as TavilyTimeout

        try:
            body = self._client().search(query, max_results=max_results, timeout=self.timeout_s)
        except InvalidAPIKeyError:
            return self._failed("the Tavily API key was refused (401); check TAVILY_API_KEY")
        except UsageLimitExceededError as exc:
            return self._failed(f"Tavily usage limit reached (429){_detail(exc)}")
        except ForbiddenError as exc:
            return self._failed(f"Tavily refused the request (403){_detail(exc)}")
        except BadRequestError as exc:
            return self._failed(f"Tavily rejected the query (400){_detail(exc)}")
        except (TavilyTimeout, requests.exceptions.Timeout):
            return self._failed(f"Tavily did not answer within {self.timeout_s:g} s")
        except requests.exceptions.HTTPError as exc:
            code = exc.response.status_code if exc.response is not None else "?"
            return self._failed(f"Tavily server error (HTTP {code})")
        except requests.exceptions.ConnectionError:
            return self._failed(f"cannot reach Tavily at {self.base_url or 'api.tavily.com'}")
        except Exception as exc:  # an unexpected body shape must not break the run either
            return self._failed(f"{type(exc).__name__}: {exc}")
        chunks = _to_chunks(body.get("results") or [], max_results)
        return WebSearchResult(available=True, chunks=chunks, message=f"{len(chunks)} web results")

    def status(self) -> BackendStatus:
        detail = f"base URL {self.base_url}" if self.base_url else "api.tavily.com"
        return BackendStatus(role="web_search", name="tavily", live=True, detail=detail)

    @staticmethod
    def _failed(reason: str) -> WebSearchResult:
        # available=True: the backend is configured, this one call failed.
        return WebSearchResult(available=True, chunks=[], message=f"web search failed: {reason}")


class UnavailableWebSearch:
    """Stands in when no web backend is configured; says why instead of raising."""

    name = "unavailable"

    def __init__(self, reason: str = "set TAVILY_API_KEY"):
        self.reason = reason

    def search(self, query: str, max_results: int) -> WebSearchResult:
        return WebSearchResult(available=False, chunks=[], message=f"web search unavailable: {self.reason}")

    def status(self) -> BackendStatus:
        return BackendStatus(role="web_search", name="none", live=False, detail=self.reason,
                             how_to_enable=HOW_TO_ENABLE)


def _to_chunks(results: list[dict], max_results: int) -> list[RetrievedChunk]:
    chunks: list[RetrievedChunk] = []
    seen: set[str] = set()
    for item in results:
        url = str(item.get("url") or "").strip()
        text = str(item.get("content") or "").strip()
        if not url or not text:
            continue
        chunk_id = web_chunk_id(url)
        if chunk_id in seen:
            continue
        seen.add(chunk_id)
        title = str(item.get("title") or "").strip() or url
        chunks.append(RetrievedChunk(chunk_id=chunk_id, document=title, text=text, origin="web", url=url,
                                     found_by=["web_search"]))
        if len(chunks) >= max_results:
            break
    return chunks


def _detail(exc: Exception) -> str:
    text = str(exc).strip()
    return f": {text}" if text else ""
