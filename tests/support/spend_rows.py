"""The organization-day rows of one usage source, read as the dashboard reads them (``org_days``
over the keys ``keys.spend_org_pattern()`` lists), newest day first."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

from worker.state import keys
from worker.state.spend import org_days


async def org_rows(redis: Redis, usage_source: str) -> list[dict[str, Any]]:
    found = [key async for key in redis.scan_iter(match=keys.spend_org_pattern(), count=1000)]
    names = [key.decode() if isinstance(key, bytes) else str(key) for key in found]
    return [row for row in await org_days(redis, names) if row["usage_source"] == usage_source]
