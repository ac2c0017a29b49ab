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

Spend: every answer the provider billed is recorded, an answer that cited nothing usable (an
``upstream_error`` for the agent, a ``PaidFailure`` here) as well as one that did.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobs.facts import query_about
from jobs.providers.base import Deadline, Found, PaidFailure, Provider, falls_back
from jobs.providers.choose import Providers, open_providers
from jobs.providers.upstream import HEARD, Heard
from worker.archive.service import SharedArchive
from worker.archive.writer import DROPPED, Archive, Receipt
from worker.config import Settings, redact_url
from worker.errors import DestinationBlocked, InvalidRequest, ResearchError, SchemeNotAllowed
from worker.guardian.domains import DomainPolicy
from worker.guardian.urls import parse_https_url
from worker.limits import DEFAULT_MAX_RESULTS, MAX_QUERY_CHARS, MAX_RESULTS, REPORT_ID, WEB_SEARCH
from worker.logs import fields
from worker.runtime.context import JobContext, Runtime
from worker.serialization import JobArguments
from worker.state.budget import Tool
from worker.state.report_domains import ReportDomains, report_domains
from worker.state.result_records import OK, About, Citation, SearchFields
from worker.state.spend import record_search
from worker.tracing.phases import SEARCH_PROVIDER, phase

log = logging.getLogger("research.search")

# The part of the search's time the primary leaves for the fallback when one is configured.
FALLBACK_SHARE = 1 / 3
LARGEST_ARGUMENT = 2**63 - 1
# Refused, not clamped: a number this large is not read as a count at all.
TOO_LARGE = f"max_results is out of range and was refused; give an integer from 0 to {MAX_RESULTS}"


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
        raise InvalidRequest(TOO_LARGE)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequest(f"max_results must be an integer, not {type(value).__name__}")
    if abs(value) > LARGEST_ARGUMENT:
        raise InvalidRequest(TOO_LARGE)
    return min(max(value, 0), MAX_RESULTS)


class WebSearchTool:
    """The web_search job; its providers are built once per worker at start-up."""

    name = WEB_SEARCH
    params = ("query", "max_results", "org_id")

    def __init__(self, archive: SharedArchive | None = None) -> None:
        self._providers: Providers | None = None
        self._domains: ReportDomains | None = None
        self._shared = archive if archive is not None else SharedArchive()
        self._archive: Archive | None = None

    def deadline_s(self, settings: Settings) -> float:
        return settings.search_deadline_s

    def about(self, arguments: Mapping[str, Any]) -> About | None:
        return query_about(arguments)

    async def start(self, runtime: Runtime) -> None:
        self._providers = open_providers(runtime.settings)
        self._domains = report_domains(runtime.redis, runtime.settings)
        self._archive = self._shared.open(runtime.settings, runtime.redis, runtime.metrics)

    def _started_domains(self) -> ReportDomains:
        if self._domains is None:
            raise RuntimeError("web_search was not started by this worker")
        return self._domains

    async def stop(self) -> None:
        if self._providers is not None:
            await self._providers.close()
        if self._archive is not None:
            self._archive = None
            await self._shared.close()

    async def run(self, job: JobContext, arguments: JobArguments) -> SearchFields:
        request = SearchRequest.parse(arguments)
        providers = self._providers
        if providers is None:
            raise RuntimeError("web_search was not started by this worker")
        primary = providers.primary
        if request.max_results == 0:
            return SearchFields(request.query, (), primary.name.value, asked=False)
        primary.check_ready(request.org_id)
        # Charged before the call: a call that fails may still have been billed.
        await job.charge(Tool.SEARCH)
        # Results on a refused domain never reach the agent, nor the menu. They are filtered
        # before the cut to max_results, so with domain lists in force the provider is asked for
        # as many as a search may bring (one call, within the same charge): blocked results
        # would otherwise crowd out allowed ones.
        domains = await self._started_domains().policy(job.report_id)
        asked = request if domains.unrestricted else dataclasses.replace(request, max_results=MAX_RESULTS)
        heard: list[Heard] = []
        token = HEARD.set(heard)
        try:
            answered, found = await ask(primary, ready_fallback(providers, asked), asked, job)
        finally:
            HEARD.reset(token)
        if found.spend is not None:
            await record_search(
                job.runtime, job.report_id, request.org_id, found.spend, provider=answered.name.value
            )
        allowed = [result for result in found.results if on_allowed_domain(domains, result["url"])]
        results = allowed[: request.max_results]
        receipt = self._keep(job.report_id, heard, request, answered.name.value, results, job.job_id)
        await job.runtime.menu.record(job.report_id, [result["url"] for result in results])
        record = await receipt.accepted()
        return SearchFields(request.query, tuple(results), answered.name.value, record)

    def _keep(
        self,
        report_id: str,
        heard: list[Heard],
        request: SearchRequest,
        provider: str,
        results: list[Citation],
        job_id: str | None = None,
    ) -> Receipt:
        """The answer the results came from (the last one heard), as received, to the archive."""
        if self._archive is None or not self._archive.enabled or not heard:
            return DROPPED
        last = heard[-1]
        summary = {
            "query": request.query,
            "max_results": request.max_results,
            "provider": provider,
            "status": last.answer.status,
            "results": results,
        }
        return self._archive.searched(
            report_id,
            endpoint=redact_url(last.url),
            content_type=last.answer.content_type,
            answer=last.answer.body,
            summary=summary,
            job_id=job_id,
        )


def on_allowed_domain(domains: DomainPolicy, url: str) -> bool:
    """Whether a result's host passes the domain lists (with lists set, an unreadable one does not)."""
    if domains.unrestricted:
        return True
    scheme, sep, rest = url.partition("://")
    try:
        host = parse_https_url(f"https://{rest}" if sep and scheme.lower() == "http" else url).host
    except (DestinationBlocked, SchemeNotAllowed):
        return False
    return domains.refusal(host) is None


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
    try:
        found = await asking(primary, request, Deadline(end, end - leave, budget_s), job)
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
        found = await asking(fallback, request, Deadline(end, end, budget_s), job)
    except ResearchError as second:
        raise second.with_message(
            f"{second.message} (this was the fallback, {fallback.name.value}, after "
            f"{primary.name.value} failed with {first.kind.value})"
        ) from None
    return fallback, found


async def asking(provider: Provider, request: SearchRequest, deadline: Deadline, job: JobContext) -> Found:
    """One provider's search, counted by provider and outcome; a failed answer that was billed has
    its spend recorded before the failure is the result."""
    metrics = job.runtime.metrics
    try:
        try:
            with phase(SEARCH_PROVIDER):
                found = await provider.search(request.query, request.max_results, request.org_id, deadline)
        except PaidFailure as paid:
            await record_search(
                job.runtime, job.report_id, request.org_id, paid.spend, provider=provider.name.value
            )
            raise
    except ResearchError as failure:
        metrics.provider_searches.labels(provider.name.value, failure.kind.value).inc()
        raise
    metrics.provider_searches.labels(provider.name.value, OK).inc()
    return found
