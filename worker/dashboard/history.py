"""The last hour, read from the workers' minute buckets (``worker.state.activity``): jobs per minute by
outcome, the deepest queue of each minute, p95 queue wait per minute, and per-tool statistics.

Sixty HGETALLs in one pipeline. The buckets hold counters only, so a percentile here is read from
histogram bins: within 9 % of the true value (the bins are a quarter of a doubling wide), and
never more than the slowest job the buckets recorded (a bin's middle can lie past it: 21.2 s was
shown as the p95 of jobs none slower than 20.0 s).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from redis.asyncio import Redis

import worker.dashboard.decode as decode
from worker.state import activity, keys
from worker.state.result_records import OK

HOUR_MINUTES = 60
# Outcomes drawn as their own series; more than this (only garbage could make it) fold into "other".
MAX_SERIES = 20
MAX_TOOLS = 20
OTHER = "other"


@dataclass(frozen=True)
class Minute:
    start: float  # unix seconds
    jobs: dict[str, int]  # outcome -> jobs finished in this minute
    depth: int | None  # the deepest queue a job finishing in this minute saw; None: no job finished
    wait_p95_ms: float | None


@dataclass(frozen=True)
class ToolStats:
    tool: str
    jobs: int
    ok: int
    ok_share: float | None
    duration_p50_ms: float | None
    duration_p95_ms: float | None
    wait_p95_ms: float | None
    cache_hits: int


@dataclass(frozen=True)
class History:
    minutes: list[Minute]  # oldest first, the current minute last
    outcomes: list[str]  # every outcome seen in the hour: "ok" first, then the most frequent
    tools: list[ToolStats]

    @property
    def jobs(self) -> int:
        return sum(sum(minute.jobs.values()) for minute in self.minutes)


@dataclass
class Bucket:
    """One minute's hash, parsed: anything that is not a field the workers write is ignored."""

    jobs: Counter[tuple[str, str]] = field(default_factory=Counter)
    durations: defaultdict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    waits: defaultdict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    hits: Counter[str] = field(default_factory=Counter)
    depth: int | None = None
    # The slowest duration and queue wait per tool, in ms (buckets written before they were kept
    # have none: their percentiles are not held under anything).
    slowest: dict[str, float] = field(default_factory=dict)
    slowest_wait: dict[str, float] = field(default_factory=dict)


async def read_history(redis: Redis, queue_name: str, now: float) -> History:
    current = activity.minute_of(now)
    minutes = range(current - HOUR_MINUTES + 1, current + 1)
    async with redis.pipeline(transaction=False) as pipe:
        for minute in minutes:
            pipe.hgetall(keys.minute(queue_name, minute))
        replies = await pipe.execute(raise_on_error=False)
    buckets = [parse_bucket(reply) if isinstance(reply, dict) else Bucket() for reply in replies]
    return summarize([minute * activity.MINUTE_S for minute in minutes], buckets)


def parse_bucket(fields: Mapping[object, object]) -> Bucket:
    bucket = Bucket()
    for raw_name, raw_value in fields.items():
        name = decode.text(raw_name)
        value = decode.integer_or_none(raw_value)
        if value is None or value < 0:
            continue
        kind, _, rest = name.partition(":")
        if name == activity.DEPTH_FIELD:
            bucket.depth = value
        elif kind == "n":
            tool, sep, outcome = rest.partition(":")
            if sep and tool and outcome:
                bucket.jobs[(tool, outcome)] += value
        elif kind in ("d", "w"):
            tool, sep, index = rest.rpartition(":")
            bin_index = decode.integer_or_none(index) if sep and tool else None
            if bin_index is not None and activity.MIN_BIN <= bin_index <= activity.MAX_BIN:
                histograms = bucket.durations if kind == "d" else bucket.waits
                histograms[tool][bin_index] += value
        elif kind == "h" and rest:
            bucket.hits[rest] += value
        elif kind in (activity.SLOWEST_DURATION, activity.SLOWEST_WAIT) and rest:
            slowest = bucket.slowest if kind == activity.SLOWEST_DURATION else bucket.slowest_wait
            slowest[rest] = max(slowest.get(rest, 0.0), value / 1000)
    return bucket


def summarize(starts: list[float], buckets: list[Bucket]) -> History:
    by_outcome: Counter[str] = Counter()
    for bucket in buckets:
        for (_, outcome), count in bucket.jobs.items():
            by_outcome[outcome] += count
    ranked = sorted(by_outcome, key=lambda outcome: (outcome != OK, -by_outcome[outcome], outcome))
    shown = set(ranked[:MAX_SERIES] if len(ranked) <= MAX_SERIES else ranked[: MAX_SERIES - 1])
    outcomes = [outcome for outcome in ranked if outcome in shown]
    if len(shown) < len(ranked):
        outcomes.append(OTHER)
    minutes = []
    for start, bucket in zip(starts, buckets, strict=True):
        jobs: Counter[str] = Counter()
        for (_, outcome), count in bucket.jobs.items():
            jobs[outcome if outcome in shown else OTHER] += count
        waits = merge(bucket.waits.values())
        ceiling = slowest_of([bucket.slowest_wait], bucket.waits)
        minutes.append(Minute(start, dict(jobs), bucket.depth, percentile(waits, 0.95, ceiling)))
    return History(minutes, outcomes, tool_stats(buckets))


def tool_stats(buckets: list[Bucket]) -> list[ToolStats]:
    jobs: Counter[str] = Counter()
    ok: Counter[str] = Counter()
    durations: defaultdict[str, Counter[int]] = defaultdict(Counter)
    waits: defaultdict[str, Counter[int]] = defaultdict(Counter)
    hits: Counter[str] = Counter()
    for bucket in buckets:
        for (tool, outcome), count in bucket.jobs.items():
            jobs[tool] += count
            if outcome == OK:
                ok[tool] += count
        for tool, histogram in bucket.durations.items():
            durations[tool].update(histogram)
        for tool, histogram in bucket.waits.items():
            waits[tool].update(histogram)
        hits.update(bucket.hits)
    return [
        ToolStats(
            tool=tool,
            jobs=count,
            ok=ok[tool],
            ok_share=ok[tool] / count if count else None,
            duration_p50_ms=percentile(durations[tool], 0.50, slowest_tool(buckets, tool, wait=False)),
            duration_p95_ms=percentile(durations[tool], 0.95, slowest_tool(buckets, tool, wait=False)),
            wait_p95_ms=percentile(waits[tool], 0.95, slowest_tool(buckets, tool, wait=True)),
            cache_hits=hits[tool],
        )
        for tool, count in sorted(jobs.items(), key=lambda pair: (-pair[1], pair[0]))[:MAX_TOOLS]
    ]


def merge(histograms: Iterable[Mapping[int, int]]) -> Counter[int]:
    merged: Counter[int] = Counter()
    for histogram in histograms:
        merged.update(histogram)
    return merged


def slowest_tool(buckets: list[Bucket], tool: str, *, wait: bool) -> float | None:
    """The slowest duration (or queue wait) of ``tool`` in the hour; None when a bucket that
    counted it kept no maximum (written by an older worker)."""
    slowest: list[float] = []
    for bucket in buckets:
        histogram = (bucket.waits if wait else bucket.durations).get(tool)
        if not histogram:
            continue
        kept = (bucket.slowest_wait if wait else bucket.slowest).get(tool)
        if kept is None:
            return None
        slowest.append(kept)
    return max(slowest, default=None)


def slowest_of(maxima: list[dict[str, float]], histograms: Mapping[str, Mapping[int, int]]) -> float | None:
    """The slowest over every tool with a histogram; None when one of them kept no maximum."""
    found: list[float] = []
    for tool, histogram in histograms.items():
        if not histogram:
            continue
        kept = [m[tool] for m in maxima if tool in m]
        if not kept:
            return None
        found.append(max(kept))
    return max(found, default=None)


def percentile(histogram: Mapping[int, int], q: float, ceiling: float | None = None) -> float | None:
    """The nearest-rank percentile of a binned histogram, as its bin's representative value, and
    never more than ``ceiling`` (the slowest value recorded), which a bin's middle may pass."""
    total = sum(histogram.values())
    if total <= 0:
        return None
    rank = max(1, math.ceil(q * total))
    seen = 0
    value = activity.bin_value_ms(max(histogram))
    for index in sorted(histogram):
        seen += histogram[index]
        if seen >= rank:
            value = activity.bin_value_ms(index)
            break
    return value if ceiling is None else min(value, ceiling)
