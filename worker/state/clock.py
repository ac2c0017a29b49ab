"""Redis's clock as one process reads it: a ``TIME`` now and then, and the monotonic clock between.

Leases, host holds, queue scores and the cache's expiries are compared by every worker, on many
machines, so they all run on one clock: Redis's. Reading it with ``TIME`` inside each script cost a
command on every write; instead a process reads ``TIME`` once every ``RESYNC_S`` and runs Redis's
clock on from there with its own monotonic clock, which a wrong or stepped wall clock never moves.

The reading is never ahead of Redis's own (the offset is taken when the reply has arrived, so the
time it names is already past) and behind it by at most the round trip of the ``TIME`` that set it,
plus the two clocks' drift over ``RESYNC_S`` (parts per million: microseconds). Workers therefore
agree on when a lease or a hold ends to within a round trip, as they did with ``TIME`` in the
scripts, whatever their own wall clocks say. The monotonic clock stands still while a machine
sleeps or a VM is paused; the wall clock does not, so when the two part by more than ``JUMP_S``
since the last reading of Redis's clock (a sleep, or the wall clock stepped), it is read again at
once.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from redis.exceptions import RedisError

if TYPE_CHECKING:
    from redis.asyncio import Redis

# How often a process reads Redis's clock again: one command a while, however many writes.
RESYNC_S = 30.0
# The monotonic and the wall clock parting by more than this since the last reading: read again.
JUMP_S = 1.0


class RedisClock:
    """Redis's time in milliseconds, for the scripts that store times (one per Redis connection)."""

    def __init__(
        self,
        redis: Redis,
        *,
        resync_s: float = RESYNC_S,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._redis = redis
        self._resync_s = resync_s
        self._monotonic = monotonic
        self._wall = wall
        self._offset_ms: float | None = None  # Redis's ms minus the monotonic clock's ms
        self._synced_at = -math.inf  # monotonic
        self._wall_offset = 0.0  # the wall clock minus the monotonic clock, at the last sync
        self._lock = asyncio.Lock()

    async def now_ms(self) -> int:
        """Redis's time now, in whole milliseconds (never ahead of Redis's own ``TIME``)."""
        if self._stale():
            await self._sync()
        assert self._offset_ms is not None  # set by the first sync, or it raised
        return int(self._offset_ms + self._monotonic() * 1000)

    def _stale(self) -> bool:
        now = self._monotonic()
        if now - self._synced_at >= self._resync_s:
            return True
        return abs(self._wall() - now - self._wall_offset) > JUMP_S

    async def _sync(self) -> None:
        async with self._lock:
            if not self._stale():
                return  # another caller synced while this one waited
            try:
                seconds, micros = await self._redis.time()
            except (RedisError, OSError):
                if self._offset_ms is None:
                    raise
                return  # the last reading runs on; the next call tries again
            arrived = self._monotonic()
            self._offset_ms = seconds * 1000 + micros / 1000 - arrived * 1000
            self._synced_at = arrived
            self._wall_offset = self._wall() - arrived
