"""What workers record for the dashboard with each result (worker/state/activity.py): a line per job and
a per-minute bucket, in the result's own transaction, a few commands, expiring on their own."""

from __future__ import annotations

import math
import time

import pytest
import redis.asyncio as aioredis
from hypothesis import given
from hypothesis import strategies as st

from tests.support.tools import TEST_TOOLS
from tests.support.workers import running_worker
from tests.test_dashboard import record
from worker.client import ResearchClient
from worker.config import Settings
from worker.serialization import loads
from worker.state import activity, keys

RUN = activity.JobRun("w-7", 2, 12.34)


async def lines(redis: aioredis.Redis, settings: Settings) -> list[dict[str, object]]:
    return [loads(raw) for raw in await redis.lrange(keys.recent(settings.queue_name), 0, -1)]


async def bucket(redis: aioredis.Redis, settings: Settings, at: float) -> dict[str, int]:
    raw = await redis.hgetall(keys.minute(settings.queue_name, activity.minute_of(at)))
    return {name.decode(): int(value) for name, value in raw.items()}


async def test_a_finished_job_adds_three_commands_to_its_results_transaction(
    settings: Settings, redis: aioredis.Redis
) -> None:
    result = {"ok": True, "tool": "fetch_page", "report_id": "r-1", "job_id": "j-1", "cached": True}
    async with redis.pipeline(transaction=True) as tx:
        activity.record(tx, settings.queue_name, result, "ok", 12.0, RUN)
        queued = [command[0][0] for command in tx.command_stack]
        await tx.execute()
    assert queued == ["LPUSH", "LTRIM", "EVAL"]


async def test_the_line_says_what_failed_where_and_how_long_it_waited(
    settings: Settings, redis: aioredis.Redis
) -> None:
    failed = {
        "ok": False,
        "tool": "fetch_page",
        "report_id": "r-1",
        "job_id": "j-2",
        "url": "https://example.org/missing",
        "status": 404,
        "error": {"kind": "http_status", "message": "example.org answered 404"},
    }
    await record(redis, settings, failed, duration_ms=250.04, run=RUN, at=1_000_000.0)
    [line] = await lines(redis, settings)
    assert line == {
        "job_id": "j-2",
        "tool": "fetch_page",
        "report_id": "r-1",
        "outcome": "http_status",
        "target": "https://example.org/missing",
        "message": "example.org answered 404",
        "status": 404,
        "cached": None,
        "provider": None,
        "at": 1_000_000.0,
        "duration_ms": 250.0,
        "queue_wait_ms": 12.3,
        "worker_id": "w-7",
        "tries": 2,
    }


async def test_the_line_names_the_search_provider_and_a_cache_hit(
    settings: Settings, redis: aioredis.Redis
) -> None:
    found = {"ok": True, "tool": "web_search", "report_id": "r-1", "job_id": "j-3", "query": "tides"}
    await record(redis, settings, {**found, "provider": "searxng", "results": []}, run=RUN)
    hit = {"ok": True, "tool": "fetch_page", "report_id": "r-1", "job_id": "j-4", "url": "https://a.example/"}
    await record(redis, settings, {**hit, "cached": True, "text": "page"}, run=RUN)
    hit_line, search_line = await lines(redis, settings)
    assert (search_line["target"], search_line["provider"], search_line["cached"]) == (
        "tides",
        "searxng",
        None,
    )
    assert (hit_line["cached"], hit_line["provider"]) == (True, None)


async def test_the_line_never_holds_page_text_and_cuts_long_targets_and_messages(
    settings: Settings, redis: aioredis.Redis
) -> None:
    page = {
        "ok": True,
        "tool": "fetch_page",
        "report_id": "r-1",
        "job_id": "j-5",
        "url": "https://example.org/" + "p" * 8000,
        "title": "PAGE-TITLE",
        "text": "PAGE-TEXT " * 4000,
        "links": ["https://example.org/LINKED"],
    }
    failed = {
        "ok": False,
        "tool": "web_search",
        "report_id": "r-1",
        "job_id": "j-6",
        "query": "q" * 2000,
        "error": {"kind": "upstream_error", "message": "m" * 5000},
    }
    await record(redis, settings, page, run=RUN)
    await record(redis, settings, failed, run=RUN)
    raw = b"".join(await redis.lrange(keys.recent(settings.queue_name), 0, -1))
    assert b"PAGE-TEXT" not in raw and b"PAGE-TITLE" not in raw and b"LINKED" not in raw
    error_line, page_line = await lines(redis, settings)
    assert len(str(page_line["target"])) == activity.TARGET_PREVIEW_CHARS
    assert len(str(error_line["target"])) == activity.TARGET_PREVIEW_CHARS
    assert len(str(error_line["message"])) == activity.MESSAGE_PREVIEW_CHARS


async def test_the_recent_list_keeps_the_last_thousand_lines(
    settings: Settings, redis: aioredis.Redis
) -> None:
    async with redis.pipeline(transaction=False) as pipe:
        for index in range(activity.RECENT_LIMIT + 5):
            done = {
                "ok": True,
                "tool": "web_search",
                "report_id": "r-1",
                "job_id": f"j-{index}",
                "query": "q",
            }
            activity.record(pipe, settings.queue_name, done, "ok", 1.0, RUN)
        await pipe.execute()
    kept = await lines(redis, settings)
    assert len(kept) == activity.RECENT_LIMIT
    assert kept[0]["job_id"] == f"j-{activity.RECENT_LIMIT + 4}"


async def test_the_minute_bucket_counts_by_tool_and_outcome_with_histograms_and_cache_hits(
    settings: Settings, redis: aioredis.Redis
) -> None:
    at = time.time()
    fetched = {"ok": True, "tool": "fetch_page", "report_id": "r-1", "job_id": "j-1", "cached": True}
    blocked = {"ok": False, "tool": "fetch_page", "report_id": "r-1", "job_id": "j-2"}
    blocked["error"] = {"kind": "destination_blocked", "message": "no"}
    await record(redis, settings, fetched, duration_ms=100.0, run=activity.JobRun("w", 1, 2.0), at=at)
    await record(redis, settings, fetched, duration_ms=100.0, run=activity.JobRun("w", 1, 2.0), at=at)
    await record(redis, settings, blocked, duration_ms=3.0, run=activity.JobRun("w", 1, None), at=at)
    assert await bucket(redis, settings, at) == {
        "n:fetch_page:ok": 2,
        "n:fetch_page:destination_blocked": 1,
        activity.duration_field("fetch_page", 100.0): 2,
        activity.duration_field("fetch_page", 3.0): 1,
        activity.wait_field("fetch_page", 2.0): 2,  # the third job's wait is not known: not counted
        "h:fetch_page": 2,
        "depth": 0,
        # The slowest duration and wait, in microseconds: a percentile is never shown past them.
        "xd:fetch_page": 100_000,
        "xw:fetch_page": 2_000,
    }


async def test_a_minute_bucket_expires_on_its_own_an_hour_after_the_charts_stop_showing_it(
    settings: Settings, redis: aioredis.Redis
) -> None:
    at = time.time()
    done = {"ok": True, "tool": "web_search", "report_id": "r-1", "job_id": "j-1", "query": "q"}
    await record(redis, settings, done, run=RUN, at=at)
    ttl = await redis.ttl(keys.minute(settings.queue_name, activity.minute_of(at)))
    minute_end = (activity.minute_of(at) + 1) * 60
    assert minute_end + activity.BUCKET_TTL_S - at - 2 <= ttl <= minute_end + activity.BUCKET_TTL_S - at + 1


async def test_the_bucket_keeps_the_deepest_queue_a_finishing_job_saw(
    settings: Settings, redis: aioredis.Redis, token: str
) -> None:
    at = time.time()
    done = {"ok": True, "tool": "web_search", "report_id": "r-1", "job_id": "j-1", "query": "q"}
    depths = []
    for size in (5, 2, 7, 3):
        await redis.delete(settings.queue_name)
        await redis.zadd(settings.queue_name, {f"{token}-{i}": i for i in range(size)})
        await record(redis, settings, done, run=RUN, at=at)
        depths.append((await bucket(redis, settings, at))["depth"])
    assert depths == [5, 5, 7, 7]


async def test_a_real_worker_writes_its_id_try_and_queue_wait_with_each_result(
    settings: Settings, redis: aioredis.Redis, token: str, report: str
) -> None:
    async with (
        running_worker(settings, TEST_TOOLS),
        ResearchClient(settings=settings, job_id_prefix=f"{token}-") as client,
    ):
        done = await client.call("echo", {"report_id": report, "value": "x"})
        refused = await client.call("echo", {"report_id": report, "value": 1})
        unknown = await client.wait(await client.enqueue("no_such_tool", {"report_id": report}), wait_s=10)
    newest_first = await lines(redis, settings)
    by_job = {line["job_id"]: line for line in newest_first}
    assert by_job[done["job_id"]]["outcome"] == "ok"
    assert by_job[refused["job_id"]]["outcome"] == "invalid_request"
    assert by_job[refused["job_id"]]["message"] == "value must be a string"
    for job in (done, refused):
        line = by_job[job["job_id"]]
        assert (line["worker_id"], line["tries"]) == (settings.worker_id, 1)
        assert isinstance(line["queue_wait_ms"], float) and line["queue_wait_ms"] >= 0
    # arq's own failures (here an unknown job name) still name the worker that wrote them.
    assert by_job[unknown["job_id"]]["worker_id"] == settings.worker_id
    minute = await bucket(redis, settings, float(newest_first[0]["at"]))  # type: ignore[arg-type]
    assert minute.get("n:echo:ok", 0) + minute.get("n:echo:invalid_request", 0) >= 1


@given(st.floats(min_value=activity.FLOOR_MS * 1.0001, max_value=2**19, allow_nan=False))
def test_a_histogram_bin_stands_for_its_durations_within_nine_percent(ms: float) -> None:
    shown = activity.bin_value_ms(activity.bin_of(ms))
    assert abs(shown - ms) / ms <= 2 ** (1 / 8) - 1 + 1e-9


@given(st.floats(allow_nan=True, allow_infinity=True), st.floats(allow_nan=True, allow_infinity=True))
def test_histogram_bins_are_ordered_and_bounded_for_any_number(a: float, b: float) -> None:
    low, high = activity.bin_of(a), activity.bin_of(b)
    assert activity.MIN_BIN <= low <= activity.MAX_BIN
    if not (math.isnan(a) or math.isnan(b)) and a <= b:
        assert low <= high


@pytest.mark.parametrize("ms", [0.0, -5.0, float("nan"), 1e-9])
def test_durations_under_an_eighth_of_a_millisecond_share_the_lowest_bin(ms: float) -> None:
    assert activity.bin_of(ms) == activity.MIN_BIN


async def test_a_health_beat_notes_the_queue_depth_while_no_job_finishes(
    settings: Settings, redis: aioredis.Redis
) -> None:
    now = time.time()
    later_ms = (now + 3600) * 1000  # deferred, so no worker claims them while the test looks
    await redis.zadd(
        settings.queue_name, {f"{settings.queue_name}-a": later_ms, f"{settings.queue_name}-b": later_ms}
    )
    async with running_worker(settings, TEST_TOOLS, poll_delay_s=3600) as worker:
        worker._last_health_check = 0.0
        await worker.record_health()
    bucket = await redis.hgetall(keys.minute(settings.queue_name, activity.minute_of(now)))
    assert int(bucket[b"depth"]) >= 2
