"""The report's OCR budget: pages OCR may read per report (RESEARCH_OCR_BUDGET_PAGES).

A read reserves pages before it starts (at most what is left) and gives back the ones it did not
use when it ends, each in one script on the report's budget hash (field ``ocr_pages``), so two
reads of one report never spend the same page twice. The hash expires with the budget window.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from worker.state import keys

if TYPE_CHECKING:
    from redis.asyncio import Redis

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
REFUND_SCRIPT = """
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
        self._refund = redis.register_script(REFUND_SCRIPT)

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
