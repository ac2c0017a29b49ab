"""The results of jobs in Redis: written with their TTL and a wake-up for the client that waits on
them, and read back.

What a result is, and its JSON, is ``worker.state.result_records``. The first result written for a
job is the one that stands: a worker that lost the job's lease and finishes late finds it written
and writes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from worker.serialization import JsonObject, dumps, loads_object
from worker.state import activity, keys
from worker.state.queue import FINISH_FUNCTION, Finish, blocking_peek
from worker.state.result_records import Result, as_json, outcome, parse, parse_object, unstored

if TYPE_CHECKING:
    from redis.asyncio import Redis

# The wake-up list carries a copy of the result so a waiting client needs no second round trip;
# it is short-lived because only a client already waiting (or about to) needs it: a later reader
# reads the result key.
DONE_TTL_MS = 60_000


# KEYS: the result, its wake-up list, the queue's recent list, then, for a job that ended, arq's
# finish's five keys (worker.state.queue.FINISH_FUNCTION). ARGV: the result, its TTL ms, the
# wake-up's TTL ms, the dashboard's line, the recent list's length, the slack before it is cut,
# then the finish's six arguments. Returns {-1, the result that was there first} when another
# write stands, else {what the finish did: 1 done, 0 not this worker's job, -1 none asked}.
#
# SET NX is the first-wins write (the standing result is read only when there is one); the
# wake-up and the line go with it, in the same atomic step, and only with the write that stands.
# The job's finish for arq goes with it too: one step, so a job never leaves the queue without its
# result, nor keeps a written result waiting on a second round trip. A job whose result stood
# already is finished by its worker as before, with arq's record of the result that stands. (SET
# NX GET would read and write in one command, but only from Redis 7.0; the embedded Redis is 6.2.)
WRITE_SCRIPT = (
    FINISH_FUNCTION
    + """
if not redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX') then
  return {-1, redis.call('GET', KEYS[1])}
end
redis.call('RPUSH', KEYS[2], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
if redis.call('LPUSH', KEYS[3], ARGV[4]) > tonumber(ARGV[5]) + tonumber(ARGV[6]) then
  redis.call('LTRIM', KEYS[3], 0, tonumber(ARGV[5]) - 1)
end
if #KEYS > 3 then
  return {finish_job({unpack(KEYS, 4, 8)}, {unpack(ARGV, 7, 12)})}
end
return {-1}
"""
)


@dataclass(frozen=True)
class Written:
    """What a result's write did: ``standing`` is the result written before, when one was (this one
    was not written); ``finished`` whether the finish it carried was done (None: none carried, or
    not tried because another result stood)."""

    standing: Result | None
    finished: bool | None = None


class ResultStore:
    def __init__(self, redis: Redis, *, ttl_s: int, queue_name: str) -> None:
        self._redis = redis
        self._ttl_ms = ttl_s * 1000
        self._queue_name = queue_name
        self._script = redis.register_script(WRITE_SCRIPT)
        self.buckets = activity.Buckets(redis, queue_name)

    async def write(
        self,
        result: Result,
        duration_ms: float,
        run: activity.JobRun | None = None,
        finish: Callable[[JsonObject], Finish] | None = None,
    ) -> Written:
        """Write the job's result unless one is written already, with arq's finish of the job (what
        ``finish`` makes of the result's JSON) when it is given and this write stands.

        Result, wake-up, dashboard line and finish go in one script, only with the first write;
        the minute counters follow in this worker's next bucket write. Serialization errors raise
        before anything is sent.
        """
        job_id = result.head.job_id
        shown = as_json(result)
        payload = dumps(shown)
        at = time.time()
        kind = outcome(result)
        keys_ = [keys.result(job_id), keys.done(job_id), keys.recent(self._queue_name)]
        args: list[bytes | int | str] = [
            payload,
            self._ttl_ms,
            min(self._ttl_ms, DONE_TTL_MS),
            dumps(activity.line(shown, kind, duration_ms, run, at)),
            activity.RECENT_LIMIT,
            activity.RECENT_SLACK,
        ]
        if finish is not None:
            step = finish(shown)
            keys_ += step.keys()
            args += step.args()
        reply = await self._script(keys=keys_, args=args)
        if len(reply) > 1:
            return Written(parse(bytes(reply[1])) or unstored(result.head))
        self.buckets.add(
            at,
            activity.counters(shown, kind, duration_ms, run),
            activity.slowest(shown, duration_ms, run),
        )
        done = int(reply[0])
        return Written(None, None if done < 0 else bool(done))

    async def read(self, job_id: str) -> Result | None:
        return parse_object(await self.read_json(job_id))

    async def wait(self, job_id: str, timeout_s: float) -> Result | None:
        return parse_object(await self.wait_json(job_id, timeout_s))

    # The client hands the stored object on as it was written (the contract's result object, and
    # whatever a newer worker adds to it), so it reads the JSON, not the record.
    async def read_json(self, job_id: str) -> JsonObject | None:
        return loads_object(await self._redis.get(keys.result(job_id)))

    async def wait_json(self, job_id: str, timeout_s: float) -> JsonObject | None:
        """Block until the job's result is written (or the time runs out); no polling."""
        return loads_object(await blocking_peek(self._redis, keys.done(job_id), timeout_s))
