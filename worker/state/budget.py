"""Per-report budgets: one Lua script that checks, charges and remembers the job, atomically.

Redis runs a script to completion before any other command, so the read of the counter, the
comparison with the limit and the increment cannot interleave with another worker's charge: 200
concurrent charges against a limit of 25 allow exactly 25. arq delivers a job at least once (a
worker killed mid-job leaves it to be re-run), so each charged job id is recorded in the same hash
and a second charge for it is a no-op that reports success.

The read budget is the characters a report's continuations may return (a continuation opens no
connection and costs no fetch, so it needs a bound of its own): a second script, the same
guarantees, granting the rest when less is left than was asked.

A charge is for a result: a job whose result could not be stored (Redis out of memory, say) gets
its charge back (``refund``), so a report never pays for work it never received. A charge that
Redis refuses for memory is tried again after the page cache has given some back
(``worker.state.memory``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, cast

from worker.state import keys
from worker.state.memory import relieving

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from worker.config import Settings


class Tool(StrEnum):
    SEARCH = "search"
    FETCH = "fetch"
    RENDER = "render"  # charged besides the fetch a render also is (RESEARCH_RENDER_BUDGET)


# KEYS[1]: the report's budget hash; KEYS[2], when given, its organization's hash for today.
# ARGV: tool, limit, window seconds, job id, the organization's daily limit ('' for none), the
# organization hash's time to live.
# Returns {allowed (0/1), used after the call, already charged (0/1), refused by the org (0/1),
# the org's count after the call}. The job's mark goes first (HSETNX: a job charged before finds it
# and is not charged again), then the charge, taken back at once when it went past the limit:
# three commands for a charge that is allowed. The organization's day is charged in the same
# script, so neither counter is ever charged without the other; the job's mark names the org's
# hash ('org:' field) so a refund gives back both. The report's window starts with its first
# charge and is never extended: the expiry is looked at only when this tool's counter starts.
CHARGE_SCRIPT = """
local marker = 'job:' .. ARGV[4]
if redis.call('HSETNX', KEYS[1], marker, ARGV[1]) == 0 then
  return {1, tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0'), 1, 0, 0}
end
local used = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
local allowed = 1
local by_org = 0
local org_used = 0
if used > tonumber(ARGV[2]) then
  allowed = 0
elseif #KEYS > 1 then
  org_used = redis.call('HINCRBY', KEYS[2], ARGV[1], 1)
  if ARGV[5] ~= '' and org_used > tonumber(ARGV[5]) then
    redis.call('HINCRBY', KEYS[2], ARGV[1], -1)
    org_used = org_used - 1
    allowed = 0
    by_org = 1
  else
    redis.call('HSET', KEYS[1], 'org:' .. ARGV[4], KEYS[2])
  end
  if redis.call('TTL', KEYS[2]) < 0 then
    redis.call('EXPIRE', KEYS[2], ARGV[6])
  end
end
if allowed == 0 then
  redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
  redis.call('HDEL', KEYS[1], marker)
  used = used - 1
end
if used <= 1 and redis.call('TTL', KEYS[1]) < 0 then
  redis.call('EXPIRE', KEYS[1], ARGV[3])
end
return {allowed, used, 0, by_org, org_used}
"""

# KEYS[1]: the report's budget hash. ARGV[1]: job id. Returns how many charges were given back.
# A job holds up to two charges: its own (marker 'job:<id>') and, for a render, the render's
# (marker 'job:<id>:render', see ``Budgets.charge``); a result that could not be stored gives
# back both, and the organization's day the job's own charge named ('org:<id>'; Redis on one
# node: a script may touch it). Each marker goes first: a deletion, so Redis runs the script even
# at its memory limit.
REFUND_SCRIPT = """
local given = 0
local org = redis.call('HGET', KEYS[1], 'org:' .. ARGV[1])
redis.call('HDEL', KEYS[1], 'org:' .. ARGV[1])
for i, marker in ipairs({'job:' .. ARGV[1], 'job:' .. ARGV[1] .. ':render'}) do
  local tool = redis.call('HGET', KEYS[1], marker)
  if tool then
    redis.call('HDEL', KEYS[1], marker)
    if tonumber(redis.call('HGET', KEYS[1], tool) or '0') > 0 then
      redis.call('HINCRBY', KEYS[1], tool, -1)
    end
    if i == 1 and org and tonumber(redis.call('HGET', org, tool) or '0') > 0 then
      redis.call('HINCRBY', org, tool, -1)
    end
    given = given + 1
  end
end
return given
"""

# An organization's day is kept past its end, for ``research-worker budget --org`` and the dashboard.
ORG_DAY_TTL_S = 3 * 86_400
# The tools an organization's day counts (a render is a fetch's second charge, not a job of its own).
ORG_TOOLS: tuple[str, ...] = ("search", "fetch")


def utc_day_of_ms(ms: int) -> str:
    """The UTC day (YYYY-MM-DD) of a time in milliseconds: the organization's day it is charged to."""
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d")


@dataclass(frozen=True)
class Charge:
    allowed: bool
    used: int
    limit: int
    already_charged: bool
    by_org: bool = False  # refused by the organization's daily cap, not the report's budget
    org_limit: int | None = None


@dataclass(frozen=True)
class Usage:
    used: int
    limit: int

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.used)


def org_limits(settings: Settings) -> dict[Tool, int | None]:
    """Each tool's cap per organization and UTC day (None: no limit)."""
    return {Tool.SEARCH: settings.org_daily_searches, Tool.FETCH: settings.org_daily_fetches}


def limits(settings: Settings) -> dict[Tool, int]:
    """Each tool's budget per report, as the settings give it."""
    return {
        Tool.SEARCH: settings.search_budget,
        Tool.FETCH: settings.fetch_budget,
        Tool.RENDER: settings.render_budget,
    }


def render_marker(job_id: str) -> str:
    """The id a render's charge is remembered under (the job's own id holds its fetch's)."""
    return f"{job_id}:{Tool.RENDER.value}"


# The budget hash's counter fields, one per tool (the rest are the charged jobs' marks).
COUNTERS: tuple[str, ...] = tuple(tool.value for tool in Tool)


class Budgets:
    def __init__(self, redis: Redis, settings: Settings) -> None:
        self._redis = redis
        self._window_s = settings.budget_window_s
        self._limits = limits(settings)
        self._org_limits = org_limits(settings)
        self._queue = settings.queue_name
        self._script = redis.register_script(CHARGE_SCRIPT)
        self._refund = redis.register_script(REFUND_SCRIPT)

    async def charge(
        self, report_id: str, tool: Tool, job_id: str, org: tuple[str, str] | None = None
    ) -> Charge:
        """Charge the report, and with ``org`` = (org id, UTC day) its organization's day too."""
        limit = self._limits[tool]
        # The script remembers one charge per marker; a render is a second charge of the same job
        # (its fetch is the first), so it is remembered under a marker of its own.
        marker = job_id if tool is not Tool.RENDER else render_marker(job_id)
        counted = org is not None and tool.value in ORG_TOOLS
        org_limit = self._org_limits.get(tool) if counted else None
        script_keys = [keys.budget(report_id)]
        if org is not None and counted:
            script_keys.append(keys.org_day(*org))
        args = [
            tool.value,
            limit,
            self._window_s,
            marker,
            "" if org_limit is None else org_limit,
            ORG_DAY_TTL_S,
        ]
        raw = await relieving(self._redis, self._queue, lambda: self._script(keys=script_keys, args=args))
        allowed, used, again, by_org, _ = cast(list[int], raw)
        return Charge(bool(allowed), int(used), limit, bool(again), bool(by_org), org_limit)

    async def org_usage(self, org_id: str, day: str) -> dict[Tool, tuple[int, int | None]]:
        """The organization's counters for ``day``: (used, daily limit or None) per tool."""
        counted = [Tool(name) for name in ORG_TOOLS]
        raw = await self._redis.hmget(keys.org_day(org_id, day), [t.value for t in counted])  # type: ignore[misc]
        return {tool: (int(n or 0), self._org_limits.get(tool)) for tool, n in zip(counted, raw, strict=True)}

    async def refund(self, report_id: str, job_id: str) -> int:
        """Give back the job's charges (its own and its render's); how many were given back."""
        return int(await self._refund(keys=[keys.budget(report_id)], args=[job_id]))

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


READ_FIELD = "read_chars"

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


# KEYS[1]: the report's budget hash. ARGV: job id, the characters the job returned. Lowers the job's
# grant to what it returned, giving the rest back; a grant already as low is left (so a job run
# again settles once). Returns the characters given back.
SETTLE_READ_SCRIPT = """
local marker = 'read:' .. ARGV[1]
local before = tonumber(redis.call('HGET', KEYS[1], marker) or '-1')
local returned = math.max(0, tonumber(ARGV[2]))
if before <= returned then
  return 0
end
redis.call('HSET', KEYS[1], marker, returned)
local used = tonumber(redis.call('HGET', KEYS[1], 'read_chars') or '0')
local back = math.min(before - returned, used)
redis.call('HINCRBY', KEYS[1], 'read_chars', -back)
return back
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
        self._settle = redis.register_script(SETTLE_READ_SCRIPT)

    async def grant(self, report_id: str, job_id: str, wanted: int) -> Grant:
        raw = await self._script(
            keys=[keys.budget(report_id)], args=[max(0, wanted), self.limit, self._window_s, job_id]
        )
        granted, used = cast(list[int], raw)
        return Grant(int(granted), int(used), self.limit)

    async def settle(self, report_id: str, job_id: str, returned: int) -> int:
        """Charge the job only the characters it returned (at most what it was granted); the
        characters given back."""
        raw = await self._settle(keys=[keys.budget(report_id)], args=[job_id, max(0, returned)])
        return int(cast(int, raw))

    async def used(self, report_id: str) -> int:
        raw = await self._redis.hget(keys.budget(report_id), READ_FIELD)  # type: ignore[misc]
        return int(raw or 0)


# The report's OCR budget: pages OCR may read per report (RESEARCH_OCR_BUDGET_PAGES). A read
# reserves pages before it starts (at most what is left) and gives back the ones it did not use
# when it ends, each in one script on the report's budget hash, so two reads of one report never
# spend the same page twice.
OCR_FIELD = "ocr_pages"

# KEYS[1]: the report's budget hash. ARGV: pages wanted, limit, window seconds.
# Returns the pages granted (0 when none are left).
RESERVE_SCRIPT = """
local used = tonumber(redis.call('HGET', KEYS[1], 'ocr_pages') or '0')
local granted = math.min(tonumber(ARGV[1]), math.max(0, tonumber(ARGV[2]) - used))
if granted <= 0 then
  return 0
end
redis.call('HINCRBY', KEYS[1], 'ocr_pages', granted)
if redis.call('TTL', KEYS[1]) < 0 then
  redis.call('EXPIRE', KEYS[1], ARGV[3])
end
return granted
"""
# KEYS[1]: the report's budget hash. ARGV: pages to give back. Never below zero.
OCR_REFUND_SCRIPT = """
local used = tonumber(redis.call('HGET', KEYS[1], 'ocr_pages') or '0')
local back = math.min(tonumber(ARGV[1]), used)
if back > 0 then
  redis.call('HINCRBY', KEYS[1], 'ocr_pages', -back)
end
return back
"""


class OcrBudget:
    def __init__(self, redis: Redis, *, limit: int, window_s: int) -> None:
        self._redis = redis
        self.limit = limit
        self._window_s = window_s
        self._reserve = redis.register_script(RESERVE_SCRIPT)
        self._refund = redis.register_script(OCR_REFUND_SCRIPT)

    async def reserve(self, report_id: str, wanted: int) -> int:
        raw = await self._reserve(
            keys=[keys.budget(report_id)], args=[max(0, wanted), self.limit, self._window_s]
        )
        return int(cast(int, raw))

    async def refund(self, report_id: str, pages: int) -> None:
        if pages > 0:
            await self._refund(keys=[keys.budget(report_id)], args=[pages])

    async def used(self, report_id: str) -> int:
        raw = await self._redis.hget(keys.budget(report_id), OCR_FIELD)  # type: ignore[misc]
        return int(raw or 0)


async def org_today(redis: Redis, settings: Settings, org_id: str) -> dict[str, object]:
    """``research-worker budget --org``: the organization's counters for today (Redis's UTC day)."""
    seconds, micros = await redis.time()
    day = utc_day_of_ms(int(seconds) * 1000 + int(micros) // 1000)
    usage = await Budgets(redis, settings).org_usage(org_id, day)
    counters: dict[str, object] = {
        tool.value: {
            "used": used,
            "limit": limit,
            "remaining": None if limit is None else max(0, limit - used),
        }
        for tool, (used, limit) in usage.items()
    }
    return {"org_id": org_id, "day": day, **counters}
