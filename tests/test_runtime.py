"""The worker: orjson only, per-replica health, a failed arq job still leaves a result."""

from __future__ import annotations

import asyncio
import logging
import pickle
import time
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from arq.constants import job_key_prefix

from tests.support.tools import TEST_TOOLS
from tests.support.workers import running_worker
from worker.client import DuplicateJobId, ResearchClient
from worker.config import Settings
from worker.serialization import dumps, loads
from worker.state import keys


class _Exploit:
    """Unpickling this creates a file: the proof that a pickle would have been executed."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (Path.touch, (self.marker,))


async def test_a_pickled_payload_is_refused_logged_and_never_executed(
    settings: Settings, redis: aioredis.Redis, token: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    marker = tmp_path / "pickle-was-executed"
    job_id = f"{token}-pickled"
    payload = pickle.dumps(
        {"t": 1, "f": "echo", "a": [], "k": {"report_id": "r-1", "value": _Exploit(marker)}, "et": 0}
    )
    await redis.psetex(job_key_prefix + job_id, 60_000, payload)
    await redis.zadd(settings.queue_name, {job_id: 1})
    with caplog.at_level(logging.WARNING, logger="research.worker"):
        async with running_worker(settings, TEST_TOOLS), ResearchClient(settings=settings) as client:
            result = await client.wait(job_id, wait_s=10)
    assert not marker.exists()
    assert result["ok"] is False
    assert result["error"]["kind"] == "invalid_request"
    assert "pickle is never loaded" in result["error"]["message"]
    refusals = [r for r in caplog.records if r.getMessage() == "refused a malformed job payload"]
    assert [r.fields["job_id"] for r in refusals] == [job_id]  # type: ignore[attr-defined]
    assert await redis.zscore(settings.queue_name, job_id) is None


async def test_payloads_and_results_are_json(
    settings: Settings, redis: aioredis.Redis, token: str, report: str
) -> None:
    async with ResearchClient(settings=settings, job_id_prefix=f"{token}-") as client:
        job_id = await client.enqueue("echo", {"report_id": report, "value": "v"})
        raw = await redis.get(job_key_prefix + job_id)
        assert raw is not None
        assert loads(raw)["k"] == {"report_id": report, "value": "v"}
        async with running_worker(settings, TEST_TOOLS):
            await client.wait(job_id)
    assert loads(await redis.get(keys.result(job_id)))["ok"] is True


async def test_an_unknown_job_name_gets_an_invalid_request_result(
    settings: Settings, token: str, report: str
) -> None:
    async with (
        running_worker(settings, TEST_TOOLS),
        ResearchClient(settings=settings, job_id_prefix=f"{token}-") as client,
    ):
        result = await client.call("delete_everything", {"report_id": report}, wait_s=10)
    assert result["error"]["kind"] == "invalid_request"
    assert result["report_id"] == report
    assert "delete_everything" in result["error"]["message"]


async def test_each_replica_has_its_own_health_key(settings: Settings, redis: aioredis.Redis) -> None:
    first = Settings(**{**settings.__dict__, "worker_id": f"{settings.worker_id}-a"})
    second = Settings(**{**settings.__dict__, "worker_id": f"{settings.worker_id}-b"})
    async with running_worker(first, TEST_TOOLS):
        async with running_worker(second, TEST_TOOLS):
            await asyncio.sleep(0.2)
            names = sorted(
                [k.decode() async for k in redis.scan_iter(match=keys.health_pattern(settings.queue_name))]
            )
            assert names == [
                keys.health(settings.queue_name, first.worker_id),
                keys.health(settings.queue_name, second.worker_id),
            ]
        # The second replica stopped: its key is gone, the first one's still stands.
        remaining = [
            k.decode() async for k in redis.scan_iter(match=keys.health_pattern(settings.queue_name))
        ]
        assert remaining == [keys.health(settings.queue_name, first.worker_id)]
        info = loads(await redis.get(remaining[0]))
        assert info["worker_id"] == first.worker_id and "beat_at" in info


async def test_a_rerun_of_a_finished_job_returns_the_written_result_without_running_again(
    settings: Settings, redis: aioredis.Redis, token: str, report: str
) -> None:
    # The worker died after writing the result but before arq recorded the finish: the job is
    # still queued, with its payload, and its claim finds the result standing.
    async with (
        running_worker(settings, TEST_TOOLS),
        ResearchClient(settings=settings, job_id_prefix=f"{token}-") as client,
    ):
        first = await client.call("echo", {"report_id": report, "value": "once"})
        job_id = first["job_id"]
        with pytest.raises(DuplicateJobId):  # its result stands: the id is taken
            await client.enqueue("echo", {"report_id": report, "value": "once"}, job_id=job_id)
        await redis.delete(keys.done(job_id))
        payload = dumps({"t": None, "f": "echo", "a": [], "k": {"report_id": report, "value": "x"}, "et": 1})
        await redis.set(f"arq:job:{job_id}", payload)
        await redis.set(f"arq:retry:{job_id}", 1)
        await redis.zadd(settings.queue_name, {job_id: 1})
        deadline = time.monotonic() + 10
        while await redis.zscore(settings.queue_name, job_id) is not None:
            assert time.monotonic() < deadline, "the job was never finished"
            await asyncio.sleep(0.05)
        second = await client.result(job_id)
    assert second == first
    assert await redis.hget(keys.budget(report), "fetch") == b"1"
    assert not await redis.exists(f"arq:job:{job_id}")


def test_serialization_refuses_pickle_bytes() -> None:
    with pytest.raises(ValueError, match=r"not valid UTF-8|unexpected character"):
        loads(pickle.dumps({"a": 1}))
    assert loads(dumps({"a": (1, 2)})) == {"a": [1, 2]}


async def test_a_woken_job_scored_a_moment_ahead_of_the_workers_clock_starts_without_waiting_for_a_poll(
    settings: Settings, redis: aioredis.Redis, token: str, report: str
) -> None:
    # The enqueuer's clock ran a second ahead (or the job landed between the worker reading its
    # clock and its claim): the wake-up must still start it, not leave it to a poll 30 s away.
    job_id = f"{token}-ahead"
    payload = dumps({"t": None, "f": "echo", "a": [], "k": {"report_id": report, "value": "v"}, "et": 1})
    async with (
        running_worker(settings, TEST_TOOLS, poll_delay_s=30.0),
        ResearchClient(settings=settings) as client,
    ):
        await asyncio.sleep(0.2)  # past the worker's first poll
        await redis.psetex(job_key_prefix + job_id, 60_000, payload)
        await redis.zadd(settings.queue_name, {job_id: int(time.time() * 1000) + 1000})
        await redis.rpush(keys.wake(settings.queue_name), job_id)
        result = await client.wait(job_id, wait_s=5)
    assert result["ok"] is True, result
