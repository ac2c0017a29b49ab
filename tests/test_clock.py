"""Redis's clock as a process reads it (worker.state.clock): never ahead of Redis, behind it by at
most a round trip, one TIME per resync however many readings, and deaf to the wall clock."""

from __future__ import annotations

import time

import pytest
import redis.asyncio as aioredis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.exceptions import ConnectionError as RedisConnectionError

from worker.state.clock import RedisClock


async def redis_ms(redis: aioredis.Redis) -> float:
    seconds, micros = await redis.time()
    return seconds * 1000 + micros / 1000


class Counting:
    """A Redis whose TIME is counted, and can be made to fail."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis
        self.calls = 0
        self.down = False

    async def time(self) -> tuple[int, int]:
        self.calls += 1
        if self.down:
            raise RedisConnectionError("Redis went away")
        return await self.redis.time()


class Timed:
    """A Redis whose TIME round trips are measured: the lag a reading may have is the round trip of
    the TIME that set the clock's offset, not of any later command (a loaded machine can make the
    two differ by far more than a millisecond)."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis
        self.round_trips_ms: list[float] = []

    async def time(self) -> tuple[int, int]:
        sent = time.monotonic()
        answer = await self.redis.time()
        self.round_trips_ms.append((time.monotonic() - sent) * 1000)
        return answer


async def test_a_reading_is_never_ahead_of_redis_and_behind_it_by_at_most_a_round_trip(
    redis: aioredis.Redis,
) -> None:
    timed = Timed(redis)
    clock = RedisClock(timed)  # type: ignore[arg-type]
    for _ in range(50):
        before = await redis_ms(redis)
        reading = await clock.now_ms()
        after = await redis_ms(redis)
        # Whole milliseconds, floored: at most Redis's time when the reading was taken, and behind
        # it by at most the round trip of the sync the reading runs on (Redis's time at the reading
        # is at least ``before``).
        assert reading <= after
        assert reading >= before - max(timed.round_trips_ms) - 1


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(skew_s=st.one_of(st.sampled_from([-86_400.0, -3600.0, 3600.0]), st.floats(-86_400, 86_400)))
async def test_a_wall_clock_that_is_wrong_or_steps_does_not_move_the_reading(
    redis: aioredis.Redis, skew_s: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = RedisClock(redis)
    first = await clock.now_ms()
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + skew_s)
    second = await clock.now_ms()
    truth = await redis_ms(redis)
    monkeypatch.undo()
    assert first <= second <= truth
    assert truth - second < 1000


async def test_readings_within_the_resync_interval_cost_one_time_command(redis: aioredis.Redis) -> None:
    now = [1000.0]
    counting = Counting(redis)
    clock = RedisClock(counting, resync_s=30.0, monotonic=lambda: now[0], wall=lambda: now[0])  # type: ignore[arg-type]
    readings = []
    for _ in range(100):
        readings.append(await clock.now_ms())
        now[0] += 0.25  # 25 s in all
    assert counting.calls == 1
    # Between syncs the reading runs on the monotonic clock, ms for ms.
    assert readings[-1] - readings[0] == pytest.approx(99 * 250, abs=1)
    now[0] += 5.0  # 30 s after the sync: read again
    await clock.now_ms()
    assert counting.calls == 2


async def test_a_failed_resync_keeps_the_last_reading_running_and_a_first_one_raises(
    redis: aioredis.Redis,
) -> None:
    now = [1000.0]
    counting = Counting(redis)
    clock = RedisClock(counting, resync_s=30.0, monotonic=lambda: now[0], wall=lambda: now[0])  # type: ignore[arg-type]
    first = await clock.now_ms()
    counting.down = True
    now[0] += 60.0
    assert await clock.now_ms() == pytest.approx(first + 60_000, abs=1)
    now[0] += 1.0
    assert await clock.now_ms() == pytest.approx(first + 61_000, abs=1)
    assert counting.calls == 3  # each reading past the interval tried again
    counting.down = False
    await clock.now_ms()
    assert counting.calls == 4

    never_synced = RedisClock(Counting(redis), monotonic=lambda: now[0], wall=lambda: now[0])  # type: ignore[arg-type]
    never_synced._redis.down = True  # type: ignore[attr-defined]
    with pytest.raises(RedisConnectionError):
        await never_synced.now_ms()


async def test_a_sleep_or_a_stepped_wall_clock_makes_it_read_redis_again_at_once(
    redis: aioredis.Redis,
) -> None:
    # While a machine sleeps (or a VM is paused) its monotonic clock stands still and Redis's goes
    # on: the reading would lag by the whole sleep until the next resync.
    mono, wall = [1000.0], [5000.0]
    counting = Counting(redis)
    clock = RedisClock(counting, monotonic=lambda: mono[0], wall=lambda: wall[0])  # type: ignore[arg-type]
    await clock.now_ms()
    mono[0] += 0.5
    wall[0] += 0.5
    await clock.now_ms()
    assert counting.calls == 1  # the two clocks agree: nothing to read
    wall[0] += 600.0  # ten minutes asleep: only the wall clock moved
    await clock.now_ms()
    assert counting.calls == 2
    wall[0] -= 3600.0  # the wall clock stepped back an hour
    await clock.now_ms()
    assert counting.calls == 3
