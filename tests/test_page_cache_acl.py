"""The page cache and politeness under the deployment's Redis ACL: nothing they run is refused."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.test_deploy_acl import QUEUE, acl_redis, binaries
from worker.guardian.redirects import HopLog, follow_any
from worker.guardian.urls import parse_https_url
from worker.metrics import Metrics
from worker.state.pages.cache import Fresh, PageCache, ServedFrom
from worker.state.pages.entry import Page
from worker.state.politeness import Politeness, backing_off

TARGET = parse_https_url("https://example.org/a")


def page() -> Page:
    return Page(
        url=TARGET.url,
        final_url=TARGET.url,
        status=200,
        content_type="text/html",
        title="A",
        text="text",
        truncated=False,
        redirects=0,
        bytes_read=4,
        fetched_at="2026-12-02T08:00:00Z",
        extraction="main",
        links=(),
        hidden_removed=0,
    )


@binaries
async def test_the_worker_user_runs_the_cache_flights_and_host_slots_and_the_dashboard_user_lists_holds(
    binary: str, tmp_path: Path
) -> None:
    with acl_redis(binary, tmp_path) as server:
        settings = server.settings("research-worker")
        worker = server.client("research-worker")
        dashboard = server.client("research-dashboard")
        try:
            cache = PageCache(worker, settings, Metrics())
            started = asyncio.Event()

            async def slow_fetch() -> Fresh[None]:
                started.set()
                await asyncio.sleep(0.2)
                return Fresh(page(), storable=True)

            until = asyncio.get_running_loop().time() + 10
            serve = cache.serve(
                TARGET, "main", fresh=False, until=until, hops=HopLog(follow_any, TARGET), fetch=slow_fetch
            )
            leading = asyncio.create_task(serve)
            await started.wait()
            joined = await cache.serve(
                TARGET, "main", fresh=False, until=until, hops=HopLog(follow_any, TARGET), fetch=slow_fetch
            )
            led = await leading
            hit = await cache.serve(
                TARGET, "main", fresh=False, until=until, hops=HopLog(follow_any, TARGET), fetch=slow_fetch
            )

            hosts = Politeness(worker, settings, Metrics())
            async with hosts.turn(TARGET, until):
                await hosts.hold_if_asked(TARGET, 429, 30.0)
            listed = await backing_off(dashboard, QUEUE)
        finally:
            await worker.aclose()
            await dashboard.aclose()
    assert (led.source, joined.source, hit.source) == (
        ServedFrom.FETCHED,
        ServedFrom.FLIGHT,
        ServedFrom.CACHE,
    )
    assert [b.host for b in listed] == ["example.org"]
