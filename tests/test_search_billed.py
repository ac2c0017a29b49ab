"""A billed answer is recorded even when it is no result: every completion that cost something
adds its spend to the report and the org's day, whatever the search then returns."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis

from jobs.search import WebSearchTool
from tests.support.fake_openrouter import (
    KEY,
    FakeOpenRouter,
    Reply,
    completion,
    default_citations,
    fake_openrouter,
    file_citations,
    provider_error,
    tool_completion,
    unanswered_tool_call,
    url_citation,
)
from tests.support.spend_rows import org_rows
from tests.support.workers import running_worker
from worker.client import ResearchClient
from worker.config import SearchProvider, Secret, Settings
from worker.state.spend import report_spend

COST = 0.5


def priced(reply: Reply) -> Reply:
    body = orjson.loads(reply.body)
    body["usage"]["cost"] = COST
    reply.body = orjson.dumps(body)
    return reply


# Answers that were billed and cite nothing usable: each one ends the search in upstream_error.
UNUSABLE: dict[str, Reply] = {
    "no annotations": completion([], cost=COST),
    "only files": completion(file_citations(), cost=COST),
    "only urls that are not the web": completion(
        [url_citation("ftp://example.org/x"), url_citation("javascript:alert(1)"), url_citation("/rel")],
        cost=COST,
    ),
    "a url holding the key": completion([url_citation(f"https://example.org/?k={KEY}")], cost=COST),
    "an answer that ended in an error": completion(default_citations(), cost=COST, finish_reason="error"),
    "a search the model answered without running": tool_completion([], searches=0, cost=COST),
    "a search that ran and cited nothing": tool_completion([], searches=2, cost=COST),
    "an unanswered tool call": priced(unanswered_tool_call()),
}


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenRouter]:
    async with fake_openrouter() as server:
        yield server


@contextlib.asynccontextmanager
async def searching(settings: Settings, token: str) -> AsyncIterator[ResearchClient]:
    async with (
        running_worker(settings, [WebSearchTool()]),
        ResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=20) as client,
    ):
        yield client


@pytest.mark.parametrize("provider", [SearchProvider.OPENROUTER_PLUGIN, SearchProvider.OPENROUTER_TOOL])
async def test_every_billed_answer_without_a_usable_citation_records_its_spend(
    provider: SearchProvider,
    settings: Settings,
    fake: FakeOpenRouter,
    token: str,
    redis: aioredis.Redis,
) -> None:
    s = dataclasses.replace(
        settings,
        openrouter_base_url=fake.base_url,
        openrouter_api_key=Secret(KEY),
        search_provider=provider,
        search_timeout_s=3.0,
        usage_source=f"src-{token}",
    )
    outcomes: dict[str, Any] = {}
    async with searching(s, token) as client:
        for index, (name, reply) in enumerate(UNUSABLE.items()):
            report = f"r-{token}-{index}"
            fake.will(reply)
            result = await client.search(report, "tidal energy")
            outcomes[name] = (
                result["ok"],
                result.get("error", {}).get("kind"),
                await report_spend(redis, report),
            )
    for name, (ok, kind, spend) in outcomes.items():
        assert (ok, kind) == (False, "upstream_error"), name
        assert spend["cost_usd"] == pytest.approx(COST), name
        assert spend["searches"] == 1 and spend["by_provider"] == {provider.value: 1}, name
    [day] = await org_rows(redis, s.usage_source)
    assert day["cost_usd"] == pytest.approx(COST * len(UNUSABLE))


async def test_a_refused_request_that_was_not_billed_records_nothing(
    settings: Settings, fake: FakeOpenRouter, token: str, redis: aioredis.Redis, report: str
) -> None:
    s = dataclasses.replace(
        settings, openrouter_base_url=fake.base_url, openrouter_api_key=Secret(KEY), search_timeout_s=3.0
    )
    fake.will(provider_error(401, "bad key"))
    async with searching(s, token) as client:
        result = await client.search(report, "tidal energy")
    assert result["error"]["kind"] == "upstream_error"
    assert (await report_spend(redis, report))["searches"] == 0
