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

from worker import keys

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from worker.config import Settings


class Tool(StrEnum):
    SEARCH = "search"
    FETCH = "fetch"
    RENDER = "render"  # charged besides the fetch a render also is (RESEARCH_RENDER_BUDGET)


# KEYS[1]: the report's budget hash. ARGV: tool, limit, window seconds, job id.
# Returns {allowed (0/1), used after the call, already charged (0/1)}.
CHARGE_SCRIPT = """
local marker = 'job:' .. ARGV[4]
local used = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if redis.call('HEXISTS', KEYS[1], marker) == 1 then
  return {1, used, 1}
end
if used >= tonumber(ARGV[2]) then
  return {0, used, 0}
end
used = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
redis.call('HSET', KEYS[1], marker, ARGV[1])
if redis.call('TTL', KEYS[1]) < 0 then
  redis.call('EXPIRE', KEYS[1], ARGV[3])
end
return {1, used, 0}
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


class Budgets:
    def __init__(self, redis: Redis, settings: Settings) -> None:
        self._redis = redis
        self._window_s = settings.budget_window_s
        self._limits = {
            Tool.SEARCH: settings.search_budget,
            Tool.FETCH: settings.fetch_budget,
            Tool.RENDER: settings.render_budget,
        }
        self._script = redis.register_script(CHARGE_SCRIPT)

    def limit(self, tool: Tool) -> int:
        return self._limits[tool]

    async def charge(self, report_id: str, tool: Tool, job_id: str) -> Charge:
        limit = self._limits[tool]
        # The script remembers one charge per marker; a render is a second charge of the same job
        # (its fetch is the first), so it is remembered under a marker of its own.
        marker = job_id if tool is not Tool.RENDER else f"{job_id}:{tool.value}"
        raw = await self._script(
            keys=[keys.budget(report_id)], args=[tool.value, limit, self._window_s, marker]
        )
        allowed, used, again = cast(list[int], raw)
        return Charge(bool(allowed), int(used), limit, bool(again))

    async def usage(self, report_id: str) -> tuple[dict[Tool, Usage], int]:
        """Counters per tool and the seconds left in the window (-2 when nothing was charged)."""
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hmget(keys.budget(report_id), [t.value for t in Tool])
            pipe.ttl(keys.budget(report_id))
            counts, ttl = await pipe.execute()
        usage = {
            tool: Usage(int(raw or 0), self._limits[tool]) for tool, raw in zip(Tool, counts, strict=True)
        }
        return usage, int(ttl)
