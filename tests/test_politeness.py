"""Politeness per host: a bounded number of fetches in flight to one host, and holds when it asks."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from aiohttp import web

from jobs.fetch.tool import FetchPageTool
from tests.support.fake_dns import FakeResolver
from tests.support.fetching import fetch_settings
from tests.support.tls import TestCA, TlsServer, serve
from tests.support.workers import running_worker
from worker.client import ResearchClient
from worker.config import Settings
from worker.errors import Timeout
from worker.guardian.urls import parse_https_url
from worker.metrics import Metrics
from worker.runtime.worker import ResearchWorker
from worker.state import keys, politeness
from worker.state.leases import LEASE_MS
from worker.state.politeness import MAX_HOLD_S, SLOTS_TTL_MS, Politeness, backing_off, host_of

SITE = {"site.test": ["127.0.0.1"], "www.site.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]}


class Host:
    """Counts requests and how many are in flight at once, per Host header."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.in_flight: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        self.arrivals: list[tuple[float, str]] = []
        self.answers: dict[str, web.Response] = {}

    async def handle(self, request: web.Request) -> web.Response:
        name = (request.host or "").split(":")[0].removeprefix("www.")
        self.arrivals.append((time.monotonic(), request.path))
        self.in_flight[name] = self.in_flight.get(name, 0) + 1
        self.peak[name] = max(self.peak.get(name, 0), self.in_flight[name])
        try:
            await asyncio.sleep(self.delay_s)
            answer = self.answers.pop(request.path, None)
            if answer is not None:
                return answer
            return web.Response(text=f"<p>page {request.path}</p>", content_type="text/html")
        finally:
            self.in_flight[name] -= 1


@contextlib.asynccontextmanager
async def polite_worker(
    settings: Settings, ca: TestCA, token: str, host: Host, **changes: object
) -> AsyncIterator[tuple[TlsServer, ResearchWorker, ResearchClient]]:
    # The cache is off so that every job goes to the network: what is measured is the host's load.
    tuned = fetch_settings(settings, ca, cache_ttl_s=0, **changes)  # type: ignore[arg-type]
    async with (
        serve({"/{p:.*}": host.handle}, ca.server_context()) as server,
        running_worker(tuned, [FetchPageTool(FakeResolver(SITE))]) as worker,
        ResearchClient(settings=tuned, job_id_prefix=f"{token}-", wait_s=60) as client,
    ):
        yield server, worker, client


def counted(worker: ResearchWorker, series: str, **labels: str) -> float:
    assert worker.runtime is not None
    return worker.runtime.metrics.registry.get_sample_value(series, labels) or 0.0


async def test_at_most_the_host_limit_of_fetches_are_in_flight_to_one_host(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    host = Host(delay_s=0.2)
    async with polite_worker(settings, ca, token, host, host_concurrency=2) as (server, worker, client):
        results = await asyncio.gather(
            *(client.fetch(f"{report}-{i}", server.url(f"/p{i}", name="site.test")) for i in range(8))
        )
    assert all(r["ok"] for r in results), results
    assert host.peak["site.test"] == 2
    assert counted(worker, "research_host_waits_total", reason="slot") >= 1


async def test_a_host_and_its_www_twin_share_their_slots(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    host = Host(delay_s=0.2)
    async with polite_worker(settings, ca, token, host, host_concurrency=2) as (server, _, client):
        names = ["site.test", "www.site.test"] * 3
        results = await asyncio.gather(
            *(client.fetch(f"{report}-{i}", server.url(f"/p{i}", name=n)) for i, n in enumerate(names))
        )
    assert all(r["ok"] for r in results), results
    assert host.peak["site.test"] == 2


async def test_waiting_for_a_busy_host_does_not_hold_up_fetches_to_other_hosts(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    # Each answer takes 3 s: the other host's fetch takes its own 3 s, well under the 9 s of the
    # busy host's three in a row, with room for a busy machine.
    host = Host(delay_s=3.0)
    slow_ok = {"host_concurrency": 1, "fetch_timeout_s": 30.0}  # the third waits 6 s for its turn
    async with polite_worker(settings, ca, token, host, **slow_ok) as (server, _, client):
        started = time.monotonic()
        busy = [
            asyncio.create_task(client.fetch(f"{report}-{i}", server.url(f"/p{i}", name="site.test")))
            for i in range(3)
        ]
        other = await client.fetch(f"{report}-other", server.url("/q", name="other.test"))
        other_s = time.monotonic() - started
        await asyncio.gather(*busy)
        busy_s = time.monotonic() - started
    assert other["ok"] is True
    assert other_s < 7.5  # its own 3 s, not behind the busy host's queue of three
    assert busy_s >= 9.0  # the busy host's three fetches ran one at a time


async def test_a_retry_after_holds_every_later_fetch_to_the_host_until_then(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    host = Host()
    host.answers["/limited"] = web.Response(status=429, headers={"Retry-After": "2"})
    async with polite_worker(settings, ca, token, host) as (server, worker, client):
        limited = await client.fetch(report, server.url("/limited", name="site.test"))
        answered_at = host.arrivals[-1][0]
        later = await asyncio.gather(
            *(client.fetch(f"{report}-{i}", server.url(f"/p{i}", name="site.test")) for i in range(3))
        )
    assert (limited["error"]["kind"], limited["status"]) == ("http_status", 429)
    assert all(r["ok"] for r in later), later
    held = [at - answered_at for at, path in host.arrivals if path != "/limited"]
    assert min(held) >= 2.0
    assert counted(worker, "research_host_waits_total", reason="backoff") == 3


@pytest.mark.parametrize(
    ("status", "headers", "holds"),
    [
        pytest.param(503, {"Retry-After": "2"}, True, id="503 with Retry-After"),
        pytest.param(429, {}, False, id="429 without Retry-After"),
        pytest.param(429, {"Retry-After": "soon"}, False, id="429 with an unreadable Retry-After"),
        pytest.param(500, {"Retry-After": "2"}, False, id="500 with Retry-After"),
        pytest.param(429, {"Retry-After": "0"}, False, id="429 asking for no wait"),
    ],
)
async def test_only_a_429_or_503_with_a_readable_retry_after_holds_the_host(
    settings: Settings,
    ca: TestCA,
    token: str,
    report: str,
    redis: aioredis.Redis,
    status: int,
    headers: dict[str, str],
    holds: bool,
) -> None:
    host = Host()
    host.answers["/limited"] = web.Response(status=status, headers=headers)
    async with polite_worker(settings, ca, token, host) as (server, _, client):
        await client.fetch(report, server.url("/limited", name="site.test"))
        listed = await backing_off(redis, settings.queue_name)
    assert [b.host for b in listed] == ([f"site.test:{server.port}"] if holds else [])


async def test_a_hold_past_the_fetchs_deadline_ends_at_once_in_rate_limited_naming_the_host(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    host = Host()
    host.answers["/limited"] = web.Response(status=429, headers={"Retry-After": "120"})
    async with polite_worker(settings, ca, token, host) as (server, _, client):
        await client.fetch(report, server.url("/limited", name="site.test"))
        started = time.monotonic()
        held = await client.fetch(f"{report}-2", server.url("/other", name="www.site.test"))
        elapsed = time.monotonic() - started
    assert held["error"]["kind"] == "rate_limited"
    assert f"site.test:{server.port}" in held["error"]["message"]
    # It says what started the hold: the status, and when (to the second, UTC).
    assert "answered HTTP 429 with a Retry-After at 20" in held["error"]["message"]
    assert elapsed < 30.0  # not the 120 s hold (generous: a busy machine)
    assert [path for _, path in host.arrivals] == ["/limited"]


async def test_the_dashboard_lists_the_hosts_backing_off_with_their_until_time(
    settings: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis
) -> None:
    host = Host()
    host.answers["/limited"] = web.Response(status=429, headers={"Retry-After": "30"})
    host.answers["/brief"] = web.Response(status=503, headers={"Retry-After": "1"})
    async with polite_worker(settings, ca, token, host) as (server, worker, client):
        await client.fetch(report, server.url("/limited", name="site.test"))
        await client.fetch(report, server.url("/brief", name="other.test"))
        now = time.time()
        listed = await backing_off(redis, settings.queue_name)
        gauge = counted(worker, "research_hosts_backing_off")
        await asyncio.sleep(1.1)
        after = await backing_off(redis, settings.queue_name)
    assert [b.host for b in listed] == [f"other.test:{server.port}", f"site.test:{server.port}"]
    assert [b.cause.status if b.cause else None for b in listed] == [503, 429]
    assert all(b.cause and now - 10 < b.cause.since <= now + 1 for b in listed)
    assert now < listed[0].until <= now + 1.1
    assert now + 28 < listed[1].until <= now + 30.1
    assert gauge == 2
    assert [b.host for b in after] == [f"site.test:{server.port}"]


async def test_a_retry_after_of_a_day_holds_the_host_for_at_most_an_hour(
    settings: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis
) -> None:
    host = Host()
    host.answers["/limited"] = web.Response(status=429, headers={"Retry-After": "86400"})
    async with polite_worker(settings, ca, token, host) as (server, _, client):
        await client.fetch(report, server.url("/limited", name="site.test"))
        listed = await backing_off(redis, settings.queue_name)
    assert len(listed) == 1
    assert listed[0].until <= time.time() + MAX_HOLD_S + 1


async def test_a_slot_held_by_a_worker_that_died_frees_when_its_lease_lapses(
    settings: Settings, redis: aioredis.Redis
) -> None:
    one_slot = dataclasses.replace(settings, host_concurrency=1)
    target = parse_https_url("https://site.test/page")
    slots = keys.host_slots(settings.queue_name, host_of(target))
    # What a worker killed mid-fetch leaves behind: its lease, which nobody renews or releases.
    seconds, micros = await redis.time()
    await redis.zadd(slots, {"killed-worker": seconds * 1000 + micros // 1000 + LEASE_MS})
    loop = asyncio.get_running_loop()
    started = loop.time()
    async with Politeness(redis, one_slot, Metrics()).turn(target, loop.time() + 10):
        waited = loop.time() - started
        holders = await redis.zrange(slots, 0, -1)
    assert LEASE_MS / 1000 - 0.2 <= waited <= LEASE_MS / 1000 + 1.5
    assert b"killed-worker" not in holders and len(holders) == 1


async def test_a_turn_that_does_not_come_before_the_deadline_is_a_timeout_naming_the_host(
    settings: Settings, redis: aioredis.Redis
) -> None:
    one_slot = dataclasses.replace(settings, host_concurrency=1)
    target = parse_https_url("https://site.test/page")
    first, second = Politeness(redis, one_slot, Metrics()), Politeness(redis, one_slot, Metrics())
    loop = asyncio.get_running_loop()
    async with first.turn(target, loop.time() + 5):
        with pytest.raises(Timeout, match=r"site\.test"):
            async with second.turn(target, loop.time() + 0.3):
                pass


async def test_a_released_slot_wakes_a_waiting_job_at_once(
    settings: Settings, redis: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The waiter's own look comes only after a minute here: woken within 20 s, it was the wake-up
    # (a bound that holds on a loaded machine; the wake-up's speed is bench/ material).
    monkeypatch.setattr(politeness, "SLOT_CHECK_S", 60.0)
    one_slot = dataclasses.replace(settings, host_concurrency=1)
    target = parse_https_url("https://site.test/page")
    first, second = Politeness(redis, one_slot, Metrics()), Politeness(redis, one_slot, Metrics())
    loop = asyncio.get_running_loop()
    released_at = 0.0

    async def hold_briefly() -> None:
        nonlocal released_at
        async with first.turn(target, loop.time() + 5):
            await asyncio.sleep(0.3)
        released_at = loop.time()

    holder = asyncio.create_task(hold_briefly())
    await asyncio.sleep(0.05)
    async with second.turn(target, loop.time() + 30):
        woke_at = loop.time()
    await holder
    assert woke_at - released_at < 20  # a wake-up, not the waiter's own look a minute on


async def test_a_hosts_slots_key_is_given_its_ttl_when_it_starts_and_renewed_once_a_minute_per_worker(
    settings: Settings, redis: aioredis.Redis
) -> None:
    target = parse_https_url("https://site.test/page")
    slots = keys.host_slots(settings.queue_name, host_of(target))
    first, second = Politeness(redis, settings, Metrics()), Politeness(redis, settings, Metrics())
    loop = asyncio.get_running_loop()
    async with first.turn(target, loop.time() + 5):
        assert SLOTS_TTL_MS - 1000 <= await redis.pttl(slots) <= SLOTS_TTL_MS  # started the key
        await redis.pexpire(slots, 10_000)  # as if a minute had gone by since
        async with first.turn(target, loop.time() + 5):
            assert await redis.pttl(slots) <= 10_000  # this worker renewed it within the minute
        async with second.turn(target, loop.time() + 5):
            assert SLOTS_TTL_MS - 1000 <= await redis.pttl(slots) <= SLOTS_TTL_MS  # another worker's turn
    assert not await redis.exists(slots)  # the last release took the last lease: the key is gone


async def test_a_slot_and_a_hold_end_by_redis_clock_whatever_the_workers_wall_clock(
    settings: Settings, redis: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = parse_https_url("https://site.test/page")
    slots = keys.host_slots(settings.queue_name, host_of(target))
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + 3600)  # an hour ahead of Redis's
    hosts = Politeness(redis, settings, Metrics())
    loop = asyncio.get_running_loop()
    async with hosts.turn(target, loop.time() + 5):
        [(_, lease_ends)] = await redis.zrange(slots, 0, -1, withscores=True)
    await hosts.hold_if_asked(target, 429, 30.0)
    hold_ends = await redis.zscore(keys.host_backoffs(settings.queue_name), host_of(target))
    seconds, micros = await redis.time()
    redis_now = seconds * 1000 + micros / 1000
    assert redis_now - 1000 <= lease_ends - LEASE_MS <= redis_now
    assert hold_ends is not None and redis_now - 1000 <= hold_ends - 30_000 <= redis_now
