"""The fallback provider: after credits run out, a rate limit that outlasts the retries, or a 5xx, the
search runs once more on the fallback, within the same deadline and the same single charge."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from jobs.search import WebSearchTool
from tests.support.fake_openrouter import (
    KEY,
    FakeOpenRouter,
    fake_openrouter,
    provider_error,
    slow,
    tool_completion,
    url_citation,
)
from tests.support.fake_searxng import FakeSearxng, error_page, fake_searxng, result, results_answer
from tests.support.workers import running_worker
from worker.client import ResearchClient
from worker.config import SearchProvider, Secret, Settings
from worker.runtime.worker import ResearchWorker
from worker.state.budget import Budgets, Tool
from worker.state.spend import report_spend

PLUGIN = SearchProvider.OPENROUTER_PLUGIN
TOOL = SearchProvider.OPENROUTER_TOOL
SEARXNG = SearchProvider.SEARXNG


@pytest.fixture
async def openrouter() -> AsyncIterator[FakeOpenRouter]:
    async with fake_openrouter() as server:
        yield server


@pytest.fixture
async def searxng() -> AsyncIterator[FakeSearxng]:
    async with fake_searxng() as server:
        yield server


@pytest.fixture
def base(settings: Settings, openrouter: FakeOpenRouter, searxng: FakeSearxng, token: str) -> Settings:
    return dataclasses.replace(
        settings,
        openrouter_base_url=openrouter.base_url,
        openrouter_api_key=Secret(KEY),
        searxng_url=searxng.base_url,
        search_timeout_s=3.0,
        usage_source=f"src-{token}",
    )


def with_providers(base: Settings, primary: SearchProvider, fallback: SearchProvider | None) -> Settings:
    return dataclasses.replace(base, search_provider=primary, search_fallback=fallback)


@contextlib.asynccontextmanager
async def searching(settings: Settings, token: str) -> AsyncIterator[tuple[ResearchWorker, ResearchClient]]:
    async with (
        running_worker(settings, [WebSearchTool()]) as worker,
        ResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=20) as client,
    ):
        yield worker, client


async def searches_charged(redis: aioredis.Redis, settings: Settings, report: str) -> int:
    usage, _ = await Budgets(redis, settings).usage(report)
    return usage[Tool.SEARCH].used


def provider_searches(worker: ResearchWorker, provider: str, outcome: str) -> float:
    assert worker.runtime is not None
    value = worker.runtime.metrics.registry.get_sample_value(
        "research_search_provider_searches_total", {"provider": provider, "outcome": outcome}
    )
    return value or 0.0


async def test_after_a_402_the_fallback_answers_once_charged_once_and_says_it_answered(
    base: Settings,
    openrouter: FakeOpenRouter,
    searxng: FakeSearxng,
    redis: aioredis.Redis,
    token: str,
    report: str,
) -> None:
    settings = with_providers(base, PLUGIN, SEARXNG)
    openrouter.will(provider_error(402, "Insufficient credits"))
    searxng.will(results_answer([result("https://example.org/from-searxng", "From SearXNG")]))
    async with searching(settings, token) as (worker, client):
        found = await client.search(report, "tidal energy")
        counted = {
            (provider, outcome): provider_searches(worker, provider, outcome)
            for provider, outcome in (("openrouter-plugin", "rate_limited"), ("searxng", "ok"))
        }
    assert found["ok"] is True
    assert found["provider"] == "searxng"
    assert [r["url"] for r in found["results"]] == ["https://example.org/from-searxng"]
    assert len(openrouter.requests) == 1
    assert len(searxng.requests) == 1
    assert await searches_charged(redis, settings, report) == 1
    # SearXNG is free: the search that it answered adds nothing to the spend.
    assert (await report_spend(redis, report))["searches"] == 0
    assert counted == {("openrouter-plugin", "rate_limited"): 1, ("searxng", "ok"): 1}


async def test_a_fallback_on_openrouter_records_the_spend_as_the_fallbacks(
    base: Settings,
    openrouter: FakeOpenRouter,
    searxng: FakeSearxng,
    redis: aioredis.Redis,
    token: str,
    report: str,
) -> None:
    settings = with_providers(base, SEARXNG, TOOL)
    searxng.will(*[error_page(503, retry_after="0") for _ in range(10)])
    openrouter.will(tool_completion([url_citation("https://example.org/a")], cost=0.004))
    async with searching(settings, token) as (worker, client):
        found = await client.search(report, "q")
        unavailable = provider_searches(worker, "searxng", "upstream_error")
    assert found["provider"] == "openrouter-tool"
    assert openrouter.requests[0].searched_with == "tool"
    spend = await report_spend(redis, report)
    assert spend["by_provider"] == {"openrouter-tool": 1}
    assert spend["cost_usd"] == 0.004
    assert unavailable == 1
    assert await searches_charged(redis, settings, report) == 1


async def test_a_429_that_outlasts_the_retries_falls_back(
    base: Settings, openrouter: FakeOpenRouter, searxng: FakeSearxng, token: str, report: str
) -> None:
    settings = with_providers(base, PLUGIN, SEARXNG)
    openrouter.will(*[provider_error(429, "slow down", retry_after="0") for _ in range(10)])
    async with searching(settings, token) as (_, client):
        found = await client.search(report, "q")
    assert found["provider"] == "searxng"
    assert len(openrouter.requests) == 5


async def test_the_primary_stops_retrying_in_time_for_the_fallback_to_answer_within_the_deadline(
    base: Settings, openrouter: FakeOpenRouter, searxng: FakeSearxng, token: str, report: str
) -> None:
    settings = dataclasses.replace(with_providers(base, PLUGIN, SEARXNG), search_timeout_s=2.4)
    openrouter.will(*[provider_error(429, "slow down", retry_after="1") for _ in range(10)])
    async with searching(settings, token) as (_, client):
        found = await client.search(report, "q")
    # Answered by the fallback at all: past the 2.4 s deadline the search would have ended in a
    # timeout result (the deadline is the worker's to keep; a wall-clock bound here would also time
    # the worker's start on a busy machine).
    assert found["provider"] == "searxng"
    assert len(openrouter.requests) <= 2


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (provider_error(400, "bad request"), "upstream_error"),
        (provider_error(401, "bad key"), "upstream_error"),
        (slow(10.0), "timeout"),
    ],
)
async def test_a_failure_the_fallback_would_share_does_not_fall_back(
    base: Settings,
    openrouter: FakeOpenRouter,
    searxng: FakeSearxng,
    token: str,
    report: str,
    reply: object,
    kind: str,
) -> None:
    settings = dataclasses.replace(with_providers(base, PLUGIN, SEARXNG), search_timeout_s=1.0)
    openrouter.will(reply)  # type: ignore[arg-type]
    async with searching(settings, token) as (_, client):
        found = await client.search(report, "q")
    assert found["error"]["kind"] == kind
    assert searxng.requests == []


async def test_when_the_fallback_fails_too_the_result_is_its_failure_naming_both(
    base: Settings,
    openrouter: FakeOpenRouter,
    searxng: FakeSearxng,
    redis: aioredis.Redis,
    token: str,
    report: str,
) -> None:
    settings = with_providers(base, PLUGIN, SEARXNG)
    openrouter.will(provider_error(402, "Insufficient credits"))
    searxng.will(error_page(403, "Forbidden"))
    async with searching(settings, token) as (worker, client):
        found = await client.search(report, "q")
        counted = (
            provider_searches(worker, "openrouter-plugin", "rate_limited"),
            provider_searches(worker, "searxng", "upstream_error"),
        )
    assert found["ok"] is False
    assert found["error"]["kind"] == "upstream_error"
    message = found["error"]["message"]
    assert "HTTP 403" in message
    assert "fallback, searxng, after openrouter-plugin failed with rate_limited" in message
    assert counted == (1, 1)
    assert await searches_charged(redis, settings, report) == 1


async def test_a_fallback_that_cannot_run_leaves_the_primarys_failure(
    base: Settings, openrouter: FakeOpenRouter, searxng: FakeSearxng, token: str, report: str
) -> None:
    settings = dataclasses.replace(with_providers(base, SEARXNG, PLUGIN), openrouter_api_key=Secret(""))
    searxng.will(*[error_page(502, retry_after="0") for _ in range(10)])
    async with searching(settings, token) as (_, client):
        found = await client.search(report, "q")
    assert found["error"]["kind"] == "upstream_error"
    assert "HTTP 502" in found["error"]["message"]
    assert openrouter.requests == []


async def test_without_a_fallback_a_402_is_the_result(
    base: Settings, openrouter: FakeOpenRouter, searxng: FakeSearxng, token: str, report: str
) -> None:
    openrouter.will(provider_error(402, "Insufficient credits"))
    async with searching(with_providers(base, PLUGIN, None), token) as (_, client):
        found = await client.search(report, "q")
    assert found["error"]["kind"] == "rate_limited"
    assert searxng.requests == []
