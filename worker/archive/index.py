"""The per-report index: which archive records a report's results cite, in the order they came.

A Redis list of record ids (``keys.archive_report``) that outlives the report's last entry by at
least its budget window (each worker renews its time to live at most once a minute per report), so
a report's evidence can be exported while its budget window lasts (the records themselves stay
for ``RESEARCH_ARCHIVE_DAYS``). Only ids that parse are ever read back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from worker.archive.ids import parse_record_id
from worker.state import keys
from worker.state.leases import Renewals

if TYPE_CHECKING:
    from redis.asyncio import Redis

# More entries than a report's budgets allow is not a report: the list stops growing there.
MAX_ENTRIES = 10_000
# A worker renews a report's index's time to live at most this often (and whenever its entry
# starts the list), to the window plus twice this: the list outlives its last entry by the window.
RENEW_EVERY_S = 60.0


class ReportIndex:
    """One worker's writes to the reports' indexes: an entry is one RPUSH, whose reply says when more
    is needed (a list the push started, deleted since it was renewed, is given its time to live at
    once, and a list past its bound is cut back); the write that renews a report's list (once a
    minute per worker) sends its EXPIRE in the same round trip."""

    def __init__(self, redis: Redis, window_s: int) -> None:
        self._redis = redis
        self._ttl_s = window_s + int(2 * RENEW_EVERY_S)
        self._renewals = Renewals(RENEW_EVERY_S)

    async def add(self, report_id: str, record: str, also: Callable[[Any], None] | None = None) -> None:
        """``also`` adds commands of the caller's to the same round trip (the writer's journal)."""
        key = keys.archive_report(report_id)

        async def push(renew: bool) -> tuple[int, bool]:
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.rpush(key, record)
                if renew:
                    pipe.expire(key, self._ttl_s)
                if also is not None:
                    also(pipe)
                return int((await pipe.execute())[0]), renew

        length, renew = await self._renewals.carried(report_id, push, lambda _: True)
        if length == 1 and not renew:
            await self._redis.expire(key, self._ttl_s)
        elif length > MAX_ENTRIES:
            await self._redis.ltrim(key, 0, MAX_ENTRIES - 1)  # type: ignore[misc]


async def cited(redis: Redis, report_id: str) -> list[str]:
    """The report's record ids, each once, in the order first cited."""
    key = keys.archive_report(report_id)
    raw: list[bytes] = await redis.lrange(key, 0, MAX_ENTRIES - 1)  # type: ignore[misc]
    seen: dict[str, None] = {}
    for value in raw:
        record = parse_record_id(value.decode("ascii", "replace") if isinstance(value, bytes) else value)
        if record is not None:
            seen.setdefault(record)
    return list(seen)
