"""The envelope: report ids, arguments, one result shape for every outcome, written with its TTL."""

from __future__ import annotations

import logging

import pytest
import redis.asyncio as aioredis

from tests.support.tools import TEST_TOOLS
from tests.support.workers import running_worker
from worker.client import ResearchClient
from worker.config import Settings
from worker.serialization import loads
from worker.state import keys
from worker.state.budget import Budgets, Tool


@pytest.fixture
async def client(settings: Settings, token: str, redis: aioredis.Redis):  # type: ignore[no-untyped-def]
    async with (
        running_worker(settings, TEST_TOOLS),
        ResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=20) as c,
    ):
        yield c


@pytest.mark.parametrize(
    "bad_id",
    [None, "", 42, ["r-1"], "x" * 201, "has space", "semi;colon", "slash/es", "star*", "üñí", "new\nline"],
)
async def test_a_job_without_a_usable_report_id_is_refused_and_not_charged(
    client: ResearchClient, redis: aioredis.Redis, bad_id: object
) -> None:
    kwargs = {"value": "x"} if bad_id is None else {"report_id": bad_id, "value": "x"}
    result = await client.call("echo", kwargs)
    assert result["ok"] is False
    assert result["error"]["kind"] == "missing_report_id"
    assert result["report_id"] is None
    if isinstance(bad_id, str) and bad_id:
        assert await redis.exists(keys.budget(bad_id)) == 0


async def test_a_report_id_of_200_allowed_characters_is_accepted(client: ResearchClient, token: str) -> None:
    report_id = (f"{token}-A_z.9:" * 20)[:200]
    result = await client.call("echo", {"report_id": report_id, "value": "hi"})
    assert result["ok"] is True
    assert result["report_id"] == report_id


async def test_an_unknown_argument_is_invalid_and_not_charged(
    client: ResearchClient, redis: aioredis.Redis, report: str
) -> None:
    result = await client.call("echo", {"report_id": report, "value": "x", "admin": True})
    assert result["error"]["kind"] == "invalid_request"
    assert "'admin'" in result["error"]["message"]
    assert await redis.exists(keys.budget(report)) == 0


async def test_a_wrong_type_is_invalid_and_not_charged(
    client: ResearchClient, redis: aioredis.Redis, report: str
) -> None:
    result = await client.call("echo", {"report_id": report, "value": 12})
    assert result["error"]["kind"] == "invalid_request"
    assert await redis.exists(keys.budget(report)) == 0


async def test_the_result_has_the_contract_shape_and_is_written_with_its_ttl(
    client: ResearchClient, redis: aioredis.Redis, settings: Settings, report: str
) -> None:
    job_id = await client.enqueue("echo", {"report_id": report, "value": "hello"})
    result = await client.wait(job_id)
    assert result == {
        "ok": True,
        "tool": "echo",
        "report_id": report,
        "job_id": job_id,
        "echo": "hello",
        "job_try": 1,
    }
    stored = await redis.get(keys.result(job_id))
    assert stored is not None and loads(stored) == result
    ttl_ms = await redis.pttl(keys.result(job_id))
    assert settings.result_ttl_s * 1000 - 60_000 < ttl_ms <= settings.result_ttl_s * 1000


async def test_budget_exhausted_is_a_result_not_a_crash(
    client: ResearchClient, redis: aioredis.Redis, settings: Settings, report: str
) -> None:
    budgets = Budgets(redis, settings)
    for i in range(settings.fetch_budget):
        await budgets.charge(report, Tool.FETCH, f"pre-{i}")
    result = await client.call("echo", {"report_id": report, "value": "x"})
    assert result["ok"] is False
    assert result["error"]["kind"] == "budget_exhausted"
    assert "25" in result["error"]["message"]


async def test_a_bug_writes_an_internal_error_record_and_arq_sees_a_failure(
    client: ResearchClient, report: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR):
        result = await client.call("boom", {"report_id": report})
    assert result["ok"] is False
    assert result["error"]["kind"] == "internal_error"
    assert "a bug in a tool" not in result["error"]["message"]  # internals stay in the log
    assert any("unexpected error" in r.getMessage() for r in caplog.records)


async def test_positional_arguments_bind_in_contract_order(
    client: ResearchClient, report: str, token: str
) -> None:
    # A plain arq client may pass positional arguments; they bind as report_id, then the rest.
    from arq.connections import ArqRedis

    assert isinstance(client.redis, ArqRedis)
    job = await client.redis.enqueue_job("echo", report, "pos", _job_id=f"{token}-positional")
    assert job is not None
    result = await client.wait(job.job_id)
    assert result["ok"] is True and result["echo"] == "pos" and result["report_id"] == report
