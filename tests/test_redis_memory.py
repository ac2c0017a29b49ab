"""The page cache's share of Redis, the refund of a charge without a result, and what counts as a
refusal for memory (issue 24, class 1; the full-Redis scenario itself is tests/test_full_redis.py)."""

from __future__ import annotations

import redis.asyncio as aioredis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.exceptions import OutOfMemoryError, ResponseError

from worker.config import Settings
from worker.state import keys
from worker.state.budget import Budgets, Tool
from worker.state.memory import CACHE_SHARE, HEADROOM_SHARE, Reading, cache_bound, is_out_of_memory

MIB = 1024 * 1024
FIXED = 256 * MIB


@given(
    maxmemory=st.integers(1 * MIB, 64 * 1024 * MIB),
    used_share=st.floats(0.0, 1.2),
    cache_share=st.floats(0.0, 1.0),
)
def test_the_cache_never_takes_the_headroom_its_share_or_more_than_its_fixed_bound(
    maxmemory: int, used_share: float, cache_share: float
) -> None:
    used = int(maxmemory * used_share)
    cache = int(used * cache_share)  # what the cache holds is part of what Redis uses
    bound = cache_bound(Reading(used, maxmemory), cache, FIXED)
    assert 0 <= bound <= FIXED
    assert bound <= maxmemory * CACHE_SHARE
    # Were the cache to grow to its bound, Redis would still have its headroom free.
    assert used - cache + bound <= maxmemory * (1 - HEADROOM_SHARE) + 1 or bound == 0


@given(used=st.integers(0, 10**12), cache=st.integers(0, 10**12))
def test_a_redis_without_maxmemory_leaves_the_fixed_bound(used: int, cache: int) -> None:
    assert cache_bound(Reading(used, 0), cache, FIXED) == FIXED
    assert cache_bound(None, cache, FIXED) == FIXED


def test_a_refusal_for_memory_is_recognised_in_every_shape_redis_gives_it() -> None:
    assert is_out_of_memory(OutOfMemoryError("command not allowed when used memory > 'maxmemory'."))
    # Redis 6.2 inside a script: a plain error whose text carries the refusal.
    assert is_out_of_memory(
        ResponseError("Error running script: -OOM command not allowed when used memory > 'maxmemory'.")
    )
    assert not is_out_of_memory(ResponseError("WRONGTYPE Operation against a key holding the wrong kind"))
    assert not is_out_of_memory(ValueError("OOM command not allowed"))


# The report id carries the example, so the token fixture serves every example: no key is shared.
@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(charged=st.integers(1, 8), refunded=st.sets(st.integers(0, 7), max_size=8))
async def test_a_refund_gives_back_exactly_the_charges_of_the_jobs_named(
    redis_url: str, token: str, charged: int, refunded: set[int]
) -> None:
    redis = aioredis.Redis.from_url(redis_url)
    report = f"r-{token}-{charged}-{'-'.join(map(str, sorted(refunded)))}"
    try:
        budgets = Budgets(
            redis,
            Settings(fetch_budget=20, queue_name=f"research-test:{token}:queue"),
        )
        for job in range(charged):
            assert (await budgets.charge(report, Tool.FETCH, f"j{job}")).allowed
        given_back = [await budgets.refund(report, f"j{job}") for job in sorted(refunded)]
        again = [await budgets.refund(report, f"j{job}") for job in sorted(refunded)]  # twice: no-op
        usage, _ = await budgets.usage(report)
    finally:
        await redis.delete(keys.budget(report))
        await redis.aclose()
    named = {job for job in refunded if job < charged}
    assert given_back == [job in named for job in sorted(refunded)]
    assert not any(again)
    assert usage[Tool.FETCH].used == charged - len(named)


def test_an_idle_worker_looks_at_redis_s_memory_seldom_only_while_it_is_far_from_its_headroom() -> None:
    from worker.state.memory import Reading, calm_check_s

    gb = 1 << 30
    assert calm_check_s(None, 1.0) == 1.0  # never read: look again soon
    assert calm_check_s(Reading(used=5 * gb, maxmemory=0), 1.0) == 10.0  # no maxmemory: nothing to keep
    # maxmemory 10 GB: the headroom leaves 8 GB, calm below 4 GB.
    assert calm_check_s(Reading(used=3 * gb, maxmemory=10 * gb), 1.0) == 10.0
    assert calm_check_s(Reading(used=4 * gb, maxmemory=10 * gb), 1.0) == 1.0
    assert calm_check_s(Reading(used=9 * gb, maxmemory=10 * gb), 1.0) == 1.0
