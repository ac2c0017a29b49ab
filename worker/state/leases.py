"""Keys kept alive in Redis: leases renewed while the work they guard runs, and bookkeeping
whose time to live is renewed at most once a while.

A lease lives ``LEASE_MS`` unless renewed, so whatever a worker holds (a host slot, a page flight)
is freed within a lease time when the worker dies. ``renewed`` keeps one lease alive for the length
of a block, from a task of its own, so the beat goes on while the block awaits the network or
yields between reduction slices.

A key that many writes touch (a cache's bookkeeping, a report's menu or archive index) is given a
time to live longer than it needs by twice an interval, and each worker renews it at most once per
interval (``Renewals``): one command a minute instead of one per write. The renewal is claimed as
the write that carries it goes out, so concurrent writes do not all carry one, and given back when
that write fails, so the next write carries it instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from redis.exceptions import RedisError

from worker.logs import fields

log = logging.getLogger("research.leases")

T = TypeVar("T")

# Short, because a lapsed lease is what hands a dead worker's page flight or host slot to the next
# job: a waiter takes over within this plus its check interval. A job's own claim lease is longer
# (worker/runtime/claims.py), so a page flight is taken over before its dead fetcher's job is re-run.
LEASE_MS = 3_000
# Three renewals per lease time: one late beat (a slow Redis, a long collection) loses nothing.
RENEW_EVERY_S = LEASE_MS / 1000 / 3


@contextlib.asynccontextmanager
async def renewed(renew: Callable[[], Awaitable[Any]], key: str) -> AsyncIterator[None]:
    """Call ``renew`` every ``RENEW_EVERY_S`` while the block runs; ``key`` names the lease in logs.

    ``renew`` answers falsy when the lease was lost (it lapsed and was taken); that is logged once
    and the beat stops, since nothing can be renewed any more.
    """

    async def beat() -> None:
        while True:
            await asyncio.sleep(RENEW_EVERY_S)
            try:
                held = await renew()
            except (RedisError, OSError) as exc:
                log.warning("lease renewal failed", extra=fields(key=key, error=type(exc).__name__))
                continue
            if not held:
                log.warning("lease lost before the work ended", extra=fields(key=key))
                return

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


# Keys whose last renewal one worker remembers; one it forgot is only renewed again.
REMEMBERED = 4096


class Renewals:
    def __init__(self, every_s: float) -> None:
        self.every_s = every_s
        self._at: OrderedDict[str, float] = OrderedDict()  # key -> when claimed (monotonic)

    def due(self, key: str = "") -> bool:
        """Whether the write about to go out should renew ``key``; when it should, it is claimed."""
        now = time.monotonic()
        if now - self._at.get(key, -math.inf) < self.every_s:
            return False
        self._at[key] = now
        self._at.move_to_end(key)
        while len(self._at) > REMEMBERED:
            self._at.popitem(last=False)
        return True

    def failed(self, key: str = "") -> None:
        """The write that carried ``key``'s renewal failed: the next one renews it."""
        self._at.pop(key, None)

    async def carried(
        self, key: str, write: Callable[[bool], Awaitable[T]], renewed: Callable[[T], bool]
    ) -> T:
        """``write(renew)``: the write, told whether it renews ``key`` too (claimed when that is due).
        A write that raises, or whose reply says it did not renew (``renewed``), gives it back."""
        renew = self.due(key)
        try:
            reply = await write(renew)
        except BaseException:
            if renew:
                self.failed(key)
            raise
        if renew and not renewed(reply):
            self.failed(key)
        return reply
