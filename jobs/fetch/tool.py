"""fetch_page: validate, check the menu, charge, serve (from the network, the cache or a render
worker), read.

The checks that need no network (the URL's form and scheme, an IP literal's address, the menu) run
before the budget is charged, so they cost the report nothing; resolving a name is the fetch's
first network I/O, so a name that resolves to a refused address is refused after the charge. The
shared page cache (``worker.state.pages.cache``) is asked only after the menu and the charge, so a
cached page is never a way around either; a cache miss fetches with one of the host's turns held
(``worker.state.politeness``) and reduces the page, and that is what the cache keeps. The job that
fetched reads its answer from the whole text it made, which the cache hands back with its page.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import logging
from dataclasses import dataclass, replace

from aiohttp.abc import AbstractResolver
from redis.asyncio import Redis

from jobs.facts import parsed_url
from jobs.fetch.handoff import auto_render, render_on_worker
from jobs.fetch.hops import report_rule, require_domain, require_on_menu
from jobs.fetch.network import fetch_limits, guarded_get
from jobs.fetch.page import in_both_formats, page_of, reduce
from jobs.fetch.request import FetchRequest, PageJob
from jobs.fetcher import Fetcher
from jobs.reader.ocr.service import OcrService
from jobs.reader.pieces import MAX_BACKOFF as MAX_SEAM_BACKOFF
from jobs.reading import FromKept, InHand, KeptGone, Source, answer
from jobs.robots import Robots
from worker.archive.capture import Capture
from worker.archive.failed import keep_failed
from worker.archive.service import SharedArchive
from worker.archive.writer import DROPPED, Archive
from worker.config import RenderMode, Settings
from worker.errors import GuardianRefusal, InvalidRequest, Timeout
from worker.guardian.connector import guarded_session
from worker.guardian.domains import DomainPolicy
from worker.guardian.policy import AddressPolicy
from worker.guardian.redirects import HopLog
from worker.guardian.urls import Target, check_address, parse_https_url
from worker.limits import FETCH_PAGE
from worker.logs import fields
from worker.net.cache_control import may_store
from worker.runtime.context import JobContext, Runtime
from worker.serialization import JobArguments
from worker.state.budget import ReadBudget, Tool
from worker.state.clock import RedisClock
from worker.state.pages.cache import Fresh, PageCache
from worker.state.pages.documents import Kept, KeptDocuments
from worker.state.pages.entry import Page
from worker.state.politeness import Politeness
from worker.state.redis_conn import connect
from worker.state.report_domains import ReportDomains, deployment_policy, report_domains
from worker.state.result_records import FetchFields
from worker.tracing.phases import ARCHIVE, MENU_AND_BUDGET, REDUCE, phase

log = logging.getLogger("research.fetch")


# Waits inside the job (for another job's fetch, for a host) end this long before the job's own
# deadline, so the job ends with their message rather than the envelope's.
DEADLINE_MARGIN_S = 0.5
# How often a first fetch serves its page again when the kept document it reads from is shed under
# it (each try after the first is fresh: it fetches, or joins a fetch in progress).
READ_TRIES = 3


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
    ocr: OcrService | None = None  # scans and images: the reports' OCR budgets, scans to read on


@dataclass(frozen=True)
class _First:
    """A first fetch's answer: the page, whether the cache served it, and where its text is read."""

    page: Page
    cached: bool
    source: Source


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
            fetcher=Fetcher(session, policy, fetch_limits(settings)),
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
                runtime.redis,
                session,
                policy,
                settings.user_agent,
                domains=deployment_policy(settings),
                queue_name=settings.queue_name,
            )
            if settings.robots
            else None,
            archive=self._archive.open(settings, runtime.redis, runtime.metrics),
            ocr=OcrService(runtime.redis, self._cache_redis or runtime.redis, settings),
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

    async def run(self, job: JobContext, arguments: JobArguments) -> FetchFields:
        """Validate, check the menu, charge, serve, read."""
        request = FetchRequest.parse(arguments, max_chars_limit=job.settings.fetch_max_chars)
        if request.render and job.settings.render is RenderMode.OFF:
            raise InvalidRequest("this deployment has rendering off: fetch the page without render")
        parts = self._started()
        try:
            target, domains = await self._admit(job, parts, request)
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
            for attempt in range(READ_TRIES):
                again = refetched or attempt > 0
                first = await self._serve(job, parts, request, target, domains, fresh=again)
                # A hop to the www twin is the same site, so no hop rule saw it: the final host is judged too.
                final_url = first.page.final_url
                require_domain(domains, target if final_url == target.url else parse_https_url(final_url))
                try:
                    return await self._read(job, parts, request, first, refetched)
                except KeptGone:
                    # The kept document this answer was read from was shed since its lookup (Redis
                    # near full, or its time ran out): served again, fresh, within the one charge.
                    log.info("a kept document went away while it was read", extra=fields(job_id=job.job_id))
            raise Timeout("the page's text went away each time it was read; fetch it again")
        except GuardianRefusal as refusal:
            job.runtime.metrics.guardian_refusals.labels(refusal.reason.value).inc()
            raise

    async def _admit(
        self, job: JobContext, parts: _Parts, request: FetchRequest
    ) -> tuple[Target, DomainPolicy]:
        """The checks that need no network: the URL (parsed once for the job, its IP literal
        judged), the report's menu and the deployment's domain lists, narrowed for the report."""
        target = check_address(parsed_url(request.url), parts.fetcher.policy)
        with phase(MENU_AND_BUDGET):
            await require_on_menu(job.runtime.menu, job.report_id, target)
            domains = await parts.domains.policy(job.report_id)
        require_domain(domains, target)
        return target, domains

    async def _read(
        self, job: JobContext, parts: _Parts, request: FetchRequest, first: _First, refetched: bool
    ) -> FetchFields:
        """The piece (or the matches) asked for, from the page served; its links join the menu."""
        page = first.page
        if page.documents:  # a render's too, which no fetch of this worker judged
            page = replace(page, documents=admissible(page.documents, parts.fetcher.policy))
        if first.cached and page.archive_record is not None:
            parts.archive.cite(job.report_id, page.archive_record)  # the original fetch's record
        if page.links or page.documents:
            # The documents it embeds join the menu with its links: the agent may fetch them next.
            await job.runtime.menu.record(job.report_id, page.links + page.documents, already_canonical=True)
        text = await answer(
            first.source,
            request.format,
            offset=request.offset,
            max_chars=request.max_chars,
            needle=request.find,
            grant=None,
        )
        return FetchFields(page, first.cached, text, refetched)

    async def _serve(
        self,
        job: JobContext,
        parts: _Parts,
        request: FetchRequest,
        target: Target,
        domains: DomainPolicy,
        *,
        fresh: bool,
    ) -> _First:
        """A first fetch (from the network, the page cache or a render worker's browser), its
        document kept for this report."""
        until = job.deadline - DEADLINE_MARGIN_S
        if request.render:
            await job.charge(Tool.RENDER)
            rendered = await render_on_worker(job, target, request.extract, request.format, until)
            return _rendered(rendered, request.format)
        rule = report_rule(job.runtime.menu, job.report_id, domains, parts.robots, until)
        for attempt in range(2):
            hops = HopLog(rule, target)
            served = await parts.pages.serve(
                target,
                request.cache_mode,
                fresh=request.fresh or fresh or attempt > 0,
                until=until,
                hops=hops,
                fetch=functools.partial(self._miss, job, request, target, hops, until),
            )
            page = served.page
            if page.script_shell and job.settings.render is RenderMode.AUTO:
                shown = await auto_render(job, target, request.extract, request.format, until)
                if shown is not None:
                    return _rendered(shown, request.format)
            if served.made is not None:
                # This job fetched: it reads the whole text it made, and noted it in the same step.
                return _First(page, served.cached, served.made)
            if page.document is None:
                break  # nothing was kept to page (Redis refused the document): see below
            kept = served.kept or await parts.documents.lookup_digest(page.document)
            if kept is not None:
                await parts.documents.remember(job.report_id, request.extract, target.url, page.document)
                return _First(page, served.cached, FromKept(parts.documents, kept))
            # Another job's page whose kept document is gone since: fetched again, so it can be paged.
        # Still none (Redis refused to keep the document, and the cache or another job's flight
        # served this one): the page's own first piece is all there is; it says it was cut when it
        # may be.
        cut = len(page.text) >= request.max_chars - MAX_SEAM_BACKOFF
        return _First(
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

        async def settle(returned: int) -> None:
            await parts.reads.settle(job.report_id, job.job_id, returned)

        source: Source = FromKept(parts.documents, kept)
        page = kept.page
        more = (
            await parts.ocr.read_on(
                job,
                parts.documents,
                kept,
                fmt=request.format,
                offset=request.offset,
                max_chars=request.max_chars,
                find=request.find is not None,
                extract=request.extract,
                until=job.deadline - DEADLINE_MARGIN_S,
            )
            if parts.ocr is not None
            else None
        )
        if more is not None:  # a scan whose OCR stopped short, read on to reach this piece or find
            source, page = InHand(more.texts, more.offsets), more.page
        text = await answer(
            source,
            request.format,
            offset=request.offset,
            max_chars=request.max_chars,
            needle=request.find,
            grant=grant,
            settle=settle,
        )
        if kept.page.archive_record is not None:
            parts.archive.cite(job.report_id, kept.page.archive_record)  # the first fetch's record
        return FetchFields(page, True, text)

    async def _miss(
        self, job: JobContext, request: FetchRequest, target: Target, hops: HopLog, until: float
    ) -> Fresh[InHand]:
        """What a cache miss does: fetch through the guardian with a turn at the host, reduce, and
        keep the whole document for the report's continuations.

        The exchange goes to the archive's writer before the reduction and is asked about after
        it, so storing the record overlaps the reading of the page."""
        parts = self._started()
        capture = Capture() if parts.archive.enabled else None
        with keep_failed(parts.archive, job.report_id, job.job_id, capture):  # a 404 is evidence too
            fetched = await guarded_get(
                parts.fetcher,
                parts.hosts,
                target,
                hops,
                timeout_s=job.settings.fetch_timeout_s,
                until=until,
                capture=capture,
            )
        receipt = DROPPED if capture is None else parts.archive.fetched(job.report_id, capture, job.job_id)
        sha256 = hashlib.sha256(fetched.body).hexdigest()
        job.runtime.metrics.bytes_read.observe(len(fetched.body))
        ocr = parts.ocr.ask(job) if parts.ocr is not None else None
        with phase(REDUCE):  # a scan's OCR is its own phase too (jobs/reader/pdf/reader.py)
            document = await reduce(
                job, fetched, extract=request.extract, fmt=request.format, until=until, ocr=ocr
            )
        if document.unresolved_links:
            # Counted, never quoted: the links are the page's text.
            log.info(
                "dropped links the URL parser could not read",
                extra=fields(job_id=job.job_id, host=target.host, count=document.unresolved_links),
            )
        with phase(REDUCE):
            whole = await in_both_formats(document, job.settings.reduce_cpu_budget_s)
        with phase(ARCHIVE):
            archive_record = await receipt.accepted()
        page = replace(
            page_of(target, fetched, document, job.settings.fetch_max_chars),
            sha256=sha256,
            archive_record=archive_record,
        )
        keeping = await parts.documents.prepare(
            page, whole.texts, whole.offsets, noted_for=(job.report_id, request.extract, target.url)
        )
        if parts.ocr is not None:
            await parts.ocr.keep_scan(keeping.digest, document, fetched.body)
        # A page cut by CPU time or the deadline is served to this job only (worker.state.pages.cache).
        storable = may_store(fetched.cache_control) and not document.out_of_time
        return Fresh(replace(page, document=keeping.digest), storable, keeping, made=whole)

    def _started(self) -> _Parts:
        if self._parts is None:
            raise RuntimeError("fetch_page was not started by this worker")
        return self._parts


def admissible(documents: tuple[str, ...], policy: AddressPolicy) -> tuple[str, ...]:
    """The embedded documents the guardian could fetch: an IP literal its policy refuses (a
    private, loopback or metadata address) is never offered, nor put on the menu. A name is
    judged when it is fetched, as every link's is."""
    kept = []
    for url in documents:
        try:
            check_address(parse_https_url(url), policy)
        except GuardianRefusal:
            continue
        kept.append(url)
    return tuple(kept)


def _rendered(page: Page, fmt: str) -> _First:
    """A render worker's page: made for this job, its text the piece it rendered."""
    return _First(page, False, InHand({fmt: page.text}, {}))


async def cache_redis(settings: Settings) -> Redis | None:
    """A connection to the page cache's own Redis, when one is configured."""
    if settings.cache_redis_url is None:
        return None
    return await connect(dataclasses.replace(settings, redis_url=settings.cache_redis_url))
