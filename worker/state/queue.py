"""The queue's fast path: enqueue and wake in one round trip, claim jobs in one round trip.

The payload is arq's own job format, so any arq client can enqueue too (a worker picks such jobs
up at its fallback poll). This path also pushes the job id onto the queue's wake list in the same
script, so an idle worker blocked on that list claims that very job within a millisecond. Every
claim is a lease (``worker.runtime.claims``) and brings the job's payload back, for the worker to check
before arq reads it (``worker.runtime.payload``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from arq.jobs import SerializationError

from worker.logs import fields
from worker.serialization import JobArguments, dumps
from worker.state import keys
from worker.state.clock import RedisClock

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = logging.getLogger("research.queue")

# Wake tokens beyond this are dropped, oldest first. No job depends on its token: a worker's
# periodic poll and the poll it makes whenever a slot frees find every queued job.
WAKE_CAP = 256
# The list is cut back to WAKE_CAP once it is this much longer: one LTRIM per 64 enqueues in a burst.
WAKE_SLACK = 64
JOB_EXPIRES_MS = 86_400_000

# KEYS: job key, arq result key, research result key, queue zset, wake list. ARGV: payload, expiry
# ms, job id, wake cap, the score. Returns 1 when enqueued, 0 when a job with this id exists or has
# a result already. (A job whose research result stands without arq's keys, enqueued by any other
# means, is finished without running by its claim: see worker.runtime.worker.)
#
# The score is Redis's clock (``worker.state.clock``), not the enqueuer's: a client whose clock runs
# ahead would otherwise score its job in the future, where no worker takes it until that time
# comes. The payload's enqueue time ("et") is the same instant, so the queue wait a worker measures
# is Redis's too. The wake list is trimmed only when it outgrows its cap by WAKE_SLACK and given
# its expiry only when this push created it (an empty list is deleted by Redis, so a list in use is
# created again soon): two commands fewer per enqueue.
ENQUEUE_SCRIPT = """
if redis.call('EXISTS', KEYS[1], KEYS[2], KEYS[3]) > 0 then
  return 0
end
redis.call('PSETEX', KEYS[1], ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[5], ARGV[3])
local length = redis.call('RPUSH', KEYS[5], ARGV[3])
if length == 1 then
  redis.call('PEXPIRE', KEYS[5], ARGV[2])
elseif length > tonumber(ARGV[4]) + WAKE_SLACK then
  redis.call('LTRIM', KEYS[5], -tonumber(ARGV[4]), -1)
end
return 1
""".replace("WAKE_SLACK", str(WAKE_SLACK))

# How often an enqueuer asks Redis how many replicas it has (INFO replication). WAIT cannot run
# inside a script, and asking on every enqueue was a command per job; a replica that attached in
# the last second is still copying the data set and could not acknowledge in time anyway.
REPLICAS_CHECK_S = 1.0
# How long an enqueue waits for a replica to hold the job, when the primary has replicas.
REPLICA_ACK_MS = 1000


# A job this project's Enqueuer queued says so in its payload: its result is read from
# research:result, so arq's record of it (kept for the dashboard's times and arguments) holds the
# result's head only, never a second copy of the page text. A job a plain arq client queued has no
# such field and gets arq's whole record, which its Job.result() reads.
OURS_FIELD = "rs"


def job_payload(function: str, kwargs: JobArguments, enqueued_ms: int) -> bytes:
    """arq's job format (t, f, a, k, et: the enqueue time by Redis's clock) with our mark."""
    try:
        return dumps({"t": None, "f": function, "a": [], "k": kwargs, OURS_FIELD: 1, "et": enqueued_ms})
    except Exception as exc:
        raise SerializationError(f"unable to serialize job {function!r}") from exc


# arq's finish (finish_job and finish_failed_job), done only by the lease holder, as a Lua function
# that the finish script and the result's write (worker.state.results) both run. K: in-progress,
# job, retry, arq result, queue. (arq's finish also takes the job out of its abort set; this worker
# does not abort jobs, as arq's does not with allow_abort_jobs off, so nothing of its puts a job
# there.) A: holder token, job id, finish (1) or hand back to the queue (0), arq's result record
# ('' for none), its TTL ms, the score a job handed back is queued with ('' to leave it). Returns 1
# when done, 0 when the job is another worker's now (its key names another holder) or finished
# already (no key, and no longer queued): a resumed worker neither removes the new holder's claim
# nor puts a finished job back in the queue. A job handed back gets its score from before its claim
# moved it (plus any delay arq asked for), so it is due again at once, or when arq's Retry said.
FINISH_FUNCTION = """
local function finish_job(K, A)
  local owner = redis.call('GET', K[1])
  if owner then
    local prefix = A[1] .. '@'
    if string.sub(owner, 1, #prefix) ~= prefix then
      return 0
    end
  elseif not redis.call('ZSCORE', K[5], A[2]) then
    return 0
  end
  if A[3] == '1' then
    if A[4] ~= '' then
      redis.call('SET', K[4], A[4], 'PX', A[5])
    end
    redis.call('DEL', K[1], K[2], K[3])
    redis.call('ZREM', K[5], A[2])
  else
    redis.call('DEL', K[1])
    if A[6] ~= '' then
      redis.call('ZADD', K[5], 'XX', A[6], A[2])
    end
  end
  return 1
end
"""


@dataclass(frozen=True)
class Finish:
    """arq's finish of one job by its lease holder: the finish function's keys and arguments."""

    queue_name: str
    job_id: str
    holder: str  # the lease holder's token (worker.runtime.claims)
    finish: bool  # False: handed back to the queue, to run again
    record: bytes | None  # arq's result record
    record_ttl_ms: int
    requeue_score: str | None = None  # a job handed back: its score ('' leaves it)

    def keys(self) -> list[str]:
        return [
            keys.arq_in_progress(self.job_id),
            keys.arq_job(self.job_id),
            keys.arq_retry(self.job_id),
            keys.arq_result(self.job_id),
            self.queue_name,
        ]

    def args(self) -> list[bytes | int | str]:
        return [
            self.holder,
            self.job_id,
            int(self.finish),
            self.record or b"",
            max(1, self.record_ttl_ms),
            self.requeue_score or "",
        ]


class Enqueuer:
    def __init__(self, redis: Redis, queue_name: str, clock: RedisClock | None = None) -> None:
        self._redis = redis
        self._queue_name = queue_name
        self._clock = clock or RedisClock(redis)
        self._script = redis.register_script(ENQUEUE_SCRIPT)
        self._replicas = 0
        self._replicas_checked = -math.inf

    async def enqueue(self, function: str, job_id: str, kwargs: JobArguments) -> bool:
        """Enqueue and wake; True when enqueued, False when the job id is taken.

        With replicas (Sentinel), it returns once one replica holds the job too, so a job the
        caller saw acknowledged survives the primary dying right after.
        """
        replicas = await self._replica_count()
        now_ms = await self._clock.now_ms()
        payload = job_payload(function, kwargs, now_ms)
        created = await self._script(
            keys=[
                keys.arq_job(job_id),
                keys.arq_result(job_id),
                keys.result(job_id),
                self._queue_name,
                keys.wake(self._queue_name),
            ],
            args=[payload, JOB_EXPIRES_MS, job_id, WAKE_CAP, now_ms],
        )
        if int(created) and replicas:
            acked = await self._redis.execute_command("WAIT", 1, REPLICA_ACK_MS)  # type: ignore[no-untyped-call]
            if not int(acked):
                log.warning(
                    "no replica acknowledged the enqueue in time",
                    extra=fields(job_id=job_id, waited_ms=REPLICA_ACK_MS),
                )
        return bool(int(created))

    async def _replica_count(self) -> int:
        now = time.monotonic()
        if now - self._replicas_checked >= REPLICAS_CHECK_S:
            info = await self._redis.info("replication")
            self._replicas = int(info.get("connected_slaves", 0))
            self._replicas_checked = now
        return self._replicas


@dataclass(frozen=True)
class Claimed:
    """A job this worker now holds the lease of, as the claim found it.

    ``payload`` is the job as the queue held it (None when its key is gone: arq's "job expired");
    ``job_try`` counts this start (arq's retry counter, taken in the claim); ``standing`` is the
    job's research result when one is written already (a job whose result stands runs no more).
    """

    job_id: str
    score: int
    payload: bytes | None
    job_try: int = 1
    standing: bytes | None = None
    sent_at: float = 0.0  # time.monotonic() before the claim was sent: the lease is no older
    lease: str | None = None  # the lease's value the claim wrote


# What every claim does to one job, in the claim's own script: take the lease (SET NX, so a job
# another worker holds costs one command and is left alone), read the payload, any standing result
# and arq's own try counter in one MGET, and move the job's score to the lease's end with the try
# counted in it.
#
# Moving the score is what keeps a claim's cost flat: a running job leaves the due part of the
# queue (scores up to now) for as long as its lease lives, and the lease's renewal moves it on, so
# the poll's ZRANGEBYSCORE returns only jobs nobody runs (plus those whose lease lapsed: a dead
# worker's, due again when the lease ends). arq's own poll walks every running job at the head of
# the queue.
#
# The try is counted in the score's sixteenths (an enqueue scores whole milliseconds; a claim adds
# try/16 ms, exact in a double), so counting it costs no command of its own, and it survives the
# worker: the next claim of a job whose worker died reads it back. arq's retry key, which a plain
# arq worker keeps, is read too and the larger count wins. ARGV (shared by every claim script):
# 1 now ms, 2 lease ms, 3 lease value, 4 in-progress prefix, 5 job prefix, 6 retry prefix,
# 7 research result prefix. KEYS[1]: the queue.
CLAIM_ONE = """
local function claim(id, score, claimed)
  if not redis.call('SET', ARGV[4] .. id, ARGV[3], 'PX', ARGV[2], 'NX') then
    return
  end
  local got = redis.call('MGET', ARGV[5] .. id, ARGV[7] .. id, ARGV[6] .. id)
  local tries = math.floor((tonumber(score) % 1) * 16 + 0.5)
  tries = math.min(math.max(tries, tonumber(got[3] or '0') or 0) + 1, 15)
  local until_ms = tonumber(ARGV[1]) + tonumber(ARGV[2])
  redis.call('ZADD', KEYS[1], 'XX', string.format('%d.%04d', until_ms, tries * 625), id)
  local n = #claimed
  claimed[n + 1] = id
  claimed[n + 2] = score
  claimed[n + 3] = got[1]
  claimed[n + 4] = tries
  claimed[n + 5] = got[2]
end
"""
CLAIM_FIELDS = 5

# The poll, in one step: the due part of the queue in order, claimed up to ARGV[8] jobs. Jobs
# other workers run are not in the due part (their scores sit at their leases' ends), so this
# reads about as many jobs as it claims, however many run. ARGV 8: how many, 9: how far to look
# (a bound for the jobs that are due but held, such as a plain arq worker's).
CLAIM_DUE_SCRIPT = (
    CLAIM_ONE
    + """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[9]))
local claimed = {}
local wanted = tonumber(ARGV[8]) * 5
for i = 1, #due, 2 do
  claim(due[i], due[i + 1], claimed)
  if #claimed >= wanted then
    break
  end
end
return claimed
"""
)
DUE_SCAN_LIMIT = 1000
# A woken job was scored a moment ago, by its enqueuer's reading of Redis's clock (which may run a
# round trip ahead of this worker's) or by a plain arq client's own clock; it counts as due up to
# this far ahead, so the worker takes it at once instead of leaving it to the next poll.
WOKEN_SKEW_MS = 5_000

# A wake-up, in one step: claim the woken job and the jobs of up to ARGV[9] more wake tokens,
# popped from the wake list here, so a burst of enqueues costs a worker one round trip per batch
# rather than two per job. The batch is capped so one worker does not take a whole burst that
# idle replicas could share. KEYS: queue, wake list. ARGV 8: the woken job id, 9: how many more,
# 10: the latest score that counts as due. A job that is not queued, not due, or running (its
# score is its lease's end) costs one ZSCORE.
CLAIM_WOKEN_SCRIPT = (
    CLAIM_ONE
    + """
local ids = {ARGV[8]}
if tonumber(ARGV[9]) > 0 then
  local more = redis.call('LPOP', KEYS[2], ARGV[9])
  if more then
    for _, id in ipairs(more) do
      ids[#ids + 1] = id
    end
  end
end
local claimed = {}
for _, id in ipairs(ids) do
  local score = redis.call('ZSCORE', KEYS[1], id)
  if score and tonumber(score) <= tonumber(ARGV[10]) then
    claim(id, score, claimed)
  end
end
return claimed
"""
)


class Claimer:
    """Claims queued jobs for one worker: each claim is a lease of ``lease_ms`` named by ``lease_value``."""

    def __init__(
        self,
        redis: Redis,
        queue_name: str,
        lease_ms: int,
        lease_value: Callable[[int], str],
        clock: RedisClock | None = None,
    ) -> None:
        self._queue_name = queue_name
        self._clock = clock or RedisClock(redis)
        self._lease_ms = lease_ms
        self._lease_value = lease_value
        self._due_script = redis.register_script(CLAIM_DUE_SCRIPT)
        self._woken_script = redis.register_script(CLAIM_WOKEN_SCRIPT)

    def _shared(self, now_ms: int, lease: str) -> list[str | int]:
        return [
            now_ms,
            self._lease_ms,
            lease,
            *keys.ARQ_JOB_PREFIXES,
            keys.result(""),
        ]

    async def claim_due(self, wanted: int) -> list[Claimed | bytes]:
        """Claim up to ``wanted`` due jobs nobody holds, oldest first.

        A queue member whose id is not UTF-8 comes back as its raw bytes: it cannot name a result
        key, and the worker only removes it.
        """
        sent_at = time.monotonic()
        now_ms = await self._clock.now_ms()
        lease = self._lease_value(now_ms)
        flat = await self._due_script(
            keys=[self._queue_name], args=[*self._shared(now_ms, lease), wanted, DUE_SCAN_LIMIT]
        )
        return _claims(flat, sent_at, lease)

    async def claim_woken(self, job_id: bytes | str, more: int) -> list[Claimed | bytes]:
        """Claim the woken job and those of up to ``more`` further wake tokens, as they are due and free."""
        sent_at = time.monotonic()
        now_ms = await self._clock.now_ms()
        lease = self._lease_value(now_ms)
        flat = await self._woken_script(
            keys=[self._queue_name, keys.wake(self._queue_name)],
            args=[*self._shared(now_ms, lease), job_id, max(0, more), now_ms + WOKEN_SKEW_MS],
        )
        return _claims(flat, sent_at, lease)


def _claims(flat: Any, sent_at: float, lease: str) -> list[Claimed | bytes]:
    rows = list(flat)
    return [_claimed(rows[i : i + CLAIM_FIELDS], sent_at, lease) for i in range(0, len(rows), CLAIM_FIELDS)]


def _claimed(row: list[Any], sent_at: float, lease: str) -> Claimed | bytes:
    raw_id, score, payload, tries, standing = row
    try:
        job_id = bytes(raw_id).decode()
    except UnicodeDecodeError:
        return bytes(raw_id)
    return Claimed(
        job_id,
        int(float(score)),
        None if payload is None else bytes(payload),
        int(tries),
        None if standing is None else bytes(standing),
        sent_at,
        lease,
    )


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
