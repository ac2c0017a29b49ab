"""The Python client fails fast, as the command line does, when no worker runs on its queue."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import redis.asyncio as aioredis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.processes import start_worker, stop, wait_healthy
from tests.support.tools import TEST_TOOLS
from tests.support.workers import running_worker
from worker.client import ClientError, NoWorkerRunning, ResearchClient, SyncResearchClient
from worker.config import Settings

# Every way a client runs a job and waits for it.
CALLS = {
    "fetch": lambda c, report: c.fetch(report, "https://example.org/"),
    "search": lambda c, report: c.search(report, "tidal energy"),
    "run": lambda c, report: c.run("echo", {"report_id": report, "value": "x"}),
    "call": lambda c, report: c.call("fetch_page", '{"url": "https://example.org/"}', report_id=report),
    "call-low-level": lambda c, report: c.call("echo", {"report_id": report}),
}


@pytest.mark.parametrize("how", sorted(CALLS))
async def test_every_way_to_run_a_job_fails_at_once_when_no_worker_runs(
    how: str, settings: Settings, report: str, redis: aioredis.Redis
) -> None:
    async with ResearchClient(settings=settings, wait_s=120) as client:
        started = time.monotonic()
        with pytest.raises(NoWorkerRunning) as caught:
            await CALLS[how](client, report)
        elapsed = time.monotonic() - started
    assert elapsed < 30.0  # not the 120 s wait: one health read (generous: a busy machine)
    assert isinstance(caught.value, ClientError)
    assert settings.queue_name in str(caught.value) and "research-worker run" in str(caught.value)
    assert await redis.zcard(settings.queue_name) == 0  # nothing was enqueued, nothing charged
    assert not [key async for key in redis.scan_iter(match=f"*{report}*")]


def test_the_sync_client_fails_at_once_too(settings: Settings, report: str) -> None:
    with SyncResearchClient(settings=settings, wait_s=120) as client, pytest.raises(NoWorkerRunning):
        client.fetch(report, "https://example.org/")


async def test_the_message_never_shows_the_redis_password(settings: Settings) -> None:
    error = NoWorkerRunning("q", "redis://ops:Pw9-secret@cache:6379/0")
    assert "Pw9-secret" not in str(error) and "ops:***@cache" in str(error)


async def test_require_worker_false_enqueues_for_a_worker_that_starts_later(
    settings: Settings, token: str, report: str
) -> None:
    async with ResearchClient(
        settings=settings, job_id_prefix=f"{token}-", wait_s=30, require_worker=False
    ) as client:
        waiting = asyncio.ensure_future(client.run("echo", {"report_id": report, "value": "later"}))
        await asyncio.sleep(0.3)
        assert not waiting.done()
        async with running_worker(settings, TEST_TOOLS):
            result = await asyncio.wait_for(waiting, 30)
    assert result["ok"] is True and result["echo"] == "later"


def test_a_worker_that_stopped_is_noticed_by_the_next_call(
    settings: Settings, token: str, report: str
) -> None:
    worker = start_worker(settings, "stops")
    try:
        wait_healthy(settings, 1)
        with SyncResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=20) as client:
            assert client.run("echo", {"report_id": report, "value": "x"})["ok"] is True
            stop(worker)  # SIGTERM: the worker withdraws its health keys as it stops
            with pytest.raises(NoWorkerRunning):
                client.run("echo", {"report_id": report, "value": "y"})
    finally:
        stop(worker)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.one_of(st.sampled_from(["fetch_page", "web_search"]), st.text(max_size=20)),
    arguments=st.one_of(
        st.text(max_size=40), st.dictionaries(st.text(max_size=8), st.integers(), max_size=3)
    ),
)
async def test_a_models_call_with_no_worker_running_is_refused_by_the_client_not_by_a_timeout(
    name: str, arguments: Any, settings: Settings, report: str
) -> None:
    # Whatever the model sent, no worker is a fact about the deployment: either the call is
    # refused as the model's mistake (an invalid_request result, nothing enqueued), or the
    # client raises at once. It never waits.
    async with ResearchClient(settings=settings, wait_s=120) as client:
        try:
            answer = await asyncio.wait_for(client.call(name, arguments, report_id=report), 5)
        except NoWorkerRunning:
            return
    assert '"invalid_request"' in answer
