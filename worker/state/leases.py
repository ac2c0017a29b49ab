"""Leases held in Redis and renewed while the work they guard runs.

A lease lives ``LEASE_MS`` unless renewed, so whatever a worker holds (a host slot, a page flight)
is freed within a lease time when the worker dies. ``renewed`` keeps one lease alive for the length
of a block, from a task of its own, so the beat goes on while the block awaits the network or
yields between reduction slices.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from redis.exceptions import RedisError

from worker.logs import fields

log = logging.getLogger("research.leases")

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
