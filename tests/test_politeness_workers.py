"""Politeness across real worker processes: one limit per host and one hold per host, for all of them."""

from __future__ import annotations

import asyncio
import time

import redis.asyncio as aioredis
from aiohttp import web

from tests.support.fetch_workers import fetch_workers
from tests.support.tls import TestCA, serve
from worker.client import ResearchClient
from worker.config import Settings
from worker.serialization import loads
from worker.state import keys


class Host:
    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.arrivals: list[tuple[float, str]] = []
        self.in_flight = 0
        self.peak = 0

    async def handle(self, request: web.Request) -> web.Response:
        self.arrivals.append((time.monotonic(), request.path))
        if request.path == "/limited" and len(self.arrivals) == 1:
            return web.Response(status=429, headers={"Retry-After": "2"}, text="slow down")
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(self.delay_s)
            return web.Response(text=f"<p>page {request.path}</p>", content_type="text/html")
        finally:
            self.in_flight -= 1


async def test_a_host_answering_429_with_retry_after_2_receives_no_request_from_any_worker_for_2_seconds(
    settings: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis
) -> None:
    host = Host(delay_s=0.05)
    async with serve({"/{p:.*}": host.handle}, ca.server_context()) as server:
        # Four jobs at most per worker: the ten held fetches below must be spread over both.
        async with (
            fetch_workers(settings, ca, RESEARCH_URL_MENU="off", RESEARCH_MAX_JOBS="4"),
            ResearchClient(settings=settings, job_id_prefix=f"{token}-") as client,
        ):
            limited = await client.fetch(report, server.url("/limited"))
            answered_at = host.arrivals[0][0]
            ids = [
                await client.enqueue(
                    "fetch_page", {"report_id": f"{report}-{i}", "url": server.url(f"/p{i}")}
                )
                for i in range(10)
            ]
            later = [await client.wait(job_id, wait_s=60) for job_id in ids]
        lines = [loads(line) for line in await redis.lrange(keys.recent(settings.queue_name), 0, -1)]
    assert (limited["error"]["kind"], limited["status"]) == ("http_status", 429)
    assert all(r["ok"] for r in later), later
    first_after = min(at for at, path in host.arrivals if path != "/limited")
    assert first_after - answered_at >= 2.0
    assert first_after - answered_at < 4.0  # held until then, not much longer
    workers = {line["worker_id"] for line in lines if line["job_id"] in ids}
    assert len(workers) == 2


async def test_fetches_in_flight_to_one_host_stay_within_the_limit_across_two_workers(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    host = Host(delay_s=0.1)
    async with serve({"/{p:.*}": host.handle}, ca.server_context()) as server:
        async with (
            fetch_workers(
                settings, ca, RESEARCH_URL_MENU="off", RESEARCH_CACHE_TTL_S="0", RESEARCH_HOST_CONCURRENCY="3"
            ),
            ResearchClient(settings=settings, job_id_prefix=f"{token}-") as client,
        ):
            ids = [
                await client.enqueue(
                    "fetch_page", {"report_id": f"{report}-{i % 5}", "url": server.url(f"/p{i}")}
                )
                for i in range(30)
            ]
            results = [await client.wait(job_id, wait_s=60) for job_id in ids]
    assert all(r["ok"] for r in results), [r for r in results if not r["ok"]][:3]
    assert host.peak == 3
