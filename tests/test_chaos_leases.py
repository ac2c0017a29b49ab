"""Leases with real processes: a worker killed mid-fetch, and a worker stopped past its lease and
resumed. Default timeouts throughout: without leases, the job would stay invisible for the job
timeout plus 10 s (over a minute).

Run with `make chaos` or `pytest -m chaos --chaos-short`.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest
import redis.asyncio as aioredis
from aiohttp import web
from arq.constants import job_key_prefix, result_key_prefix

from tests.support.processes import read_log, start_worker, stop, wait_healthy
from tests.support.tls import TestCA, TlsServer, serve
from worker.client import ResearchClient
from worker.config import Settings
from worker.serialization import loads
from worker.state import keys

pytestmark = pytest.mark.chaos

TAKEOVER_BOUND_S = 20.0


def fetch_env(ca: TestCA) -> dict[str, str]:
    return {
        "RESEARCH_GUARDIAN_ALLOW_CIDRS": "127.0.0.1/32",
        "RESEARCH_CA_BUNDLE": str(ca.bundle),
        "RESEARCH_URL_MENU": "off",
    }


@dataclass
class HeldPage:
    """The first request waits until the test lets it go; every later one is answered at once."""

    requests: list[float] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append(time.monotonic())
        if len(self.requests) == 1:
            await self.release.wait()
            return web.Response(text="<p>the stale evidence</p>", content_type="text/html")
        return web.Response(text="<p>the fresh evidence</p>", content_type="text/html")

    async def first_request(self) -> None:
        deadline = time.monotonic() + 30
        while not self.requests:
            assert time.monotonic() < deadline, "the fetch never reached the server"
            await asyncio.sleep(0.02)


@asynccontextmanager
async def held_page(ca: TestCA) -> AsyncIterator[tuple[HeldPage, TlsServer]]:
    page = HeldPage()
    async with serve({"/": page.handle}, ca.server_context()) as server:
        try:
            yield page, server
        finally:
            page.release.set()


async def lines_for(redis: aioredis.Redis, settings: Settings, job_id: str) -> int:
    entries = await redis.lrange(keys.recent(settings.queue_name), 0, -1)
    return sum(1 for e in entries if loads(e)["job_id"] == job_id)


async def until(check: Callable[[], Awaitable[bool]], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.1)


async def test_a_worker_killed_mid_fetch_has_its_job_finished_elsewhere_within_20_s_once_charged(
    settings: Settings, ca: TestCA, redis: aioredis.Redis, token: str, report: str
) -> None:
    env = fetch_env(ca)
    doomed: subprocess.Popen[bytes] | None = None
    survivor: subprocess.Popen[bytes] | None = None
    async with held_page(ca) as (page, server):
        try:
            doomed = start_worker(settings, "doomed", module="tests.support.run_cli_worker", env=env)
            wait_healthy(settings, 1)
            async with ResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=90) as client:
                job_id = await client.enqueue("fetch_page", {"report_id": report, "url": server.url("/")})
                await page.first_request()
                survivor = start_worker(settings, "survivor", module="tests.support.run_cli_worker", env=env)
                wait_healthy(settings, 2)
                doomed.send_signal(signal.SIGKILL)
                killed_at = time.monotonic()
                result = await client.wait(job_id)
                took = time.monotonic() - killed_at
            assert survivor.poll() is None, read_log(survivor)
        finally:
            for proc in (doomed, survivor):
                if proc is not None:
                    stop(proc)
    print(f"\nSIGKILL mid-fetch: the job finished on another worker {took:.1f} s after the kill")
    assert result["ok"] is True, result
    assert "the fresh evidence" in result["text"]
    assert took < TAKEOVER_BOUND_S
    assert len(page.requests) == 2
    assert await redis.hget(keys.budget(report), "fetch") == b"1"
    assert await lines_for(redis, settings, job_id) == 1


async def test_a_worker_stopped_past_its_lease_and_resumed_leaves_one_result_and_one_charge(
    settings: Settings, ca: TestCA, redis: aioredis.Redis, token: str, report: str
) -> None:
    env = fetch_env(ca)
    paused: subprocess.Popen[bytes] | None = None
    other: subprocess.Popen[bytes] | None = None
    async with held_page(ca) as (page, server):
        try:
            paused = start_worker(settings, "paused", module="tests.support.run_cli_worker", env=env)
            wait_healthy(settings, 1)
            async with ResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=90) as client:
                job_id = await client.enqueue("fetch_page", {"report_id": report, "url": server.url("/")})
                await page.first_request()
                other = start_worker(settings, "other", module="tests.support.run_cli_worker", env=env)
                wait_healthy(settings, 2)
                paused.send_signal(signal.SIGSTOP)
                result = await client.wait(job_id)
                # The stale answer reaches the paused worker the moment it resumes.
                page.release.set()
                paused.send_signal(signal.SIGCONT)

                async def paused_worker_gave_up() -> bool:
                    log = read_log(paused) if paused is not None else ""
                    return "lost the lease" in log or "wrote this job's result first" in log

                await until(paused_worker_gave_up, 30, "the resumed worker never noticed it lost the job")
                await asyncio.sleep(1.0)  # and arq's finish after it, which must change nothing
                paused_key = keys.health(settings.queue_name, f"{settings.worker_id}-paused")

                async def paused_worker_is_healthy() -> bool:
                    return bool(await redis.exists(paused_key))

                await until(paused_worker_is_healthy, 15, "the resumed worker did not report healthy")
            assert paused.poll() is None, read_log(paused)
            assert other.poll() is None, read_log(other)
        finally:
            page.release.set()
            for proc in (paused, other):
                if proc is not None:
                    if proc.poll() is None:
                        proc.send_signal(signal.SIGCONT)
                    stop(proc)
    assert result["ok"] is True, result
    assert "the fresh evidence" in result["text"]
    stored = loads(await redis.get(keys.result(job_id)))
    assert stored == result
    assert await lines_for(redis, settings, job_id) == 1
    assert await redis.hget(keys.budget(report), "fetch") == b"1"
    assert await redis.zscore(settings.queue_name, job_id) is None
    assert not await redis.exists(job_key_prefix + job_id)
    assert await redis.exists(result_key_prefix + job_id)
