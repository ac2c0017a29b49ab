"""The last hour read back from the minute buckets: per-tool statistics and per-minute series."""

from __future__ import annotations

import math
import time

import redis.asyncio as aioredis
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from tests.test_dashboard import get_json, record, serving
from worker.config import Settings
from worker.dashboard.history import HOUR_MINUTES, Bucket, parse_bucket, percentile, read_history, summarize
from worker.state import activity, keys

TOLERANCE = 2 ** (1 / 8) - 1 + 1e-9  # half a bin, on a log scale


def exact_percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


@given(
    st.lists(st.floats(min_value=0.2, max_value=500_000, allow_nan=False), min_size=1, max_size=300),
    st.sampled_from([0.5, 0.9, 0.95, 0.99]),
)
def test_a_percentile_read_from_the_bins_is_within_half_a_bin_of_the_true_one(
    values: list[float], q: float
) -> None:
    histogram: dict[int, int] = {}
    for value in values:
        index = activity.bin_of(value)
        histogram[index] = histogram.get(index, 0) + 1
    estimate = percentile(histogram, q)
    true = exact_percentile(values, q)
    assert estimate is not None
    assert abs(estimate - true) / true <= TOLERANCE


def test_an_empty_histogram_has_no_percentile() -> None:
    assert percentile({}, 0.95) is None


async def test_per_tool_statistics_count_jobs_ok_share_latencies_and_cache_hits(
    settings: Settings, redis: aioredis.Redis
) -> None:
    now = time.time()
    fast = activity.JobRun("w", 1, 2.0)
    slow_wait = activity.JobRun("w", 1, 400.0)
    for index in range(20):
        fetched = {"ok": True, "tool": "fetch_page", "report_id": "r", "job_id": f"f{index}"}
        fetched["cached"] = index < 5
        run = slow_wait if index == 19 else fast
        await record(
            redis, settings, fetched, duration_ms=100.0 if index < 18 else 900.0, run=run, at=now - index * 60
        )
    for index in range(4):
        failed = {"ok": False, "tool": "web_search", "report_id": "r", "job_id": f"s{index}", "query": "q"}
        failed["error"] = {"kind": "upstream_error", "message": "provider said no"}
        await record(redis, settings, failed, duration_ms=50.0, run=fast, at=now - 30)
    found = {"ok": True, "tool": "web_search", "report_id": "r", "job_id": "s-ok", "query": "q"}
    await record(redis, settings, found, duration_ms=50.0, run=fast, at=now)

    history = await read_history(redis, settings.queue_name, now)
    stats = {row.tool: row for row in history.tools}
    fetch, search = stats["fetch_page"], stats["web_search"]
    assert (fetch.jobs, fetch.ok, fetch.ok_share, fetch.cache_hits) == (20, 20, 1.0, 5)
    assert (search.jobs, search.ok, search.ok_share, search.cache_hits) == (5, 1, 0.2, 0)
    assert abs(fetch.duration_p50_ms - 100.0) / 100.0 <= TOLERANCE  # type: ignore[operator]
    assert abs(fetch.duration_p95_ms - 900.0) / 900.0 <= TOLERANCE  # type: ignore[operator]
    assert abs(fetch.wait_p95_ms - 2.0) / 2.0 <= TOLERANCE  # type: ignore[operator]
    assert [row.tool for row in history.tools] == ["fetch_page", "web_search"]  # the busiest first
    assert history.outcomes == ["ok", "upstream_error"]
    assert history.jobs == 25


async def test_the_hour_is_the_last_sixty_minutes_and_older_buckets_do_not_count(
    settings: Settings, redis: aioredis.Redis
) -> None:
    now = time.time()
    done = {"ok": True, "tool": "web_search", "report_id": "r", "job_id": "j", "query": "q"}
    for minutes_ago in (0, 59, 60, 61, 90):
        await record(redis, settings, done, run=activity.JobRun("w"), at=now - minutes_ago * 60)
    history = await read_history(redis, settings.queue_name, now)
    assert len(history.minutes) == HOUR_MINUTES
    assert history.minutes[-1].start == activity.minute_of(now) * 60
    assert history.minutes[0].start == (activity.minute_of(now) - 59) * 60
    assert [sum(m.jobs.values()) for m in history.minutes].count(1) == 2
    assert history.jobs == 2


def test_fields_the_workers_never_write_are_ignored() -> None:
    parsed = parse_bucket(
        {
            b"n:fetch_page:ok": b"3",
            b"n:fetch_page": b"4",
            b"n::ok": b"1",
            b"d:fetch_page:9999": b"1",
            b"d:fetch_page:x": b"1",
            b"w:fetch_page:4": b"-2",
            b"h:": b"1",
            b"depth": b"not a number",
            b"zzz": b"1",
            b"d:fetch_page:4": b"2",
        }
    )
    assert dict(parsed.jobs) == {("fetch_page", "ok"): 3}
    assert {tool: dict(h) for tool, h in parsed.durations.items()} == {"fetch_page": {4: 2}}
    assert not parsed.waits and not parsed.hits and parsed.depth is None


def test_more_outcomes_than_colours_fold_the_rarest_into_other() -> None:
    bucket = Bucket()
    for index in range(30):
        bucket.jobs[("t", f"kind_{index:02d}")] = 100 - index
    history = summarize([0.0], [bucket])
    assert len(history.outcomes) == 20
    assert history.outcomes[-1] == "other"
    assert history.minutes[0].jobs["other"] == sum(100 - index for index in range(19, 30))
    assert sum(history.minutes[0].jobs.values()) == sum(100 - index for index in range(30))


@hypothesis_settings(max_examples=30, deadline=None)
@given(st.dictionaries(st.binary(max_size=40), st.binary(max_size=20), max_size=20))
def test_any_bucket_contents_parse_without_error(fields: dict[bytes, bytes]) -> None:
    summarize([0.0], [parse_bucket(fields)])


async def test_the_state_carries_the_hour_for_scripts(settings: Settings, redis: aioredis.Redis) -> None:
    done = {"ok": True, "tool": "web_search", "report_id": "r", "job_id": "j", "query": "q"}
    await record(redis, settings, done, duration_ms=30.0, run=activity.JobRun("w", 1, 1.0))
    await redis.set(keys.minute(settings.queue_name, 1), b"a string, not a hash")  # never read, never a crash
    async with serving(settings) as base:
        status, state = await get_json(f"{base}/api/state")
    assert status == 200
    assert len(state["history"]["minutes"]) == HOUR_MINUTES
    assert state["history"]["minutes"][-1]["jobs"] == {"ok": 1}
    assert state["history"]["tools"][0]["tool"] == "web_search"
