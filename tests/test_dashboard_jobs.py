"""From a glance to a diagnosis: failed jobs show their target and message, and every job id leads
to ``/job/{id}``: its arguments, its result (previews only), arq's record, tries, and its worker."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from urllib.parse import quote

import pytest
import redis.asyncio as aioredis
from aiohttp import web

from tests.support.fetching import fetch_settings, fetching
from tests.support.processes import start_worker, stop, wait_healthy
from tests.support.tls import TestCA, serve
from tests.support.tools import TEST_TOOLS
from tests.support.workers import running_worker
from tests.test_dashboard import Parsed, get, record, seed, serving, text_of
from worker.client import ResearchClient
from worker.config import Settings
from worker.dashboard.job import STRING_PREVIEW
from worker.serialization import dumps
from worker.state import activity, keys


async def test_a_failed_fetch_shows_its_url_and_message_and_links_to_its_job_page(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    # 127.0.0.2 is loopback, harmless, and refused: the guardian here trusts 127.0.0.1 only.
    url = "https://127.0.0.2:9/private"
    fetch = fetch_settings(settings, ca)
    async with fetching(fetch, token, report) as harness, serving(fetch) as base:
        result = await harness.fetch(url)
        _, _, page = await get(f"{base}/")
        job_status, _, job_page = await get(f"{base}/job/{quote(result['job_id'], safe='')}")
    assert result["error"]["kind"] == "destination_blocked"
    message = result["error"]["message"]
    parsed = Parsed(page)
    row = next(line for line in page.split("<tr>") if result["job_id"] in line)
    row_text = Parsed(row).text
    assert url in row_text
    assert message[:100] in row_text
    assert "destination_blocked" in row_text
    assert f"/job/{result['job_id']}" in parsed.links()
    assert job_status == 200
    assert text_of(job_page, "job-state") == "finished"
    assert text_of(job_page, "job-target") == url
    assert text_of(job_page, "job-message") == message[:STRING_PREVIEW]
    assert text_of(job_page, "job-tries") == "1"
    assert text_of(job_page, "job-worker") == settings.worker_id
    assert '"kind": "destination_blocked"' in Parsed(job_page).text


async def test_after_a_retry_the_job_page_shows_the_result_and_the_second_try(
    settings: Settings, ca: TestCA, redis: aioredis.Redis, token: str, report: str
) -> None:
    # The first worker is stopped while the fetch hangs; arq puts the job back and a second worker
    # runs it again, as try 2, and this time the server answers 503.
    first_request = asyncio.Event()
    first_worker_gone = asyncio.Event()
    calls = 0

    async def flaky(request: web.Request) -> web.StreamResponse:
        nonlocal calls
        calls += 1
        if calls == 1:
            first_request.set()
            await first_worker_gone.wait()  # nobody reads this answer: its worker has stopped
        return web.Response(status=503, text="busy")

    env = {
        "RESEARCH_GUARDIAN_ALLOW_CIDRS": "127.0.0.1/32",
        "RESEARCH_CA_BUNDLE": str(ca.bundle),
        "RESEARCH_URL_MENU": "off",
        "RESEARCH_SHUTDOWN_GRACE_S": "0.5",
    }
    async with serve({"/flaky": flaky}, ca.server_context()) as server:
        url = server.url("/flaky")
        first = start_worker(settings, "p0", env=env)
        try:
            wait_healthy(settings, 1)
            async with ResearchClient(settings=settings, job_id_prefix=f"{token}-") as client:
                job_id = await client.enqueue("fetch_page", {"report_id": report, "url": url})
                await asyncio.wait_for(first_request.wait(), 30)
                first.send_signal(signal.SIGTERM)
                await asyncio.to_thread(first.wait, 30)
                first_worker_gone.set()
                # The first try is counted in the job's queue score (its sixteenths, see
                # worker.state.queue), which the next claim reads back.
                score = await redis.zscore(settings.queue_name, job_id)
                assert score is not None and round(score % 1 * 16) == 1
                second = start_worker(settings, "p1", env=env)
                try:
                    result = await client.wait(job_id, wait_s=30)
                finally:
                    stop(second)
        finally:
            first_worker_gone.set()
            stop(first)
        async with serving(settings) as base:
            _, _, page = await get(f"{base}/")
            _, _, job_page = await get(f"{base}/job/{job_id}")
    assert (result["error"]["kind"], result["status"]) == ("http_status", 503)
    assert calls == 2
    row = Parsed(next(line for line in page.split("<tr>") if job_id in line)).text
    assert "http_status" in row and url in row
    assert text_of(job_page, "job-tries") == "2"
    assert text_of(job_page, "job-worker") == f"{settings.worker_id}-p1"
    assert text_of(job_page, "job-outcome") == "http_status"
    assert '"status": 503' in Parsed(job_page).text


async def test_a_finished_job_shows_arqs_times_and_the_workers_own_measures(
    settings: Settings, token: str, report: str
) -> None:
    async with (
        running_worker(settings, TEST_TOOLS),
        ResearchClient(settings=settings, job_id_prefix=f"{token}-") as client,
        serving(settings) as base,
    ):
        result = await client.call("slow", {"report_id": report, "seconds": 0.2})
        # arq records the finish just after the result is written.
        for _ in range(100):
            if await client.redis.exists(f"arq:result:{result['job_id']}"):
                break
            await asyncio.sleep(0.05)
        _, _, page = await get(f"{base}/job/{result['job_id']}")
    for field in ("job-enqueued", "job-started", "job-finished"):
        assert text_of(page, field).endswith(" UTC"), field
    duration = text_of(page, "job-duration")
    assert duration.endswith(" ms") and 200 <= float(duration.split()[0]) < 2000
    assert text_of(page, "job-queue-wait").endswith(" ms")
    assert text_of(page, "job-worker") == settings.worker_id
    assert '"seconds": 0.2' in Parsed(page).text


async def test_a_running_job_shows_its_arguments_tries_and_state(
    settings: Settings, redis: aioredis.Redis, token: str, tmp_path: Path
) -> None:
    s = await seed(redis, settings, token, tmp_path / "marker")
    async with serving(settings) as base:
        status, _, page = await get(f"{base}/job/{s.running_job}")
    assert status == 200
    assert text_of(page, "job-state") == "running"
    assert text_of(page, "job-tries") == "2"
    assert text_of(page, "job-enqueued").endswith(" UTC")
    assert '"report_id": "' + s.report in Parsed(page).text
    assert "onerror=alert(1)" in Parsed(page).text
    assert "<img" not in page


async def test_page_text_links_and_long_values_are_cut_to_previews(
    settings: Settings, redis: aioredis.Redis, token: str
) -> None:
    job_id = f"{token}-big"
    result = {
        "ok": True,
        "tool": "fetch_page",
        "report_id": "r-1",
        "job_id": job_id,
        "url": "https://example.org/a",
        "text": "secret-page-text " * 3000,
        "links": [f"https://example.org/{i}" for i in range(500)],
    }
    await redis.set(keys.result(job_id), dumps(result), ex=600)
    async with serving(settings) as base:
        _, _, page = await get(f"{base}/job/{job_id}")
    shown = Parsed(page).text
    assert shown.count("secret-page-text") <= STRING_PREVIEW // len("secret-page-text ") + 1
    assert f"{len(result['text']) - STRING_PREVIEW} more characters not shown" in shown
    assert "https://example.org/19" in shown
    assert "https://example.org/20" not in shown
    assert "480 more items not shown" in shown


@pytest.mark.parametrize(
    "job_id", ["a/b", "x?y#z", "100%", "<b>id</b>", "..", "id with spaces", "é/ü", "{id}"]
)
async def test_any_job_id_links_to_its_own_page_and_back(
    settings: Settings, redis: aioredis.Redis, token: str, job_id: str
) -> None:
    job_id = f"{token}{job_id}"
    finished = {"ok": True, "tool": "web_search", "report_id": "r-1", "job_id": job_id, "query": "q"}
    await record(redis, settings, finished, run=activity.JobRun("w-1", 1, 1.0))
    await redis.set(keys.result(job_id), dumps(finished), ex=600)
    async with serving(settings) as base:
        _, _, page = await get(f"{base}/")
        [href] = [link for link in Parsed(page).links() if link.startswith("/job/") and token in link]
        assert href == "/job/" + quote(job_id, safe="")
        status, _, job_page = await get(f"{base}{href}")
    assert status == 200
    assert text_of(job_page, "job-state") == "finished"
    assert Parsed(job_page).by_id("job-id") is not None
    assert job_id in Parsed(job_page).text


async def test_a_job_whose_result_expired_is_shown_from_its_recent_line(
    settings: Settings, redis: aioredis.Redis, token: str
) -> None:
    failed = {
        "ok": False,
        "tool": "fetch_page",
        "report_id": "r-1",
        "job_id": f"{token}-old",
        "url": "https://example.org/gone",
        "error": {"kind": "timeout", "message": "fetch_page ran out of time"},
    }
    await record(redis, settings, failed, run=activity.JobRun("w-9", 3, 12.0))
    async with serving(settings) as base:
        status, _, page = await get(f"{base}/job/{token}-old")
    assert status == 200
    assert text_of(page, "job-state") == "finished, result expired"
    assert text_of(page, "job-message") == "fetch_page ran out of time"
    assert (text_of(page, "job-tries"), text_of(page, "job-worker")) == ("3", "w-9")


@pytest.mark.parametrize("job_id", ["never-was", "x" * 201])
async def test_a_job_that_does_not_exist_is_a_404_page(settings: Settings, token: str, job_id: str) -> None:
    async with serving(settings) as base:
        status, headers, page = await get(f"{base}/job/{token}{job_id}")
    assert status == 404
    assert headers["Content-Type"].startswith("text/html")
    assert "No such job" in page
    assert "/" in Parsed(page).links()
