"""After a Redis restart the health keys are gone though the workers live: a client that saw a worker
waits one beat (``health.RESTART_GRACE_S`` from the restart) for one before it says no worker runs;
a client that never saw one is told at once. A real redis-server, restarted on its own free port."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from tests.support.redis_process import RedisProcess
from tests.support.tools import TEST_TOOLS
from tests.support.workers import running_worker
from worker.client import NoWorkerRunning, ResearchClient
from worker.config import Settings
from worker.state import health, keys


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisProcess]:
    process = RedisProcess(tmp_path, persistent=False)
    process.start()
    try:
        yield process
    finally:
        process.stop()


def settings_on(server: RedisProcess, token: str) -> Settings:
    return Settings(
        redis_url=server.url, queue_name=f"research-test:{token}:queue", worker_id=f"w-{token}", max_jobs=4
    )


async def beat(redis: aioredis.Redis, queue: str, worker_id: str) -> None:
    """One beat, as a worker publishes it."""
    await health.publish(redis, queue, keys.health(queue, worker_id), {"beat_at": time.time()}, health.TTL_S)


async def test_a_real_worker_is_found_again_right_after_a_redis_restart(
    server: RedisProcess, token: str
) -> None:
    s = settings_on(server, token)
    report = f"r-{token}"
    async with (
        running_worker(s, list(TEST_TOOLS)),
        ResearchClient(settings=s, job_id_prefix=f"{token}-", wait_s=60) as client,
    ):
        assert (await client.run("echo", {"report_id": report, "value": "before"}))["ok"]
        await asyncio.to_thread(server.restart, 0.5)
        # The worker reconnects with a backoff; until its next beat the queue holds no health key.
        after = await client.run("echo", {"report_id": report, "value": "after"})
    assert after["ok"], after


async def test_a_client_that_saw_a_worker_waits_for_its_next_beat_after_a_restart(
    server: RedisProcess, token: str
) -> None:
    queue = f"research-test:{token}:queue"
    redis = aioredis.Redis.from_url(server.url)
    try:
        await beat(redis, queue, "w1")
        watch = health.WorkerWatch()
        assert await watch.ready(redis, queue)
        await asyncio.to_thread(server.restart, 0.2)
        assert not await health.any_alive(redis, queue)  # the restart lost the key

        async def late_beat() -> None:
            await asyncio.sleep(1.5)
            await beat(redis, queue, "w1")

        beating = asyncio.create_task(late_beat())
        started = time.monotonic()
        assert await watch.ready(redis, queue)  # not a false "no worker"
        assert time.monotonic() - started >= 1.0  # it did wait for the beat
        await beating
    finally:
        await redis.aclose()


async def test_with_no_worker_back_the_client_says_so_once_the_grace_has_passed(
    server: RedisProcess, token: str
) -> None:
    s = settings_on(server, token)
    async with ResearchClient(settings=s, job_id_prefix=f"{token}-", wait_s=60) as client:
        await beat(client.redis, s.queue_name, "w1")
        assert (await client.run("echo", {"report_id": f"r-{token}", "value": "x"}, wait_s=0.2))[
            "ok"
        ] is False
        await asyncio.to_thread(server.restart, 0.2)
        started = time.monotonic()
        with pytest.raises(NoWorkerRunning):
            await client.run("echo", {"report_id": f"r-{token}", "value": "y"})
        waited = time.monotonic() - started
        up_s = await health.uptime_s(client.redis)
    assert up_s is not None and up_s >= health.RESTART_GRACE_S - 1  # it waited out the grace
    assert waited >= 2.0


async def test_a_client_that_never_saw_a_worker_is_told_at_once_even_after_a_restart(
    server: RedisProcess, token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = settings_on(server, token)
    await asyncio.to_thread(server.restart, 0.2)

    async def never(*_: object) -> None:
        raise AssertionError("a client that never saw a worker has nothing to wait for")

    monkeypatch.setattr(health, "uptime_s", never)
    async with ResearchClient(settings=s, job_id_prefix=f"{token}-", wait_s=60) as client:
        with pytest.raises(NoWorkerRunning):
            await client.run("echo", {"report_id": f"r-{token}", "value": "x"})
