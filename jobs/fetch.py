"""fetch_page: validate, check the menu, charge, fetch through the guardian (or the cache), read,
record the links.

The job reads like its data flow. The checks that need no network (the URL's form and scheme, an
IP literal's address, the menu) run before the budget is charged, so they cost the report nothing;
resolving a name is the fetch's first network I/O, so a name that resolves to a refused address
is refused after the charge. The shared page cache (``worker.state.page_cache``) is asked only after the
menu and the charge, so a cached page is never a way around either; a cache miss fetches with one
of the host's turns held (``worker.state.politeness``) and reduces the page, and that is what the cache
keeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp.abc import AbstractResolver

from jobs.fetcher import Fetched, Fetcher, FetchLimits
from jobs.reader.document import Document, build_document
from worker.config import Settings
from worker.errors import GuardianRefusal, HttpStatus, InvalidRequest, Timeout, UrlNotInMenu
from worker.guardian.connector import guarded_session
from worker.guardian.policy import AddressPolicy
from worker.guardian.redirects import HopRule
from worker.guardian.urls import SCHEME, Target, canonical_url, check_url
from worker.limits import EXTRACT_MODES, FETCH_PAGE, MAX_URL_LENGTH
from worker.logs import fields
from worker.net.cache_control import may_store
from worker.runtime.context import JobContext, Runtime
from worker.state.budget import Tool
from worker.state.menu import Menu
from worker.state.page_cache import Fresh, PageCache
from worker.state.page_entry import Page
from worker.state.politeness import Politeness
from worker.state.results import About, FetchPage

log = logging.getLogger("research.fetch")

# Waits inside the job (for another job's fetch, for a host) end this long before the job's own
# deadline, so the job ends with their message rather than the envelope's.
DEADLINE_MARGIN_S = 0.5
# The least CPU a reduction gets, however late its slot came: enough for a first slice of text.
MIN_REDUCE_S = 0.05


@dataclass(frozen=True)
class FetchRequest:
    url: str
    extract: str
    fresh: bool

    @classmethod
    def parse(cls, args: Mapping[str, Any]) -> FetchRequest:
        url = args.get("url")
        if url is None:
            raise InvalidRequest("fetch_page needs a url")
        if not isinstance(url, str):
            raise InvalidRequest(f"url must be a string, not {type(url).__name__}")
        if not url.strip():
            raise InvalidRequest("url is empty")
        if len(url) > MAX_URL_LENGTH:
            raise InvalidRequest(f"url is longer than {MAX_URL_LENGTH:,} characters")
        if SCHEME.match(url.strip()) is None:
            # Not a URL at all ("not a url", "example.org/page"): the argument is wrong, not the
            # destination, so it is an invalid request rather than a guardian refusal.
            raise InvalidRequest("url must be an absolute https URL, such as https://example.org/page")
        extract = args.get("extract", "main")
        if extract not in EXTRACT_MODES:
            raise InvalidRequest("extract must be 'main' or 'full'")
        fresh = args.get("fresh", False)
        if not isinstance(fresh, bool):
            raise InvalidRequest(f"fresh must be true or false, not {type(fresh).__name__}")
        return cls(url=url.strip(), extract=str(extract), fresh=fresh)


@dataclass(frozen=True)
class _Parts:
    """What the tool builds once per worker at start-up."""

    fetcher: Fetcher  # the guarded session
    pages: PageCache
    hosts: Politeness


class FetchPageTool:
    """The fetch_page job. Its parts are built once per worker at start-up; tests hand it a fake
    resolver, production uses the system's."""

    name = FETCH_PAGE
    params = ("url", "extract", "fresh")

    def __init__(self, resolver: AbstractResolver | None = None) -> None:
        self._resolver = resolver
        self._parts: _Parts | None = None

    def deadline_s(self, settings: Settings) -> float:
        return settings.fetch_deadline_s

    def about(self, arguments: Mapping[str, Any]) -> About | None:
        url = arguments.get("url")
        if not isinstance(url, str):
            return None
        url = url.strip()[:MAX_URL_LENGTH]
        return {"url": canonical_url(url) or url}

    async def start(self, runtime: Runtime) -> None:
        settings = runtime.settings
        policy = AddressPolicy(settings.guardian_allow_cidrs)
        if policy.allow_ranges:
            log.warning(
                "GUARDIAN OPERATOR ALLOW RANGES ACTIVE: these ranges are fetched despite the deny list",
                extra=fields(allow=[str(r) for r in policy.allow_ranges]),
            )
        if not runtime.menu.enabled:
            log.warning("the URL menu is off: reports may fetch URLs they have not seen")
        limits = FetchLimits(
            max_bytes=settings.fetch_max_bytes,
            max_pdf_bytes=settings.fetch_max_pdf_bytes,
            max_redirects=settings.fetch_max_redirects,
        )
        self._parts = _Parts(
            fetcher=Fetcher(guarded_session(settings, policy, self._resolver), policy, limits),
            pages=PageCache(runtime.redis, settings, runtime.metrics),
            hosts=Politeness(runtime.redis, settings, runtime.metrics),
        )
        self._parts.hosts.start()

    async def stop(self) -> None:
        if self._parts is not None:
            await self._parts.hosts.stop()
            await self._parts.fetcher.close()

    async def run(self, job: JobContext, arguments: dict[str, Any]) -> FetchPage:
        request = FetchRequest.parse(arguments)
        parts = self._started()
        until = job.deadline - DEADLINE_MARGIN_S
        metrics = job.runtime.metrics
        menu = job.runtime.menu
        try:
            target = check_url(request.url, parts.fetcher.policy)
            await require_on_menu(menu, job.report_id, target)
            await job.charge(Tool.FETCH)
            served = await parts.pages.serve(
                target,
                request.extract,
                fresh=request.fresh,
                until=until,
                may_follow=menu_rule(menu, job.report_id),
                fetch=functools.partial(self._fetch_and_read, job, target, request.extract, until=until),
            )
        except GuardianRefusal as refusal:
            metrics.guardian_refusals.labels(refusal.reason.value).inc()
            raise
        if served.page.links:
            await menu.record(job.report_id, served.page.links, already_canonical=True)
        return page_fields(served.page, cached=served.cached)

    async def _fetch_and_read(
        self, job: JobContext, target: Target, extract: str, may_follow: HopRule, until: float
    ) -> Fresh:
        """What a cache miss does: fetch through the guardian with a turn at the host, then reduce."""
        fetched = await self._fetch(job, self._started(), target, may_follow, until)
        job.runtime.metrics.bytes_read.observe(len(fetched.body))
        # The worker's CPU slots (worker.runtime.cpu_slots): smallest body first, small ones in a lane of
        # their own. A page that waited long for its slot reduces with the time it has left, and
        # comes back truncated rather than not at all.
        async with job.runtime.cpu_slots.slot(len(fetched.body)):
            left = until - asyncio.get_running_loop().time()
            document = await build_document(
                fetched.body,
                fetched.content_type,
                fetched.final.url,
                extract=extract,
                max_chars=job.settings.fetch_max_chars,
                cpu_budget_s=max(MIN_REDUCE_S, min(job.settings.reduce_cpu_budget_s, left)),
                body_truncated=fetched.truncated,
            )
        if document.unresolved_links:
            # Counted, never quoted: the links are the page's text.
            log.info(
                "dropped links the URL parser could not read",
                extra=fields(job_id=job.job_id, host=target.host, count=document.unresolved_links),
            )
        return Fresh(page_of(target, fetched, document), storable=may_store(fetched.cache_control))

    async def _fetch(
        self, job: JobContext, parts: _Parts, target: Target, may_follow: HopRule, until: float
    ) -> Fetched:
        """The network part, under one time bound: the wait for a turn at the host, then the GET."""
        loop = asyncio.get_running_loop()
        seconds = max(0.0, min(job.settings.fetch_timeout_s, until - loop.time()))
        answering = [target]  # the host whose answer ends the chain, for a Retry-After

        async def noting(current: Target, following: Target) -> bool:
            allowed = await may_follow(current, following)
            if allowed:
                answering.append(following)
            return allowed

        async with time_bound(seconds, target), parts.hosts.turn(target, loop.time() + seconds):
            try:
                return await parts.fetcher.get(target, noting)
            except HttpStatus as answer:
                await parts.hosts.hold_if_asked(answering[-1], answer.status or 0, answer.retry_after_s)
                raise

    def _started(self) -> _Parts:
        if self._parts is None:
            raise RuntimeError("fetch_page was not started by this worker")
        return self._parts


def page_of(target: Target, fetched: Fetched, document: Document) -> Page:
    """The reduced page as the cache keeps it, fetched now."""
    pages_read = document.pages_read if document.pages_read is not None else document.pages
    return Page(
        url=target.url,
        final_url=fetched.final.url,
        status=fetched.status,
        content_type=document.content_type,
        title=document.title,
        text=document.text,
        truncated=document.truncated,
        redirects=fetched.redirects,
        bytes_read=len(fetched.body),
        fetched_at=dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        extraction=document.extraction,
        links=tuple(document.links),
        hidden_removed=document.hidden_removed,
        pages=document.pages,
        pages_read=pages_read if document.pages is not None else None,
    )


def page_fields(page: Page, *, cached: bool) -> FetchPage:
    result: FetchPage = {
        "url": page.url,
        "final_url": page.final_url,
        "status": page.status,
        "content_type": page.content_type,
        "title": page.title,
        "text": page.text,
        "truncated": page.truncated,
        "redirects": page.redirects,
        "bytes_read": page.bytes_read,
        "fetched_at": page.fetched_at,
        "extraction": page.extraction,
        "links": list(page.links),
        "hidden_removed": page.hidden_removed,
        "cached": cached,
    }
    if page.pages is not None:
        result["pages"] = page.pages
        result["pages_read"] = page.pages_read if page.pages_read is not None else page.pages
    return result


async def require_on_menu(menu: Menu, report_id: str, target: Target) -> None:
    if menu.enabled and not await menu.contains(report_id, target.url):
        raise UrlNotInMenu(
            "this report has not seen that URL: fetch the url of a search result, a link from a "
            "fetched page, or a URL from the briefing"
        )


def menu_rule(menu: Menu, report_id: str) -> HopRule:
    """The URL menu's rule for a redirect to another site: its target must be on the report's menu."""

    async def may_follow(current: Target, following: Target) -> bool:
        return not menu.enabled or await menu.contains(report_id, following.url)

    return may_follow


@contextlib.asynccontextmanager
async def time_bound(seconds: float, target: Target) -> AsyncIterator[None]:
    """One bound for the whole chain: DNS, connects, redirects and the body of every hop."""
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError:
        raise Timeout(f"fetching from {target.host} took longer than {seconds:g} s") from None
