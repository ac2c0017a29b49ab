"""Faults, with real processes, real Redis and local servers: nothing lost, nothing overspent.

Run with `make chaos` (long form) or `pytest -m chaos --chaos-short` (CI's short form).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from jobs.search import WebSearchTool
from tests.support.fake_openrouter import KEY, fake_openrouter, provider_error, slow
from tests.support.processes import start_worker, stop, wait_healthy
from tests.support.redis_process import RedisProcess
from tests.support.workers import running_worker
from worker.client import ResearchClient
from worker.config import Secret, Settings
from worker.serialization import loads
from worker.state import keys

pytestmark = pytest.mark.chaos

# Short time bounds, so the tests' jobs and searches end quickly.
FAST_TIMEOUTS = {
    "RESEARCH_FETCH_TIMEOUT_S": "4",
    "RESEARCH_SEARCH_TIMEOUT_S": "2",
    "RESEARCH_REDUCE_CPU_BUDGET_S": "1",
}


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisProcess]:
    server = RedisProcess(tmp_path, persistent=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def test_workers_ride_out_redis_restarts_while_idle_and_while_jobs_are_queued(
    settings: Settings, own_redis: RedisProcess, token: str, chaos_short: bool
) -> None:
    s = dataclasses.replace(settings, redis_url=own_redis.url, max_jobs=2)
    workers = [start_worker(s, f"w{i}", env=FAST_TIMEOUTS) for i in range(2)]
    jobs = 20 if chaos_short else 80
    try:
        wait_healthy(s, 2)
        own_redis.restart(down_s=1.0)  # idle workers lose their connections
        async with ResearchClient(settings=s, job_id_prefix=f"{token}-", wait_s=60) as client:
            after_idle = await asyncio.gather(
                *(client.call("echo", {"report_id": f"idle-{token}-{i}", "value": str(i)}) for i in range(5))
            )
            assert all(r["ok"] for r in after_idle)
            ids = [
                await client.enqueue("slow", {"report_id": f"q-{token}-{i}", "seconds": 0.25})
                for i in range(jobs)
            ]
            await asyncio.sleep(1.0)
            own_redis.restart(down_s=1.0)  # with jobs running and queued
            results = [await client.wait(job_id) for job_id in ids]
            stored = [await client.redis.exists(keys.result(job_id)) for job_id in ids]
    finally:
        logs = [stop(w) for w in workers]
    assert [r["ok"] for r in results] == [True] * jobs, [r for r in results if not r["ok"]][:3]
    assert all(stored)
    assert all(w.returncode == 0 for w in workers), logs


@contextlib.asynccontextmanager
async def search_worker(settings: Settings, base_url: str, timeout_s: float) -> AsyncIterator[ResearchClient]:
    s = dataclasses.replace(
        settings,
        openrouter_base_url=base_url,
        openrouter_api_key=Secret(KEY),
        search_timeout_s=timeout_s,
        usage_source=f"src-{settings.worker_id}",  # carries the test token, so cleanup finds it
    )
    async with (
        running_worker(s, [WebSearchTool()]),
        ResearchClient(settings=s, wait_s=timeout_s + 30, job_id_prefix=f"{settings.worker_id}-") as client,
    ):
        yield client


async def _timed_searches(
    client: ResearchClient, report: str, count: int
) -> tuple[list[dict[str, object]], float]:
    started = time.monotonic()
    results = await asyncio.gather(*(client.search(report, f"query {i}") for i in range(count)))
    return list(results), time.monotonic() - started


async def test_a_provider_answering_429_for_a_minute_ends_in_rate_limited_within_the_budget(
    settings: Settings, redis: aioredis.Redis, report: str, chaos_short: bool
) -> None:
    outage_s = 10.0 if chaos_short else 60.0
    timeout_s = 4.0 if chaos_short else 20.0
    async with fake_openrouter() as fake:
        ends = time.monotonic() + outage_s
        fake.will(*[provider_error(429, "slow down", retry_after="1") for _ in range(500)])
        async with search_worker(settings, fake.base_url, timeout_s) as client:
            results, elapsed = await _timed_searches(client, report, 3)
        assert time.monotonic() < ends  # the outage outlasted every search
    assert {r["error"]["kind"] for r in results} == {"rate_limited"}  # type: ignore[index]
    assert elapsed < timeout_s + 3
    assert await redis.hget(keys.budget(report), "search") == b"3"


async def test_a_provider_that_is_down_ends_in_connection_failed_within_the_budget(
    settings: Settings, redis: aioredis.Redis, report: str
) -> None:
    from tests.support.redis_process import free_port

    async with search_worker(settings, f"http://127.0.0.1:{free_port()}/api/v1", 3.0) as client:
        results, elapsed = await _timed_searches(client, report, 3)
    assert {r["error"]["kind"] for r in results} == {"connection_failed"}  # type: ignore[index]
    assert elapsed < 3.0 + 3
    assert await redis.hget(keys.budget(report), "search") == b"3"


async def test_a_provider_that_hangs_ends_in_timeout_within_the_budget(
    settings: Settings, redis: aioredis.Redis, report: str
) -> None:
    async with fake_openrouter() as fake:
        fake.will(*[slow(60) for _ in range(10)])
        async with search_worker(settings, fake.base_url, 3.0) as client:
            results, elapsed = await _timed_searches(client, report, 3)
    assert {r["error"]["kind"] for r in results} == {"timeout"}  # type: ignore[index]
    assert elapsed < 3.0 + 3
    assert await redis.hget(keys.budget(report), "search") == b"3"


async def test_results_land_with_their_ttl_when_the_reader_is_gone(
    settings: Settings, redis: aioredis.Redis, token: str, report: str
) -> None:
    worker = start_worker(settings, "alone")
    try:
        wait_healthy(settings, 1)
        async with ResearchClient(settings=settings, job_id_prefix=f"{token}-") as client:
            job_id = await client.enqueue("slow", {"report_id": report, "seconds": 0.5})
        # The client is gone; the worker finishes anyway.
        deadline = time.monotonic() + 20
        while not await redis.exists(keys.result(job_id)):
            assert time.monotonic() < deadline, "the result never landed"
            await asyncio.sleep(0.1)
    finally:
        stop(worker)
    ttl = await redis.ttl(keys.result(job_id))
    assert 0 < ttl <= settings.result_ttl_s
    assert loads(await redis.get(keys.result(job_id)))["ok"] is True
