"""Per-report budgets: one Lua script that checks, charges and remembers the job, atomically.

Redis runs a script to completion before any other command, so the read of the counter, the
comparison with the limit and the increment cannot interleave with another worker's charge: 200
concurrent charges against a limit of 25 allow exactly 25. arq delivers a job at least once (a
worker killed mid-job leaves it to be re-run), so each charged job id is recorded in the same hash
and a second charge for it is a no-op that reports success.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, cast

from worker.state import keys

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from worker.config import Settings


class Tool(StrEnum):
    SEARCH = "search"
    FETCH = "fetch"


# KEYS[1]: the report's budget hash. ARGV: tool, limit, window seconds, job id.
# Returns {allowed (0/1), used after the call, already charged (0/1)}. The job's mark goes first
# (HSETNX: a job charged before finds it and is not charged again), then the charge, taken back
# at once when it went past the limit: three commands for a charge that is allowed. The window
# starts with the report's first charge and is never extended: the expiry is looked at only when
# this tool's counter starts (a counter above one was counted under a hash that had its expiry).
CHARGE_SCRIPT = """
local marker = 'job:' .. ARGV[4]
if redis.call('HSETNX', KEYS[1], marker, ARGV[1]) == 0 then
  return {1, tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0'), 1}
end
local used = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
local allowed = 1
if used > tonumber(ARGV[2]) then
  redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
  redis.call('HDEL', KEYS[1], marker)
  used = used - 1
  allowed = 0
end
if used <= 1 and redis.call('TTL', KEYS[1]) < 0 then
  redis.call('EXPIRE', KEYS[1], ARGV[3])
end
return {allowed, used, 0}
"""


@dataclass(frozen=True)
class Charge:
    allowed: bool
    used: int
    limit: int
    already_charged: bool


@dataclass(frozen=True)
class Usage:
    used: int
    limit: int

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.used)


def limits(settings: Settings) -> dict[Tool, int]:
    """Each tool's budget per report, as the settings give it."""
    return {Tool.SEARCH: settings.search_budget, Tool.FETCH: settings.fetch_budget}


# The budget hash's counter fields, one per tool (the rest are the charged jobs' marks).
COUNTERS: tuple[str, ...] = tuple(tool.value for tool in Tool)


class Budgets:
    def __init__(self, redis: Redis, settings: Settings) -> None:
        self._redis = redis
        self._window_s = settings.budget_window_s
        self._limits = limits(settings)
        self._script = redis.register_script(CHARGE_SCRIPT)

    async def charge(self, report_id: str, tool: Tool, job_id: str) -> Charge:
        limit = self._limits[tool]
        raw = await self._script(
            keys=[keys.budget(report_id)], args=[tool.value, limit, self._window_s, job_id]
        )
        allowed, used, again = cast(list[int], raw)
        return Charge(bool(allowed), int(used), limit, bool(again))

    async def usage(self, report_id: str) -> tuple[dict[Tool, Usage], int]:
        """Counters per tool and the seconds left in the window (-2 when nothing was charged)."""
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hmget(keys.budget(report_id), list(COUNTERS))
            pipe.ttl(keys.budget(report_id))
            counts, ttl = await pipe.execute()
        usage = {
            tool: Usage(int(raw or 0), self._limits[tool]) for tool, raw in zip(Tool, counts, strict=True)
        }
        return usage, int(ttl)
