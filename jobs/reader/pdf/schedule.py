"""Who reads next in the PDF pool: the waiting PDF whose site has cost the children least lately.

A PDF's size says nothing about its cost: a 3 KB file can make PDFium parse hundreds of megabytes
of content stream, page after page, for seconds. So the pool is not ordered by bytes (the worker's
CPU slots are, for HTML, and PDFs never take those) but by cost: each reading's time in a child is
charged to its site (``cost_key``, the URL's host), the charge decays by half every
``HALF_LIFE_S``, and a child that frees goes to the waiting PDF whose site has the smallest charge
(the oldest, among equals). A site whose PDFs cost seconds each then waits behind sites whose PDFs
cost milliseconds, instead of every site waiting behind it.

The queue belongs to one event loop (a worker has one); the pool's threads bound the children.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import time
from collections.abc import AsyncIterator

HALF_LIFE_S = 30.0


class CostQueue:
    """At most ``seats`` readings at once; the next seat goes to the cheapest site waiting."""

    def __init__(self, seats: int, *, half_life_s: float = HALF_LIFE_S) -> None:
        if seats < 1:
            raise ValueError("a PDF pool needs at least one seat")
        self._free = seats
        self._half_life_s = half_life_s
        self._spent: dict[str, tuple[float, float]] = {}  # site: (charge in seconds, when charged)
        self._waiting: list[tuple[str, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    @property
    def waiting(self) -> int:
        return sum(not future.done() for _, _, future in self._waiting)

    def charge(self, key: str, now: float | None = None) -> float:
        """The site's charge now: its readings' seconds, each halved every half-life since."""
        spent, at = self._spent.get(key, (0.0, 0.0))
        if not spent:
            return 0.0
        elapsed = max(0.0, (time.monotonic() if now is None else now) - at)
        return spent * math.pow(0.5, elapsed / self._half_life_s)

    @contextlib.asynccontextmanager
    async def seat(self, key: str) -> AsyncIterator[None]:
        """Hold a seat for one reading of a PDF from ``key``'s site; its time is charged to it."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((key, next(self._order), future))
        self._grant()
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self._release()  # granted in the same moment it was cancelled: pass the seat on
            raise
        started = time.monotonic()
        try:
            yield
        finally:
            now = time.monotonic()
            self._spent[key] = (self.charge(key, now) + (now - started), now)
            self._forget_idle(now)
            self._release()

    def _release(self) -> None:
        self._free += 1
        self._grant()

    def _grant(self) -> None:
        self._waiting = [entry for entry in self._waiting if not entry[2].done()]
        while self._free > 0 and self._waiting:
            now = time.monotonic()
            chosen = min(self._waiting, key=lambda entry: (self.charge(entry[0], now), entry[1]))
            self._waiting.remove(chosen)
            self._free -= 1
            chosen[2].set_result(None)

    def _forget_idle(self, now: float) -> None:
        """Drop sites whose charge has decayed to nothing, so the ledger does not grow forever."""
        if len(self._spent) > 1000:
            self._spent = {k: v for k, v in self._spent.items() if self.charge(k, now) > 0.001}
