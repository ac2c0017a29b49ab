"""Hosts the workers are holding fetches back from (a 429 or 503 that asked them to wait).

The politeness layer keeps them in Redis and owns their format (``worker.state.politeness``); this is the
one place the dashboard asks it. When the listing cannot be read (a Redis user refused it), the page
says the list is not available rather than showing an empty list that would look like calm.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from worker.logs import fields
from worker.state import politeness

log = logging.getLogger("research.dashboard")


@dataclass(frozen=True)
class BackoffRow:
    host: str
    until: float  # unix seconds
    remaining_s: float
    status: int | None  # the answer that started the hold, when known
    since: float | None  # when it came (unix seconds)


async def read_backoffs(redis: Redis, queue_name: str, now: float) -> list[BackoffRow] | None:
    """The hosts backing off now, soonest release first; None when they cannot be listed."""
    try:
        held = await politeness.backing_off(redis, queue_name)
    except ResponseError as exc:
        log.warning("cannot list the hosts backing off", extra=fields(error=type(exc).__name__))
        return None
    return [
        BackoffRow(
            row.host,
            row.until,
            max(0.0, row.until - now),
            row.cause.status if row.cause else None,
            row.cause.since if row.cause else None,
        )
        for row in held
    ]
