"""The queue's fast path: enqueue and wake in one round trip, claim jobs in one round trip.

The payload is arq's own job format, so any arq client can enqueue too (a worker picks such jobs
up at its fallback poll). This path also pushes the job id onto the queue's wake list in the same
script, so an idle worker blocked on that list claims that very job within a millisecond. Every
claim is a lease (``worker.runtime.claims``) and brings the job's payload back, for the worker to check
before arq reads it (``worker.runtime.payload``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from arq.constants import in_progress_key_prefix, job_key_prefix, result_key_prefix
from arq.jobs import serialize_job

from worker.logs import fields
from worker.serialization import dumps
from worker.state import keys

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = logging.getLogger("research.queue")

# Wake tokens beyond this are dropped, oldest first. No job depends on its token: a worker's
# periodic poll and the poll it makes whenever a slot frees find every queued job.
WAKE_CAP = 256
JOB_EXPIRES_MS = 86_400_000

# KEYS: job key, arq result key, queue zset, wake list. ARGV: payload, score, expiry ms, job id, cap.
# Returns {1 when enqueued or 0 when a job with this id exists or has a result already, the number
# of replicas the primary has}: the caller waits for one of them to hold the job before it calls
# the job acknowledged (WAIT cannot run inside a script).
ENQUEUE_SCRIPT = """
local replicas = tonumber(string.match(redis.call('INFO', 'replication'), 'connected_slaves:(%d+)')) or 0
if redis.call('EXISTS', KEYS[1], KEYS[2]) > 0 then
  return {0, replicas}
end
redis.call('PSETEX', KEYS[1], ARGV[3], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[4])
redis.call('RPUSH', KEYS[4], ARGV[4])
redis.call('LTRIM', KEYS[4], -tonumber(ARGV[5]), -1)
redis.call('PEXPIRE', KEYS[4], ARGV[3])
return {1, replicas}
"""

# The same decision arq makes with WATCH/EXISTS/ZSCORE/MULTI/EXEC, in one atomic step: a job is
# claimed when nobody holds its lease, it is still queued, and it is due. The claim is a lease
# (worker.runtime.claims) whose value names this worker; the job's payload comes back with it, so the
# worker checks the payload before arq reads it. KEYS: in-progress key, queue, job key. ARGV: job
# id, now ms, lease ms, lease value. Returns {score, payload or nil}, or nil when not claimed.
CLAIM_SCRIPT = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  return nil
end
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not score or tonumber(score) > tonumber(ARGV[2]) then
  return nil
end
redis.call('SET', KEYS[1], ARGV[4], 'PX', ARGV[3])
return {score, redis.call('GET', KEYS[3])}
"""

# How long an enqueue waits for a replica to hold the job, when the primary has replicas.
REPLICA_ACK_MS = 1000


class Enqueuer:
    def __init__(self, redis: Redis, queue_name: str) -> None:
        self._redis = redis
        self._queue_name = queue_name
        self._script = redis.register_script(ENQUEUE_SCRIPT)

    async def enqueue(self, function: str, job_id: str, kwargs: dict[str, Any]) -> bool:
        """Enqueue and wake; True when enqueued, False when the job id is taken.

        With replicas (Sentinel), it returns once one replica holds the job too, so a job the
        caller saw acknowledged survives the primary dying right after.
        """
        now_ms = int(time.time() * 1000)
        payload = serialize_job(function, (), kwargs, None, now_ms, serializer=dumps)
        created, replicas = await self._script(
            keys=[
                job_key_prefix + job_id,
                result_key_prefix + job_id,
                self._queue_name,
                keys.wake(self._queue_name),
            ],
            args=[payload, now_ms, JOB_EXPIRES_MS, job_id, WAKE_CAP],
        )
        if int(created) and int(replicas):
            acked = await self._redis.execute_command("WAIT", 1, REPLICA_ACK_MS)  # type: ignore[no-untyped-call]
            if not int(acked):
                log.warning(
                    "no replica acknowledged the enqueue in time",
                    extra=fields(job_id=job_id, waited_ms=REPLICA_ACK_MS),
                )
        return bool(int(created))


@dataclass(frozen=True)
class Claimed:
    """A job this worker now holds the lease of, with its payload as the queue held it."""

    job_id: str
    score: int
    payload: bytes | None


# The poll, in one step: walk the due part of the queue in order, skip jobs whose lease another
# worker holds, and claim up to ARGV[3] of the rest. arq polls with ZRANGEBYSCORE and then tries
# each id in its own WATCH transaction, so a worker with free slots behind a queue head of running
# jobs spends a round trip on every one of them. KEYS: queue. ARGV: now ms, lease ms, how many,
# how far to look, the in-progress key prefix, the lease value, the job key prefix. Returns a flat
# list of job id, score, payload (nil when the job key is gone) triples.
CLAIM_DUE_SCRIPT = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[4]))
local claimed = {}
local wanted = tonumber(ARGV[3])
for i = 1, #due, 2 do
  local key = ARGV[5] .. due[i]
  if redis.call('EXISTS', key) == 0 then
    redis.call('SET', key, ARGV[6], 'PX', ARGV[2])
    claimed[#claimed + 1] = due[i]
    claimed[#claimed + 1] = due[i + 1]
    claimed[#claimed + 1] = redis.call('GET', ARGV[7] .. due[i])
    if #claimed >= wanted * 3 then
      break
    end
  end
end
return claimed
"""
DUE_SCAN_LIMIT = 1000
# A woken job was scored "now" by its enqueuer's clock a moment ago; it counts as due up to this
# far ahead of the claiming worker's clock. Without it, a job enqueued between a worker reading its
# clock and its claim script running (or scored by a client whose clock runs a little ahead) lost
# its wake token and waited for the next poll.
WOKEN_SKEW_MS = 5_000

# A wake-up, in one step: claim the woken job and the jobs of up to ARGV[2] more wake tokens,
# popped from the wake list here, so a burst of enqueues costs a worker one round trip per batch
# rather than two per job (a worker whose loop is busy with other jobs would otherwise take
# seconds to start the last of them). The batch is capped so one worker does not take a whole
# burst that idle replicas could share. KEYS: queue, wake list. ARGV: woken job id, how many more,
# now ms, lease ms, lease value, in-progress prefix, job prefix. Returns id, score, payload triples.
CLAIM_WOKEN_SCRIPT = """
local ids = {ARGV[1]}
if tonumber(ARGV[2]) > 0 then
  local more = redis.call('LPOP', KEYS[2], ARGV[2])
  if more then
    for _, id in ipairs(more) do
      ids[#ids + 1] = id
    end
  end
end
local claimed = {}
for _, id in ipairs(ids) do
  local key = ARGV[6] .. id
  if redis.call('EXISTS', key) == 0 then
    local score = redis.call('ZSCORE', KEYS[1], id)
    if score and tonumber(score) <= tonumber(ARGV[3]) then
      redis.call('SET', key, ARGV[5], 'PX', ARGV[4])
      claimed[#claimed + 1] = id
      claimed[#claimed + 1] = score
      claimed[#claimed + 1] = redis.call('GET', ARGV[7] .. id)
    end
  end
end
return claimed
"""


class Claimer:
    """Claims queued jobs for one worker: each claim is a lease of ``lease_ms`` named by ``lease_value``."""

    def __init__(
        self, redis: Redis, queue_name: str, lease_ms: int, lease_value: Callable[[int], str]
    ) -> None:
        self._queue_name = queue_name
        self._lease_ms = lease_ms
        self._lease_value = lease_value
        self._script = redis.register_script(CLAIM_SCRIPT)
        self._due_script = redis.register_script(CLAIM_DUE_SCRIPT)
        self._woken_script = redis.register_script(CLAIM_WOKEN_SCRIPT)

    async def claim_due(self, wanted: int) -> list[Claimed | bytes]:
        """Claim up to ``wanted`` due jobs nobody holds, oldest first.

        A queue member whose id is not UTF-8 comes back as its raw bytes: it cannot name a result
        key, and the worker only removes it.
        """
        now_ms = int(time.time() * 1000)
        flat = list(
            await self._due_script(
                keys=[self._queue_name],
                args=[
                    now_ms,
                    self._lease_ms,
                    wanted,
                    DUE_SCAN_LIMIT,
                    in_progress_key_prefix,
                    self._lease_value(now_ms),
                    job_key_prefix,
                ],
            )
        )
        return [_claimed(flat[i], flat[i + 1], flat[i + 2]) for i in range(0, len(flat), 3)]

    async def claim_woken(self, job_id: bytes, more: int) -> list[Claimed | bytes]:
        """Claim the woken job and those of up to ``more`` further wake tokens, as they are due and free."""
        now_ms = int(time.time() * 1000)
        flat = list(
            await self._woken_script(
                keys=[self._queue_name, keys.wake(self._queue_name)],
                args=[
                    job_id,
                    max(0, more),
                    now_ms + WOKEN_SKEW_MS,
                    self._lease_ms,
                    self._lease_value(now_ms),
                    in_progress_key_prefix,
                    job_key_prefix,
                ],
            )
        )
        return [_claimed(flat[i], flat[i + 1], flat[i + 2]) for i in range(0, len(flat), 3)]

    async def claim(self, job_id: str) -> Claimed | None:
        """The claimed job when this worker now holds it, None when another has it or it is gone."""
        now_ms = int(time.time() * 1000)
        reply = await self._script(
            keys=[in_progress_key_prefix + job_id, self._queue_name, job_key_prefix + job_id],
            args=[job_id, now_ms + WOKEN_SKEW_MS, self._lease_ms, self._lease_value(now_ms)],
        )
        if reply is None:
            return None
        score, payload = reply
        return Claimed(job_id, int(float(score)), None if payload is None else bytes(payload))


def _claimed(raw_id: Any, score: Any, payload: Any) -> Claimed | bytes:
    try:
        job_id = bytes(raw_id).decode()
    except UnicodeDecodeError:
        return bytes(raw_id)
    return Claimed(job_id, int(float(score)), None if payload is None else bytes(payload))


async def blocking_pop(redis: Redis, key: str, timeout_s: float) -> bytes | None:
    """BLPOP one key for at most ``timeout_s`` (fractions allowed; never 0, which blocks forever)."""
    reply = await redis.execute_command(  # type: ignore[no-untyped-call]
        "BLPOP", key, f"{max(timeout_s, 0.001):.3f}"
    )
    return None if reply is None else bytes(reply[1])


async def blocking_peek(redis: Redis, key: str, timeout_s: float) -> bytes | None:
    """Wait for a one-element list and read its element without consuming it.

    BLMOVE from a list to itself rotates it, and the push back wakes the next blocked reader too,
    so every client waiting on the same job learns of its result (Redis 6.2 or later).
    """
    reply = await redis.execute_command(  # type: ignore[no-untyped-call]
        "BLMOVE", key, key, "LEFT", "LEFT", f"{max(timeout_s, 0.001):.3f}"
    )
    return None if reply is None else bytes(reply)
