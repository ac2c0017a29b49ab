"""A full Redis loses no paid work (issue 24, class 1).

The deploy runs Redis with ``maxmemory`` and ``noeviction``. Here a Redis of the test's own (on a
free loopback port, never the shared one) gets a small ``maxmemory`` and one report reads many
distinct 40 KB pages through the page cache: the cache gives way to results, so no job ends without
its result, the report is charged for exactly the results it got, and the worker's health stays
readable the whole time. When Redis is truly full (the cache has nothing left to give), the client
raises its own ``RedisOutOfMemory`` and the command line says so with exit code 6.

The short form runs by default; the long form (the issue's 24 MB Redis) is behind ``chaos``. Each
page costs Redis about 120 KB: its result and the client's wake-up copy of it, arq's record and the
dashboard's line (about 90 KB, which nothing may drop), and its kept document (about 30 KB, which
the cache gives back; the cache's entry only names it). Since a cached page's text is stored once,
the issue's 152 pages no longer fill 24 MB, so the sizes put Redis past the cache's headroom (80 %
of maxmemory) well before the last page, while what may not be dropped stays under 80 % of it: 96
pages through 12 MB, and 200 through 24 MB.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from aiohttp import web
from redis.exceptions import ResponseError

from jobs.fetch.tool import FetchPageTool
from tests.support.fake_dns import FakeResolver
from tests.support.fetching import fetch_settings
from tests.support.redis_process import RedisProcess
from tests.support.tls import TestCA, TlsServer, serve
from tests.support.workers import running_worker
from worker import cli
from worker.client import RedisOutOfMemory, ResearchClient
from worker.config import Settings
from worker.errors import ErrorKind
from worker.guardian.urls import parse_https_url
from worker.metrics import Metrics
from worker.state import health, keys
from worker.state import memory as redis_memory
from worker.state.memory import is_out_of_memory
from worker.state.politeness import Politeness, host_of

SITE = {"site.test": ["127.0.0.1"]}
PAGE_BYTES = 40 * 1024
WORDS = ("market", "share", "revenue", "growth", "quarter", "report")
WORDS += ("analyst", "forecast", "supply", "chain", "demand")


def page(path: str) -> str:
    """A distinct article of about 40 KB of readable text: nothing two pages share."""
    rng = random.Random(path)
    paragraphs = []
    size = 0
    while size < PAGE_BYTES:
        paragraph = " ".join(rng.choice(WORDS) + str(rng.randrange(10_000)) for _ in range(60))
        paragraphs.append(f"<p>{paragraph}.</p>")
        size += len(paragraph) + 8
    return f"<html><head><title>{path}</title></head><body><main>{''.join(paragraphs)}</main></body></html>"


@contextlib.contextmanager
def small_redis(tmp_path: Path, maxmemory: str) -> Iterator[RedisProcess]:
    server = RedisProcess(
        tmp_path, persistent=False, extra_args=["--maxmemory", maxmemory, "--maxmemory-policy", "noeviction"]
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextlib.asynccontextmanager
async def site(ca: TestCA) -> AsyncIterator[TlsServer]:
    async def handle(request: web.Request) -> web.Response:
        return web.Response(text=page(request.path), content_type="text/html")

    async with serve({"/{p:.*}": handle}, ca.server_context()) as server:
        yield server


def settings_on(server: RedisProcess, ca: TestCA, token: str, pages: int) -> Settings:
    base = Settings(
        redis_url=server.url,
        queue_name=f"research-test:{token}:queue",
        worker_id=f"w-{token}",
        max_jobs=8,
        fetch_budget=pages + 10,
    )
    return fetch_settings(base, ca)


class HealthWatch:
    """Samples, every quarter second, what ``fetch`` asks before enqueueing: is a worker alive?"""

    def __init__(self, redis: aioredis.Redis, queue_name: str) -> None:
        self.redis = redis
        self.queue_name = queue_name
        self.samples: list[bool] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            self.samples.append(await health.any_alive(self.redis, self.queue_name))
            await asyncio.sleep(0.25)

    def __enter__(self) -> HealthWatch:
        self._task = asyncio.create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


async def read_pages(
    client: ResearchClient, server: TlsServer, report: str, pages: int
) -> list[dict[str, Any]]:
    gate = asyncio.Semaphore(4)  # an agent reading a few pages at a time

    async def one(i: int) -> dict[str, Any]:
        async with gate:
            return await client.fetch(report, server.url(f"/p{i}", name="site.test"))

    return list(await asyncio.gather(*(one(i) for i in range(pages))))


# Error kinds a fetch is charged for: the fetch ran (a 404, a timeout, a refused address after DNS).
COSTLY = {kind.value for kind in ErrorKind} - {
    ErrorKind.INTERNAL_ERROR.value,
    ErrorKind.BUDGET_EXHAUSTED.value,
    ErrorKind.INVALID_REQUEST.value,
    ErrorKind.MISSING_REPORT_ID.value,
}


async def one_report_fills_redis(
    tmp_path: Path, ca: TestCA, token: str, maxmemory: str, pages: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A deployment fills its Redis over minutes; this run does it in seconds, so the worker reads
    # Redis's memory ten times a second instead of once (the rate is not what this tests).
    monkeypatch.setattr(redis_memory, "READ_EVERY_S", 0.1)
    report = f"r-{token}"
    with small_redis(tmp_path, maxmemory) as server:
        settings = settings_on(server, ca, token, pages)
        redis = aioredis.Redis.from_url(server.url)
        try:
            async with (
                site(ca) as pages_site,
                running_worker(settings, [FetchPageTool(FakeResolver(SITE))]),
                ResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=60) as client,
            ):
                await asyncio.sleep(0.3)  # the first beat
                with HealthWatch(redis, settings.queue_name) as watch:
                    results = await read_pages(client, pages_site, report, pages)
                # A page is cached as the name of its kept document: the documents are what it holds.
                cached = await redis.zcard(keys.document_index(settings.queue_name))
                charged = int(await redis.hget(keys.budget(report), "fetch") or 0)
                memory = await redis.info("memory")
        finally:
            await redis.aclose()
    kinds = [r["error"]["kind"] if not r["ok"] else "ok" for r in results]
    # No job ends without its result: every page came back, none as a stand-in or a timeout.
    assert kinds.count("ok") == pages, sorted(set(kinds))
    # Charged for exactly what it got (a costly error would count too; there were none).
    assert charged == kinds.count("ok") + sum(kind in COSTLY for kind in kinds)
    # The worker was seen alive at every sample.
    assert watch.samples and all(watch.samples), watch.samples.count(False)
    # The pressure was real: Redis came near its limit, and the cache gave way (it holds fewer
    # pages than were read, all of which it would have kept in a roomy Redis).
    assert int(memory["used_memory"]) > int(memory["maxmemory"]) // 2
    assert cached < pages


async def test_one_report_reading_many_pages_through_a_small_redis_loses_nothing(
    tmp_path: Path, ca: TestCA, token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await one_report_fills_redis(tmp_path, ca, token, "12mb", 96, monkeypatch)


@pytest.mark.chaos
async def test_one_report_reading_200_pages_through_a_24_mb_redis_loses_nothing(
    tmp_path: Path, ca: TestCA, token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await one_report_fills_redis(tmp_path, ca, token, "24mb", 200, monkeypatch)


async def fill(redis: aioredis.Redis, token: str, start: int = 0) -> int:
    """Write filler keys until Redis refuses even a small one for memory; returns how many it took.

    Big ones first, then smaller: a Redis that refused 64 KB may still take a job's few hundred
    bytes once its memory dips (freed buffers), and "truly full" must mean full for those too."""
    count = start
    for size in (64 * 1024, 4 * 1024, 256):
        while True:
            try:
                await redis.set(f"filler:{token}:{count}", b"x" * size)
            except ResponseError as exc:
                if not is_out_of_memory(exc):
                    raise
                break
            count += 1
    return count - start


async def stay_full(redis: aioredis.Redis, margin: int = 512 * 1024) -> int:
    """Lower maxmemory under what a full Redis uses by ``margin``, so that no dip in its memory
    lets a write in; returns the limit to put back."""
    limit = int((await redis.config_get("maxmemory"))["maxmemory"])
    used = int((await redis.info("memory"))["used_memory"])
    await redis.config_set("maxmemory", max(used - margin, 1024 * 1024))
    return limit


async def test_a_truly_full_redis_is_the_clients_own_exception_and_the_commands_exit_6(
    tmp_path: Path,
    ca: TestCA,
    token: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = f"r-{token}"
    with small_redis(tmp_path, "4mb") as server:
        settings = settings_on(server, ca, token, 10)
        redis = aioredis.Redis.from_url(server.url)
        try:
            async with (
                running_worker(settings, [FetchPageTool(FakeResolver(SITE))]),
                ResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=10) as client,
            ):
                await asyncio.sleep(0.3)
                assert await fill(redis, token) > 0
                with pytest.raises(RedisOutOfMemory, match="Redis is out of memory"):
                    await client.fetch(report, "https://site.test/a")
                with pytest.raises(RedisOutOfMemory):
                    await client.seed_urls(report, ["https://site.test/a"])
                await asyncio.sleep(2.5)  # a beat or two at the limit
                alive = await health.any_alive(redis, settings.queue_name)
                monkeypatch.setenv("REDIS_URL", server.url)
                monkeypatch.setenv("RESEARCH_QUEUE", settings.queue_name)
                await fill(redis, token, start=10**6)  # still full, to the last few hundred bytes
                code = await asyncio.to_thread(
                    cli.main, ["fetch", "--report", report, "--wait", "5", "https://site.test/a"]
                )
                charged = await redis.hget(keys.budget(report), "fetch")
        finally:
            await redis.aclose()
    assert alive is True  # the health beat still lands: fetch does not say "no worker"
    assert code == cli.Exit.REDIS_OUT_OF_MEMORY == 6
    said = capsys.readouterr().err
    assert "Redis is out of memory" in said
    assert "no worker" not in said and "cannot reach" not in said and "lost Redis" not in said
    assert charged is None  # nothing was enqueued, so nothing was charged


async def test_a_job_whose_result_cannot_be_stored_gives_its_charge_back(
    tmp_path: Path, ca: TestCA, token: str
) -> None:
    # Redis fills while the job runs (the page answers only once it is full) and the cache holds
    # nothing to give: the result and even its stand-in are refused, so the charge is returned. The
    # report is never charged for a result it did not get.
    report = f"r-{token}"
    release = asyncio.Event()

    async def slow(request: web.Request) -> web.Response:
        await release.wait()
        return web.Response(text=page(request.path), content_type="text/html")

    with small_redis(tmp_path, "4mb") as server:
        settings = dataclasses.replace(settings_on(server, ca, token, 10), fetch_timeout_s=30.0)
        redis = aioredis.Redis.from_url(server.url)
        try:
            async with (
                serve({"/{p:.*}": slow}, ca.server_context()) as slow_site,
                running_worker(settings, [FetchPageTool(FakeResolver(SITE))]),
                ResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=40) as client,
            ):
                job = asyncio.create_task(client.fetch(report, slow_site.url("/slow", name="site.test")))
                while not await redis.hget(keys.budget(report), "fetch"):
                    await asyncio.sleep(0.05)
                fillers = await fill(redis, token)
                # Full must stay full while the job writes: a dip in used memory (a key expiring,
                # a freed buffer) would let the result in, and then it is stored and rightly kept.
                limit = await stay_full(redis)
                release.set()
                refunded = False
                for _ in range(300):  # the result's write tries (about 11 s), then the refund
                    if int(await redis.hget(keys.budget(report), "fetch") or 0) == 0:
                        refunded = True
                        break
                    await asyncio.sleep(0.1)
                await redis.config_set("maxmemory", limit)
                for n in range(fillers):
                    await redis.delete(f"filler:{token}:{n}")
                result = await job
                charged = int(await redis.hget(keys.budget(report), "fetch") or 0)
        finally:
            await redis.aclose()
    assert refunded
    assert charged == 0
    # What the client got says the job did not complete; never a page it was not charged for.
    assert result["ok"] is False and result["error"]["kind"] in ("internal_error", "timeout"), result


async def test_the_cache_gives_way_while_the_worker_fetches_nothing(
    tmp_path: Path, ca: TestCA, token: str
) -> None:
    # Pages cached, then Redis fills past its headroom with other data while no job runs: the
    # worker's cache sheds within a couple of seconds, without waiting for a fetch to notice.
    with small_redis(tmp_path, "8mb") as server:
        settings = settings_on(server, ca, token, 20)
        redis = aioredis.Redis.from_url(server.url)
        try:
            async with (
                site(ca) as pages_site,
                running_worker(settings, [FetchPageTool(FakeResolver(SITE))]),
                ResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=60) as client,
            ):
                results = await read_pages(client, pages_site, f"r-{token}", 20)
                # A page is cached as the name of its kept document: the documents are what it holds.
                before = await redis.zcard(keys.document_index(settings.queue_name))
                memory = await redis.info("memory")
                filler = int(memory["maxmemory"]) * 9 // 10 - int(memory["used_memory"])
                for n in range(max(0, filler) // (64 * 1024)):
                    await redis.set(f"filler:{token}:{n}", b"x" * 64 * 1024)
                await asyncio.sleep(2.5)
                after = await redis.zcard(keys.document_index(settings.queue_name))
                used = int((await redis.info("memory"))["used_memory"])
        finally:
            await redis.aclose()
    assert all(r["ok"] for r in results)
    assert before == 20
    assert after < before
    assert used <= int(memory["maxmemory"]) * 0.85


async def test_a_host_slot_is_taken_at_the_memory_limit_once_the_cache_gives_way(
    tmp_path: Path, ca: TestCA, token: str
) -> None:
    # Taking a host's slot is a write: at the limit, like the charge and the result, it waits on
    # the page cache shedding its pages, instead of ending the job in an internal_error.
    target = parse_https_url("https://site.test/page")
    with small_redis(tmp_path, "4mb") as server:
        settings = settings_on(server, ca, token, 10)
        redis = aioredis.Redis.from_url(server.url)
        try:
            index, total = keys.page_index(settings.queue_name), keys.page_bytes(settings.queue_name)
            cached = [keys.page(settings.queue_name, "main", f"{n:064x}") for n in range(8)]
            for key in cached:
                await redis.set(key, b"p" * 64 * 1024)
                await redis.zadd(index, {f"{key}|{64 * 1024}": 1})
            await redis.set(total, 8 * 64 * 1024)
            await fill(redis, token)
            await stay_full(redis, margin=64 * 1024)
            loop = asyncio.get_running_loop()
            async with Politeness(redis, settings, Metrics()).turn(target, loop.time() + 10):
                holders = await redis.zcard(keys.host_slots(settings.queue_name, host_of(target)))
            left = sum([await redis.exists(key) for key in cached])
        finally:
            await redis.aclose()
    assert holders == 1
    assert left < len(cached)  # the cache gave memory back so that the slot could be taken
