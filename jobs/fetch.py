"""fetch_page: validate, check the menu, charge, fetch through the guardian, read, record the links.

The job reads like its data flow. The checks that need no network (the URL's form and scheme, an
IP literal's address, the menu) run before the budget is charged, so they cost the report nothing;
resolving a name is the fetch's first network I/O, so a name that resolves to a refused address
is refused after the charge.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp.abc import AbstractResolver

from jobs.fetcher import Fetcher, FetchLimits, HopRule
from jobs.reader.document import Document, build_document
from worker.budget import Tool
from worker.config import Settings
from worker.context import JobContext, Runtime
from worker.errors import GuardianRefusal, InvalidRequest, Timeout, UrlNotInMenu
from worker.guardian.connector import guarded_session
from worker.guardian.policy import AddressPolicy
from worker.guardian.urls import SCHEME, Target, canonical_url, check_url
from worker.limits import EXTRACT_MODES, MAX_URL_LENGTH
from worker.logs import fields
from worker.menu import Menu
from worker.results import About, FetchPage

log = logging.getLogger("research.fetch")


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


class FetchPageTool:
    """The fetch_page job. Its fetcher (the guarded session) is built once per worker at start-up;
    tests hand it a fake resolver, production uses the system's."""

    name = "fetch_page"
    params = ("url", "extract", "fresh")

    def __init__(self, resolver: AbstractResolver | None = None) -> None:
        self._resolver = resolver
        self._fetcher: Fetcher | None = None
        # Reduction is CPU-bound and yields to the loop in slices, so more than a few at once adds
        # no throughput, only memory (each holds its decoded page and token buffers).
        self._reduce_slots: asyncio.Semaphore | None = None

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
        self._fetcher = Fetcher(guarded_session(settings, policy, self._resolver), policy, limits)
        self._reduce_slots = asyncio.Semaphore(settings.reduce_slots)

    async def stop(self) -> None:
        if self._fetcher is not None:
            await self._fetcher.close()

    async def run(self, job: JobContext, arguments: dict[str, Any]) -> FetchPage:
        request = FetchRequest.parse(arguments)
        fetcher, slots = self._started()
        metrics = job.runtime.metrics
        menu = job.runtime.menu
        try:
            target = check_url(request.url, fetcher.policy)
            await require_on_menu(menu, job.report_id, target)
            await job.charge(Tool.FETCH)
            async with time_bound(job.settings.fetch_timeout_s, target):
                fetched = await fetcher.get(target, menu_rule(menu, job.report_id))
        except GuardianRefusal as refusal:
            metrics.guardian_refusals.labels(refusal.reason.value).inc()
            raise
        metrics.bytes_read.observe(len(fetched.body))
        async with slots:
            document = await build_document(
                fetched.body,
                fetched.content_type,
                fetched.final.url,
                extract=request.extract,
                max_chars=job.settings.fetch_max_chars,
                cpu_budget_s=job.settings.reduce_cpu_budget_s,
                body_truncated=fetched.truncated,
            )
        if document.links:
            await menu.record(job.report_id, document.links)
        return page_fields(
            target.url, fetched.final.url, fetched.status, fetched.redirects, len(fetched.body), document
        )

    def _started(self) -> tuple[Fetcher, asyncio.Semaphore]:
        if self._fetcher is None or self._reduce_slots is None:
            raise RuntimeError("fetch_page was not started by this worker")
        return self._fetcher, self._reduce_slots


def page_fields(
    url: str, final_url: str, status: int, redirects: int, bytes_read: int, document: Document
) -> FetchPage:
    page: FetchPage = {
        "url": url,
        "final_url": final_url,
        "status": status,
        "content_type": document.content_type,
        "title": document.title,
        "text": document.text,
        "truncated": document.truncated,
        "redirects": redirects,
        "bytes_read": bytes_read,
        "fetched_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "extraction": document.extraction,
        "links": document.links,
        "hidden_removed": document.hidden_removed,
        "cached": False,
    }
    if document.pages is not None:
        page["pages"] = document.pages
        page["pages_read"] = document.pages_read if document.pages_read is not None else document.pages
    return page


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
