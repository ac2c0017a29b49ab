"""fetch_page: validate, check the menu, charge, fetch through the guardian, reduce, return.

The network part reads the body as a stream and stops at the byte cap (counted after
decompression, so a gzip bomb costs at most the cap), refuses a declared binary type before
reading anything, and runs under one time bound for the whole redirect chain and body.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import yarl
from aiohttp.abc import AbstractResolver

from jobs.content_types import declared_kind
from jobs.document import build_document
from worker.budget import Tool
from worker.context import JobContext, Runtime
from worker.envelope import ToolJob
from worker.errors import (
    ConnectionFailed,
    DestinationBlocked,
    GuardianRefusal,
    HttpStatus,
    InvalidRequest,
    Timeout,
    TooManyRedirects,
    UnsupportedContentType,
    UrlNotInMenu,
)
from worker.guardian.connector import SocketRefused, guarded_session
from worker.guardian.policy import AddressPolicy
from worker.guardian.redirects import REDIRECT_STATUSES, next_hop, same_site
from worker.guardian.urls import MAX_URL_LENGTH, Target, check_url
from worker.logs import fields

log = logging.getLogger("research.fetch")

READ_CHUNK = 65_536


@dataclass(frozen=True)
class FetchRequest:
    url: str
    extract: str

    @classmethod
    def parse(cls, args: dict[str, Any]) -> FetchRequest:
        url = args.get("url")
        if url is None:
            raise InvalidRequest("fetch_page needs a url")
        if not isinstance(url, str):
            raise InvalidRequest(f"url must be a string, not {type(url).__name__}")
        if not url.strip():
            raise InvalidRequest("url is empty")
        if len(url) > MAX_URL_LENGTH:
            raise InvalidRequest(f"url is longer than {MAX_URL_LENGTH:,} characters")
        extract = args.get("extract", "main")
        if extract not in ("main", "full"):
            raise InvalidRequest("extract must be 'main' or 'full'")
        return cls(url=url.strip(), extract=str(extract))


@dataclass
class Fetched:
    final: Target
    status: int
    content_type: str | None
    body: bytes
    truncated: bool
    redirects: int


class Fetcher:
    """The guarded session and the policy, built once per worker and shared by its fetch jobs."""

    def __init__(self, runtime: Runtime, session: aiohttp.ClientSession, policy: AddressPolicy) -> None:
        self.runtime = runtime
        self.session = session
        self.policy = policy
        # Reduction is CPU-bound and yields to the loop in slices, so more than a few at once adds
        # no throughput, only memory (each holds its decoded page and token buffers).
        self.reduce_slots = asyncio.Semaphore(runtime.settings.reduce_slots)

    async def close(self) -> None:
        await self.session.close()

    async def get(self, report_id: str, target: Target) -> Fetched:
        settings = self.runtime.settings
        current = target
        for hop in range(settings.fetch_max_redirects + 1):
            response = await self._request(current)
            try:
                location = response.headers.get("Location")
                if response.status in REDIRECT_STATUSES and location is not None:
                    if hop == settings.fetch_max_redirects:
                        raise TooManyRedirects(
                            f"more than {settings.fetch_max_redirects} redirects; the last pointed to "
                            f"{location[:200]}"
                        )
                    hop_target = next_hop(current, location, self.policy)
                    await self._require_menu_for_cross_site(report_id, current, hop_target)
                    current = hop_target
                    continue
                return await self._read(current, response, hop)
            finally:
                response.release()
        raise AssertionError("unreachable: the loop returns or raises")

    async def _request(self, target: Target) -> aiohttp.ClientResponse:
        try:
            return await self.session.get(yarl.URL(target.url, encoded=True), allow_redirects=False)
        except aiohttp.ClientConnectorCertificateError as exc:
            raise ConnectionFailed(
                f"TLS certificate of {target.host} not accepted: {exc.certificate_error}"
            ) from None
        except aiohttp.ClientConnectorSSLError as exc:
            raise ConnectionFailed(f"TLS handshake with {target.host} failed: {exc.os_error}") from None
        except aiohttp.ClientConnectorError as exc:
            refused = exc.os_error
            if isinstance(refused, SocketRefused):
                raise _socket_refusal(refused) from None
            raise ConnectionFailed(
                f"could not connect to {target.host}:{target.port}: {exc.strerror or exc.os_error}"
            ) from None
        except aiohttp.ClientResponseError as exc:
            raise ConnectionFailed(f"{target.host} sent an unreadable response: {exc.message}") from None
        except aiohttp.ClientError as exc:
            raise ConnectionFailed(f"connection to {target.host} failed: {type(exc).__name__}") from None

    async def _require_menu_for_cross_site(self, report_id: str, current: Target, hop: Target) -> None:
        menu = self.runtime.menu
        if not menu.enabled or same_site(current, hop):
            return
        if not await menu.contains(report_id, hop.url):
            raise UrlNotInMenu(
                f"the page redirected to another site, {hop.url[:200]}, which this report has not seen"
            )

    async def _read(self, final: Target, response: aiohttp.ClientResponse, redirects: int) -> Fetched:
        if not 200 <= response.status < 300:
            raise HttpStatus(f"the server answered HTTP {response.status}", status=response.status)
        content_type = response.headers.get("Content-Type")
        if declared_kind(content_type) == "binary":
            shown = (content_type or "").split(";")[0].strip()[:80]
            raise UnsupportedContentType(f"the page is {shown}, not text")
        limit = self.runtime.settings.fetch_max_bytes
        chunks: list[bytes] = []
        size = 0
        truncated = False
        try:
            async for chunk in response.content.iter_chunked(READ_CHUNK):
                room = limit - size
                if len(chunk) >= room:
                    chunks.append(chunk[:room])
                    size += room
                    truncated = len(chunk) > room or not response.content.at_eof()
                    break
                chunks.append(chunk)
                size += len(chunk)
        except aiohttp.ClientPayloadError as exc:
            raise ConnectionFailed(f"the body from {final.host} broke off: {exc}") from None
        if truncated:
            response.close()  # the rest is never read; do not return this connection to the pool
        return Fetched(
            final=final,
            status=response.status,
            content_type=content_type,
            body=b"".join(chunks),
            truncated=truncated,
            redirects=redirects,
        )


def _socket_refusal(refused: SocketRefused) -> GuardianRefusal:
    return DestinationBlocked(f"{refused.address} is refused: {refused.detail}", reason=refused.reason)


@contextlib.asynccontextmanager
async def time_bound(seconds: float, target: Target) -> AsyncIterator[None]:
    """One bound for the whole chain: DNS, connects, redirects and the body of every hop."""
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError:
        raise Timeout(f"fetching {target.url[:200]} took longer than {seconds:g} s") from None


async def require_on_menu(job: JobContext, target: Target) -> None:
    menu = job.runtime.menu
    if menu.enabled and not await menu.contains(job.report_id, target.url):
        raise UrlNotInMenu(
            "this report has not seen that URL: fetch the url of a search result, a link from a "
            "fetched page, or a URL from the briefing"
        )


async def fetch_page(job: JobContext, args: dict[str, Any]) -> dict[str, Any]:
    request = FetchRequest.parse(args)
    fetcher = job.runtime.client(Fetcher)
    metrics = job.runtime.metrics
    try:
        target = check_url(request.url, fetcher.policy)
        await require_on_menu(job, target)
        await job.charge(Tool.FETCH)
        async with time_bound(job.settings.fetch_timeout_s, target):
            fetched = await fetcher.get(job.report_id, target)
    except GuardianRefusal as refusal:
        metrics.guardian_refusals.labels(refusal.reason).inc()
        raise
    metrics.bytes_read.observe(len(fetched.body))
    async with fetcher.reduce_slots:
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
        await job.runtime.menu.record(job.report_id, document.links)
    return {
        "url": target.url,
        "final_url": fetched.final.url,
        "status": fetched.status,
        "content_type": document.content_type,
        "title": document.title,
        "text": document.text,
        "truncated": document.truncated,
        "redirects": fetched.redirects,
        "bytes_read": len(fetched.body),
        "fetched_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "extraction": document.extraction,
        "links": document.links,
        "hidden_removed": document.hidden_removed,
    }


def fetch_tool(resolver: AbstractResolver | None = None) -> ToolJob:
    """The fetch_page job; tests pass a fake resolver, production uses the system's."""

    async def start(runtime: Runtime) -> None:
        settings = runtime.settings
        policy = AddressPolicy(settings.guardian_allow_cidrs)
        if policy.allow_ranges:
            log.warning(
                "GUARDIAN OPERATOR ALLOW RANGES ACTIVE: these ranges are fetched despite the deny list",
                extra=fields(allow=[str(r) for r in policy.allow_ranges]),
            )
        if not runtime.menu.enabled:
            log.warning("the URL menu is off: reports may fetch URLs they have not seen")
        runtime.provide(Fetcher(runtime, guarded_session(settings, policy, resolver), policy))

    async def stop(runtime: Runtime) -> None:
        await runtime.client(Fetcher).close()

    return ToolJob(
        name="fetch_page",
        params=("url", "extract"),
        deadline_s=lambda s: s.fetch_deadline_s,
        run=fetch_page,
        start=start,
        stop=stop,
    )


FETCH_PAGE = fetch_tool()
