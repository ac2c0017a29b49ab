"""web_search: validate, check the provider can run, charge, ask it (then the fallback), record, return.

The provider is the one configured (``RESEARCH_SEARCH_PROVIDER``: OpenRouter's web plugin, its
server tool, or the operator's SearXNG; see ``jobs.providers``). What comes back is only cited
sources, each ``{title, url, snippet}``, cleaned the same way whichever provider answered. A search
with no usable source is an error, never an empty list, because an agent would read an empty list
as "nothing exists" when the search may simply not have run.

Fallback (``RESEARCH_SEARCH_FALLBACK``): when the primary ends in ``rate_limited`` or in a 5xx,
the search runs once on the fallback, within the same time budget and under the same single
charge; the primary stops retrying early enough to leave the fallback a share of that budget. The
result's ``provider``, the spend record and the metrics say which provider answered.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobs.providers.base import Deadline, Found, Provider, falls_back
from jobs.providers.choose import Providers, open_providers
from worker.config import Settings
from worker.errors import InvalidRequest, ResearchError
from worker.limits import DEFAULT_MAX_RESULTS, MAX_QUERY_CHARS, MAX_RESULTS, REPORT_ID, WEB_SEARCH
from worker.logs import fields
from worker.metrics import Metrics
from worker.runtime.context import JobContext, Runtime
from worker.state.budget import Tool
from worker.state.results import OK, About, WebSearch
from worker.state.spend import record_search

log = logging.getLogger("research.search")

# The part of the search's time the primary leaves for the fallback when one is configured.
FALLBACK_SHARE = 1 / 3
LARGEST_ARGUMENT = 2**63 - 1


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
        max_results = clamped_max_results(args.get("max_results", DEFAULT_MAX_RESULTS))
        org_id = args.get("org_id")
        # The org id becomes part of Redis keys, so it keeps the report id's rules.
        if org_id is not None and (not isinstance(org_id, str) or not REPORT_ID.fullmatch(org_id)):
            raise InvalidRequest("org_id must be 1-200 letters, digits and the characters - _ . :")
        return cls(query=query, max_results=max_results, org_id=org_id)


def clamped_max_results(value: object) -> int:
    # Past 64 bits a JSON integer cannot travel in a job (orjson refuses to write it) and arrives
    # as a float when it is read: either way the caller asked for a number out of range.
    if isinstance(value, float) and math.isfinite(value) and abs(value) > LARGEST_ARGUMENT:
        raise InvalidRequest(f"max_results is out of range; it is clamped to 0..{MAX_RESULTS}")
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequest(f"max_results must be an integer, not {type(value).__name__}")
    if abs(value) > LARGEST_ARGUMENT:
        raise InvalidRequest(f"max_results is out of range; it is clamped to 0..{MAX_RESULTS}")
    return min(max(value, 0), MAX_RESULTS)


class WebSearchTool:
    """The web_search job; its providers are built once per worker at start-up."""

    name = WEB_SEARCH
    params = ("query", "max_results", "org_id")

    def __init__(self) -> None:
        self._providers: Providers | None = None

    def deadline_s(self, settings: Settings) -> float:
        return settings.search_deadline_s

    def about(self, arguments: Mapping[str, Any]) -> About | None:
        query = arguments.get("query")
        return {"query": query.strip()[:MAX_QUERY_CHARS]} if isinstance(query, str) else None

    async def start(self, runtime: Runtime) -> None:
        self._providers = open_providers(runtime.settings)

    async def stop(self) -> None:
        if self._providers is not None:
            await self._providers.close()

    async def run(self, job: JobContext, arguments: dict[str, Any]) -> WebSearch:
        request = SearchRequest.parse(arguments)
        providers = self._providers
        if providers is None:
            raise RuntimeError("web_search was not started by this worker")
        primary = providers.primary
        if request.max_results == 0:
            return {"query": request.query, "results": [], "provider": primary.name.value}
        primary.check_ready(request.org_id)
        # Charged before the call: a call that fails may still have been billed.
        await job.charge(Tool.SEARCH)
        answered, found = await ask(primary, ready_fallback(providers, request), request, job)
        if found.spend is not None:
            await record_search(
                job.runtime, job.report_id, request.org_id, found.spend, provider=answered.name.value
            )
        await job.runtime.menu.record(job.report_id, [result["url"] for result in found.results])
        return {"query": request.query, "results": found.results, "provider": answered.name.value}


def ready_fallback(providers: Providers, request: SearchRequest) -> Provider | None:
    fallback = providers.fallback
    if fallback is None:
        return None
    try:
        fallback.check_ready(request.org_id)
    except ResearchError:
        return None
    return fallback


async def ask(
    primary: Provider, fallback: Provider | None, request: SearchRequest, job: JobContext
) -> tuple[Provider, Found]:
    """The primary's answer, or the fallback's after a failure another provider may not share."""
    budget_s = job.settings.search_timeout_s
    end = asyncio.get_running_loop().time() + budget_s
    leave = budget_s * FALLBACK_SHARE if fallback is not None else 0.0
    metrics = job.runtime.metrics
    try:
        found = await asking(primary, request, Deadline(end, end - leave, budget_s), metrics)
        return primary, found
    except ResearchError as failure:
        if fallback is None or not falls_back(failure):
            raise
        first = failure
    log.warning(
        "search provider failed; asking the fallback",
        extra=fields(provider=primary.name.value, fallback=fallback.name.value, failure=first.message),
    )
    try:
        found = await asking(fallback, request, Deadline(end, end, budget_s), metrics)
    except ResearchError as second:
        raise second.with_message(
            f"{second.message} (this was the fallback, {fallback.name.value}, after "
            f"{primary.name.value} failed with {first.kind.value})"
        ) from None
    return fallback, found


async def asking(provider: Provider, request: SearchRequest, deadline: Deadline, metrics: Metrics) -> Found:
    """One provider's search, counted by provider and outcome."""
    try:
        found = await provider.search(request.query, request.max_results, request.org_id, deadline)
    except ResearchError as failure:
        metrics.provider_searches.labels(provider.name.value, failure.kind.value).inc()
        raise
    metrics.provider_searches.labels(provider.name.value, OK).inc()
    return found
