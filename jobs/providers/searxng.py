"""``searxng``: the operator's own SearXNG instance, through its JSON search API.

One search is ``GET {SEARXNG_URL}/search?q=<query>&format=json``. The instance is the operator's,
trusted like the OpenRouter base URL (it does not go through the fetch guardian), but its answer is
read like any upstream answer (``jobs.providers.upstream``): bounded in size and time, no redirect
followed, retried on 429 and 5xx. SearXNG answers 403 when the instance does not serve the JSON
format (``search.formats`` in its settings.yml), and 429 when its limiter refuses the worker.

Each of its ``results`` becomes ``{title, url, snippet}`` from ``title``, ``url`` and ``content``,
through the same cleaning as every provider. SearXNG is free: nothing is added to the spend.
"""

from __future__ import annotations

import logging
from typing import Any

from jobs.providers.base import NOT_EVIDENCE, Deadline, Found
from jobs.providers.cleaning import Masker, citation, first_distinct
from jobs.providers.upstream import Answer, Upstream, json_object, raise_for, retrying, status_failure
from worker.config import SearchProvider, Settings, redact_url
from worker.errors import ResearchError, UpstreamError
from worker.logs import fields
from worker.state.result_records import Citation

log = logging.getLogger("research.search")

PEER = "the SearXNG instance"
HEADERS = {"Accept": "application/json"}


class SearxngSearch:
    name = SearchProvider.SEARXNG

    def __init__(self, endpoint: str, upstream: Upstream, masker: Masker) -> None:
        self.endpoint = endpoint
        self.upstream = upstream
        self.masker = masker

    @classmethod
    def open(cls, settings: Settings) -> SearxngSearch:
        if settings.searxng_url is None:
            raise ValueError("SEARXNG_URL is not set")  # Settings.check_search stops start-up first
        log.info("SearXNG client ready", extra=fields(url=redact_url(settings.searxng_url)))
        return cls(
            f"{settings.searxng_url}/search", Upstream.open(settings, PEER), Masker.from_settings(settings)
        )

    async def close(self) -> None:
        await self.upstream.close()

    def check_ready(self, org_id: str | None) -> None:
        return None

    async def search(self, query: str, max_results: int, org_id: str | None, deadline: Deadline) -> Found:
        async def attempt() -> list[Citation]:
            answer = await self.upstream.send(
                "GET", self.endpoint, params={"q": query, "format": "json"}, headers=HEADERS
            )
            if answer.status != 200:
                raise_for(answer, failure(answer.status))
            return results(answer, max_results, self.masker)

        return Found(await retrying(attempt, deadline, PEER), spend=None)


def failure(status: int) -> ResearchError:
    if status == 403:
        return UpstreamError(
            f"{PEER} refused the search (HTTP 403); it may not serve the JSON format, which its "
            f"settings.yml must list under search.formats; {NOT_EVIDENCE}"
        )
    return status_failure(status, PEER)


def results(answer: Answer, limit: int, masker: Masker) -> list[Citation]:
    data = json_object(answer.body, unusable)
    listed = data.get("results")
    if not isinstance(listed, list):
        raise unusable("it has no results list")
    found = first_distinct((result_citation(item, masker) for item in listed), limit)
    if found:
        return found
    silent = data.get("unresponsive_engines")
    engines = f" ({len(silent)} of its engines did not answer)" if isinstance(silent, list) and silent else ""
    raise UpstreamError(f"{PEER} returned no usable result{engines}; {NOT_EVIDENCE}")


def result_citation(item: Any, masker: Masker) -> Citation | None:
    if not isinstance(item, dict):
        return None
    return citation(item.get("url"), item.get("title"), item.get("content"), masker)


def unusable(why: str) -> UpstreamError:
    return UpstreamError(f"the answer of {PEER} was unusable ({why}); {NOT_EVIDENCE}")
