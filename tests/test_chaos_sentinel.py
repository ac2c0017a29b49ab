"""Sentinel failover under load, with real processes: a primary, a replica and three sentinels from
the same redis-server binary, two worker processes and a client, all through ``redis+sentinel://``.

The primary is killed (SIGKILL) while jobs are being enqueued and run. Workers and client follow the
new primary without a restart, and every job whose enqueue was acknowledged gets exactly one
result: an enqueue returns only once the replica holds the job (WAIT), results and bookkeeping the
replica had not received are lost with the old primary, and their jobs run again under the leases
the replica did receive.
"""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from tests.support.processes import read_log, start_worker, stop, wait_healthy
from tests.support.redis_process import SentinelGroup
from worker.client import ResearchClient
from worker.config import Settings
from worker.serialization import loads
from worker.state import keys

pytestmark = pytest.mark.chaos


@pytest.fixture
def group(tmp_path: Path) -> Iterator[SentinelGroup]:
    sentinels = SentinelGroup(tmp_path)
    sentinels.start()
    try:
        yield sentinels
    finally:
        sentinels.stop()


async def test_a_primary_killed_under_load_loses_no_acknowledged_job_and_workers_follow_the_new_one(
    settings: Settings, group: SentinelGroup, token: str, chaos_short: bool
) -> None:
    jobs = 60 if chaos_short else 300
    s = dataclasses.replace(settings, redis_url=group.url, max_jobs=8)
    old_port = group.primary_port()
    workers: list[subprocess.Popen[bytes]] = [start_worker(s, f"w{i}") for i in range(2)]
    acknowledged: list[str] = []
    refused = 0
    try:
        wait_healthy(s, 2, redis_url=group.primary_url())
        async with ResearchClient(settings=s, job_id_prefix=f"{token}-", wait_s=90) as client:
            for i in range(jobs):
                if i == jobs // 2:
                    group.primary.kill()
                try:
                    acknowledged.append(
                        await client.enqueue("slow", {"report_id": f"r-{token}-{i % 20}", "seconds": 0.05})
                    )
                except (RedisError, OSError):
                    refused += 1  # not acknowledged: the caller knows to try again
                await asyncio.sleep(0.01)
            new_port = group.wait_for_new_primary(old_port)
            results = [await client.wait(job_id) for job_id in acknowledged]
        survivor = aioredis.Redis(port=new_port)
        try:
            lines = [loads(raw)["job_id"] for raw in await survivor.lrange(keys.recent(s.queue_name), 0, -1)]
            stored = [await survivor.exists(keys.result(job_id)) for job_id in acknowledged]
            queued = await survivor.zcard(s.queue_name)
            healthy = [
                await survivor.exists(keys.health(s.queue_name, f"{s.worker_id}-w{i}")) for i in range(2)
            ]
        finally:
            await survivor.aclose()
        alive = [w.poll() is None for w in workers]
        logs = [read_log(w) for w in workers]
    finally:
        for worker in workers:
            stop(worker)
    print(
        f"\nsentinel failover: {len(acknowledged)} jobs acknowledged, {refused} enqueues refused "
        f"during the failover; primary moved from port {old_port} to {new_port}"
    )
    assert alive == [True, True], logs
    assert len(acknowledged) >= jobs // 2
    assert [r["ok"] for r in results] == [True] * len(acknowledged), [r for r in results if not r["ok"]][:3]
    assert all(stored)
    assert all(lines.count(job_id) == 1 for job_id in acknowledged), "a job has two results"
    assert queued == 0
    assert healthy == [1, 1]  # both workers write to the new primary: they followed it
