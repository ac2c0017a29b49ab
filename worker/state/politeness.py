"""Politeness per host across every worker of a queue: at most ``host_concurrency`` fetches in
flight to one host, and none while the host has asked to be left alone.

A site that many reports read at once would otherwise see every worker at the same moment, and
block the worker's address: the very sites the agents most need. So a fetch first takes one of the
host's slots, held in Redis as a lease (a token in the host's sorted set, scored by its expiry and
renewed while the fetch runs), so a worker that dies holding a slot frees it within a lease time.
A job that finds the host full waits on the host's free list, a blocking pop that the next release
wakes, and looks again at least every ``SLOT_CHECK_S`` in case a holder died without releasing.

A 429 or 503 with Retry-After puts the host in the queue's backoff set until then, and every
worker reads that set before taking a slot: a job holds until the time has come, or, when that is
past its own deadline, ends at once in ``rate_limited`` naming the host. The job that got the answer
ends the same way when the wait it asks for is past its deadline (``past_deadline``), and with the
host's ``http_status`` when the wait would fit.

Waiting is an await on Redis or on the clock, never a lock on the event loop, so the worker's other
jobs, and fetches to other hosts, go on. The host is the site: a name and its ``www.`` twin, with
the port, count as one host. All times are Redis's (``worker.state.clock``), so workers on
different machines agree on when a hold or a slot's lease ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from redis.exceptions import RedisError

from worker.errors import RateLimited, Timeout
from worker.logs import fields
from worker.state import keys
from worker.state.clock import RedisClock
from worker.state.leases import LEASE_MS, Renewals, renewed
from worker.state.memory import relieving
from worker.state.queue import blocking_pop

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from worker.config import Settings
    from worker.guardian.urls import Target
    from worker.metrics import Metrics

log = logging.getLogger("research.politeness")

# A waiter looks again this often even without a wake-up: a holder that died frees its slot only
# when its lease lapses, and nobody pushes a wake-up for that.
SLOT_CHECK_S = 1.0
# A host's Retry-After is obeyed up to this long: a hold of a day would only make every fetch to the
# host fail at once for a day, long after whatever made the host ask.
MAX_HOLD_S = 3600.0
# Wake-ups outlive a release this long: only a job already waiting (or about to) needs one.
FREE_TTL_MS = 5_000
# A host's slots key outlives its last lease by twice this: each worker renews the key's time to
# live at most this often per host (``worker.state.leases.Renewals``), and whenever its take starts
# the key, not with every take and every lease renewal.
SLOTS_RENEW_S = 60.0
SLOTS_TTL_MS = LEASE_MS + int(2 * SLOTS_RENEW_S * 1000)
# The gauge of hosts backing off is sampled this often (Prometheus's usual scrape), and at once
# when this worker holds a host: an idle worker's ZCOUNT every 5 s was traffic no scrape saw.
BACKING_OFF_REFRESH_S = 15.0
DASHBOARD_ROWS = 200
BACKOFF_STATUSES = frozenset({429, 503})

# KEYS[1]: the host's slots (sorted set). KEYS[2]: the queue's backoff set. KEYS[3]: the host's
# waiting mark. ARGV: token, limit, lease ms, host, the mark's ms, now (Redis's ms), the slots key's
# time to live ms, '1' when this take renews it. Returns {1, 0, 1 when the key's time to live was
# set} when the slot is taken, {0, ms} while the host is backing off for ms more, {0, 0} when every
# slot is in use. One script, so the backoff check, the purge of lapsed leases, the count and the
# take cannot interleave with another worker's: the limit holds exactly. Lapsed leases are purged
# only when the host looks full (they are what may make it look full). A job that finds it full
# leaves the waiting mark, so releases know to wake it. The key's time to live is set by the take
# that starts it and renewed once a minute per worker (SLOTS_RENEW_S): every holder renews its own
# lease each beat, so the key outlives every live lease.
ACQUIRE_SCRIPT = """
local now = tonumber(ARGV[6])
local hold = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[4]) or '0')
if hold > now then
  return {0, hold - now}
end
local limit = tonumber(ARGV[2])
local held = redis.call('ZCARD', KEYS[1])
if held >= limit then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  held = redis.call('ZCARD', KEYS[1])
  if held >= limit then
    redis.call('SET', KEYS[3], '1', 'PX', ARGV[5])
    return {0, 0}
  end
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
if held == 0 or ARGV[8] == '1' then
  redis.call('PEXPIRE', KEYS[1], ARGV[7])
  return {1, 0, 1}
end
return {1, 0, 0}
"""

# KEYS[1]: the host's slots. ARGV: token, lease ms, now (Redis's ms), the slots key's time to live
# ms, '1' when this renewal renews it too. Extends the lease if it is still held (one script, so a
# lease that lapsed and was purged is not brought back over the limit): ZADD XX only moves a member
# that is there, GT only later, and CH says whether it did.
RENEW_SCRIPT = """
local now = tonumber(ARGV[3])
if redis.call('ZADD', KEYS[1], 'XX', 'GT', 'CH', now + tonumber(ARGV[2]), ARGV[1]) == 0 then
  return 0
end
if ARGV[5] == '1' then
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
end
return 1
"""

# KEYS[1]: the queue's backoff set. KEYS[2]: the hold causes. ARGV: host, hold ms, status, now
# (Redis's ms). Drops
# finished holds, then moves the host's hold later (never earlier: GT) and, when it did, notes the
# answer that moved it (status and time), so a refusal can say what started the hold; both keys
# live as long as the last hold.
HOLD_SCRIPT = """
local now = tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZADD', KEYS[1], 'GT', 'CH', now + tonumber(ARGV[2]), ARGV[1]) == 1 then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[3] .. ':' .. now)
end
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
local ttl = math.max(1, tonumber(last[2]) - now)
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
return 1
"""


def host_of(target: Target) -> str:
    """The host as politeness counts it: the site (``www.`` twin folded) and a port other than 443."""
    host, port = target.site
    shown = f"[{host}]" if ":" in host else host
    return shown if port == 443 else f"{shown}:{port}"


@dataclass(frozen=True)
class HoldCause:
    """The answer that started a host's hold: its status, and when it came (Unix seconds)."""

    status: int
    since: float

    def said(self) -> str:
        when = dt.datetime.fromtimestamp(self.since, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return f"answered HTTP {self.status} with a Retry-After at {when}, holding every worker off"


def parse_cause(raw: bytes | str | None) -> HoldCause | None:
    """A cause as the hold script wrote it (``status:ms``); None for anything else."""
    if raw is None:
        return None
    text = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
    status, _, since = text.partition(":")
    if not (status.isdigit() and since.isdigit() and len(status) == 3):
        return None
    return HoldCause(int(status), int(since) / 1000)


async def hold_cause(redis: Redis, queue_name: str, host: str) -> HoldCause | None:
    try:
        return parse_cause(await redis.hget(keys.host_backoff_causes(queue_name), host))  # type: ignore[misc]
    except (RedisError, OSError):
        return None


@dataclass(frozen=True)
class HostHold:
    """A host every worker holds off, until when (Unix seconds), and the answer that started it."""

    host: str
    until: float
    cause: HoldCause | None = None


async def backing_off(redis: Redis, queue_name: str, limit: int = DASHBOARD_ROWS) -> list[HostHold]:
    """The hosts every worker of the queue is holding off now, soonest first (for the dashboard).

    One read (ZRANGEBYSCORE), which the dashboard's read-only Redis user may run (TIME it may not,
    so "now" is this machine's clock). Hosts were validated before they became members.
    """
    now_ms = int(time.time() * 1000)
    rows = await redis.zrangebyscore(
        keys.host_backoffs(queue_name), f"({now_ms}", "+inf", start=0, num=limit, withscores=True
    )
    hosts = [bytes(host).decode(errors="replace") for host, _ in rows]
    causes = await redis.hmget(keys.host_backoff_causes(queue_name), hosts) if hosts else []  # type: ignore[misc]
    return [
        HostHold(host, float(until) / 1000, parse_cause(cause))
        for host, (_, until), cause in zip(hosts, rows, causes, strict=True)
    ]


class Politeness:
    """The host slots and holds of one queue, shared by every worker that runs it."""

    def __init__(
        self, redis: Redis, settings: Settings, metrics: Metrics, clock: RedisClock | None = None
    ) -> None:
        self._redis = redis
        self._clock = clock or RedisClock(redis)
        self._queue = settings.queue_name
        self._limit = settings.host_concurrency
        self._metrics = metrics
        self._acquire = redis.register_script(ACQUIRE_SCRIPT)
        self._renew = redis.register_script(RENEW_SCRIPT)
        self._hold = redis.register_script(HOLD_SCRIPT)
        self._slots_ttl = Renewals(SLOTS_RENEW_S)  # keyed by host
        self._watcher: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Keep the hosts-backing-off gauge current (it is shared state, so it is sampled)."""
        self._watcher = asyncio.create_task(self._watch())

    async def stop(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher

    @contextlib.asynccontextmanager
    async def turn(self, target: Target, until: float) -> AsyncIterator[None]:
        """Hold one of the host's slots while the body runs; wait for it until ``until`` (loop time)."""
        host = host_of(target)
        token = uuid.uuid4().hex
        await self._take(host, token, until)
        slots = keys.host_slots(self._queue, host)
        try:
            async with renewed(functools.partial(self._renew_slot, host, slots, token), slots):
                yield
        finally:
            # Shielded: a job cancelled at its deadline still gives its slot back at once.
            await asyncio.shield(self._release(host, token))

    async def _renew_slot(self, host: str, slots: str, token: str) -> object:
        now_ms = await self._clock.now_ms()

        def renew(key_too: bool) -> Awaitable[int]:
            return self._renew(keys=[slots], args=[token, LEASE_MS, now_ms, SLOTS_TTL_MS, int(key_too)])

        return await self._slots_ttl.carried(host, renew, lambda held: bool(int(held)))

    async def hold_if_asked(self, target: Target, status: int, retry_after_s: float | None) -> float:
        """A 429 or 503 with Retry-After holds every worker's fetches to the host until then;
        returns the seconds the host asked for (0 when it asked for nothing)."""
        if status not in BACKOFF_STATUSES or not retry_after_s or retry_after_s <= 0:
            return 0.0
        host = host_of(target)
        seconds = min(retry_after_s, MAX_HOLD_S)
        try:
            await self._hold(
                keys=[keys.host_backoffs(self._queue), keys.host_backoff_causes(self._queue)],
                args=[host, int(seconds * 1000), status, await self._clock.now_ms()],
            )
        except (RedisError, OSError) as exc:
            # The job still reports the host's answer; only the hold for later fetches is lost.
            log.warning("host hold not recorded", extra=fields(host=host, error=type(exc).__name__))
            return retry_after_s
        log.info("host asked to be left alone", extra=fields(host=host, status=status, hold_s=seconds))
        await self._sample()
        return retry_after_s

    @staticmethod
    def past_deadline(target: Target, status: int, asked_s: float, until: float) -> RateLimited | None:
        """The failure for a host's answer asking for a wait past ``until`` (loop time), or None."""
        left = until - asyncio.get_running_loop().time()
        if asked_s <= 0 or asked_s <= left:
            return None
        return RateLimited(
            f"{host_of(target)} asked the worker to wait (Retry-After) {min(asked_s, MAX_HOLD_S):.0f} s, "
            "past this fetch's deadline; try it later",
            status=status,
        )

    async def _take(self, host: str, token: str, until: float) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        waited: set[str] = set()
        slots = keys.host_slots(self._queue, host)
        backoffs = keys.host_backoffs(self._queue)
        waiting = keys.host_waiting(self._queue, host)
        while True:
            # Taking a slot is a write: at Redis's memory limit the page cache gives way first.
            now_ms = await self._clock.now_ms()

            def take(key_too: bool, now_ms: int = now_ms) -> Awaitable[list[int]]:
                args: list[str | int] = [
                    token, self._limit, LEASE_MS, host, FREE_TTL_MS, now_ms, SLOTS_TTL_MS, int(key_too),
                ]  # fmt: skip
                return relieving(
                    self._redis,
                    self._queue,
                    functools.partial(self._acquire, keys=[slots, backoffs, waiting], args=args),
                )

            # A try that did not take a slot did not renew the key: the next take does.
            reply = [
                int(x) for x in await self._slots_ttl.carried(host, take, lambda r: r[0] == 1 and r[2] == 1)
            ]
            granted, hold_ms = reply[0], reply[1]
            if granted:
                break
            left = until - loop.time()
            if hold_ms > 0:
                waited.add("backoff")
                if hold_ms / 1000 > left:
                    cause = await hold_cause(self._redis, self._queue, host)
                    raise RateLimited(
                        f"{host} {cause.said() if cause else 'asked the worker to wait (Retry-After)'}; "
                        f"its hold has {hold_ms / 1000:.0f} s more to run, past this fetch's deadline; "
                        "try it later"
                    )
                await asyncio.sleep(hold_ms / 1000)
                continue
            waited.add("slot")
            if left <= 0:
                raise Timeout(
                    f"no turn to fetch from {host} came in time: at most {self._limit} fetches run "
                    "to one host at once, across all workers"
                )
            await blocking_pop(self._redis, keys.host_free(self._queue, host), min(left, SLOT_CHECK_S))
        for reason in waited:
            self._metrics.host_waits.labels(reason).inc()
        if waited:
            self._metrics.host_wait.observe(loop.time() - started)

    async def _release(self, host: str, token: str) -> None:
        # The slot goes back, and a wake-up is pushed only when a job waits (its mark is there).
        # Not one script: a job that marks itself waiting after this read took its look at the
        # slots after the ZREM, and saw the slot free.
        free = keys.host_free(self._queue, host)
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.zrem(keys.host_slots(self._queue, host), token)
                pipe.exists(keys.host_waiting(self._queue, host))
                _, waiting = await pipe.execute()
            if waiting:
                async with self._redis.pipeline(transaction=True) as tx:
                    tx.lpush(free, b"1")
                    tx.ltrim(free, 0, self._limit - 1)
                    tx.pexpire(free, FREE_TTL_MS)
                    await tx.execute()
        except (RedisError, OSError) as exc:
            # The slot's lease lapses on its own within LEASE_MS; the fetch's result stands.
            log.warning("host slot release failed", extra=fields(host=host, error=type(exc).__name__))

    async def _watch(self) -> None:
        while True:
            await self._sample()
            await asyncio.sleep(BACKING_OFF_REFRESH_S)

    async def _sample(self) -> None:
        with contextlib.suppress(RedisError, OSError):
            now_ms = await self._clock.now_ms()
            held = await self._redis.zcount(keys.host_backoffs(self._queue), f"({now_ms}", "+inf")
            self._metrics.hosts_backing_off.set(held)
