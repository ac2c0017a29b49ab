"""A running job's claim is a short lease that its worker renews while the job runs.

arq marks a claimed job with an in-progress key that lives for the job timeout plus 10 s, so a job
whose worker died stays invisible for that long. Here the key lives ``LEASE_MS`` and one task per
worker renews the leases of every job it runs; a dead worker's jobs become claimable once their
lease lapses, a few seconds later. The key's value names the holder (``{worker_id}/{nonce}@{ms}``:
the worker process and when it claimed the job), so renewing and finishing act only on a lease
the worker still holds: a worker that was paused past its lease (SIGSTOP, a stalled host) finds
another worker's name there, stops its copy of the job, and leaves arq's bookkeeping (the queue,
the job and retry keys, arq's result) to the worker that has it now.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from worker.state import keys
from worker.state.clock import RedisClock
from worker.state.queue import FINISH_FUNCTION, Finish

if TYPE_CHECKING:
    from redis.asyncio import Redis

LEASE_MS = 10_000
# A beat every 3 s. A lease is renewed by the first beat at which it is at least one beat old, so it
# is renewed when it has 4 to 7 s left: one late beat (a long garbage collection, a slow Redis)
# costs nothing, and a job that ends within a beat of its claim (most do) is never renewed at all.
RENEW_SHARE = 0.3


@dataclass(frozen=True)
class Lease:
    """What an in-progress key says: which worker holds the job, and since when (ms)."""

    worker_id: str
    claimed_ms: int


def holder_token(worker_id: str) -> str:
    """This worker process's name in its leases: its id, made unique per process start."""
    return f"{worker_id}/{uuid.uuid4().hex[:12]}"


def parse_lease(value: bytes | str | None) -> Lease | None:
    """Read an in-progress key's value; None for arq's own '1' or anything else unreadable."""
    if value is None:
        return None
    text = value.decode(errors="replace") if isinstance(value, bytes) else value
    holder, at, claimed = text.rpartition("@")
    if not at or not claimed.isdigit():
        return None
    return Lease(worker_id=holder.rpartition("/")[0] or holder, claimed_ms=int(claimed))


# KEYS: the queue, then pairs of (in-progress key, the job's result key). ARGV: lease ms, holder
# token, now ms, then (job id, its try, its lease's value) in the key pairs' order. Returns one flag
# per pair: 1 while this worker holds the lease, 0 when it has lost it. Atomic, so a lease is never
# renewed after another worker's claim landed between a read and an extend. A lapsed lease that
# nobody took (and whose job has no result yet) is taken back: the worker is still running the job,
# and the key may also have vanished with a Redis restart. A held job's score moves on with its
# lease, which keeps it out of the due part of the queue that a claim reads, its try still counted
# in its sixteenths (worker.state.queue).
#
# SET XX GET reads the holder and extends the lease in one command (two per held job with the
# score's ZADD). When the lease turns out to be another worker's, it goes back at once, in this
# same step, with a whole lease time (the new holder renews it to that every beat anyway).
RENEW_SCRIPT = """
local held = {}
local prefix = ARGV[2] .. '@'
local until_ms = tonumber(ARGV[3]) + tonumber(ARGV[1])
for i = 2, #KEYS, 2 do
  local at = 4 + (i / 2 - 1) * 3
  local owner = redis.call('SET', KEYS[i], ARGV[at + 2], 'XX', 'PX', ARGV[1], 'GET')
  local flag = 0
  if owner and string.sub(owner, 1, #prefix) == prefix then
    flag = 1
  elseif owner then
    redis.call('SET', KEYS[i], owner, 'PX', ARGV[1])
  elseif redis.call('EXISTS', KEYS[i + 1]) == 0 then
    redis.call('SET', KEYS[i], ARGV[at + 2], 'PX', ARGV[1])
    flag = 1
  end
  if flag == 1 then
    local score = string.format('%d.%04d', until_ms, tonumber(ARGV[at + 1]) * 625)
    redis.call('ZADD', KEYS[1], 'XX', score, ARGV[at])
  end
  held[#held + 1] = flag
end
return held
"""

# arq's finish, done only by the lease holder: worker.state.queue.FINISH_FUNCTION says what it does.
FINISH_SCRIPT = FINISH_FUNCTION + "return finish_job(KEYS, ARGV)"


def tried_score(ms: int, job_try: int) -> str:
    """A queue score of ``ms`` that also counts ``job_try`` starts, in its sixteenths."""
    return f"{int(ms)}.{min(job_try, 15) * 625:04d}"


class JobLeases:
    """The job leases one worker holds, renewed in one round trip per beat whatever their number.

    Each beat renews only the leases at least one beat old (set by their claim or their last
    renewal): a younger lease has more than a beat's time to live beyond the next beat, so
    renewing it now would buy nothing but a command per job."""

    def __init__(
        self,
        redis: Redis,
        queue_name: str,
        worker_id: str,
        lease_ms: int = LEASE_MS,
        clock: Callable[[], float] = time.monotonic,
        redis_clock: RedisClock | None = None,
    ) -> None:
        self.token = holder_token(worker_id)
        self.lease_ms = lease_ms
        self.renew_every_s = lease_ms / 1000 * RENEW_SHARE
        self._queue_name = queue_name
        self._clock = clock
        self._redis_clock = redis_clock or RedisClock(redis)
        self._held: dict[str, int] = {}  # job id -> its try
        self._set_at: dict[str, float] = {}  # job id -> when its lease was last set (clock)
        self._values: dict[str, str] = {}  # job id -> its lease's value, as its claim wrote it
        self._renew = redis.register_script(RENEW_SCRIPT)
        self._finish = redis.register_script(FINISH_SCRIPT)

    def value(self, now_ms: int) -> str:
        """The in-progress key's value for a claim made now."""
        return f"{self.token}@{now_ms}"

    def hold(
        self, job_id: str, job_try: int = 1, claimed_at: float | None = None, value: str | None = None
    ) -> None:
        """Hold a job this worker claimed (``claimed_at``: the clock before the claim was sent, by
        default now; ``value``: the lease's value the claim wrote, by default one of now); holding
        it again only updates its try, or with a new claim's value, its lease too."""
        self._held[job_id] = job_try
        if value is not None:
            self._values[job_id] = value
            self._set_at[job_id] = self._clock() if claimed_at is None else claimed_at
        else:
            self._values.setdefault(job_id, self.value(int(time.time() * 1000)))
            self._set_at.setdefault(job_id, self._clock() if claimed_at is None else claimed_at)

    def release(self, job_id: str) -> None:
        self._held.pop(job_id, None)
        self._set_at.pop(job_id, None)
        self._values.pop(job_id, None)

    @property
    def held(self) -> frozenset[str]:
        return frozenset(self._held)

    async def renew(self) -> set[str]:
        """Extend the leases this worker holds that are a beat old; returns the job ids whose lease
        it has lost (a lease is found lost by the beat that renews it)."""
        sent_at = self._clock()
        oldest = sent_at - self.renew_every_s
        held = sorted((j, t) for j, t in self._held.items() if self._set_at.get(j, -math.inf) <= oldest)
        if not held:
            return set()
        job_ids = [job_id for job_id, _ in held]
        pairs = [key for job_id in job_ids for key in (keys.arq_in_progress(job_id), keys.result(job_id))]
        tries = [part for job_id, job_try in held for part in (job_id, job_try, self._values[job_id])]
        flags = await self._renew(
            keys=[self._queue_name, *pairs],
            args=[self.lease_ms, self.token, await self._redis_clock.now_ms(), *tries],
        )
        lost = {job_id for job_id, flag in zip(job_ids, flags, strict=True) if not int(flag)}
        lost &= set(self._held)  # a job that finished while the script ran was not lost, only done
        for job_id in job_ids:
            if job_id in lost:
                self.release(job_id)
            elif job_id in self._held:
                self._set_at[job_id] = sent_at
        return lost

    async def finish(
        self,
        job_id: str,
        *,
        finish: bool,
        arq_result: bytes | None,
        result_ttl_ms: int,
        requeue_score: int | None = None,
    ) -> bool:
        """arq's end-of-job bookkeeping if this worker still holds the job; False when it does not.

        ``requeue_score`` is the score (ms) a job handed back (``finish`` false) is queued with:
        its score before the claim moved it, plus whatever delay arq's Retry asked for. Its try
        stays counted in the score's sixteenths (worker.state.queue).
        """
        job_try = self._held.get(job_id, 1)
        self.release(job_id)
        requeue = None if requeue_score is None else tried_score(requeue_score, job_try)
        step = Finish(self._queue_name, job_id, self.token, finish, arq_result, result_ttl_ms, requeue)
        return bool(int(await self._finish(keys=step.keys(), args=step.args())))

    def finishing(self, job_id: str, arq_result: bytes | None, result_ttl_ms: int) -> Finish:
        """The finish of a job that ended, for the result's write to carry (``worker.state.results``)."""
        return Finish(self._queue_name, job_id, self.token, True, arq_result, result_ttl_ms)
