"""Issue 24, items 7 and 13: a job is scored by Redis's clock, not its enqueuer's; and a job whose
result stands is never run, asked for or charged again, whatever its try."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
import redis.asyncio as aioredis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.processes import start_worker, stop, wait_healthy
from tests.support.results import ok_json as ok_result
from tests.support.tools import TEST_TOOLS
from tests.support.workers import running_worker
from worker.client import ResearchClient
from worker.config import Settings
from worker.serialization import dumps, loads
from worker.state import keys
from worker.state.queue import Enqueuer


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(skew_s=st.one_of(st.sampled_from([-3600.0, -30.0, 30.0, 3600.0]), st.floats(-86_400, 86_400)))
async def test_an_enqueue_is_scored_by_redis_time_whatever_the_clients_clock(
    settings: Settings, redis: aioredis.Redis, token: str, skew_s: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The client's clock runs skew_s ahead (or behind) of Redis's: the score and the payload's
    # enqueue time are Redis's own, so the job is due at once for an idle worker.
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + skew_s)
    enqueuer = Enqueuer(redis, settings.queue_name)
    job_id = f"{token}-skew-{uuid.uuid4().hex}"
    seconds, micros = await redis.time()
    before_ms = seconds * 1000 + micros // 1000
    assert await enqueuer.enqueue("echo", job_id, {"report_id": "r-1", "value": "v"})
    seconds, micros = await redis.time()
    after_ms = seconds * 1000 + micros // 1000
    score = await redis.zscore(settings.queue_name, job_id)
    payload = loads(await redis.get(f"arq:job:{job_id}"))
    assert score is not None and before_ms <= score <= after_ms
    assert payload["et"] == score
    await redis.zrem(settings.queue_name, job_id)
    await redis.delete(f"arq:job:{job_id}")


@pytest.mark.parametrize("ahead_s", [30.0, 3600.0])
async def test_a_client_whose_clock_runs_ahead_gets_its_result_not_a_timeout(
    settings: Settings, token: str, report: str, ahead_s: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker runs in its own process on the true clock; only this client's clock is ahead.
    worker = start_worker(settings, f"clock-{int(ahead_s)}", env={"RESEARCH_POLL_DELAY_S": "3600"})
    try:
        wait_healthy(settings, 1)
        real_time = time.time
        monkeypatch.setattr(time, "time", lambda: real_time() + ahead_s)
        async with ResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=10) as client:
            started = time.monotonic()
            result = await client.call("echo", {"report_id": report, "value": "on time"})
        assert result["ok"] is True, result
        assert time.monotonic() - started < 60  # the wake-up, not the hour-long poll
    finally:
        monkeypatch.undo()
        stop(worker)


STANDING = st.sampled_from(
    [
        {"echo": "written before"},
        {"echo": ""},
    ]
)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(job_try=st.integers(min_value=0, max_value=2), fields=STANDING, ok=st.booleans())
async def test_a_standing_result_with_no_arq_keys_is_neither_run_nor_charged_on_any_try(
    settings: Settings,
    redis: aioredis.Redis,
    token: str,
    report: str,
    job_try: int,
    fields: dict[str, str],
    ok: bool,
) -> None:
    job_id = f"{token}-standing-{job_try}-{int(ok)}-{len(fields['echo'])}"
    standing = ok_result("echo", report, job_id, fields)
    if not ok:
        standing = {**standing, "ok": False, "error": {"kind": "upstream_error", "message": "m"}}
    await redis.set(keys.result(job_id), dumps(standing))
    # Queued as by any arq client (no wake token), with the try it is on and no other arq key.
    payload = dumps({"t": None, "f": "echo", "a": [], "k": {"report_id": report, "value": "again"}, "et": 1})
    await redis.set(f"arq:job:{job_id}", payload)
    if job_try:
        await redis.set(f"arq:retry:{job_id}", job_try)
    await redis.zadd(settings.queue_name, {job_id: 1})
    async with running_worker(settings, TEST_TOOLS, poll_delay_s=0.05):
        deadline = time.monotonic() + 10
        while await redis.zscore(settings.queue_name, job_id) is not None:
            assert time.monotonic() < deadline, "the job was never finished"
            await asyncio.sleep(0.02)
    assert loads(await redis.get(keys.result(job_id))) == standing
    assert await redis.hget(keys.budget(report), "fetch") is None  # nothing was charged
    assert not await redis.exists(f"arq:job:{job_id}", f"arq:retry:{job_id}", f"arq:in-progress:{job_id}")
    await redis.delete(keys.result(job_id), f"arq:result:{job_id}")
