"""fetch_page: validate, check the menu, charge, fetch through the guardian (or the cache), read,
record the links.

The job reads like its data flow. The checks that need no network (the URL's form and scheme, an
IP literal's address, the menu) run before the budget is charged, so they cost the report nothing;
resolving a name is the fetch's first network I/O, so a name that resolves to a refused address
is refused after the charge. The shared page cache (``worker.state.pages.cache``) is asked only after the
menu and the charge, so a cached page is never a way around either; a cache miss fetches with one
of the host's turns held (``worker.state.politeness``) and reduces the page, and that is what the cache
keeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import functools
import hashlib
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from aiohttp.abc import AbstractResolver
from redis.asyncio import Redis

from jobs.fetcher import Fetched, Fetcher, FetchLimits
from jobs.reader.cpu_budget import CpuBudget
from jobs.reader.document import Document, build_document, cut_text, reads_in_child
from jobs.reader.formats import FORMATS, MARKDOWN, TEXT, page_offsets, whole_text_paced
from jobs.reader.hidden import strip_invisible
from jobs.reader.pieces import MAX_BACKOFF as MAX_SEAM_BACKOFF
from jobs.reader.pieces import needle_of
from jobs.reading import FromKept, InHand, KeptGone, Source, answer
from jobs.render.delegate import render_on_worker
from jobs.robots import Robots
from worker.archive.capture import Capture
from worker.archive.service import SharedArchive
from worker.archive.writer import DROPPED, Archive
from worker.config import RenderMode, Settings
from worker.errors import (
    DomainNotAllowed,
    GuardianRefusal,
    HttpStatus,
    InvalidRequest,
    ResearchError,
    Timeout,
    UrlNotInMenu,
)
from worker.guardian.connector import CONNECTED, guarded_session
from worker.guardian.domains import DomainPolicy
from worker.guardian.policy import AddressPolicy
from worker.guardian.redirects import HopRule
from worker.guardian.urls import SCHEME, Target, canonical_url, check_url, parse_https_url
from worker.limits import (
    EXTRACT_MODES,
    FETCH_PAGE,
    FIND_CHARS,
    MAX_DOCUMENT_CHARS,
    MAX_PAGE_OFFSETS,
    MAX_URL_LENGTH,
)
from worker.logs import fields
from worker.net.cache_control import may_store
from worker.runtime.context import JobContext, Runtime
from worker.state.budget import ReadBudget, Tool
from worker.state.clock import RedisClock
from worker.state.menu import Menu
from worker.state.pages.cache import Fresh, PageCache
from worker.state.pages.documents import Kept, KeptDocuments
from worker.state.pages.entry import Page
from worker.state.politeness import Politeness
from worker.state.redis_conn import connect
from worker.state.report_domains import ReportDomains, deployment_policy, report_domains
from worker.state.result_records import About, FetchFields

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
    format: str = MARKDOWN
    offset: int = 0
    max_chars: int = 40_000
    find: str | None = None  # the folded needle (pieces.needle_of), never a pattern
    render: bool = False

    @property
    def continues(self) -> bool:
        """An offset past the start, or a find: a page this report fetched is read from what was kept."""
        return self.offset > 0 or self.find is not None

    @property
    def cache_mode(self) -> str:
        """The page cache keeps one reduced page per extract mode and format (the plain text
        under the mode's own name, as before there were formats)."""
        return self.extract if self.format == TEXT else f"{self.extract}.{self.format}"

    @classmethod
    def parse(cls, args: Mapping[str, Any], *, max_chars_limit: int = 40_000) -> FetchRequest:
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
        return cls(
            url=url.strip(),
            extract=str(extract),
            fresh=fresh,
            offset=_count(args.get("offset", 0), "offset", 0, MAX_DOCUMENT_CHARS),
            max_chars=_count(args.get("max_chars", max_chars_limit), "max_chars", 1, max_chars_limit),
            find=_needle(args.get("find")),
            format=_format(args.get("format", MARKDOWN)),
            render=_switch(args.get("render", False), "render"),
        )


def _count(value: object, name: str, low: int, high: int) -> int:
    """An integer argument within [low, high]; a bool, a float or a string is not one."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequest(f"{name} must be an integer, not {type(value).__name__}")
    if not low <= value <= high:
        raise InvalidRequest(f"{name} must be from {low:,} to {high:,}")
    return value


def _needle(value: object) -> str | None:
    """``find`` folded for the search; refused when it says nothing a reader could see."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidRequest(f"find must be a string, not {type(value).__name__}")
    low, high = FIND_CHARS
    if len(value) > high:
        raise InvalidRequest(f"find must be {low} to {high} characters")
    if "\0" in value:
        raise InvalidRequest("find must not contain a NUL character")
    visible, _ = strip_invisible(value)
    needle = needle_of(visible)
    if not needle:
        raise InvalidRequest(
            f"find must hold {low} to {high} visible characters, not only spaces or invisible ones"
        )
    return needle


def _format(value: object) -> str:
    if not isinstance(value, str) or value not in FORMATS:
        raise InvalidRequest("format must be 'markdown' or 'text'")
    return value


def _switch(value: object, name: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidRequest(f"{name} must be true or false, not {type(value).__name__}")
    return value


@dataclass(frozen=True)
class _Parts:
    """What the tool builds once per worker at start-up."""

    fetcher: Fetcher  # the guarded session
    pages: PageCache
    hosts: Politeness
    documents: KeptDocuments  # whole texts, for the continuations of the reports that fetched them
    reads: ReadBudget
    domains: ReportDomains  # the deployment's domain lists, narrowed per report
    robots: Robots | None  # robots.txt, when the operator turned it on
    archive: Archive  # the evidence archive (docs/archive.md); off: every receipt is empty


class PageJob:
    """What fetch_page and the render worker's job share: a fetch's time, and one URL they are about."""

    def deadline_s(self, settings: Settings) -> float:
        return settings.fetch_deadline_s

    def about(self, arguments: Mapping[str, Any]) -> About | None:
        return url_about(arguments)


class FetchPageTool(PageJob):
    """The fetch_page job. Its parts are built once per worker at start-up; tests hand it a fake
    resolver, production uses the system's."""

    name = FETCH_PAGE
    params = ("url", "extract", "fresh", "format", "offset", "max_chars", "find", "render")

    def __init__(
        self, resolver: AbstractResolver | None = None, archive: SharedArchive | None = None
    ) -> None:
        self._resolver = resolver
        self._archive = archive if archive is not None else SharedArchive()
        self._parts: _Parts | None = None
        self._cache_redis: Redis | None = None

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
        session = guarded_session(settings, policy, self._resolver)
        # The cache may live on a Redis of its own (RESEARCH_CACHE_REDIS_URL, allkeys-lru), and the
        # kept documents with it (both may be lost at no cost but a refetch); host slots, holds,
        # domain lists and robots verdicts stay on the main one, with the queue.
        self._cache_redis = await cache_redis(settings)
        # The cache's times are its own Redis's, which may be another machine's clock.
        cache_clock = runtime.clock if self._cache_redis is None else RedisClock(self._cache_redis)
        documents = KeptDocuments(
            self._cache_redis or runtime.redis,
            ttl_s=settings.budget_window_s,
            queue_name=settings.queue_name,
            clock=cache_clock,
        )
        self._parts = _Parts(
            fetcher=Fetcher(session, policy, limits),
            pages=PageCache(
                self._cache_redis or runtime.redis, settings, runtime.metrics, cache_clock, documents
            ),
            hosts=Politeness(runtime.redis, settings, runtime.metrics, runtime.clock),
            documents=documents,
            reads=ReadBudget(
                runtime.redis, limit=settings.read_budget_chars, window_s=settings.budget_window_s
            ),
            domains=report_domains(runtime.redis, settings),
            robots=Robots(
                runtime.redis, session, policy, settings.user_agent, domains=deployment_policy(settings)
            )
            if settings.robots
            else None,
            archive=self._archive.open(settings, runtime.redis, runtime.metrics),
        )
        self._parts.hosts.start()
        self._parts.pages.start()

    async def stop(self) -> None:
        if self._parts is not None:
            await self._parts.pages.stop()
            await self._parts.hosts.stop()
            await self._parts.fetcher.close()
            await self._archive.close()
        if self._cache_redis is not None:
            await self._cache_redis.aclose()

    async def run(self, job: JobContext, arguments: dict[str, Any]) -> FetchFields:
        request = FetchRequest.parse(arguments, max_chars_limit=job.settings.fetch_max_chars)
        if request.render and job.settings.render is RenderMode.OFF:
            raise InvalidRequest("this deployment has rendering off: fetch the page without render")
        parts = self._started()
        metrics = job.runtime.metrics
        menu = job.runtime.menu
        try:
            target = check_url(request.url, parts.fetcher.policy)
            await require_on_menu(menu, job.report_id, target)
            domains = await parts.domains.policy(job.report_id)
            require_domain(domains, target)
            refetched = False
            if request.continues:
                kept = await parts.documents.lookup(job.report_id, request.extract, target.url)
                if isinstance(kept, Kept) and request.format in kept.layouts:
                    with contextlib.suppress(KeptGone):
                        return await self._continue(job, parts, request, kept)
                # Fetched before but no longer kept: fetched again, charged again, and said so.
                refetched = kept is not None
            if parts.robots is not None:
                await parts.robots.check(target, job.deadline - DEADLINE_MARGIN_S)
            await job.charge(Tool.FETCH)
            page, cached, source = await self._first(job, parts, request, target, domains, fresh=refetched)
            # A hop to the www twin is the same site, so no hop rule saw it: the final host is judged too.
            require_domain(domains, parse_https_url(page.final_url))
        except GuardianRefusal as refusal:
            metrics.guardian_refusals.labels(refusal.reason.value).inc()
            raise
        if cached and page.archive_record is not None:
            parts.archive.cite(job.report_id, page.archive_record)  # the original fetch's record
        if page.links:
            await menu.record(job.report_id, page.links, already_canonical=True)
        text = await answer(
            source,
            request.format,
            offset=request.offset,
            max_chars=request.max_chars,
            needle=request.find,
            grant=None,
        )
        return FetchFields(page, cached, text, refetched)

    async def _first(
        self,
        job: JobContext,
        parts: _Parts,
        request: FetchRequest,
        target: Target,
        domains: DomainPolicy,
        *,
        fresh: bool,
    ) -> tuple[Page, bool, Source]:
        """A first fetch (from the network, the page cache or a render worker's browser), its
        document kept for this report."""
        until = job.deadline - DEADLINE_MARGIN_S
        if request.render:
            await job.charge(Tool.RENDER)
            rendered = await render_on_worker(job, target, request.extract, request.format, until)
            return rendered, False, InHand({request.format: rendered.text}, {})
        in_hand: list[InHand] = []
        read = functools.partial(self._fetch_and_read, job, target, request, in_hand, until=until)
        for attempt in range(2):
            served = await parts.pages.serve(
                target,
                request.cache_mode,
                fresh=request.fresh or fresh or attempt > 0,
                until=until,
                may_follow=hop_rule(job.runtime.menu, job.report_id, domains, parts.robots, until),
                fetch=read,
            )
            page = served.page
            if page.script_shell and job.settings.render is RenderMode.AUTO:
                rendered, _ = await auto_render(job, target, request, until, page, served.cached)
                if rendered is not page:
                    return rendered, False, InHand({request.format: rendered.text}, {})
            source: Source | None = in_hand[0] if in_hand else None
            if source is None and page.document is not None:
                kept = served.kept or await parts.documents.lookup_digest(page.document)
                source = FromKept(parts.documents, kept) if kept is not None else None
            if source is not None:
                # The job that kept the document noted it for its report in the same step.
                if page.document is not None and not in_hand:
                    await parts.documents.remember(job.report_id, request.extract, target.url, page.document)
                return page, served.cached, source
            if page.document is None:
                break  # nothing was kept to page (Redis refused the document): see below
            # Another job's page whose kept document is gone since: fetched again, so it can be paged.
        # Still none (Redis refused to keep the document, and the cache or another job's flight
        # served this one): the page's own first piece is all there is; it says it was cut when it
        # may be.
        cut = len(page.text) >= request.max_chars - MAX_SEAM_BACKOFF
        return (
            replace(page, truncated=page.truncated or cut),
            served.cached,
            InHand({request.format: page.text}, {}),
        )

    async def _continue(
        self, job: JobContext, parts: _Parts, request: FetchRequest, kept: Kept
    ) -> FetchFields:
        """Read on from what this report's first fetch kept: no connection, no fetch charged."""

        async def grant(wanted: int) -> int:
            return (await parts.reads.grant(job.report_id, job.job_id, wanted)).chars

        text = await answer(
            FromKept(parts.documents, kept),
            request.format,
            offset=request.offset,
            max_chars=request.max_chars,
            needle=request.find,
            grant=grant,
        )
        if kept.page.archive_record is not None:
            parts.archive.cite(job.report_id, kept.page.archive_record)  # the first fetch's record
        return FetchFields(kept.page, True, text)

    async def _fetch_and_read(
        self,
        job: JobContext,
        target: Target,
        request: FetchRequest,
        in_hand: list[InHand],
        may_follow: HopRule,
        until: float,
    ) -> Fresh:
        """What a cache miss does: fetch through the guardian with a turn at the host, reduce, and keep
        the whole document for the report's continuations.

        The exchange goes to the archive's writer before the reduction and is asked about after
        it, so storing the record overlaps the reading of the page."""
        parts = self._started()
        capture = Capture() if parts.archive.enabled else None
        fetched = await self._fetch(job, parts, target, may_follow, until, capture)
        receipt = parts.archive.fetched(job.report_id, capture) if capture is not None else DROPPED
        sha256 = hashlib.sha256(fetched.body).hexdigest()
        job.runtime.metrics.bytes_read.observe(len(fetched.body))
        # The worker's CPU slots (worker.runtime.cpu_slots): smallest body first, small ones in a lane of
        # their own. A page that waited long for its slot reduces with the time it has left, and
        # comes back truncated rather than not at all. A PDF takes no slot: it is read in the PDF
        # pool's children, which queue by cost of their own (jobs.reader.pdf.schedule).
        in_child = reads_in_child(fetched.body, fetched.content_type)
        slot = contextlib.nullcontext() if in_child else job.runtime.cpu_slots.slot(len(fetched.body))
        async with slot:
            left = until - asyncio.get_running_loop().time()
            document = await build_document(
                fetched.body,
                fetched.content_type,
                fetched.final.url,
                extract=request.extract,
                max_chars=MAX_DOCUMENT_CHARS,
                cpu_budget_s=max(MIN_REDUCE_S, min(job.settings.reduce_cpu_budget_s, left)),
                body_truncated=fetched.truncated,
                until=until,
                format=request.format,
                content_language=fetched.content_language,
            )
        if document.unresolved_links:
            # Counted, never quoted: the links are the page's text.
            log.info(
                "dropped links the URL parser could not read",
                extra=fields(job_id=job.job_id, host=target.host, count=document.unresolved_links),
            )
        whole = await in_both_formats(document, job.settings.reduce_cpu_budget_s)
        in_hand.append(whole)
        page = replace(
            page_of(target, fetched, document, job.settings.fetch_max_chars),
            sha256=sha256,
            archive_record=await receipt.stored(),
        )
        keeping = await parts.documents.prepare(
            page, whole.texts, whole.offsets, noted_for=(job.report_id, request.extract, target.url)
        )
        # A page cut by CPU time or the deadline is served to this job only (worker.state.pages.cache).
        storable = may_store(fetched.cache_control) and not document.out_of_time
        return Fresh(replace(page, document=keeping.digest), storable=storable, keeping=keeping)

    async def _fetch(
        self,
        job: JobContext,
        parts: _Parts,
        target: Target,
        may_follow: HopRule,
        until: float,
        capture: Capture | None = None,
    ) -> Fetched:
        """The network part, under one time bound: the wait for a turn at the host, then the GET."""
        loop = asyncio.get_running_loop()
        seconds = max(0.0, min(job.settings.fetch_timeout_s, until - loop.time()))
        answering = [target]  # the host whose answer ends the chain, for a Retry-After

        async def noting(current: Target, following: Target) -> None:
            await may_follow(current, following)
            answering.append(following)

        async with time_bound(seconds, target), parts.hosts.turn(target, loop.time() + seconds):
            try:
                if capture is None:
                    return await parts.fetcher.get(target, noting)
                hearing = CONNECTED.set(capture.peers)
                try:
                    return await parts.fetcher.get(target, noting, capture)
                finally:
                    CONNECTED.reset(hearing)
            except HttpStatus as answer:
                status = answer.status or 0
                asked = await parts.hosts.hold_if_asked(answering[-1], status, answer.retry_after_s)
                if (late := parts.hosts.past_deadline(answering[-1], status, asked, until)) is not None:
                    raise late from None
                raise

    def _started(self) -> _Parts:
        if self._parts is None:
            raise RuntimeError("fetch_page was not started by this worker")
        return self._parts


async def in_both_formats(document: Document, cpu_budget_s: float) -> InHand:
    """The document's whole text in each format (what it was read in, and the other rendered from
    the same reduction, paced), with each format's PDF page offsets: what is kept for its pieces."""
    texts = {document.format: document.text}
    budget = CpuBudget(cpu_budget_s)
    for name in FORMATS:
        if name not in texts:
            texts[name] = cut_text(
                await whole_text_paced(document.readable, name, budget), MAX_DOCUMENT_CHARS
            )
    offsets: dict[str, tuple[int, ...] | None] = {}
    for name, text in texts.items():
        found = page_offsets(document.readable, name)
        offsets[name] = (
            None if found is None else tuple(at for at in found[:MAX_PAGE_OFFSETS] if at <= len(text))
        )
    return InHand(texts, offsets)


async def cache_redis(settings: Settings) -> Redis | None:
    """A connection to the page cache's own Redis, when one is configured."""
    if settings.cache_redis_url is None:
        return None
    return await connect(dataclasses.replace(settings, redis_url=settings.cache_redis_url))


def page_of(target: Target, fetched: Fetched, document: Document, max_chars: int) -> Page:
    """The reduced page as the cache keeps it, fetched now: its first piece of text, and the kept
    document that holds the whole."""
    pages_read = document.pages_read if document.pages_read is not None else document.pages
    return Page(
        url=target.url,
        final_url=fetched.final.url,
        status=fetched.status,
        content_type=document.content_type,
        title=document.title,
        text=cut_text(document.text, max_chars),
        truncated=document.truncated,
        redirects=fetched.redirects,
        bytes_read=len(fetched.body),
        fetched_at=dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        extraction=document.extraction,
        links=tuple(document.links),
        hidden_removed=document.hidden_removed,
        pages=document.pages,
        pages_read=pages_read if document.pages is not None else None,
        metadata=document.metadata,
        script_shell=document.script_shell,
    )


def url_about(arguments: Mapping[str, Any]) -> About | None:
    """What a fetch (or a render) is about: the canonical form of its URL, or the URL as given."""
    url = arguments.get("url")
    if not isinstance(url, str):
        return None
    url = url.strip()[:MAX_URL_LENGTH]
    return {"url": canonical_url(url) or url}


async def auto_render(
    job: JobContext, target: Target, request: FetchRequest, until: float, page: Page, cached: bool
) -> tuple[Page, bool]:
    """RESEARCH_RENDER=auto: a script shell is rendered unasked while the render budget lasts; when
    it cannot be (no budget, no render worker, a failed render) the static page stands, and says
    ``script_shell``."""
    try:
        await job.charge(Tool.RENDER)
        return await render_on_worker(job, target, request.extract, request.format, until), False
    except ResearchError as failure:
        log.info(
            "a script shell was not rendered",
            extra=fields(job_id=job.job_id, host=target.host, kind=failure.kind.value),
        )
        return page, cached


async def require_on_menu(menu: Menu, report_id: str, target: Target, *, redirected: bool = False) -> None:
    """The URL menu: a URL the report has not seen, asked for or redirected to, is refused."""
    if menu.enabled and not await menu.contains(report_id, target.url):
        unseen = (
            f"the URL on another site, {target.host}, that the page redirected to"
            if redirected
            else "that URL"
        )
        raise UrlNotInMenu(
            f"this report has not seen {unseen}: fetch the url of a search result, a link from a "
            "fetched page, or a URL from the briefing"
        )


def require_domain(domains: DomainPolicy, target: Target) -> None:
    refusal = domains.refusal(target.host)
    if refusal is not None:
        raise DomainNotAllowed(f"{refusal}, so this deployment does not fetch from it")


def hop_rule(
    menu: Menu,
    report_id: str,
    domains: DomainPolicy | None = None,
    robots: Robots | None = None,
    until: float = 0.0,
) -> HopRule:
    """A redirect to another site: its host must pass the domain lists (else domain_not_allowed),
    its URL must be on the report's menu (else url_not_in_menu), and, with robots.txt checking on,
    that site's robots.txt must allow it (else robots_disallowed). The render job, which has no
    domain lists or robots.txt of its own, asks the menu alone."""

    async def may_follow(current: Target, following: Target) -> None:
        if domains is not None:
            require_domain(domains, following)
        await require_on_menu(menu, report_id, following, redirected=True)
        if robots is not None:
            await robots.check(following, until)

    return may_follow


@contextlib.asynccontextmanager
async def time_bound(seconds: float, target: Target) -> AsyncIterator[None]:
    """One bound for the whole chain: DNS, connects, redirects and the body of every hop."""
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError:
        raise Timeout(f"fetching from {target.host} took longer than {seconds:g} s") from None
