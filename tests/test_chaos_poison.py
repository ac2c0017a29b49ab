"""Poison pills: malformed payloads in the queue of four worker processes while real jobs run.

Before payloads were checked, each of these made arq raise in the worker's poll loop: the worker
exited with its jobs in flight, and so did every worker that picked the job up after it.
"""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest
import redis.asyncio as aioredis
from arq.constants import job_key_prefix

from tests.support.processes import read_log, worker_processes
from worker.client import ResearchClient
from worker.config import Settings
from worker.serialization import loads
from worker.state import keys

pytestmark = pytest.mark.chaos

POISON = {
    "name is a list": {"f": ["echo"]},
    "name is an object": {"f": {"name": "echo"}},
    "enqueue time is text": {"et": "yesterday"},
    "enqueue time past the year 9999": {"et": 1e30},
    "try count is text": {"t": "first"},
    "arguments are an object": {"a": {"0": "r-1"}},
    "keyword arguments are a list": {"k": ["report_id", "r-1"]},
}


async def test_poison_pills_end_with_one_result_each_and_all_four_workers_stay_up(
    settings: Settings, redis: aioredis.Redis, token: str, report: str, chaos_short: bool
) -> None:
    rounds = 1 if chaos_short else 5
    with worker_processes(settings, 4) as procs:
        async with ResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=60) as client:
            running = [
                await client.enqueue("slow", {"report_id": f"{report}-{i}", "seconds": 1.0}) for i in range(8)
            ]
            poisoned: list[str] = []
            for r in range(rounds):
                for name, change in POISON.items():
                    job_id = f"{token}-poison-{r}-{name.replace(' ', '-')}"
                    payload = {"t": None, "f": "echo", "a": [], "k": {"report_id": report}, "et": 1, **change}
                    await redis.psetex(job_key_prefix + job_id, 60_000, orjson.dumps(payload))
                    await redis.zadd(settings.queue_name, {job_id: int(time.time() * 1000)})
                    await redis.rpush(keys.wake(settings.queue_name), job_id)
                    poisoned.append(job_id)
            refused = [await client.wait(job_id) for job_id in poisoned]
            finished = [await client.wait(job_id) for job_id in running]
            after = await client.call("echo", {"report_id": report, "value": "still here"})
            await asyncio.sleep(1.5)  # a fallback poll on every worker: nothing is seen twice
        alive = [proc.poll() is None for proc in procs]
        logs = [read_log(proc) for proc in procs]
    assert alive == [True] * 4, logs
    assert {r["error"]["kind"] for r in refused} == {"invalid_request"}
    assert all(r["ok"] for r in finished), finished
    assert after["ok"] is True
    lines = [loads(raw)["job_id"] for raw in await redis.lrange(keys.recent(settings.queue_name), 0, -1)]
    assert all(lines.count(job_id) == 1 for job_id in poisoned)
    assert [await redis.zscore(settings.queue_name, job_id) for job_id in poisoned] == [None] * len(poisoned)
    # Each refusal was logged once, by the one worker that took the job.
    assert all(sum(text.count(job_id) for text in logs) == 1 for job_id in poisoned)
