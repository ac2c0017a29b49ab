"""Budgets: atomic across processes, charged once per job id, gone when the window ends."""

from __future__ import annotations

import asyncio
import collections
import time
import uuid

import redis.asyncio as aioredis
from hypothesis import HealthCheck, given
from hypothesis import settings as examples
from hypothesis import strategies as st

from tests.support.processes import worker_processes
from worker.client import ResearchClient
from worker.config import Settings
from worker.state import keys
from worker.state.budget import COUNTERS, Budgets, Grant, ReadBudget, Tool


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
    short = Settings(**{**settings.__dict__, "budget_window_s": 3})
    budgets = Budgets(redis, short)
    await budgets.charge(report, Tool.FETCH, "job-1")
    first_ttl = await redis.pttl(keys.budget(report))
    read_at = time.monotonic()
    assert 0 < first_ttl <= 3000
    # A later charge in the same window must not push the expiry out (the window is fixed): the
    # time to live only went down by the time that passed (measured, so a slow machine is no worry).
    await asyncio.sleep(0.4)
    await budgets.charge(report, Tool.FETCH, "job-2")
    passed_ms = (time.monotonic() - read_at) * 1000  # at most what Redis saw pass between the reads
    later_ttl = await redis.pttl(keys.budget(report))
    assert passed_ms < 3000, "the machine stalled past the window; nothing to compare"
    assert later_ttl <= first_ttl - passed_ms + 1
    # And the counters go with the window.
    async with asyncio.timeout(30):
        while (await budgets.usage(report))[1] != -2:
            await asyncio.sleep(0.1)
    usage, _ = await budgets.usage(report)
    assert usage[Tool.FETCH].used == 0


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


# A render is charged twice: its fetch under the job's id, its render under a marker of its own.
# A result that could not be stored gives back both, and only the named job's.
@examples(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    jobs=st.lists(st.booleans(), min_size=1, max_size=6),  # one per job: True when it also rendered
    refunded=st.sets(st.integers(0, 5), max_size=6),
)
async def test_a_refund_gives_back_a_render_s_charge_with_its_fetch(
    redis_url: str, token: str, jobs: list[bool], refunded: set[int]
) -> None:
    redis = aioredis.Redis.from_url(redis_url)
    report = f"r-{token}-{uuid.uuid4().hex[:8]}"  # a fresh hash per example: nothing carries over
    try:
        budgets = Budgets(redis, Settings(fetch_budget=20, render_budget=20, queue_name=f"q:{token}"))
        for job, rendered in enumerate(jobs):
            assert (await budgets.charge(report, Tool.FETCH, f"j{job}")).allowed
            if rendered:
                assert (await budgets.charge(report, Tool.RENDER, f"j{job}")).allowed
        given_back = [await budgets.refund(report, f"j{job}") for job in sorted(refunded)]
        again = [await budgets.refund(report, f"j{job}") for job in sorted(refunded)]
        usage, _ = await budgets.usage(report)
        marks = {k.decode() for k in await redis.hkeys(keys.budget(report))} - set(COUNTERS)
    finally:
        await redis.delete(keys.budget(report))
        await redis.aclose()
    named = [job for job in sorted(refunded) if job < len(jobs)]
    assert given_back == [(1 + jobs[job]) if job < len(jobs) else 0 for job in sorted(refunded)]
    assert again == [0] * len(refunded)
    assert usage[Tool.FETCH].used == len(jobs) - len(named)
    assert usage[Tool.RENDER].used == sum(jobs) - sum(jobs[job] for job in named)
    kept = {f"job:j{job}" for job in range(len(jobs)) if job not in named}
    kept |= {f"job:j{job}:render" for job in range(len(jobs)) if jobs[job] and job not in named}
    assert marks == kept


async def test_a_render_s_refund_is_written_out(
    redis: aioredis.Redis, settings: Settings, report: str
) -> None:
    budgets = Budgets(redis, settings)
    await budgets.charge(report, Tool.FETCH, "job-r")
    await budgets.charge(report, Tool.RENDER, "job-r")
    assert await redis.hgetall(keys.budget(report)) == {
        b"fetch": b"1",
        b"render": b"1",
        b"job:job-r": b"fetch",
        b"job:job-r:render": b"render",
    }
    assert await budgets.refund(report, "job-r") == 2
    assert await redis.hgetall(keys.budget(report)) == {b"fetch": b"0", b"render": b"0"}


# The read budget: the characters a report's continuations may return.


async def test_reads_are_granted_up_to_the_limit_and_not_one_character_more(
    redis: aioredis.Redis, report: str
) -> None:
    reads = ReadBudget(redis, limit=100, window_s=60)
    assert (await reads.grant(report, "a", 30)) == Grant(chars=30, used=30, limit=100)
    assert (await reads.grant(report, "b", 50)) == Grant(chars=50, used=80, limit=100)
    assert (await reads.grant(report, "c", 40)) == Grant(chars=20, used=100, limit=100)
    assert (await reads.grant(report, "d", 1)) == Grant(chars=0, used=100, limit=100)
    assert await reads.used(report) == 100


async def test_a_read_asked_again_by_the_same_job_gets_the_same_grant_uncharged(
    redis: aioredis.Redis, report: str
) -> None:
    reads = ReadBudget(redis, limit=10, window_s=60)
    assert (await reads.grant(report, "a", 7)).chars == 7
    assert (await reads.grant(report, "a", 7)) == Grant(chars=7, used=7, limit=10)
    assert (await reads.grant(report, "b", 7)).chars == 3


async def test_a_read_budget_of_zero_grants_nothing_and_a_negative_ask_is_nothing(
    redis: aioredis.Redis, report: str
) -> None:
    assert (await ReadBudget(redis, limit=0, window_s=60).grant(report, "a", 5)).chars == 0
    reads = ReadBudget(redis, limit=10, window_s=60)
    assert (await reads.grant(f"{report}-2", "a", -5)).chars == 0
    assert await reads.used(f"{report}-2") == 0


async def test_the_read_budget_starts_the_window_and_shares_it(redis: aioredis.Redis, report: str) -> None:
    reads = ReadBudget(redis, limit=10, window_s=60)
    await reads.grant(report, "a", 3)
    assert 0 < await redis.ttl(keys.budget(report)) <= 60


@examples(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(limit=st.integers(0, 500), wants=st.lists(st.integers(0, 200), max_size=12))
async def test_every_sequence_of_reads_is_granted_as_a_running_sum_says(
    redis_url: str, token: str, limit: int, wants: list[int]
) -> None:
    redis = aioredis.Redis.from_url(redis_url)
    report = f"r-{token}-{uuid.uuid4().hex[:8]}"
    try:
        reads = ReadBudget(redis, limit=limit, window_s=60)
        grants = [(await reads.grant(report, f"j{i}", want)).chars for i, want in enumerate(wants)]
    finally:
        await redis.delete(keys.budget(report))
        await redis.aclose()
    left = limit
    for want, granted in zip(wants, grants, strict=True):
        assert granted == min(want, left)
        left -= granted
    assert sum(grants) == min(sum(wants), limit)


async def test_200_concurrent_reads_grant_exactly_the_limit(redis: aioredis.Redis, report: str) -> None:
    reads = ReadBudget(redis, limit=1000, window_s=60)
    grants = await asyncio.gather(*(reads.grant(report, f"j{i}", 7) for i in range(200)))
    assert sum(g.chars for g in grants) == 1000
    assert sorted({g.chars for g in grants}) == [0, 6, 7]  # 142 whole reads, one of the 6 left, the rest none
