"""CPU slots: how a worker shares its one core between the jobs that reduce a body to text.

A worker's jobs mostly wait (on the network, on Redis), and waiting is cheap: many jobs fit on
one event loop. Reduction is not: it is CPU-bound, and a hostile 2 MiB page takes a full CPU
budget (seconds). Running many at once adds no throughput, only memory, and each running
reduction adds a slice to every turn of the event loop, which every other job on the worker
waits through; so a few slots gate it. Two rules keep that gate from becoming a queue that
everything waits in:

- smallest first: the slot that frees goes to the smallest body waiting, not the oldest, so a
  short page never waits behind a line of large ones;
- an express lane: a few more slots that only small bodies may take, so a small page starts
  at once even while every general slot is held by a large page that will take seconds.

What the gate does not hold is the rest of the job: its network time, and refusals (a URL the
guardian or the menu refuses) are answered before any slot is asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import AsyncIterator
from enum import Enum

# A page this small reduces in tens of milliseconds even when hostile.
EXPRESS_MAX_BYTES = 128 * 1024
EXPRESS_SLOTS = 2


class Lane(Enum):
    GENERAL = "general"
    EXPRESS = "express"


class CpuSlots:
    def __init__(
        self, slots: int, *, express_slots: int = EXPRESS_SLOTS, express_max_bytes: int = EXPRESS_MAX_BYTES
    ) -> None:
        if slots < 1 or express_slots < 0:
            raise ValueError("a worker needs at least one CPU slot")
        self._free = {Lane.GENERAL: slots, Lane.EXPRESS: express_slots}
        self._express_max_bytes = express_max_bytes
        self._waiting: list[tuple[int, int, asyncio.Future[Lane]]] = []
        self._order = itertools.count()

    @property
    def waiting(self) -> int:
        return sum(not future.done() for _, _, future in self._waiting)

    def free(self, lane: Lane) -> int:
        return self._free[lane]

    @contextlib.asynccontextmanager
    async def slot(self, size: int) -> AsyncIterator[Lane]:
        """Hold a slot for the block's CPU work on a body of ``size`` bytes; yields the lane taken."""
        future: asyncio.Future[Lane] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (max(0, size), next(self._order), future))
        self._grant()
        try:
            lane = await future
        except asyncio.CancelledError:
            # Cancelled while waiting (the job's deadline); a slot granted in that same moment
            # goes back to the next waiter.
            if future.done() and not future.cancelled():
                self._release(future.result())
            raise
        try:
            yield lane
        finally:
            self._release(lane)

    def _release(self, lane: Lane) -> None:
        self._free[lane] += 1
        self._grant()

    def _grant(self) -> None:
        # Waiters are ordered by size, so once the smallest cannot be seated no larger one can be.
        while self._waiting:
            size, _, future = self._waiting[0]
            if future.done():  # cancelled while waiting
                heapq.heappop(self._waiting)
                continue
            lane = self._lane_for(size)
            if lane is None:
                return
            heapq.heappop(self._waiting)
            self._free[lane] -= 1
            future.set_result(lane)

    def _lane_for(self, size: int) -> Lane | None:
        if size <= self._express_max_bytes and self._free[Lane.EXPRESS] > 0:
            return Lane.EXPRESS
        if self._free[Lane.GENERAL] > 0:
            return Lane.GENERAL
        return None
