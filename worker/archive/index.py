"""The per-report index: which archive records a report's results cite, in the order they came.

A Redis list of record ids (``keys.archive_report``) with the budget window's time to live, renewed
on each entry, so a report's evidence can be exported while its budget window lasts (the records
themselves stay for ``RESEARCH_ARCHIVE_DAYS``). Only ids that parse are ever read back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from worker.archive.ids import parse_record_id
from worker.state import keys

if TYPE_CHECKING:
    from redis.asyncio import Redis

# More entries than a report's budgets allow is not a report: the list stops growing there.
MAX_ENTRIES = 10_000


async def add(redis: Redis, report_id: str, record: str, window_s: int) -> None:
    key = keys.archive_report(report_id)
    async with redis.pipeline(transaction=True) as tx:
        tx.rpush(key, record)
        tx.ltrim(key, 0, MAX_ENTRIES - 1)
        tx.expire(key, window_s)
        await tx.execute()


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
