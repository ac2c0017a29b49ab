"""web_search: validate, charge, ask OpenRouter's web plugin, keep only its citations, return.

The model's prose is discarded: what comes back is the plugin's ``url_citation`` annotations, each
as ``{title, url, snippet}``, in the provider's order, exact-duplicate urls dropped, cut at
``max_results``. A search with no usable citation is an error, never an empty list, because an
agent would read an empty list as "nothing exists" when the search may simply not have run.

Title and snippet are third-party text: control and Unicode format characters (zero-width, bidi
controls, tag characters) are dropped and whitespace collapsed, so nothing hidden reaches the agent;
the snippet is cut at SNIPPET_MAX_CHARS, at a word boundary when one is near, marked with "…".
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from jobs.providers.openrouter import NOT_EVIDENCE, Completion, OpenRouter
from worker.budget import Tool
from worker.config import Settings
from worker.context import JobContext, Runtime
from worker.errors import InvalidRequest, UpstreamError
from worker.limits import DEFAULT_MAX_RESULTS, MAX_QUERY_CHARS, MAX_RESULTS, MAX_URL_LENGTH, REPORT_ID
from worker.results import About, Citation, WebSearch
from worker.spend import record_search

TITLE_MAX_CHARS = 300
SNIPPET_MAX_CHARS = 500
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Co"})
PROVIDER = "openrouter-plugin"


@dataclass(frozen=True)
class SearchRequest:
    query: str
    max_results: int
    org_id: str | None

    @classmethod
    def parse(cls, args: Mapping[str, Any]) -> SearchRequest:
        query = args.get("query")
        if query is None:
            raise InvalidRequest("web_search needs a query")
        if not isinstance(query, str):
            raise InvalidRequest(f"query must be a string, not {type(query).__name__}")
        query = query.strip()
        if not query:
            raise InvalidRequest("query is empty")
        if len(query) > MAX_QUERY_CHARS:
            raise InvalidRequest(f"query is longer than {MAX_QUERY_CHARS:,} characters")
        max_results = args.get("max_results", DEFAULT_MAX_RESULTS)
        if isinstance(max_results, bool) or not isinstance(max_results, int):
            raise InvalidRequest(f"max_results must be an integer, not {type(max_results).__name__}")
        org_id = args.get("org_id")
        # The org id becomes part of Redis keys and metric labels, so it keeps the report id's rules.
        if org_id is not None and (not isinstance(org_id, str) or not REPORT_ID.fullmatch(org_id)):
            raise InvalidRequest("org_id must be 1-200 letters, digits and the characters - _ . :")
        return cls(query=query, max_results=min(max(max_results, 0), MAX_RESULTS), org_id=org_id)


class WebSearchTool:
    """The web_search job; its provider client is built once per worker at start-up."""

    name = "web_search"
    params = ("query", "max_results", "org_id")

    def __init__(self) -> None:
        self._provider: OpenRouter | None = None

    def deadline_s(self, settings: Settings) -> float:
        return settings.search_deadline_s

    def about(self, arguments: Mapping[str, Any]) -> About | None:
        query = arguments.get("query")
        return {"query": query.strip()[:MAX_QUERY_CHARS]} if isinstance(query, str) else None

    async def start(self, runtime: Runtime) -> None:
        self._provider = await OpenRouter.open(runtime.settings)

    async def stop(self) -> None:
        if self._provider is not None:
            await self._provider.close()

    async def run(self, job: JobContext, arguments: dict[str, Any]) -> WebSearch:
        request = SearchRequest.parse(arguments)
        provider = self._provider
        if provider is None:
            raise RuntimeError("web_search was not started by this worker")
        if request.max_results == 0:
            return {"query": request.query, "results": [], "provider": PROVIDER}
        key = provider.key_for(request.org_id)
        # Charged before the call: a call that fails may still have been billed.
        await job.charge(Tool.SEARCH)
        completion = await provider.search(request.query, request.max_results, request.org_id, key)
        await record_search(job.runtime, job.report_id, request.org_id, completion.spend)
        results = citations(completion, request.max_results)
        await job.runtime.menu.record(job.report_id, [result["url"] for result in results])
        return {"query": request.query, "results": results, "provider": PROVIDER}


def citations(completion: Completion, limit: int) -> list[Citation]:
    if completion.finish_reason == "error":
        said = f": {completion.error}" if completion.error else ""
        raise UpstreamError(f"the search provider's answer ended in an error{said}; {NOT_EVIDENCE}")
    results: list[Citation] = []
    seen: set[str] = set()
    for annotation in completion.annotations:
        cited = url_citation(annotation)
        if cited is None or cited["url"] in seen:
            continue
        seen.add(cited["url"])
        results.append(cited)
        if len(results) == limit:
            break
    if not results:
        raise UpstreamError(f"the search returned no usable citation; {NOT_EVIDENCE}")
    return results


def url_citation(annotation: object) -> Citation | None:
    if not isinstance(annotation, dict) or annotation.get("type") != "url_citation":
        return None
    cited = annotation.get("url_citation")
    if not isinstance(cited, dict):
        return None
    url = usable_url(cited.get("url"))
    if url is None:
        return None
    return {
        "title": plain_text(cited.get("title"), TITLE_MAX_CHARS),
        "url": url,
        "snippet": plain_text(cited.get("content"), SNIPPET_MAX_CHARS),
    }


def usable_url(value: object) -> str | None:
    """An absolute http(s) URL with a host, of a length a fetch would accept; else None."""
    if not isinstance(value, str):
        return None
    url = value.strip()
    if not url or len(url) > MAX_URL_LENGTH or any(ch.isspace() or not ch.isprintable() for ch in url):
        return None
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        return None
    if parts.scheme.lower() not in {"http", "https"} or not host:
        return None
    return url


def plain_text(value: object, limit: int) -> str:
    if not isinstance(value, str):
        return ""
    visible = "".join(ch for ch in value if ch.isspace() or unicodedata.category(ch) not in HIDDEN_CATEGORIES)
    text = " ".join(visible.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip() + "…"
