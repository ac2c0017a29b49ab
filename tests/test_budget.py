"""Budgets: atomic across processes, charged once per job id, gone when the window ends."""

from __future__ import annotations

import asyncio
import collections

import redis.asyncio as aioredis

from tests.support.processes import worker_processes
from worker.client import ResearchClient
from worker.config import Settings
from worker.state import keys
from worker.state.budget import Budgets, Tool


async def test_charges_stop_exactly_at_the_limit(
    redis: aioredis.Redis, settings: Settings, report: str
) -> None:
    budgets = Budgets(redis, settings)
    charges = await asyncio.gather(*(budgets.charge(report, Tool.SEARCH, f"job-{i}") for i in range(40)))
    assert sum(c.allowed for c in charges) == 15
    usage, _ = await budgets.usage(report)
    assert usage[Tool.SEARCH].used == 15
    assert usage[Tool.FETCH].used == 0


async def test_the_same_job_id_is_charged_once(
    redis: aioredis.Redis, settings: Settings, report: str
) -> None:
    budgets = Budgets(redis, settings)
    first = await budgets.charge(report, Tool.FETCH, "job-a")
    again = await budgets.charge(report, Tool.FETCH, "job-a")
    assert first.allowed and not first.already_charged
    assert again.allowed and again.already_charged
    usage, _ = await budgets.usage(report)
    assert usage[Tool.FETCH].used == 1


async def test_a_rerun_is_allowed_even_when_the_budget_is_now_full(
    redis: aioredis.Redis, settings: Settings, report: str
) -> None:
    budgets = Budgets(redis, settings)
    for i in range(25):
        assert (await budgets.charge(report, Tool.FETCH, f"job-{i}")).allowed
    assert not (await budgets.charge(report, Tool.FETCH, "job-new")).allowed
    # job-3 was charged before its worker died; its re-run must go ahead without a new charge.
    rerun = await budgets.charge(report, Tool.FETCH, "job-3")
    assert rerun.allowed and rerun.already_charged and rerun.used == 25


async def test_reports_do_not_share_budgets(redis: aioredis.Redis, settings: Settings, report: str) -> None:
    budgets = Budgets(redis, settings)
    for i in range(15):
        await budgets.charge(report, Tool.SEARCH, f"job-{i}")
    other = await budgets.charge(f"{report}-other", Tool.SEARCH, "job-x")
    assert other.allowed and other.used == 1


async def test_counters_expire_with_the_window(
    redis: aioredis.Redis, settings: Settings, report: str
) -> None:
    short = Settings(**{**settings.__dict__, "budget_window_s": 1})
    budgets = Budgets(redis, short)
    await budgets.charge(report, Tool.FETCH, "job-1")
    ttl = await redis.pttl(keys.budget(report))
    assert 0 < ttl <= 1000
    # A later charge in the same window must not push the expiry out (the window is fixed).
    await asyncio.sleep(0.4)
    await budgets.charge(report, Tool.FETCH, "job-2")
    assert await redis.pttl(keys.budget(report)) <= 600
    await asyncio.sleep(0.8)
    usage, ttl_after = await budgets.usage(report)
    assert usage[Tool.FETCH].used == 0
    assert ttl_after == -2


async def test_200_concurrent_jobs_from_4_worker_processes_charge_exactly_the_limit(
    redis: aioredis.Redis, settings: Settings, report: str, token: str
) -> None:
    with worker_processes(settings, 4):
        async with ResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=60) as client:
            results = await asyncio.gather(
                *(client.call("echo", {"report_id": report, "value": str(i)}) for i in range(200))
            )
    kinds = collections.Counter("ok" if r["ok"] else r["error"]["kind"] for r in results)
    assert kinds == {"ok": 25, "budget_exhausted": 175}
    ran_on = await redis.hlen(keys.budget(report))
    assert ran_on == 1 + 25  # the counter and one marker per charged job
