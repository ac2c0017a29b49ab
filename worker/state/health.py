"""Who is alive on a queue: one health key per replica, and arq's one key per queue.

Each replica beats every few seconds into its own key, ``{queue}:health-check:{worker_id}``, holding
its counters as JSON, so one replica stopping never hides another. arq's convention is one key per
queue, ``{queue}:health-check``, which ``arq --check`` reads: every beat refreshes that one too (as
arq's own one-line summary, with the same time to live), and a replica that stops re-derives it from
the replicas still beating, so it exists while any replica does. arq's own worker deletes the queue
key when it stops, even with others running; the same re-derivation puts it back.

A beat must land even when Redis is full (``maxmemory`` with ``noeviction``): a probe that reads
no beat restarts a healthy worker exactly when Redis is under pressure, and ``fetch`` would say no
worker runs. So a beat is one script that first deletes the replica's key, which Redis never
refuses for memory, and then writes both keys: once a script has written, Redis runs it to its
end (``worker.state.memory``). The keys are a few hundred bytes, rewritten in place.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError, ResponseError

from worker.logs import fields
from worker.serialization import dumps, loads
from worker.state import keys

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = logging.getLogger("research.health")

SCAN_COUNT = 1000
# Every replica beats this often, and its key outlives three beats.
INTERVAL_S = 5.0
TTL_S = 3 * INTERVAL_S
# The longest a worker waits between tries while Redis is away; its first poll that reaches Redis
# again beats at once (worker.runtime.worker), so a restarted Redis hears from every live worker
# within this, and a client waits this and one beat more before it says no worker runs.
RECONNECT_MAX_S = 5.0
RESTART_GRACE_S = RECONNECT_MAX_S + INTERVAL_S
WATCH_POLL_S = 0.2

# KEYS: 1 this replica's key, 2 the queue's. ARGV: 1 the replica's beat, 2 arq's summary, 3 ttl ms.
BEAT_SCRIPT = """
redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return 1
"""


@dataclass(frozen=True)
class Replica:
    """One replica's last beat, and how long its key has left."""

    worker_id: str
    info: Mapping[str, Any]
    ttl_ms: int

    @property
    def beat_at(self) -> float:
        beat = self.info.get("beat_at")
        return float(beat) if isinstance(beat, int | float) else 0.0


async def publish(
    redis: Redis, queue_name: str, replica_key: str, info: Mapping[str, Any], ttl_s: float
) -> None:
    """One beat: this replica's key and the queue's, in one round trip, at Redis's memory limit too."""
    ttl_ms = int(ttl_s * 1000)
    await redis.eval(  # type: ignore[misc]
        BEAT_SCRIPT,
        2,
        replica_key,
        keys.queue_health(queue_name),
        dumps(info).decode(),
        arq_summary(info),
        str(max(1, ttl_ms)),
    )


async def withdraw(redis: Redis, queue_name: str) -> None:
    """After this replica's key is gone, the queue key follows the replicas left (none: no key)."""
    try:
        left = await replicas(redis, queue_name)
        if not left:
            await redis.delete(keys.queue_health(queue_name))
            return
        freshest = max(left, key=lambda replica: replica.beat_at)
        await redis.set(keys.queue_health(queue_name), arq_summary(freshest.info), px=max(freshest.ttl_ms, 1))
    except (RedisError, OSError) as exc:
        # Stopping with Redis away: the queue key expires on its own with the last beat's TTL.
        log.warning("could not update the queue's health key", extra=fields(error=type(exc).__name__))


async def replicas(redis: Redis, queue_name: str) -> list[Replica]:
    """The replicas whose health keys are still alive on this queue."""
    found = [key async for key in redis.scan_iter(match=keys.health_pattern(queue_name), count=SCAN_COUNT)]
    if not found:
        return []
    async with redis.pipeline(transaction=False) as pipe:
        for key in found:
            pipe.get(key)
            pipe.pttl(key)
        answers = await pipe.execute()
    prefix = keys.health(queue_name, "")
    alive = []
    for key, raw, ttl_ms in zip(found, answers[::2], answers[1::2], strict=True):
        if raw is None:
            continue  # expired between the scan and the read
        name = key.decode(errors="replace") if isinstance(key, bytes) else str(key)
        alive.append(Replica(name.removeprefix(prefix), _info(raw), int(ttl_ms)))
    return alive


class WorkerWatch:
    """A client's view of whether a worker runs, across a Redis restart.

    A Redis that restarted without persistence has lost every health key, though the workers are
    alive and reconnecting: for a moment the queue looks empty of workers. A client that saw a
    worker before the restart waits until ``RESTART_GRACE_S`` after it for one to beat again;
    a client that never saw one (nothing runs yet) is told at once, as before.
    """

    def __init__(self) -> None:
        self._seen_at: float | None = None  # wall clock: compared with Redis's own uptime

    async def ready(self, redis: Redis, queue_name: str) -> bool:
        if await any_alive(redis, queue_name):
            self._seen_at = time.time()
            return True
        if self._seen_at is None:
            return False
        up_s = await uptime_s(redis)
        if up_s is None or up_s >= RESTART_GRACE_S or time.time() - up_s < self._seen_at - 1.0:
            return False  # no restart since a worker was seen (or none this client may learn of)
        deadline = time.monotonic() + RESTART_GRACE_S - up_s
        while time.monotonic() < deadline:
            await asyncio.sleep(WATCH_POLL_S)
            if await any_alive(redis, queue_name):
                self._seen_at = time.time()
                return True
        return False


async def uptime_s(redis: Redis) -> float | None:
    """Seconds since Redis started, or None where INFO's server section is refused (an ACL)."""
    try:
        info = await redis.info("server")
    except ResponseError:
        return None
    up = info.get("uptime_in_seconds")
    return float(up) if isinstance(up, int | float) else None


async def any_alive(redis: Redis, queue_name: str) -> bool:
    """True while a replica beats on this queue: the queue key when it is there, else a scan."""
    if await redis.exists(keys.queue_health(queue_name)):
        return True
    return bool(await replicas(redis, queue_name))


def arq_summary(info: Mapping[str, Any]) -> str:
    """A beat in arq's own health line format, which ``arq --check`` prints."""
    beat = info.get("beat_at")
    when = time.localtime(beat if isinstance(beat, int | float) else None)
    counters = " ".join(
        f"{label}={info.get(field, 0)}"
        for label, field in (
            ("j_complete", "jobs_complete"),
            ("j_failed", "jobs_failed"),
            ("j_retried", "jobs_retried"),
            ("j_ongoing", "jobs_ongoing"),
            ("queued", "queued"),
        )
    )
    return f"{time.strftime('%b-%d %H:%M:%S', when)} {counters} worker_id={info.get('worker_id', '?')}"


def _info(raw: bytes) -> Mapping[str, Any]:
    info: object = {}
    with contextlib.suppress(ValueError):
        info = loads(raw)
    return info if isinstance(info, dict) else {}
