"""The page cache across real worker processes: one fetch per page, a dead fetcher's waiters take over."""

from __future__ import annotations

import asyncio
import collections
import signal
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis as syncredis
import redis.asyncio as aioredis
from aiohttp import web

from tests.support.fetch_workers import fetch_env
from tests.support.processes import start_worker, stop, wait_healthy
from tests.support.tls import TestCA, serve
from worker.client import ResearchClient
from worker.config import Settings
from worker.state import keys
from worker.state.leases import LEASE_MS
from worker.state.pages.cache import FLIGHT_CHECK_S


class CountingSite:
    """Article pages that link to each other, counting requests per path and requests in flight."""

    def __init__(self, delay_s: float = 0.05) -> None:
        self.delay_s = delay_s
        self.hits: collections.Counter[str] = collections.Counter()
        self.arrivals: list[tuple[float, str]] = []
        self.in_flight = 0
        self.peak = 0
        self.headers: dict[str, str] = {}

    async def handle(self, request: web.Request) -> web.Response:
        self.hits[request.path] += 1
        self.arrivals.append((time.monotonic(), request.path))
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(self.delay_s)
            port = request.url.port
            body = (
                f"<html><head><title>{request.path}</title></head><body><main><h1>{request.path}</h1>"
                f"<p>Text of {request.path}, long enough to be what the page is about.</p>"
                f'<a href="https://127.0.0.1:{port}{request.path}/more">more</a></main></body></html>'
            )
            return web.Response(text=body, content_type="text/html", headers=self.headers)
        finally:
            self.in_flight -= 1


@pytest.fixture(scope="module")
def pair(redis_url: str, ca: TestCA) -> Iterator[Settings]:
    """Two worker processes with the URL menu on, shared by the tests that do not stop them: each
    test has its own reports, job ids and server port, so its pages and menus are its own."""
    token = f"t{uuid.uuid4().hex[:12]}"
    shared = Settings(
        redis_url=redis_url,
        queue_name=f"research-test:{token}:queue",
        worker_id=f"w-{token}",
        max_jobs=16,
    )
    procs = [start_worker(shared, f"p{i}", env=fetch_env(ca, RESEARCH_URL_MENU="on")) for i in range(2)]
    try:
        wait_healthy(shared, 2)
        yield shared
    finally:
        for proc in procs:
            stop(proc)
        client = syncredis.Redis.from_url(redis_url)
        try:
            for key in client.scan_iter(match=f"*{token}*", count=1000):
                client.delete(key)
        finally:
            client.close()


async def run_all(client: ResearchClient, jobs: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """Enqueue every (report, url) fetch at once, then collect the results in order."""
    ids = [await client.enqueue("fetch_page", {"report_id": r, "url": u}) for r, u in jobs]
    return [await client.wait(job_id, wait_s=120) for job_id in ids]


async def test_fifty_reports_reading_the_same_twenty_pages_over_two_workers_make_twenty_requests(
    pair: Settings, ca: TestCA, token: str, report: str, own_keys: None
) -> None:
    site = CountingSite()
    async with serve({"/{p:.*}": site.handle}, ca.server_context()) as server:
        pages = [server.url(f"/page/{i}") for i in range(20)]
        reports = [f"{report}-{n}" for n in range(50)]
        async with ResearchClient(settings=pair, job_id_prefix=f"{token}-") as client:
            for each in reports:
                await client.seed_urls(each, pages)
            results = await run_all(client, [(r, p) for r in reports for p in pages])
    assert all(r["ok"] for r in results), [r for r in results if not r["ok"]][:3]
    assert sum(site.hits.values()) == 20
    assert set(site.hits.values()) == {1}
    assert sum(r["cached"] for r in results) == 1000 - 20
    assert site.peak <= pair.host_concurrency
    by_url = collections.defaultdict(set)
    for r in results:
        by_url[r["url"]].add((r["text"], r["fetched_at"]))
    assert all(len(seen) == 1 for seen in by_url.values())  # every report read the same fetch


async def test_across_workers_an_unseen_url_is_refused_and_a_cached_pages_links_reach_the_next_menu(
    pair: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis
) -> None:
    site = CountingSite()
    async with serve({"/{p:.*}": site.handle}, ca.server_context()) as server:
        url = server.url("/page/1")
        first, second, stranger = report, f"{report}-second", f"{report}-stranger"
        async with ResearchClient(settings=pair, job_id_prefix=f"{token}-") as client:
            await client.seed_urls(first, [url])
            await client.seed_urls(second, [url])
            fetched = await client.fetch(first, url)
            refused = await client.fetch(stranger, url)
            hit = await client.fetch(second, url)
            onward = await client.fetch(second, server.url("/page/1/more"))
    assert fetched["ok"] and fetched["cached"] is False
    assert refused["error"]["kind"] == "url_not_in_menu"
    assert await redis.exists(keys.budget(stranger)) == 0
    assert hit["cached"] is True
    assert server.url("/page/1/more") in {m.decode() for m in await redis.smembers(keys.menu(second))}
    assert onward["ok"] is True and onward["cached"] is False
    assert site.hits == {"/page/1": 1, "/page/1/more": 1}


async def test_across_workers_a_cached_cross_site_redirect_is_refused_to_a_report_unaware_of_its_target(
    pair: Settings, ca: TestCA, token: str, report: str, own_keys: None
) -> None:
    site = CountingSite()
    async with serve({"/{p:.*}": site.handle}, ca.server_context()) as elsewhere:
        target = elsewhere.url("/target")

        async def away(request: web.Request) -> web.Response:
            raise web.HTTPFound(target)  # another port: another site

        async with serve({"/away": away}, ca.server_context()) as origin:
            url = origin.url("/away")
            knows, stranger = report, f"{report}-stranger"
            async with ResearchClient(settings=pair, job_id_prefix=f"{token}-") as client:
                await client.seed_urls(knows, [url, target])
                await client.seed_urls(stranger, [url])
                fetched = await client.fetch(knows, url)
                refused = await client.fetch(stranger, url)
    assert fetched["ok"] is True and fetched["final_url"] == target
    assert refused["error"]["kind"] == "url_not_in_menu"
    assert site.hits["/target"] == 1


async def test_across_workers_a_no_store_page_is_fetched_again(
    pair: Settings, ca: TestCA, token: str, report: str, own_keys: None
) -> None:
    site = CountingSite()
    site.headers = {"Cache-Control": "no-store"}
    async with serve({"/{p:.*}": site.handle}, ca.server_context()) as server:
        url = server.url("/page/1")
        readers = [f"{report}-{i}" for i in range(4)]
        async with ResearchClient(settings=pair, job_id_prefix=f"{token}-") as client:
            for reader in readers:
                await client.seed_urls(reader, [url])
            results = [await client.fetch(reader, url) for reader in readers]
    assert [r["cached"] for r in results] == [False] * 4
    assert site.hits["/page/1"] == 4


async def test_a_fetcher_killed_mid_fetch_hands_over_to_a_waiter(
    settings: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis
) -> None:
    site = CountingSite(delay_s=0.0)
    first_request, test_over = asyncio.Event(), asyncio.Event()

    async def hangs_the_first_time(request: web.Request) -> web.Response:
        if not first_request.is_set():
            first_request.set()
            site.arrivals.append((time.monotonic(), request.path))
            await test_over.wait()
            return web.Response(status=503)  # nobody reads this: its fetcher is dead
        return await site.handle(request)

    env = fetch_env(ca, RESEARCH_URL_MENU="off")
    async with serve({"/slow": hangs_the_first_time}, ca.server_context()) as server:
        url = server.url("/slow")
        # The fetcher runs one job at a time, so the waiter's job can only go to the other worker.
        fetcher = start_worker(settings, "fetcher", env={**env, "RESEARCH_MAX_JOBS": "1"})
        waiter = None
        try:
            await asyncio.to_thread(wait_healthy, settings, 1)
            async with ResearchClient(settings=settings, job_id_prefix=f"{token}-") as client:
                await client.enqueue("fetch_page", {"report_id": report, "url": url})
                await asyncio.wait_for(first_request.wait(), 30)
                waiter = start_worker(settings, "waiter", env=env)
                await asyncio.to_thread(wait_healthy, settings, 2)
                job_id = await client.enqueue("fetch_page", {"report_id": f"{report}-2", "url": url})
                while not await redis.exists(f"arq:in-progress:{job_id}"):
                    await asyncio.sleep(0.02)
                await asyncio.sleep(0.5)  # the waiter has joined the flight and blocks on it
                fetcher.send_signal(signal.SIGKILL)
                killed_at = time.monotonic()
                result = await client.wait(job_id, wait_s=30)
                took_over_s = time.monotonic() - killed_at
        finally:
            test_over.set()
            await asyncio.to_thread(stop, fetcher)
            if waiter is not None:
                await asyncio.to_thread(stop, waiter)
    assert result["ok"] is True, result
    assert result["cached"] is False  # the waiter fetched the page itself
    assert [path for _, path in site.arrivals] == ["/slow", "/slow"]
    assert site.arrivals[1][0] > killed_at  # it waited for the fetcher, and fetched only once it died
    assert took_over_s < LEASE_MS / 1000 + FLIGHT_CHECK_S + 3
