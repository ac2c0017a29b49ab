"""The shared page cache and single-flight: one fetch per page, however many reports want it.

Reports overlap: fifty reports on one company read the same twenty pages. The cache keeps each
reduced page in Redis, keyed by its canonical URL and extract mode, for ``cache_ttl_s`` (0 turns the
cache and the single-flight off), shared by every worker of the queue. When several jobs want the
same page at once, one fetches (it holds the page's flight lease, renewed while it works) and the
others block on the flight's done list until its outcome lands; if the fetcher dies its lease
lapses, and a waiter takes over. Waiting is bounded by each waiter's own deadline.

Each report still sees only what it may: the tool checks the URL against the report's menu and
charges the report before it asks here, and every page or shared failure that this job did not
fetch itself is re-checked here against the report's own hop rule (a redirect to another site must
be on its menu), because another report's fetch followed those hops under another menu.

What is kept, and for how long: a page for ``cache_ttl_s``, unless its response said
``Cache-Control: no-store`` or ``private``; a 404 or 410 for ``GONE_TTL_S``; no other failure, and
no page cut short by CPU time or a deadline (the tool marks those not storable). A flight's outcome
(whatever it is) goes to the jobs waiting on it at that moment, even when it is not kept.

A page is kept once: its fetch keeps its whole document for the report's continuations
(``worker.state.pages.documents``: the page's record and every format's text), and the entry only
names that document (``KeptPage``), so a hit reads the page from it, and a document shed or expired
turns its entry into a miss. A page whose document did not fit the documents' bound is not cached;
one whose document Redis refused is cached whole (naming no document, so a hit serves its first
piece), unless its entry is larger than ``MAX_ENTRY_BYTES``, as failures are. What is cached whole
is bounded by ``MAX_CACHE_BYTES`` and by Redis's own memory (``worker.state.memory``): at most half
of ``maxmemory``, never the headroom that results, budgets and health need, and shed first (closest
to expiry first) when Redis is near full or refuses a write; then the documents, which have a
bound of their own.

The deployment is one Redis (or a Sentinel pair), never Cluster: the store script evicts keys
named by the index, which Cluster would refuse.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from importlib import resources
from typing import TYPE_CHECKING, Generic, TypeVar, cast

from redis.exceptions import RedisError

from worker.errors import HttpStatus, ResearchError, Timeout
from worker.guardian.redirects import HopLog, HopRule
from worker.guardian.urls import Target, parse_https_url
from worker.logs import fields
from worker.state import keys
from worker.state.clock import RedisClock
from worker.state.leases import LEASE_MS, Renewals, renewed
from worker.state.memory import BOOKKEEPING_RENEW_S, CacheRoom, relieving
from worker.state.pages.documents import KEEP_FUNCTION, Keeping, Kept, KeptDocuments
from worker.state.pages.entry import (
    Abandoned,
    Failure,
    Hop,
    KeptPage,
    Outcome,
    Page,
    decode,
    encode,
    failure_of,
)
from worker.state.politeness import host_of
from worker.state.queue import blocking_peek

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from worker.config import Settings
    from worker.metrics import Metrics

log = logging.getLogger("research.page_cache")
# What a fetch makes beyond its page, handed back to the job that fetched (never to waiters).
Made = TypeVar("Made")

# An entry is the reduced page: at most 40,000 characters of text (up to 160 KB of UTF-8, usually
# 40 KB) and up to 500 links. Larger entries are not kept; typical pages are 20 to 100 KB.
MAX_ENTRY_BYTES = 256 * 1024
# The cache's memory bound per queue: about a thousand pages at the entry bound, several thousand
# typical ones; the pages closest to expiry make room for new ones.
MAX_CACHE_BYTES = 256 * 1024 * 1024
# A store evicts at most this many pages; a page that still does not fit is not kept.
MAX_EVICTIONS = 64
# Expired pages are dropped from the index at most this many per store (Redis dropped their keys).
MAX_PRUNE = 1000
GONE_STATUSES = frozenset({404, 410})
GONE_TTL_S = 60
# A waiter looks at the flight's lease this often while it waits: a fetcher that died is noticed
# within a lease time plus this.
FLIGHT_CHECK_S = 1.0
# A flight's outcome outlives it this long: only jobs already waiting on it need it.
DONE_TTL_MS = 10_000


# KEYS: the page's entry, the page's flight lease. ARGV: token, lease ms, '1' to read the cache.
# Returns {'hit', entry}, {'join', the fetcher's token} or {'lead', token}. One script, so between a
# miss and taking the lease no other job can take it too: exactly one job leads a flight. A job
# that joins appends a '+' to the lease, so the fetcher knows to push its outcome to waiters.
JOIN_SCRIPT = """
if ARGV[3] == '1' then
  local entry = redis.call('GET', KEYS[1])
  if entry then
    return {'hit', entry}
  end
end
if redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2], 'NX') then
  return {'lead', ARGV[1]}
end
redis.call('APPEND', KEYS[2], '+')
return {'join', string.match(redis.call('GET', KEYS[2]), '^[^+]*')}
"""

# KEYS[1]: a flight lease. ARGV: token, lease ms. Returns 1 while this job holds the lease (its
# value is the token, then a '+' per job that joined). SET XX GET extends it and reads the holder in
# one command, which is all a flight nobody joined needs; a value it did not write (joiners' marks,
# or another job's lease after this one's lapsed) goes back in the same step, a whole lease time
# ahead (what its own holder renews it to).
RENEW_SCRIPT = """
local holder = redis.call('SET', KEYS[1], ARGV[1], 'XX', 'PX', ARGV[2], 'GET')
if not holder then
  return 0
end
if holder ~= ARGV[1] then
  redis.call('SET', KEYS[1], holder, 'PX', ARGV[2])
end
if string.sub(holder, 1, #ARGV[1]) == ARGV[1] then
  return 1
end
return 0
"""

# The end of a flight, with the keep of a leading fetch's document: worker/state/pages/cache_finish.lua
# says what it does.
FINISH_SCRIPT = KEEP_FUNCTION + (resources.files("worker.state.pages") / "cache_finish.lua").read_text()
# How often a worker checks Redis's headroom while it fetches nothing and Redis is near it; far
# from it, every ``worker.state.memory.CALM_CHECK_S``.
HEADROOM_CHECK_S = 1.0


class Store(StrEnum):
    """What a flight's end keeps in the cache (cache_finish.lua's ARGV[3])."""

    NOTHING = "0"
    WHOLE = "1"  # the outcome itself, indexed and sized
    NAMED = "2"  # the entry that names the page's kept document, when the document is kept


class ServedFrom(StrEnum):
    FETCHED = "fetched"  # this job fetched the page
    CACHE = "cache"  # a page in the cache
    FLIGHT = "flight"  # another job's fetch, waited for


@dataclass(frozen=True)
class Fresh(Generic[Made]):
    """What a fetch produced: the page, whether its response allows keeping it, its whole
    document ready to keep (kept as the flight ends, in the same step; alone with the cache off),
    and what else the fetch made that its own job reads (the whole text, in hand)."""

    page: Page
    storable: bool
    keeping: Keeping | None = None
    made: Made | None = None


@dataclass(frozen=True)
class Served(Generic[Made]):
    page: Page
    source: ServedFrom
    kept: Kept | None = None  # the page's kept document, when the cache read the page from it
    made: Made | None = None  # what this job's own fetch made (``Fresh.made``), when it fetched

    @property
    def cached(self) -> bool:
        """Served from the shared cache: not fetched for this job (its fetched_at is older)."""
        return self.source is not ServedFrom.FETCHED


# The fetch a leading job runs: it fetches and reduces the page, its hops followed through the
# job's HopLog (which the cache reads for the hops it keeps).
FetchFresh = Callable[[], Awaitable[Fresh[Made]]]


def url_digest(url: str) -> str:
    return hashlib.sha256(url.encode()).hexdigest()


class PageCache:
    """The queue's page cache and flights, shared by every worker that runs the queue."""

    def __init__(
        self,
        redis: Redis,
        settings: Settings,
        metrics: Metrics,
        clock: RedisClock | None = None,
        documents: KeptDocuments | None = None,
    ) -> None:
        self.enabled = settings.cache_ttl_s > 0
        self._redis = redis
        self._clock = clock or RedisClock(redis)
        self._documents = documents or KeptDocuments(
            redis, ttl_s=settings.budget_window_s, queue_name=settings.queue_name, clock=self._clock
        )
        self._queue = settings.queue_name
        self._ttl_ms = settings.cache_ttl_s * 1000
        self._gone_ttl_ms = min(GONE_TTL_S, settings.cache_ttl_s) * 1000
        self._metrics = metrics
        self._join = redis.register_script(JOIN_SCRIPT)
        self._renew = redis.register_script(RENEW_SCRIPT)
        self._finish = redis.register_script(FINISH_SCRIPT)
        self._bookkeeping = Renewals(BOOKKEEPING_RENEW_S)
        self._room = CacheRoom(redis, settings.queue_name)
        self._keeper: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Keep Redis's headroom while the worker runs, fetching or not: a worker whose claims Redis
        refuses (full) fetches nothing, and the cache must give way all the same."""
        if self.enabled:
            self._keeper = asyncio.create_task(self._keep_headroom())

    async def stop(self) -> None:
        if self._keeper is not None:
            self._keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keeper

    async def _keep_headroom(self) -> None:
        while True:
            await self._room.keep_headroom()
            await asyncio.sleep(self._room.idle_check_s(HEADROOM_CHECK_S))

    async def serve(
        self,
        target: Target,
        extract: str,
        *,
        fresh: bool,
        until: float,
        hops: HopLog,
        fetch: FetchFresh[Made],
    ) -> Served[Made]:
        """The page from the cache, from a flight in progress, or fetched by this job (``fetch``).

        ``fresh`` skips the cache but still joins a flight in progress, and what it fetches
        replaces the cached copy. ``until`` (loop time) bounds the wait for another job's fetch.
        Another job's hops are asked of ``hops``'s rule; this job's own are followed through it.
        """
        if not self.enabled:
            fetched = await fetch()
            if fetched.keeping is not None:
                await fetched.keeping.keep()
            return Served(fetched.page, ServedFrom.FETCHED, made=fetched.made)
        await self._room.keep_headroom()
        digest = url_digest(target.url)
        entry = keys.page(self._queue, extract, digest)
        lease = keys.page_flight(self._queue, extract, digest)
        read_cache = not fresh
        joined = False
        while True:
            token = uuid.uuid4().hex
            join = functools.partial(self._join, keys=[entry, lease], args=[token, LEASE_MS, int(read_cache)])
            reply = await relieving(self._redis, self._queue, join)
            kind, value = (bytes(part) for part in cast(list[bytes], reply))
            if kind == b"hit":
                served: Served[Made] | None = await self._hit(decode(value), target, hops.rule)
                if served is not None:
                    self._metrics.page_cache_hits.inc()
                    return served
                read_cache = False  # not an entry this worker can use: fetch and overwrite it
                continue
            if kind == b"join":
                if not joined:
                    joined = True
                    self._metrics.page_flight_joins.inc()
                outcome = await self._wait(target, lease, value.decode(), until)
                if outcome is None or isinstance(outcome, Abandoned):
                    continue  # the fetcher died or gave up: take over (or join whoever did)
                return await _reuse(outcome, ServedFrom.FLIGHT, hops.rule)
            if not fresh:
                self._metrics.page_cache_misses.inc()
            return await self._lead(entry, lease, token, hops, fetch)

    async def _hit(self, entry: object, target: Target, may_follow: HopRule) -> Served[Made] | None:
        """What a cache entry serves: its page (read from its kept document, when it names one) or
        its failure; None for an entry this worker cannot use (another shape, another URL, or a
        document since shed or expired)."""
        if isinstance(entry, KeptPage) and entry.url == target.url:
            await _check_hops(entry.hops, may_follow)
            kept = await self._documents.lookup_digest(entry.document)
            if kept is None or kept.page.url != target.url:
                return None
            page = replace(kept.page, hops=entry.hops, document=entry.document)
            return Served(page, ServedFrom.CACHE, kept)
        if isinstance(entry, Page | Failure) and _about(entry, target):
            return await _reuse(entry, ServedFrom.CACHE, may_follow)
        return None

    async def _lead(
        self, entry: str, lease: str, token: str, hops: HopLog, fetch: FetchFresh[Made]
    ) -> Served[Made]:
        async def renew() -> object:
            return await self._renew(keys=[lease], args=[token, LEASE_MS])

        try:
            async with renewed(renew, lease):
                fetched = await fetch()
        except ResearchError as error:
            failure = failure_of(error, hops.hops)
            gone = isinstance(error, HttpStatus) and error.status in GONE_STATUSES
            await asyncio.shield(
                self._publish(entry, lease, token, failure or Abandoned(), self._gone_ttl_ms if gone else 0)
            )
            raise
        except BaseException:
            # A bug, or the job's deadline: the waiters fetch for themselves rather than wait out
            # the lease.
            await asyncio.shield(self._publish(entry, lease, token, Abandoned(), 0))
            raise
        page = replace(fetched.page, hops=hops.hops)
        keep_ms = self._ttl_ms if fetched.storable else 0
        await self._publish(entry, lease, token, page, keep_ms, fetched.keeping)
        return Served(page, ServedFrom.FETCHED, made=fetched.made)

    async def _publish(
        self,
        entry: str,
        lease: str,
        token: str,
        outcome: Outcome,
        keep_ms: int,
        keeping: Keeping | None = None,
    ) -> None:
        """End the flight: the outcome to its waiters, into the cache when ``keep_ms`` > 0, and the
        fetch's document kept (``keeping``), all in one step.

        A page with its document is cached as the entry that names it, when the document is kept
        (one that could not be is not cached: the documents, or Redis, are full); an outcome
        without one (a failure, a page whose document Redis refused) is cached whole, when it is
        not too large, in the cache's own index and bound."""
        payload = encode(outcome)
        named = b""
        if keeping is not None and isinstance(outcome, Page):
            named = encode(KeptPage(outcome.url, keeping.digest, outcome.hops))
        store = Store.NOTHING
        if keep_ms > 0 and named:
            store = Store.NAMED
        elif keep_ms > 0 and keeping is None and len(payload) <= MAX_ENTRY_BYTES:
            store = Store.WHOLE
        keep = store is Store.WHOLE
        renew = keep and self._bookkeeping.due()
        # What Redis has room for bounds a whole entry and a kept document alike.
        bound, room = (
            await self._room.limits(MAX_CACHE_BYTES)
            if keep or keeping is not None
            else (MAX_CACHE_BYTES, None)
        )
        keys_ = [
            entry,
            lease,
            keys.page_flight_done(self._queue, token),
            keys.page_index(self._queue),
            keys.page_bytes(self._queue),
        ]
        args: list[bytes | int | str] = [
            token,
            payload,
            store.value,
            keep_ms,
            bound,
            DONE_TTL_MS,
            MAX_EVICTIONS,
            MAX_PRUNE,
            self._ttl_ms + int(2 * BOOKKEEPING_RENEW_S * 1000),
            int(renew),
            LEASE_MS,
            "" if room is None else room,
            await self._clock.now_ms(),
            named,
        ]
        if keeping is not None:
            keys_ += keeping.keys
            args += keeping.args
        try:
            if keeping is None:
                await self._finish(keys=keys_, args=args)
            else:
                # A full Redis makes room from the cache and the kept documents first, as a keep did.
                await relieving(self._redis, self._queue, lambda: self._finish(keys=keys_, args=args))
        except (RedisError, OSError) as exc:
            if renew:
                self._bookkeeping.failed()
            if keeping is not None:
                # Still no room for the document: the flight ends without it, its waiters told, and
                # the page (naming no document now) is cached whole if Redis takes it.
                keeping.store.failed(keeping, exc)
                alone = replace(outcome, document=None) if isinstance(outcome, Page) else outcome
                await self._publish(entry, lease, token, alone, keep_ms)
                return
            # The job's own result stands; waiters take over when the lease lapses.
            log.warning("page flight could not be published", extra=fields(error=type(exc).__name__))

    async def _wait(self, target: Target, lease: str, holder: str, until: float) -> Outcome | None:
        """The outcome of the flight ``holder`` leads, or None when its fetcher is gone."""
        loop = asyncio.get_running_loop()
        done = keys.page_flight_done(self._queue, holder)
        while True:
            left = until - loop.time()
            if left <= 0:
                raise Timeout(
                    f"another job's fetch of {host_of(target)}, which this fetch waited for, did not "
                    "finish before this fetch's deadline"
                )
            raw = await blocking_peek(self._redis, done, min(left, FLIGHT_CHECK_S))
            if raw is None:
                # Read together: a flight that just finished has its outcome pushed as its lease goes.
                async with self._redis.pipeline(transaction=True) as tx:
                    tx.lindex(done, 0)
                    tx.get(lease)
                    raw, current = await tx.execute()
                if raw is None:
                    if current is None or bytes(current).decode().partition("+")[0] != holder:
                        return None
                    continue
            outcome = decode(bytes(raw))
            # A flight hands on the whole outcome; anything else there is no outcome at all.
            return outcome if isinstance(outcome, Page | Failure | Abandoned) else Abandoned()


def _about(outcome: Page | Failure, target: Target) -> bool:
    """A page entry names its URL; a digest collision (or a stray key) is never served."""
    return not isinstance(outcome, Page) or outcome.url == target.url


async def _check_hops(hops: tuple[Hop, ...], may_follow: HopRule) -> None:
    """Another job's cross-site hops, each passed by this report's own rule (or refused)."""
    for came_from, went_to in hops:
        await may_follow(parse_https_url(came_from), parse_https_url(went_to))


async def _reuse(outcome: Page | Failure, source: ServedFrom, may_follow: HopRule) -> Served[Made]:
    """Another job's page or failure, after its cross-site hops pass this report's own rule."""
    await _check_hops(outcome.hops, may_follow)
    if isinstance(outcome, Failure):
        raise outcome.error()
    return Served(outcome, source)
