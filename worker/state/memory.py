"""Redis's memory: how full it is, how much of it the page cache may take, and making room in it.

The deployment runs Redis with ``maxmemory`` and ``noeviction``: when it is full, every write is
refused, and paid work is lost (a result that cannot be stored, a charge without a result, a health
beat that fails so a probe restarts a healthy worker). The page cache is the one thing in Redis
that can be dropped without loss, so it gives way to everything else:

- its bound follows Redis: read from ``INFO memory`` (``used_memory``, ``maxmemory``) at most once
  every ``READ_EVERY_S``, the cache may hold at most ``CACHE_SHARE`` of ``maxmemory`` (and never
  more than its fixed bound), and only while Redis keeps ``HEADROOM_SHARE`` of it free for the
  rest; past that it sheds its own entries, closest to expiry first (``CacheRoom``);
- a write that Redis refuses for memory anyway (``is_out_of_memory``) sheds cache entries and is
  tried again (``relieving``), as long as the cache had something to give; only then is the
  refusal real, and it is raised.

A Redis without ``maxmemory`` (0) bounds nothing here: the fixed bound applies. A Redis user that
may not read ``INFO memory`` gets the fixed bound and the retries; the worker says so once.

Small bookkeeping scripts that must work at the limit (the shedding itself, a budget refund, the
health beat) start with a deletion, which Redis never refuses for memory: once a script has
written, Redis runs it to its end (it cannot stop a script half-way), so the few bytes they write
land even when Redis is full (Redis 6.2 and later, with or without script flags).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar, cast

from redis.exceptions import OutOfMemoryError, RedisError, ResponseError

from worker.logs import fields
from worker.state import keys

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = logging.getLogger("research.memory")

T = TypeVar("T")

# How often one worker renews the cache's and the kept documents' bookkeeping keys' time to live,
# which is the longest entry's plus twice this: the bookkeeping always outlives the entries it counts.
BOOKKEEPING_RENEW_S = 60.0
# INFO memory is a few hundred microseconds of Redis's time: once a second per worker is nothing.
READ_EVERY_S = 1.0
# While Redis has no maxmemory, or holds less than this share of what its headroom leaves, an idle
# worker looks at it only every ``CALM_CHECK_S``: filling the rest takes other workers' writes,
# and a worker that fetches reads it before each fetch (at most every ``READ_EVERY_S``); a write
# Redis refuses for memory sheds at once anyway (``relieving``). An idle worker's INFO every
# second was a fifth of its Redis traffic.
CALM_SHARE = 0.5
CALM_CHECK_S = 10.0
# After a refusal to read INFO (an ACL without +info|memory), ask again this seldom.
UNREADABLE_RETRY_S = 60.0
# The cache's share of Redis at most, and the share of Redis it leaves free for results, budgets,
# menus and health (a result is up to a few hundred KB, and a worker writes a few a second).
CACHE_SHARE = 0.5
HEADROOM_SHARE = 0.2
# One round of shedding frees about this much, at most this many entries.
SHED_BYTES = 1024 * 1024
SHED_ENTRIES = 64
# A refused write is tried again after this many rounds of shedding at most.
RELIEF_ROUNDS = 8
# Redis's words for a write refused at maxmemory (redis-py names the error only outside scripts).
OOM_MARKERS = ("OOM command not allowed", "command not allowed when used memory")

# KEYS: 1 the index (sorted set of "entry key|bytes" members by expiry ms, as the page cache's
# finish script writes it), 2 the total bytes. ARGV: 1 bytes to free, 2 most entries. Returns
# {bytes freed, entries dropped}. The entries that expire soonest go first, as the store's own
# eviction does; an entry is unlinked only while it is still the one its member counted (STRLEN),
# never a successor stored since. Every write here frees memory or rewrites a counter in place,
# so Redis runs it at its limit too.
SHED_SCRIPT = """
local freed, dropped = 0, 0
while freed < tonumber(ARGV[1]) and dropped < tonumber(ARGV[2]) do
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0)
  if #oldest == 0 then
    break
  end
  local key, bytes = string.match(oldest[1], '^(.*)|(%d+)$')
  key = key or oldest[1]
  local size = tonumber(bytes or '0')
  if redis.call('STRLEN', key) == size then
    redis.call('UNLINK', key)
  end
  redis.call('ZREM', KEYS[1], oldest[1])
  freed = freed + size
  dropped = dropped + 1
end
if freed > 0 then
  redis.call('DECRBY', KEYS[2], freed)
end
return {freed, dropped}
"""


def is_out_of_memory(error: BaseException) -> bool:
    """Whether Redis refused a write because it is at ``maxmemory`` (any client, any script)."""
    if isinstance(error, OutOfMemoryError):
        return True
    return isinstance(error, ResponseError) and any(marker in str(error) for marker in OOM_MARKERS)


@dataclass(frozen=True)
class Reading:
    """Redis's memory when last read, in bytes; ``maxmemory`` 0 means unbounded."""

    used: int
    maxmemory: int


class RedisMemory:
    """``INFO memory``, read at most once every ``READ_EVERY_S`` however often it is asked."""

    def __init__(self, redis: Redis) -> None:
        self._redis = redis
        self._reading: Reading | None = None
        self._read_at = float("-inf")
        self._unreadable = False

    @property
    def last(self) -> Reading | None:
        """The last reading, without asking Redis."""
        return self._reading

    def stale(self) -> None:
        """The next ``reading`` asks Redis again (after shedding, say)."""
        self._read_at = float("-inf")

    async def reading(self) -> Reading | None:
        """The last reading, refreshed when it is older than its rate; None when unknown."""
        now = asyncio.get_running_loop().time()
        wait = UNREADABLE_RETRY_S if self._unreadable else READ_EVERY_S
        if now - self._read_at < wait:
            return self._reading
        self._read_at = now
        try:
            info = await self._redis.info("memory")
        except ResponseError as exc:  # NOPERM: the ACL lacks +info|memory
            if not self._unreadable:
                log.warning(
                    "cannot read Redis's memory (INFO memory); the page cache keeps its fixed bound",
                    extra=fields(error=type(exc).__name__),
                )
            self._unreadable, self._reading = True, None
            return None
        except (RedisError, OSError):
            return self._reading  # a blip: the last reading stands until the next try
        self._unreadable = False
        self._reading = Reading(int(info.get("used_memory", 0)), int(info.get("maxmemory", 0)))
        return self._reading


def cache_limits(reading: Reading | None, fixed_bound: int) -> tuple[int, int | None]:
    """What bounds the cache now: its fixed bound lowered to its share of Redis, and what Redis
    has free beyond its headroom (negative past it; None when Redis's memory bounds nothing). The
    store adds what the cache holds to the second, as ``cache_bound`` does, in its own step."""
    if reading is None or reading.maxmemory <= 0:
        return fixed_bound, None
    headroom = int(reading.maxmemory * HEADROOM_SHARE)
    free_beyond_headroom = reading.maxmemory - headroom - reading.used
    return min(fixed_bound, int(reading.maxmemory * CACHE_SHARE)), free_beyond_headroom


def calm_check_s(reading: Reading | None, every_s: float) -> float:
    if reading is None:
        return every_s
    if reading.maxmemory <= 0:
        return max(every_s, CALM_CHECK_S)
    allowed = reading.maxmemory - int(reading.maxmemory * HEADROOM_SHARE)
    return max(every_s, CALM_CHECK_S) if reading.used < allowed * CALM_SHARE else every_s


def cache_bound(reading: Reading | None, cache_bytes: int, fixed_bound: int) -> int:
    """The most the cache may hold now: its fixed bound, its share of Redis, and no more than
    leaves Redis its headroom (what the cache holds now, plus what is free beyond the headroom)."""
    bound, room = cache_limits(reading, fixed_bound)
    return bound if room is None else max(0, min(bound, cache_bytes + room))


async def shed(redis: Redis, queue_name: str, nbytes: int = SHED_BYTES) -> int:
    """Drop cached pages (closest to expiry first) worth about ``nbytes``, then kept documents when
    the pages were not enough; returns bytes freed."""
    freed = 0
    for index, total, what in (
        (keys.page_index(queue_name), keys.page_bytes(queue_name), "pages"),
        (keys.document_index(queue_name), keys.document_bytes(queue_name), "kept documents"),
    ):
        got, dropped = cast(
            list[int],
            await redis.eval(  # type: ignore[misc]
                SHED_SCRIPT, 2, index, total, str(max(1, nbytes - freed)), str(SHED_ENTRIES)
            ),
        )
        if dropped:
            log.info(f"{what} gave memory back to Redis", extra=fields(bytes=int(got), entries=int(dropped)))
            freed += int(got)
        if freed >= nbytes:
            break
    return freed


async def relieving(redis: Redis, queue_name: str, write: Callable[[], Awaitable[T]]) -> T:
    """``write()``, and when Redis refuses it for memory, the same write again after the page
    cache has given some back, until it lands or the cache has nothing left to give."""
    for _ in range(RELIEF_ROUNDS):
        try:
            return await write()
        except ResponseError as exc:  # OutOfMemoryError is one
            if not is_out_of_memory(exc):
                raise
            try:
                freed = await shed(redis, queue_name)
            except (RedisError, OSError):
                freed = 0
            if not freed:
                raise
    return await write()


class CacheRoom:
    """How much the page cache of one queue may hold now, and keeping it there."""

    def __init__(self, redis: Redis, queue_name: str) -> None:
        self._redis = redis
        self._queue = queue_name
        self._memory = RedisMemory(redis)
        self._acted_on: Reading | None = None  # the reading the last shedding answered

    async def limits(self, fixed_bound: int) -> tuple[int, int | None]:
        """``cache_limits`` from the last reading (Redis is asked at most once every
        ``READ_EVERY_S``): the store's bound and the room beyond Redis's headroom."""
        return cache_limits(await self._memory.reading(), fixed_bound)

    def idle_check_s(self, every_s: float) -> float:
        """How long an idle worker may wait before its next ``keep_headroom``: ``every_s`` while
        Redis is near its headroom or unread, ``CALM_CHECK_S`` while it is far from it."""
        return calm_check_s(self._memory.last, every_s)

    async def keep_headroom(self) -> None:
        """Shed cached pages when Redis is past its headroom: asked before each fetch, it reads
        Redis's memory at most once a second and sheds only when that reading is new and high."""
        reading = await self._memory.reading()
        if reading is None or reading.maxmemory <= 0 or reading is self._acted_on:
            return
        self._acted_on = reading
        limit = reading.maxmemory - int(reading.maxmemory * HEADROOM_SHARE)
        if reading.used <= limit:
            return
        try:
            freed = await shed(self._redis, self._queue, reading.used - limit)
        except (RedisError, OSError) as exc:
            log.warning("page cache could not shed", extra=fields(error=type(exc).__name__))
            return
        if freed:
            self._memory.stale()
