"""A percentile read from the minute buckets is never shown past the slowest job recorded:
any set of durations and waits, written by the workers' own script, read as the dashboard reads it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis as syncredis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worker.dashboard.history import parse_bucket, percentile, summarize
from worker.state import activity, keys

NOW = 1_800_000_000.0
DURATIONS = st.lists(
    st.one_of(
        st.floats(min_value=0.0, max_value=3_600_000.0),
        st.sampled_from([20_000.0, 19_999.9, 0.0, 0.124, 1e12]),
    ),
    min_size=1,
    max_size=40,
)


@pytest.fixture
def sync_redis(redis_url: str) -> Iterator[syncredis.Redis]:
    client = syncredis.Redis.from_url(redis_url)
    try:
        yield client
    finally:
        client.close()


def recorded(client: syncredis.Redis, durations: list[float], waits: list[float]) -> dict[str, float | None]:
    queue = f"research-test:{uuid.uuid4().hex[:12]}:queue"
    try:
        with client.pipeline(transaction=True) as tx:
            for index, ms in enumerate(durations):
                run = activity.JobRun("w", 1, waits[index % len(waits)])
                result = {"ok": True, "tool": "fetch_page", "job_id": f"j{index}", "url": "https://a.test/"}
                activity.record(tx, queue, result, "ok", ms, run, now=NOW)  # type: ignore[arg-type]
            tx.execute()
        bucket = parse_bucket(client.hgetall(keys.minute(queue, activity.minute_of(NOW))))
    finally:
        client.delete(keys.minute(queue, activity.minute_of(NOW)), keys.recent(queue))
    history = summarize([NOW], [bucket])
    [stats] = history.tools
    return {
        "p50": stats.duration_p50_ms,
        "p95": stats.duration_p95_ms,
        "wait_p95": stats.wait_p95_ms,
        "minute_wait_p95": history.minutes[0].wait_p95_ms,
    }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(durations=DURATIONS, waits=DURATIONS)
def test_no_percentile_is_shown_past_the_slowest_job(
    sync_redis: syncredis.Redis, durations: list[float], waits: list[float]
) -> None:
    shown = recorded(sync_redis, durations, waits)
    slowest = max(durations)
    assert shown["p50"] is not None and shown["p95"] is not None
    assert shown["p50"] <= shown["p95"] <= slowest
    assert shown["wait_p95"] is not None and shown["wait_p95"] <= max(waits)
    assert shown["minute_wait_p95"] is not None and shown["minute_wait_p95"] <= max(waits)


def test_twenty_jobs_of_twenty_seconds_show_a_p95_of_twenty_seconds_not_21_2(
    sync_redis: syncredis.Redis,
) -> None:
    shown = recorded(sync_redis, [20_000.0] * 20, [5.0])
    assert shown["p95"] == pytest.approx(20_000.0)
    # The bin's middle, which was shown before: past the slowest job.
    assert activity.bin_value_ms(activity.bin_of(20_000.0)) > 20_000.0


@given(
    histogram=st.dictionaries(
        st.integers(min_value=activity.MIN_BIN, max_value=activity.MAX_BIN), st.integers(1, 100), min_size=1
    ),
    q=st.floats(min_value=0.0, max_value=1.0),
    ceiling=st.floats(min_value=0.0, max_value=1e9),
)
def test_percentile_never_passes_its_ceiling(histogram: dict[int, int], q: float, ceiling: float) -> None:
    value = percentile(histogram, q, ceiling)
    assert value is not None and value <= ceiling
    assert percentile(histogram, q, None) is not None
