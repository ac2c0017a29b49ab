"""The organizations near their daily caps (RESEARCH_ORG_DAILY_SEARCHES, RESEARCH_ORG_DAILY_FETCHES).

Read from today's organization hashes (``worker.state.budget``), the UTC day the workers charge.
An organization is shown from ``NEAR`` of either cap on, fullest first, so an operator sees a
runaway token or a busy customer before its jobs are refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import worker.dashboard.decode as decode
from worker.state import keys
from worker.state.budget import ORG_TOOLS, org_limits, utc_day_of_ms

if TYPE_CHECKING:
    from arq.connections import ArqRedis

    from worker.config import Settings

NEAR = 0.8
MAX_SCANNED = 2000
SHOWN_CHARS = 120


@dataclass(frozen=True)
class OrgCapRow:
    org: str
    day: str
    searches: int
    search_limit: int | None
    fetches: int
    fetch_limit: int | None
    share: float  # the fuller of the two, 1.0 at a cap

    @property
    def full(self) -> bool:
        return self.share >= 1.0


def share_of(used: int, limit: int | None) -> float:
    return used / limit if limit else 0.0


async def near_caps(redis: ArqRedis, settings: Settings, now: float) -> tuple[list[OrgCapRow], bool]:
    """Today's organizations at or past ``NEAR`` of a cap, fullest first; and whether the scan
    saw every organization (False: the page says partial). ``now`` is the page's own clock: its
    read-only Redis user may not ask Redis's (TIME), and a day read a moment early or late near
    midnight only shows yesterday's counters once more."""
    limits = org_limits(settings)
    if all(limit is None for limit in limits.values()):
        return [], True
    day = utc_day_of_ms(int(now * 1000))
    prefix, suffix = keys.org_day("", day).removesuffix(f":{day}"), f":{day}"
    names: list[str] = []
    complete = True
    async for raw in redis.scan_iter(match=keys.org_day("*", day), count=1000):
        if len(names) >= MAX_SCANNED:
            complete = False
            break
        names.append(raw.decode() if isinstance(raw, bytes) else str(raw))
    if not names:
        return [], complete
    async with redis.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.hmget(name, list(ORG_TOOLS))
        replies = await pipe.execute(raise_on_error=False)
    search_limit, fetch_limit = (limits[tool] for tool in limits)
    rows = []
    for name, counts in zip(names, replies, strict=True):
        if not isinstance(counts, list):
            continue
        searches, fetches = (decode.integer(n) for n in counts)
        share = max(share_of(searches, search_limit), share_of(fetches, fetch_limit))
        if share >= NEAR:
            org = name.removeprefix(prefix).removesuffix(suffix)
            rows.append(
                OrgCapRow(
                    decode.short(org, SHOWN_CHARS), day, searches, search_limit, fetches, fetch_limit, share
                )
            )
    rows.sort(key=lambda row: (-row.share, row.org))
    return rows, complete
