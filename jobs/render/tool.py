"""render_page: the job a render worker (``research-worker run --render``) runs for fetch_page.

Fetch workers never start a browser: a ``fetch_page`` with ``render: true`` (or a script shell
under ``RESEARCH_RENDER=auto``) is validated, checked against the menu and charged on the fetch
worker, then handed to this job on the render queue (``jobs/fetch/handoff.py``), so a browser's
memory lives only in the processes that opted in. The job reads like the fetch: check the URL and
the menu again (the queue is internal, but a check costs nothing), fetch the document through the
guarded fetcher with the menu's hop rule, render it (``jobs/render/page.py``), reduce the DOM with
the same reader, and return the page's fields with ``rendered: true``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import math
import time
from collections.abc import Mapping
from typing import Any

from aiohttp.abc import AbstractResolver

from jobs.fetch.hops import report_rule, require_on_menu
from jobs.fetch.network import fetch_limits, time_bound
from jobs.fetch.page import page_of
from jobs.fetch.request import PageJob, text_format
from jobs.fetcher import Fetcher
from jobs.reader.content_types import HTML_TYPES, parse_content_type
from jobs.reader.document import build_document
from jobs.reader.formats import TEXT
from jobs.render.browser import BrowserLauncher, BrowserMissing
from jobs.render.page import PageRenderer, RenderBounds
from jobs.render.pool import Browsers, browsers_for
from worker.archive.capture import Capture, hearing
from worker.archive.failed import keep_failed
from worker.archive.service import SharedArchive
from worker.archive.writer import DROPPED, Archive
from worker.config import ConfigError
from worker.errors import GuardianRefusal, InvalidRequest, UnsupportedContentType
from worker.guardian.connector import guarded_session
from worker.guardian.egress_proxy import HTTPS_PORTS
from worker.guardian.policy import AddressPolicy
from worker.guardian.reasons import Reason
from worker.guardian.urls import check_url
from worker.limits import EXTRACT_MODES, MAX_URL_LENGTH
from worker.logs import fields
from worker.runtime.context import JobContext, Runtime
from worker.serialization import JobArguments
from worker.state.result_records import RENDER_PAGE, FetchFields

log = logging.getLogger("research.render")

NAME = RENDER_PAGE
ADDRESS_REASONS = frozenset(reason.value for reason in Reason)
# Browsers one render worker runs at once: each is several processes and a few hundred MB.
RENDER_SLOTS = 2
# What the render leaves for the reduction and the result, of the fetch's remaining time.
REDUCE_RESERVE_S = 1.5
MIN_RENDER_S = 2.0
RENDER_SUFFIX = ":render"  # a render job's id is its fetch job's with this (jobs/render/delegate.py)


class RenderPageTool(PageJob):
    name = NAME
    params = ("url", "extract", "format", "deadline_at")

    def __init__(self, resolver: AbstractResolver | None = None) -> None:
        self._resolver = resolver
        self._shared = SharedArchive()
        self._archive: Archive | None = None
        self._playwright: Any = None
        self._renderer: PageRenderer | None = None
        self._fetcher: Fetcher | None = None
        self._browsers: Browsers | None = None

    async def start(self, runtime: Runtime) -> None:
        from playwright.async_api import async_playwright

        settings = runtime.settings
        try:
            launcher = BrowserLauncher(settings.chromium, settings.ca_bundle)
        except BrowserMissing as missing:
            raise ConfigError(str(missing)) from None
        policy = AddressPolicy(settings.guardian_allow_cidrs)
        self._playwright = await async_playwright().start()
        self._browsers = browsers_for(
            self._playwright, launcher, policy, self._resolver, runtime, min(settings.max_jobs, RENDER_SLOTS)
        )
        self._renderer = PageRenderer(
            self._playwright, launcher, policy, self._resolver, self._browsers, settings.render_quiet_s
        )
        self._fetcher = Fetcher(
            guarded_session(settings, policy, self._resolver), policy, fetch_limits(settings)
        )
        self._archive = self._shared.open(settings, runtime.redis, runtime.metrics)

    async def stop(self) -> None:
        if self._browsers is not None:
            await self._browsers.stop()  # every warm browser killed before the driver goes
        if self._archive is not None:
            self._archive = None
            await self._shared.close()
        if self._fetcher is not None:
            await self._fetcher.close()
        if self._playwright is not None:
            await self._playwright.stop()

    async def run(self, job: JobContext, arguments: JobArguments) -> FetchFields:
        url, extract, deadline_at = _parse(arguments)
        fmt = text_format(arguments.get("format", TEXT))
        if self._renderer is None or self._fetcher is None or self._archive is None:
            raise RuntimeError("render_page was not started by this worker")
        archive, fetch_job = self._archive, job.job_id.removesuffix(RENDER_SUFFIX)
        capture = Capture() if archive.enabled else None
        settings = job.settings
        menu = job.runtime.menu
        loop = asyncio.get_running_loop()
        # Within the fetch job's own deadline (it waits for this result), and within this job's.
        until = min(job.deadline, loop.time() + (deadline_at - time.time())) - REDUCE_RESERVE_S
        try:
            target = check_url(url, self._fetcher.policy)
            await require_on_menu(menu, job.report_id, target)
            seconds = max(0.0, min(settings.fetch_timeout_s, until - loop.time()))
            with keep_failed(archive, job.report_id, fetch_job, capture), hearing(capture):
                async with time_bound(seconds, target):
                    fetched = await self._fetcher.get(target, report_rule(menu, job.report_id), capture)
        except GuardianRefusal as refusal:
            job.runtime.metrics.guardian_refusals.labels(refusal.reason.value).inc()
            raise
        essence = parse_content_type(fetched.content_type)
        if essence is None or essence.essence not in HTML_TYPES:
            raise UnsupportedContentType("only HTML pages are rendered; fetch this one without render")
        render_s = until - loop.time()
        if render_s < MIN_RENDER_S:
            raise InvalidRequest("too little of the fetch's time was left to render the page") from None
        bounds = RenderBounds(
            max_requests=settings.render_max_requests,
            max_bytes=settings.render_max_bytes,
            dom_bytes=settings.fetch_max_bytes,
            memory_bytes=settings.render_memory_mb * 2**20,
            ports=HTTPS_PORTS | {fetched.final.port},
        )
        rendered = await self._renderer.render(
            fetched.final.url, fetched.body, fetched.content_type or "text/html", bounds, render_s
        )
        for refused in rendered.egress.refused:
            # The proxy's refusals by the address policy's reasons, beside the fetches' own.
            reason = refused.rsplit(" ", 1)[-1]
            if reason in ADDRESS_REASONS:
                job.runtime.metrics.guardian_refusals.labels(reason).inc()
        log.info(
            "rendered",
            extra=fields(
                job_id=job.job_id,
                host=target.host,
                seconds=round(rendered.seconds, 2),
                tunnels=rendered.egress.tunnels,
                relayed_bytes=rendered.egress.bytes,
                refused=len(rendered.egress.refused) + len(rendered.refused_in_browser),
                peak_mb=math.ceil(rendered.peak_memory_bytes / 2**20),
            ),
        )
        document = await build_document(
            rendered.html,
            "text/html; charset=utf-8",
            fetched.final.url,
            extract=extract,
            max_chars=settings.fetch_max_chars,
            cpu_budget_s=settings.reduce_cpu_budget_s,
            body_truncated=rendered.truncated or fetched.truncated,
            format=fmt,
        )
        # The document's exchange, the DOM the reader read and the screenshot (docs/archive.md).
        receipt = (
            archive.rendered(job.report_id, capture, rendered.html, rendered.screenshot, fetch_job)
            if capture is not None
            else DROPPED
        )
        page = page_of(target, fetched, document, settings.fetch_max_chars)
        record = await receipt.accepted()
        page = dataclasses.replace(
            page,
            bytes_read=len(fetched.body) + rendered.egress.bytes,
            hidden_removed=page.hidden_removed + rendered.hidden_removed,
            rendered=True,
            script_shell=False,
            sha256=hashlib.sha256(fetched.body).hexdigest(),
            archive_record=record,
            screenshot_record=receipt.screenshot if record is not None else None,
        )
        return FetchFields(page, cached=False)


def _parse(arguments: Mapping[str, Any]) -> tuple[str, str, float]:
    url = arguments.get("url")
    extract = arguments.get("extract", "main")
    deadline_at = arguments.get("deadline_at")
    if not isinstance(url, str) or not url or len(url) > MAX_URL_LENGTH:
        raise InvalidRequest("render_page needs the url fetch_page checked")
    if extract not in EXTRACT_MODES:
        raise InvalidRequest("extract must be 'main' or 'full'")
    if isinstance(deadline_at, bool) or not isinstance(deadline_at, (int, float)):
        raise InvalidRequest("render_page needs the fetch's deadline")
    return url, str(extract), float(deadline_at)
