"""Stopping a worker: SIGTERM lets running jobs finish within the grace period; bad config never starts.

Real worker processes (``tests.support.worker_process``, the test tools), because signal handling is
the process's own business.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import redis as syncredis
import redis.asyncio as aioredis
from arq.constants import in_progress_key_prefix

from tests.support.processes import ROOT, read_log, start_worker, wait_healthy
from worker.client import ResearchClient
from worker.config import Settings
from worker.serialization import loads
from worker.state import keys


async def wait_until_running(redis: aioredis.Redis, report: str, job_id: str) -> None:
    """The slow tool charges its fetch first, then sleeps: a charge means the body is running."""
    deadline = time.monotonic() + 15
    while not (
        await redis.exists(in_progress_key_prefix + job_id) and await redis.hget(keys.budget(report), "fetch")
    ):
        assert time.monotonic() < deadline, "the job never started"
        await asyncio.sleep(0.02)


async def exit_of(proc: subprocess.Popen[bytes], timeout_s: float) -> tuple[int, str]:
    code = await asyncio.to_thread(proc.wait, timeout=timeout_s)
    return code, read_log(proc)


async def test_sigterm_lets_a_running_job_finish_and_write_its_result_then_exits_0(
    settings: Settings, redis: aioredis.Redis, token: str, report: str
) -> None:
    proc = start_worker(settings, "p0", env={"RESEARCH_SHUTDOWN_GRACE_S": "20"})
    try:
        wait_healthy(settings, 1)
        async with ResearchClient(settings=settings, job_id_prefix=f"{token}-") as client:
            slow = await client.enqueue("slow", {"report_id": report, "seconds": 1.5})
            await wait_until_running(redis, report, slow)
            proc.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            # Give the signal a moment to land, then offer the stopping worker another job.
            await asyncio.sleep(0.3)
            later = await client.enqueue("noop", {"report_id": report})
            code, err = await exit_of(proc, timeout_s=30)
            took = time.monotonic() - signalled
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 0, err
    result = loads(await redis.get(keys.result(slow)))
    assert result["ok"] is True
    assert result["slept"] == 1.5
    assert took < 45, "the worker waited far longer than its job (its grace is 72 s)"
    # The stopping worker took nothing new: the job waits in the queue for another replica.
    assert await redis.get(keys.result(later)) is None
    assert await redis.zscore(settings.queue_name, later) is not None
    assert not await redis.exists(in_progress_key_prefix + later)
    # And it left no health key behind to vouch for a replica that is gone.
    assert not await redis.exists(keys.health(settings.queue_name, f"{settings.worker_id}-p0"))


async def test_a_job_outliving_the_grace_goes_back_to_the_queue_and_is_charged_once_when_rerun(
    settings: Settings, redis: aioredis.Redis, token: str, report: str
) -> None:
    first = start_worker(settings, "p0", env={"RESEARCH_SHUTDOWN_GRACE_S": "0.5"})
    try:
        wait_healthy(settings, 1)
        async with ResearchClient(settings=settings, job_id_prefix=f"{token}-") as client:
            job_id = await client.enqueue("slow", {"report_id": report, "seconds": 2.5})
            await wait_until_running(redis, report, job_id)
            first.send_signal(signal.SIGTERM)
            code, err = await exit_of(first, timeout_s=30)
            assert code == 0, err
            assert await redis.get(keys.result(job_id)) is None
            assert await redis.zscore(settings.queue_name, job_id) is not None
            assert not await redis.exists(in_progress_key_prefix + job_id)

            second = start_worker(settings, "p1")
            try:
                result = await client.wait(job_id, wait_s=30)
            finally:
                second.send_signal(signal.SIGTERM)
                await exit_of(second, timeout_s=30)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert result["ok"] is True
    assert await redis.hget(keys.budget(report), "fetch") == b"1"


def test_a_worker_with_a_bad_value_exits_2_before_it_touches_the_queue(
    settings: Settings, token: str
) -> None:
    client = syncredis.Redis.from_url(settings.redis_url or "")
    try:
        client.zadd(settings.queue_name, {f"{token}-queued": 1})
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RESEARCH_", "REDIS_URL"))}
        env.update(
            PYTHONPATH=str(ROOT),
            REDIS_URL=settings.redis_url or "",
            RESEARCH_QUEUE=settings.queue_name,
            RESEARCH_WORKER_ID=f"{settings.worker_id}-bad",
            RESEARCH_METRICS_PORT="70000",
        )
        proc = subprocess.run(
            [sys.executable, "-m", "worker.cli", "run"],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 2
        assert proc.stderr.strip().splitlines() == [
            "research-worker: configuration error: RESEARCH_METRICS_PORT: '70000' is not a port in 1..65535"
        ]
        assert client.zscore(settings.queue_name, f"{token}-queued") is not None
        assert not client.exists(keys.health(settings.queue_name, f"{settings.worker_id}-bad"))
    finally:
        client.close()
