"""Fixtures for fetch tests: a worker whose guardian trusts only 127.0.0.1, with a fake resolver."""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from aiohttp.abc import AbstractResolver

from jobs.fetch.tool import FetchPageTool
from tests.support.fake_dns import FakeResolver
from tests.support.tls import TestCA
from tests.support.workers import running_worker
from worker.client import ResearchClient
from worker.config import Settings

LOOPBACK_ONLY = (ipaddress.ip_network("127.0.0.1/32"),)


def fetch_settings(settings: Settings, ca: TestCA, **changes: Any) -> Settings:
    """Allow only 127.0.0.1: 127.0.0.2 and up stay loopback (harmless) but refused by the guardian."""
    base = dataclasses.replace(
        settings,
        guardian_allow_cidrs=LOOPBACK_ONLY,
        ca_bundle=str(ca.bundle),
        url_menu=False,
        fetch_timeout_s=5.0,
    )
    return dataclasses.replace(base, **changes)


@dataclass
class FetchHarness:
    client: ResearchClient
    report: str
    resolver: AbstractResolver

    async def fetch(
        self, url: str, extract: str = "full", report: str | None = None, format: str | None = None
    ) -> dict[str, Any]:
        return await self.client.fetch(report or self.report, url, extract=extract, format=format)


@asynccontextmanager
async def fetching(
    settings: Settings, token: str, report: str, resolver: AbstractResolver | None = None, **extra: Any
) -> AsyncIterator[FetchHarness]:
    resolver = resolver or FakeResolver({})
    async with (
        running_worker(settings, [FetchPageTool(resolver)], **extra),
        ResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=30) as client,
    ):
        yield FetchHarness(client, report, resolver)


@asynccontextmanager
async def connection_counter(host: str, port: int = 0) -> AsyncIterator[tuple[int, list[str]]]:
    """A plain TCP listener that only counts who connected: proof that nothing reached it."""
    seen: list[str] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(str(writer.get_extra_info("peername")))
        writer.close()

    server = await asyncio.start_server(accept, host, port)
    bound = server.sockets[0].getsockname()[1]
    try:
        yield bound, seen
    finally:
        server.close()
        await server.wait_closed()
