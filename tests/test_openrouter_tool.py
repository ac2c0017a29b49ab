"""The ``openrouter-tool`` provider: OpenRouter's ``openrouter:web_search`` server tool, against the fake
OpenRouter and through a real worker."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from jobs.providers.base import Deadline, Found
from jobs.providers.openrouter import OpenRouter
from jobs.providers.openrouter_tool import SEARCH_ONCE, ServerToolSearch
from jobs.search import WebSearchTool
from tests.support.fake_openrouter import (
    KEY,
    PROSE,
    FakeOpenRouter,
    fake_openrouter,
    file_citations,
    provider_error,
    tool_completion,
    unanswered_tool_call,
    url_citation,
)
from tests.support.workers import running_worker
from worker.client import ResearchClient
from worker.config import SearchProvider, Secret, Settings
from worker.errors import RateLimited, UpstreamError
from worker.state.budget import Budgets, Tool
from worker.state.spend import report_spend


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenRouter]:
    async with fake_openrouter() as server:
        yield server


@pytest.fixture
def tool_settings(settings: Settings, fake: FakeOpenRouter, token: str) -> Settings:
    return dataclasses.replace(
        settings,
        openrouter_base_url=fake.base_url,
        openrouter_api_key=Secret(KEY),
        search_timeout_s=3.0,
        usage_source=f"src-{token}",
        search_provider=SearchProvider.OPENROUTER_TOOL,
    )


@pytest.fixture
async def provider(tool_settings: Settings) -> AsyncIterator[ServerToolSearch]:
    client = OpenRouter.open(tool_settings)
    try:
        yield ServerToolSearch(client)
    finally:
        await client.close()


async def search(provider: ServerToolSearch, max_results: int = 5, org_id: str | None = None) -> Found:
    end = asyncio.get_running_loop().time() + 3.0
    return await provider.search("tidal energy in Brittany", max_results, org_id, Deadline(end, end, 3.0))


@contextlib.asynccontextmanager
async def searching(settings: Settings, token: str) -> AsyncIterator[ResearchClient]:
    async with (
        running_worker(settings, [WebSearchTool()]),
        ResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=20) as client,
    ):
        yield client


async def test_a_search_asks_for_the_server_tool_once_with_both_result_bounds_set_from_max_results(
    provider: ServerToolSearch, fake: FakeOpenRouter
) -> None:
    await search(provider, max_results=7, org_id="org-42")
    assert fake.violations == []
    [sent] = fake.requests
    assert sent.body == {
        "model": "openai/gpt-4.1-nano",
        "messages": [
            {"role": "system", "content": SEARCH_ONCE},
            {"role": "user", "content": "tidal energy in Brittany"},
        ],
        "tools": [
            {"type": "openrouter:web_search", "parameters": {"max_results": 7, "max_total_results": 7}}
        ],
        "temperature": 0,
        "stream": False,
        "reasoning": {"effort": "none"},
        "user": "org-42",
    }
    assert "plugins" not in sent.body
    assert sent.headers["Authorization"] == f"Bearer {KEY}"


def test_the_instruction_asks_for_one_search_of_the_query_as_given() -> None:
    assert "exactly once" in SEARCH_ONCE
    assert "word for word" in SEARCH_ONCE


@pytest.mark.parametrize("engine", ["auto", "native", "exa", "firecrawl", "parallel"])
async def test_the_configured_engine_is_named_in_the_tools_parameters(
    tool_settings: Settings, fake: FakeOpenRouter, engine: str
) -> None:
    client = OpenRouter.open(dataclasses.replace(tool_settings, search_engine=engine))
    try:
        await search(ServerToolSearch(client), max_results=3)
    finally:
        await client.close()
    [sent] = fake.requests
    assert sent.body["tools"][0]["parameters"] == {"max_results": 3, "max_total_results": 3, "engine": engine}
    assert fake.violations == []


async def test_only_url_citations_come_back_cleaned_in_order_without_the_prose(
    provider: ServerToolSearch, fake: FakeOpenRouter
) -> None:
    fake.will(
        tool_completion(
            [
                url_citation("https://example.org/a", "First\u200b title", "About A."),
                *file_citations(),
                url_citation("https://example.org/a", "Again"),
                url_citation("javascript:alert(1)", "Script"),
                url_citation("http://example.net/b", "Second", "About B."),
            ]
        )
    )
    found = await search(provider)
    assert found.results == [
        {"title": "First title", "url": "https://example.org/a", "snippet": "About A."},
        {"title": "Second", "url": "http://example.net/b", "snippet": "About B."},
    ]
    assert PROSE not in repr(found)


async def test_an_answer_with_citations_but_no_search_count_is_still_read(
    provider: ServerToolSearch, fake: FakeOpenRouter
) -> None:
    fake.will(tool_completion([url_citation("https://example.org/a")], searches=None))
    assert [r["url"] for r in (await search(provider)).results] == ["https://example.org/a"]


async def test_a_search_that_ran_but_cited_nothing_is_an_error_that_says_so(
    provider: ServerToolSearch, fake: FakeOpenRouter
) -> None:
    fake.will(tool_completion([], searches=1))
    with pytest.raises(UpstreamError, match="ran but the answer cited no usable source") as caught:
        await search(provider)
    assert "not evidence that no sources exist" in caught.value.message


async def test_a_model_that_answered_without_searching_is_an_error_and_not_an_empty_list(
    provider: ServerToolSearch, fake: FakeOpenRouter
) -> None:
    fake.will(tool_completion([], searches=0))
    with pytest.raises(UpstreamError, match="answered without running the search") as caught:
        await search(provider)
    assert "may not have run" in caught.value.message


async def test_a_tool_call_the_provider_did_not_run_is_an_error_that_the_search_may_not_have_run(
    provider: ServerToolSearch, fake: FakeOpenRouter
) -> None:
    fake.will(unanswered_tool_call())
    with pytest.raises(UpstreamError, match="did not run") as caught:
        await search(provider)
    assert "not evidence that no sources exist" in caught.value.message


async def test_a_429_is_retried_no_sooner_than_its_retry_after(
    provider: ServerToolSearch, fake: FakeOpenRouter
) -> None:
    fake.will(provider_error(429, "Rate limit exceeded", retry_after="0.3"))
    started = time.monotonic()
    found = await search(provider)
    assert time.monotonic() - started >= 0.3
    assert len(fake.requests) == 2
    assert all(sent.searched_with == "tool" for sent in fake.requests)
    assert found.results


async def test_402_is_rate_limited_at_once(provider: ServerToolSearch, fake: FakeOpenRouter) -> None:
    fake.will(provider_error(402, "Insufficient credits"))
    with pytest.raises(RateLimited, match="402"):
        await search(provider)
    assert len(fake.requests) == 1


async def test_a_route_that_insists_on_reasoning_is_asked_again_with_the_tool_still_there(
    provider: ServerToolSearch, fake: FakeOpenRouter
) -> None:
    fake.reasoning_mandatory = True
    assert (await search(provider)).results
    first, second = fake.requests
    assert "reasoning" in first.body
    assert "reasoning" not in second.body
    assert second.body["tools"] == first.body["tools"]


@pytest.mark.parametrize(("asked", "sent"), [(50, 10), (10, 10), (1, 1)])
async def test_a_job_clamps_max_results_to_ten_in_both_bounds_and_cuts_the_results(
    tool_settings: Settings, fake: FakeOpenRouter, token: str, report: str, asked: int, sent: int
) -> None:
    fake.will(tool_completion([url_citation(f"https://example.org/{n}") for n in range(14)]))
    async with searching(tool_settings, token) as client:
        result = await client.search(report, "q", max_results=asked)
    assert result["ok"] is True
    assert result["provider"] == "openrouter-tool"
    parameters = fake.requests[0].body["tools"][0]["parameters"]
    assert parameters == {"max_results": sent, "max_total_results": sent}
    assert len(result["results"]) == sent


async def test_a_job_asking_for_no_results_makes_no_call_and_costs_nothing(
    tool_settings: Settings, fake: FakeOpenRouter, redis: aioredis.Redis, token: str, report: str
) -> None:
    async with searching(tool_settings, token) as client:
        result = await client.search(report, "q", max_results=0)
    assert (result["ok"], result["results"], result["provider"]) == (True, [], "openrouter-tool")
    assert fake.requests == []
    usage, _ = await Budgets(redis, tool_settings).usage(report)
    assert usage[Tool.SEARCH].used == 0


async def test_a_job_records_its_spend_as_the_server_tools(
    tool_settings: Settings, fake: FakeOpenRouter, redis: aioredis.Redis, token: str, report: str
) -> None:
    fake.will(tool_completion([url_citation("https://example.org/a")], cost=0.007, prompt_tokens=3000))
    async with searching(tool_settings, token) as client:
        result = await client.search(report, "q")
    assert result["ok"] is True
    spend = await report_spend(redis, report)
    assert spend["by_provider"] == {"openrouter-tool": 1}
    assert spend["cost_usd"] == 0.007
    assert spend["prompt_tokens"] == 3000
