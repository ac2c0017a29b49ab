"""The dashboard's workers are the queue's replicas as ``worker.state.health`` reads them: a queue
whose name holds glob characters shows its own workers, and only them."""

from __future__ import annotations

import dataclasses
import json
import time

import pytest
import redis.asyncio as aioredis

from tests.test_dashboard import get, serving
from worker.config import Settings
from worker.state import health, keys


@pytest.mark.parametrize("suffix", ["q[1]*?", "q\\x", "[a-z]", "*", "?", "plain"])
async def test_a_queue_named_with_glob_characters_shows_its_workers_and_no_others(
    settings: Settings, redis: aioredis.Redis, token: str, suffix: str
) -> None:
    queue = f"research-test:{token}:{suffix}"
    s = dataclasses.replace(settings, queue_name=queue)
    mine = {"worker_id": f"w-{token}", "beat_at": time.time(), "started_at": time.time(), "max_jobs": 4}
    await health.publish(redis, queue, keys.health(queue, mine["worker_id"]), mine, 30)
    # A queue whose name the glob would match if it were not escaped (or escaped twice).
    other = f"research-test:{token}:q1ab"
    await health.publish(redis, other, keys.health(other, "w-other"), {"worker_id": "w-other"}, 30)
    async with serving(s) as base:
        status, _, body = await get(f"{base}/api/state")
    assert status == 200
    assert [w["worker_id"] for w in json.loads(body)["workers"]] == [mine["worker_id"]]
