"""The queue's fast path: enqueue and wake in one round trip, claim a job in one round trip.

The payload is arq's own job format, so any arq client can enqueue too (a worker picks such jobs
up at its fallback poll). This path also pushes the job id onto the queue's wake list in the same
script, so an idle worker blocked on that list claims that very job within a millisecond.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from arq.constants import in_progress_key_prefix, job_key_prefix, result_key_prefix
from arq.jobs import serialize_job

from worker import keys
from worker.serialization import dumps

if TYPE_CHECKING:
    from redis.asyncio import Redis

# Wake tokens beyond this are dropped, oldest first. No job depends on its token: a worker's
# periodic poll and the poll it makes whenever a slot frees find every queued job.
WAKE_CAP = 256
JOB_EXPIRES_MS = 86_400_000

# KEYS: job key, arq result key, queue zset, wake list. ARGV: payload, score, expiry ms, job id, cap.
# Returns 1 when enqueued, 0 when a job with this id exists or has a result already.
ENQUEUE_SCRIPT = """
if redis.call('EXISTS', KEYS[1], KEYS[2]) > 0 then
  return 0
end
redis.call('PSETEX', KEYS[1], ARGV[3], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[4])
redis.call('RPUSH', KEYS[4], ARGV[4])
redis.call('LTRIM', KEYS[4], -tonumber(ARGV[5]), -1)
redis.call('PEXPIRE', KEYS[4], ARGV[3])
return 1
"""

# The same decision arq makes with WATCH/EXISTS/ZSCORE/MULTI/EXEC, in one atomic step: a job is
# claimed when nobody runs it, it is still queued, and it is due. KEYS: in-progress key, queue.
# ARGV: job id, now ms, in-progress timeout ms. Returns the job's score, or -1 when not claimed.
CLAIM_SCRIPT = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  return -1
end
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not score or tonumber(score) > tonumber(ARGV[2]) then
  return -1
end
redis.call('PSETEX', KEYS[1], ARGV[3], '1')
return tonumber(score)
"""


class Enqueuer:
    def __init__(self, redis: Redis, queue_name: str) -> None:
        self._queue_name = queue_name
        self._script = redis.register_script(ENQUEUE_SCRIPT)

    async def enqueue(self, function: str, job_id: str, kwargs: dict[str, Any]) -> bool:
        now_ms = int(time.time() * 1000)
        payload = serialize_job(function, (), kwargs, None, now_ms, serializer=dumps)
        created = await self._script(
            keys=[
                job_key_prefix + job_id,
                result_key_prefix + job_id,
                self._queue_name,
                keys.wake(self._queue_name),
            ],
            args=[payload, now_ms, JOB_EXPIRES_MS, job_id, WAKE_CAP],
        )
        return bool(created)


# The poll, in one step: walk the due part of the queue in order, skip jobs another worker runs,
# and claim up to ARGV[3] of the rest. arq polls with ZRANGEBYSCORE and then tries each id in its
# own WATCH transaction, so a worker with free slots behind a queue head of running jobs spends a
# round trip on every one of them. KEYS: queue. ARGV: now ms, in-progress timeout ms, how many,
# how far to look, the in-progress key prefix. Returns a flat list of job id, score pairs.
CLAIM_DUE_SCRIPT = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[4]))
local claimed = {}
local wanted = tonumber(ARGV[3])
for i = 1, #due, 2 do
  local key = ARGV[5] .. due[i]
  if redis.call('EXISTS', key) == 0 then
    redis.call('PSETEX', key, ARGV[2], '1')
    claimed[#claimed + 1] = due[i]
    claimed[#claimed + 1] = due[i + 1]
    if #claimed >= wanted * 2 then
      break
    end
  end
end
return claimed
"""
DUE_SCAN_LIMIT = 1000


class Claimer:
    def __init__(self, redis: Redis, queue_name: str, in_progress_timeout_s: float) -> None:
        self._queue_name = queue_name
        self._timeout_ms = int(in_progress_timeout_s * 1000)
        self._script = redis.register_script(CLAIM_SCRIPT)
        self._due_script = redis.register_script(CLAIM_DUE_SCRIPT)

    async def claim_due(self, wanted: int) -> list[tuple[str, int]]:
        """Claim up to ``wanted`` due jobs nobody runs, oldest first: ``(job id, score)`` pairs."""
        flat = await self._due_script(
            keys=[self._queue_name],
            args=[int(time.time() * 1000), self._timeout_ms, wanted, DUE_SCAN_LIMIT, in_progress_key_prefix],
        )
        pairs = list(flat)
        return [(bytes(pairs[i]).decode(), int(float(pairs[i + 1]))) for i in range(0, len(pairs), 2)]

    async def claim(self, job_id: str) -> int | None:
        """The job's score when this worker now owns it, None when another has it or it is gone."""
        score = await self._script(
            keys=[in_progress_key_prefix + job_id, self._queue_name],
            args=[job_id, int(time.time() * 1000), self._timeout_ms],
        )
        return None if int(score) < 0 else int(score)


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
