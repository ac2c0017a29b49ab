"""What workers record for the dashboard beside each result: a line per finished job, and per-minute
counters for the charts of the last hour.

The line is written in the result's own script (``ResultStore.write``); the counters are added up
in the worker (``Buckets``) and written once a second for every job that finished in it, after
their results: the dashboard never counts an outcome whose result is missing, and a busy worker
writes a few commands a second for its buckets rather than six per job. Neither holds page text:
the line keeps short previews of the target and of the worker's own error message, the counters
hold numbers only.

The minute bucket (``keys.minute``) is one hash per queue and minute: jobs by tool and outcome,
duration and queue-wait histograms by tool with the slowest of each (so a percentile read from
the bins is never shown past the slowest job), cache hits by tool, and the deepest queue a worker
saw as it wrote the bucket. It expires on its own.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, NotRequired, TypedDict

from redis.exceptions import RedisError, ResponseError

from worker.serialization import JsonObject, dumps
from worker.state import keys
from worker.state.memory import is_out_of_memory

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.asyncio.client import Pipeline

RECENT_LIMIT = 1000
# The recent list is cut back to RECENT_LIMIT only once it is this much longer: one LTRIM per fifty
# results instead of one each. Readers read the first RECENT_LIMIT.
RECENT_SLACK = 50
# How long a worker adds up its jobs' counters before writing them.
FLUSH_EVERY_S = 1.0
TARGET_PREVIEW_CHARS = 200
MESSAGE_PREVIEW_CHARS = 200
MINUTE_S = 60
# The charts show an hour; a bucket lives an hour past that, so the oldest minute drawn is whole.
BUCKET_TTL_S = 2 * 3600
# Histogram bins on a log scale, four per doubling: a percentile read back from them is within 9 %
# of the true value, and an hour of one tool's durations fits in a few dozen fields.
BINS_PER_OCTAVE = 4
FLOOR_MS = 0.125
MIN_BIN = -12  # everything under FLOOR_MS
MAX_BIN = 80  # about 17 minutes and beyond
DEPTH_FIELD = "depth"

# KEYS[1]: the minute bucket (a hash). KEYS[2]: the queue (arq's sorted set), only read.
# ARGV[1]: the bucket's expiry (unix seconds); ARGV[2..]: pairs of a hash field and how much to add,
# or "=N" to raise the field to N when N is more (the slowest job's microseconds).
# A script because the queue's depth must be read and written in one step: commands queued on a
# transaction cannot use each other's replies. It runs whole, so two workers writing the same
# minute cannot overwrite a deeper depth (or a slower maximum) with a shallower one.
MINUTE_SCRIPT = """
for i = 2, #ARGV, 2 do
  local name, value = ARGV[i], ARGV[i + 1]
  if string.sub(value, 1, 1) == '=' then
    local seen = tonumber(redis.call('HGET', KEYS[1], name)) or -1
    if tonumber(string.sub(value, 2)) > seen then redis.call('HSET', KEYS[1], name, string.sub(value, 2)) end
  else
    redis.call('HINCRBY', KEYS[1], name, value)
  end
end
local depth = redis.call('ZCARD', KEYS[2])
local seen = tonumber(redis.call('HGET', KEYS[1], 'depth')) or -1
if depth > seen then redis.call('HSET', KEYS[1], 'depth', depth) end
redis.call('EXPIREAT', KEYS[1], ARGV[1])
return depth
"""


@dataclass(frozen=True)
class JobRun:
    """How a job ran, beside what it returned: what the dashboard shows that the result does not say."""

    worker_id: str
    job_try: int | None = None
    queue_wait_ms: float | None = None
    # ``[name, start, duration]`` per measured phase, milliseconds from the job's start
    # (worker.tracing.phases): the job page's breakdown, from the measurements spans are made of.
    phases: list[list[str | float]] | None = None


class Line(TypedDict):
    """The dashboard's line for one finished job."""

    job_id: str | None
    tool: str | None
    report_id: str | None
    outcome: str
    target: str
    message: str | None
    status: int | None
    cached: bool | None
    provider: str | None
    at: float
    duration_ms: float
    queue_wait_ms: float | None
    worker_id: str | None
    tries: int | None
    phases: NotRequired[list[list[str | float]]]  # only when the worker measured some


def line(result: JsonObject, outcome: str, duration_ms: float, run: JobRun | None, at: float) -> Line:
    """Never page text: a preview of the target (URL or query) and of the worker's error message."""
    made = _line(result, outcome, duration_ms, run, at)
    if run is not None and run.phases:
        made["phases"] = run.phases
    return made


def _line(result: JsonObject, outcome: str, duration_ms: float, run: JobRun | None, at: float) -> Line:
    target = result.get("url") or result.get("query") or ""
    error = result.get("error")
    message = error.get("message") if isinstance(error, dict) else None
    status = result.get("status")
    cached = result.get("cached")
    provider = result.get("provider")
    return {
        "job_id": _text(result.get("job_id")),
        "tool": _text(result.get("tool")),
        "report_id": _text(result.get("report_id")),
        "outcome": outcome,
        "target": str(target)[:TARGET_PREVIEW_CHARS],
        "message": str(message)[:MESSAGE_PREVIEW_CHARS] if message is not None else None,
        "status": status if isinstance(status, int) and not isinstance(status, bool) else None,
        "cached": cached if isinstance(cached, bool) else None,
        "provider": str(provider)[:60] if provider is not None else None,
        "at": at,
        "duration_ms": round(duration_ms, 1),
        "queue_wait_ms": round(run.queue_wait_ms, 1) if run and run.queue_wait_ms is not None else None,
        "worker_id": run.worker_id if run else None,
        "tries": run.job_try if run else None,
    }


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def bin_of(ms: float) -> int:
    """The histogram bin a duration falls in."""
    if not ms > FLOOR_MS:  # also NaN
        return MIN_BIN
    if ms >= 2 ** (MAX_BIN / BINS_PER_OCTAVE):  # also infinity
        return MAX_BIN
    return max(MIN_BIN, math.floor(BINS_PER_OCTAVE * math.log2(ms)))


def bin_value_ms(index: int) -> float:
    """A bin's representative duration: the geometric middle of its bounds."""
    return float(2 ** ((index + 0.5) / BINS_PER_OCTAVE))


def count_field(tool: str, outcome: str) -> str:
    return f"n:{tool}:{outcome}"


def duration_field(tool: str, ms: float) -> str:
    return f"d:{tool}:{bin_of(ms)}"


def wait_field(tool: str, ms: float) -> str:
    return f"w:{tool}:{bin_of(ms)}"


def cache_hit_field(tool: str) -> str:
    return f"h:{tool}"


# The slowest duration and queue wait of a tool in the minute, in whole microseconds (rounded
# down, so the ceiling a percentile is held under is never above the true slowest).
SLOWEST_DURATION = "xd"
SLOWEST_WAIT = "xw"
MAX_MICROSECONDS = 10**15  # past a day by far: a figure beyond is not a duration


def microseconds(ms: float) -> int:
    micro = int(ms * 1000) if ms > 0 and ms == ms else 0  # NaN and negatives count as 0
    return min(micro, MAX_MICROSECONDS)


def slowest(result: JsonObject, duration_ms: float, run: JobRun | None = None) -> dict[str, int]:
    """The bucket fields one finished job raises to its own figures (the slowest of the minute)."""
    tool = str(result.get("tool") or "unknown")
    figures = {f"{SLOWEST_DURATION}:{tool}": microseconds(duration_ms)}
    if run and run.queue_wait_ms is not None:
        figures[f"{SLOWEST_WAIT}:{tool}"] = microseconds(run.queue_wait_ms)
    return figures


def pairs_of(counts: Mapping[str, int], maxima: Mapping[str, int]) -> list[str]:
    """The script's arguments: each counter with what to add, each maximum as ``=N``."""
    pairs = [part for name, count in counts.items() for part in (name, str(count))]
    return pairs + [part for name, value in maxima.items() for part in (name, f"={value}")]


def minute_of(at: float) -> int:
    return int(at // MINUTE_S)


def counters(result: JsonObject, outcome: str, duration_ms: float, run: JobRun | None = None) -> list[str]:
    """The bucket fields one finished job adds one to."""
    tool = str(result.get("tool") or "unknown")
    fields = [count_field(tool, outcome), duration_field(tool, duration_ms)]
    if run and run.queue_wait_ms is not None:
        fields.append(wait_field(tool, run.queue_wait_ms))
    if result.get("cached") is True:
        fields.append(cache_hit_field(tool))
    return fields


def expiry_of(minute: int) -> str:
    return str((minute + 1) * MINUTE_S + BUCKET_TTL_S)


def record(
    tx: Pipeline,
    queue_name: str,
    result: JsonObject,
    outcome: str,
    duration_ms: float,
    run: JobRun | None = None,
    *,
    now: float | None = None,
) -> None:
    """Queue one job's line and bucket on a transaction at once: three commands, whatever the job.

    (A worker writes the line with the result and adds the bucket up in ``Buckets``; this is the
    same record in one step, for tools and tests that write a finished job themselves.)
    """
    at = time.time() if now is None else now
    recent = keys.recent(queue_name)
    tx.lpush(recent, dumps(line(result, outcome, duration_ms, run, at)))
    tx.ltrim(recent, 0, RECENT_LIMIT - 1)
    minute = minute_of(at)
    counts = collections.Counter(counters(result, outcome, duration_ms, run))
    pairs = pairs_of(counts, slowest(result, duration_ms, run))
    tx.eval(MINUTE_SCRIPT, 2, keys.minute(queue_name, minute), queue_name, expiry_of(minute), *pairs)


async def sample_depth(redis: Redis, queue_name: str, *, now: float | None = None) -> None:
    """Note the queue's depth in the current minute's bucket, from a worker's health beat, so the
    chart shows a queue that grows while no job finishes (a stuck or starved worker pool)."""
    minute = minute_of(time.time() if now is None else now)
    try:
        await redis.eval(  # type: ignore[misc]
            MINUTE_SCRIPT, 2, keys.minute(queue_name, minute), queue_name, expiry_of(minute)
        )
    except ResponseError as exc:
        # A chart's sample is not worth the health beat that follows it: at Redis's memory limit
        # it is skipped, and the beat still goes out.
        if not is_out_of_memory(exc):
            raise


class Buckets:
    """One worker's minute counters, added up in memory and written at most once a second.

    A write that fails (Redis away) keeps its counts for the next one; ``flush`` at shutdown
    writes what is left.
    """

    def __init__(self, redis: Redis, queue_name: str, every_s: float = FLUSH_EVERY_S) -> None:
        self._redis = redis
        self._queue_name = queue_name
        self._every_s = every_s
        self._pending: dict[int, collections.Counter[str]] = {}
        self._slowest: dict[int, dict[str, int]] = {}
        self._writer: asyncio.Task[None] | None = None
        self._script = redis.register_script(MINUTE_SCRIPT)

    def add(self, at: float, fields: list[str], slowest: Mapping[str, int] | None = None) -> None:
        minute = minute_of(at)
        self._pending.setdefault(minute, collections.Counter()).update(fields)
        kept = self._slowest.setdefault(minute, {})
        for name, value in (slowest or {}).items():
            kept[name] = max(value, kept.get(name, value))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write_soon())

    async def _write_soon(self) -> None:
        await asyncio.sleep(self._every_s)
        with contextlib.suppress(RedisError, OSError):
            await self.flush()

    async def flush(self) -> None:
        """Write every count added so far (counts that fail to write are kept for the next try)."""
        pending, self._pending = self._pending, {}
        maxima, self._slowest = self._slowest, {}
        for minute, counts in sorted(pending.items()):
            pairs = pairs_of(counts, maxima.get(minute, {}))
            try:
                await self._script(
                    keys=[keys.minute(self._queue_name, minute), self._queue_name],
                    args=[expiry_of(minute), *pairs],
                )
            except BaseException:
                for later, rest in pending.items():
                    if later >= minute:
                        self._pending.setdefault(later, collections.Counter()).update(rest)
                        for name, value in maxima.get(later, {}).items():
                            kept = self._slowest.setdefault(later, {})
                            kept[name] = max(value, kept.get(name, value))
                raise

    async def close(self) -> None:
        if self._writer is not None and not self._writer.done():
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
        with contextlib.suppress(RedisError, OSError):
            await self.flush()
