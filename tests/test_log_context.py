"""A job's context is bound to every line logged inside it: its id, tool, report and target, in
any module and any task it starts; a finished job's line says what it was about and how it ended."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobs.fetch.tool import FetchPageTool
from jobs.search import WebSearchTool
from tests.support.fake_openrouter import KEY, completion, default_citations, fake_openrouter, provider_error
from tests.support.workers import running_worker
from worker import logs
from worker.client import ResearchClient
from worker.config import Secret, Settings
from worker.config.values import LogFormat
from worker.logs import bound, fields


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    stream = io.StringIO()
    logs.configure("INFO", LogFormat.JSON, stream=stream)
    try:
        yield stream
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{")]


def test_a_bound_context_reaches_every_line_and_ends_with_its_block(captured: io.StringIO) -> None:
    log = logging.getLogger("research.test-context")
    with bound(job_id="j-1", tool="fetch_page"):
        log.info("inside")
        logs.bind(url="https://a.test/")
        log.info("inside, later", extra=fields(tool="its own field wins"))
    log.info("outside")
    inside, later, outside = lines(captured)
    assert (inside["job_id"], inside["tool"]) == ("j-1", "fetch_page") and "url" not in inside
    assert later["url"] == "https://a.test/" and later["tool"] == "its own field wins"
    assert "job_id" not in outside and "url" not in outside


async def test_tasks_inherit_the_context_and_two_jobs_never_mix(captured: io.StringIO) -> None:
    log = logging.getLogger("research.test-context")

    async def job(job_id: str) -> None:
        with bound(job_id=job_id):
            await asyncio.sleep(0.01)
            await asyncio.create_task(asyncio.sleep(0))  # a task started inside
            await asyncio.to_thread(log.info, "from a thread")
            log.info("after the wait")

    await asyncio.gather(*(job(f"j-{n}") for n in range(20)))
    seen = lines(captured)
    assert len(seen) == 40
    by_job: dict[str, int] = {}
    for line in seen:
        by_job[line["job_id"]] = by_job.get(line["job_id"], 0) + 1
    assert by_job == {f"j-{n}": 2 for n in range(20)}


@given(values=st.dictionaries(st.sampled_from(["job_id", "url", "query", "x"]), st.text(max_size=30)))
def test_any_bound_values_stay_one_line_in_text(values: dict[str, str]) -> None:
    stream = io.StringIO()
    logs.configure("INFO", LogFormat.TEXT, stream=stream, logger_name="research.test-context-text")
    with bound(**values):
        logging.getLogger("research.test-context-text").info("a line")
    assert stream.getvalue().count("\n") == 1


async def test_a_searchs_retry_warnings_name_its_job_and_its_end_names_kind_and_message(
    settings: Settings, token: str, report: str, captured: io.StringIO
) -> None:
    async with fake_openrouter() as fake:
        s = dataclasses.replace(
            settings, openrouter_base_url=fake.base_url, openrouter_api_key=Secret(KEY), search_timeout_s=5.0
        )
        fake.will(provider_error(503, "busy", retry_after="0"), completion(default_citations()))
        async with (
            running_worker(s, [WebSearchTool()]),
            ResearchClient(settings=s, job_id_prefix=f"{token}-", wait_s=20) as client,
        ):
            found = await client.search(report, "tidal energy")
            fake.will(provider_error(401, "no"))
            failed = await client.search(report, "tidal power")
    assert found["ok"] is True and failed["ok"] is False
    seen = lines(captured)
    [retry] = [line for line in seen if line["msg"] == "search provider failed; retrying"]
    assert retry["job_id"] == found["job_id"] and retry["report_id"] == report
    assert retry["tool"] == "web_search" and retry["query"] == "tidal energy"
    [ended] = [line for line in seen if line["msg"] == "job finished" and line["job_id"] == failed["job_id"]]
    assert ended["query"] == "tidal power"
    assert ended["error_kind"] == "upstream_error"
    assert ended["error_message"] == failed["error"]["message"]
    assert KEY not in captured.getvalue()


async def test_a_finished_fetchs_line_names_its_url_kind_and_message(
    settings: Settings, token: str, report: str, captured: io.StringIO
) -> None:
    async with (
        running_worker(settings, [FetchPageTool()]),
        ResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=20) as client,
    ):
        result = await client.fetch(report, "https://Example.ORG:443/never-seen#x")
    assert result["error"]["kind"] == "url_not_in_menu"
    [ended] = [line for line in lines(captured) if line["msg"] == "job finished"]
    assert ended["url"] == "https://example.org/never-seen"
    assert ended["error_kind"] == "url_not_in_menu"
    assert ended["error_message"] == result["error"]["message"]
    assert ended["job_id"] == result["job_id"] and ended["report_id"] == report
