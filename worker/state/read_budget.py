"""The read budget: characters a report's continuations may return, charged atomically in Redis.

A continuation opens no connection and costs no fetch, so it needs a bound of its own, or one
report could page through documents forever. The characters a continuation returns are charged to
a counter in the report's budget hash, once per job id (a re-run is granted what the first run
was), and a continuation asking for more than is left is granted the rest: its piece ends there and
says where the next would start. One with nothing left is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from worker.state import keys

if TYPE_CHECKING:
    from redis.asyncio import Redis

FIELD = "read_chars"

# KEYS[1]: the report's budget hash. ARGV: characters wanted, limit, window seconds, job id.
# Returns {granted characters (0 when nothing is left), used after the call}.
# One script, so the read of the counter, the grant and the increment cannot interleave.
CHARGE_READ_SCRIPT = """
local marker = 'read:' .. ARGV[4]
local used = tonumber(redis.call('HGET', KEYS[1], 'read_chars') or '0')
local before = redis.call('HGET', KEYS[1], marker)
if before then
  return {tonumber(before), used}
end
local granted = math.min(tonumber(ARGV[1]), math.max(0, tonumber(ARGV[2]) - used))
if granted <= 0 then
  return {0, used}
end
used = redis.call('HINCRBY', KEYS[1], 'read_chars', granted)
redis.call('HSET', KEYS[1], marker, granted)
if redis.call('TTL', KEYS[1]) < 0 then
  redis.call('EXPIRE', KEYS[1], ARGV[3])
end
return {granted, used}
"""


@dataclass(frozen=True)
class Grant:
    chars: int  # what this job may return (0: the budget is spent)
    used: int
    limit: int


class ReadBudget:
    def __init__(self, redis: Redis, *, limit: int, window_s: int) -> None:
        self._redis = redis
        self.limit = limit
        self._window_s = window_s
        self._script = redis.register_script(CHARGE_READ_SCRIPT)

    async def grant(self, report_id: str, job_id: str, wanted: int) -> Grant:
        raw = await self._script(
            keys=[keys.budget(report_id)], args=[max(0, wanted), self.limit, self._window_s, job_id]
        )
        granted, used = cast(list[int], raw)
        return Grant(int(granted), int(used), self.limit)

    async def used(self, report_id: str) -> int:
        raw = await self._redis.hget(keys.budget(report_id), FIELD)  # type: ignore[misc]
        return int(raw or 0)
