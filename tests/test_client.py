"""ResearchClient: wakes on completion instead of polling, and gives up cleanly at its deadline."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis

from tests.support.tools import TEST_TOOLS
from tests.support.workers import running_worker
from worker.client import ResearchClient
from worker.config import Settings
from worker.results import ResultStore


async def test_the_client_wakes_on_completion_without_polling_the_result(
    settings: Settings, token: str, report: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = 0
    original = ResultStore.read

    async def counting_read(self: ResultStore, job_id: str):  # type: ignore[no-untyped-def]
        nonlocal reads
        reads += 1
        return await original(self, job_id)

    async with (
        running_worker(settings, TEST_TOOLS),
        ResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=30) as client,
    ):
        job_id = await client.enqueue("slow", {"report_id": report, "seconds": 1.5})
        monkeypatch.setattr(ResultStore, "read", counting_read)
        result = await client.wait(job_id)
    assert result["ok"] is True and result["slept"] == 1.5
    # One read before blocking and one after the wake-up: a poller would have read dozens of times.
    assert reads <= 2


async def test_the_client_times_out_cleanly_when_no_worker_runs(
    settings: Settings, token: str, report: str
) -> None:
    async with ResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=0.5) as client:
        result = await asyncio.wait_for(client.fetch(report, "https://example.org/", extract="full"), 10)
        assert result["ok"] is False
        assert result["error"]["kind"] == "timeout"
        assert result["tool"] == "fetch_page"
        assert result["report_id"] == report
        assert result["job_id"].startswith(f"{token}-")


async def test_a_deadline_shorter_than_the_job_returns_timeout_and_the_result_still_lands(
    settings: Settings, token: str, report: str, redis: aioredis.Redis
) -> None:
    async with (
        running_worker(settings, TEST_TOOLS),
        ResearchClient(settings=settings, job_id_prefix=f"{token}-") as client,
    ):
        job_id = await client.enqueue("slow", {"report_id": report, "seconds": 1.0})
        early = await client.wait(job_id, wait_s=0.2)
        assert early["error"]["kind"] == "timeout"
        late = await client.wait(job_id, wait_s=10)
    assert late["ok"] is True


async def test_a_job_id_cannot_be_enqueued_twice(settings: Settings, token: str, report: str) -> None:
    async with ResearchClient(settings=settings) as client:
        await client.enqueue("echo", {"report_id": report}, job_id=f"{token}-dup")
        with pytest.raises(ValueError, match="already exists"):
            await client.enqueue("echo", {"report_id": report}, job_id=f"{token}-dup")


async def test_every_client_waiting_on_a_job_wakes_with_its_result(
    settings: Settings, token: str, report: str
) -> None:
    async with (
        running_worker(settings, TEST_TOOLS),
        ResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=20) as first,
        ResearchClient(settings=settings, wait_s=20) as second,
    ):
        job_id = await first.enqueue("slow", {"report_id": report, "seconds": 0.5})
        results = await asyncio.gather(
            first.wait(job_id, fresh=True), second.wait(job_id, fresh=True), first.wait(job_id, fresh=True)
        )
    assert [r["ok"] for r in results] == [True, True, True]
    assert {r["job_id"] for r in results} == {job_id}
