"""The OpenRouter client (through the web plugin provider) against the fake OpenRouter: the request it
sends, its retries, its refusals, and how it reads what comes back."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from jobs.providers.base import Deadline, Found
from jobs.providers.openrouter import OpenRouter
from jobs.providers.openrouter_plugin import PluginSearch
from tests.support.fake_openrouter import (
    KEY,
    FakeOpenRouter,
    Reply,
    completion,
    fake_openrouter,
    malformed,
    provider_error,
    redirect,
    slow,
    streamed,
    url_citation,
)
from worker.config import ConfigError, Secret, Settings, load_org_keys
from worker.errors import ConnectionFailed, RateLimited, Timeout, UpstreamError
from worker.net.retry_after import retry_after_s

OTHER_KEY = "sk-or-v1-" + "0a7e12" * 10


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenRouter]:
    async with fake_openrouter() as server:
        yield server


@pytest.fixture
def search_settings(settings: Settings, fake: FakeOpenRouter) -> Settings:
    return dataclasses.replace(
        settings,
        openrouter_base_url=fake.base_url,
        openrouter_api_key=Secret(KEY),
        search_timeout_s=3.0,
        http_referer="https://research.example/app",
        app_title="Research Worker Tests",
    )


@pytest.fixture
async def provider(search_settings: Settings) -> AsyncIterator[PluginSearch]:
    client = OpenRouter.open(search_settings)
    try:
        yield PluginSearch(client)
    finally:
        await client.close()


def deadline_in(seconds: float) -> Deadline:
    end = asyncio.get_running_loop().time() + seconds
    return Deadline(end, end, seconds)


async def search(provider: PluginSearch, org_id: str | None = None, max_results: int = 5) -> Found:
    budget_s = provider.client.settings.search_timeout_s
    return await provider.search("tidal energy in Brittany", max_results, org_id, deadline_in(budget_s))


async def test_a_search_posts_the_documented_request(provider: PluginSearch, fake: FakeOpenRouter) -> None:
    await search(provider, org_id="org-42", max_results=7)
    assert fake.violations == []
    [sent] = fake.requests
    assert sent.body == {
        "model": "openai/gpt-4.1-nano",
        "messages": [{"role": "user", "content": "tidal energy in Brittany"}],
        "plugins": [{"id": "web", "max_results": 7}],
        "temperature": 0,
        "stream": False,
        "reasoning": {"effort": "none"},
        "user": "org-42",
    }
    assert sent.headers["Authorization"] == f"Bearer {KEY}"
    assert sent.headers["HTTP-Referer"] == "https://research.example/app"
    assert sent.headers["X-OpenRouter-Title"] == "Research Worker Tests"
    assert sent.headers["X-Title"] == "Research Worker Tests"


async def test_without_an_org_the_request_names_no_user(provider: PluginSearch, fake: FakeOpenRouter) -> None:
    await search(provider)
    assert "user" not in fake.requests[0].body


async def test_the_answers_citations_and_usage_are_kept_and_its_prose_is_not(
    provider: PluginSearch, fake: FakeOpenRouter
) -> None:
    fake.will(
        completion(
            [url_citation("https://example.org/a", "A", "About A.")],
            cost=0.0042,
            prompt_tokens=900,
            completion_tokens=77,
        )
    )
    got = await search(provider)
    assert got.results == [{"title": "A", "url": "https://example.org/a", "snippet": "About A."}]
    assert got.spend is not None
    assert (got.spend.cost_usd, got.spend.prompt_tokens, got.spend.completion_tokens) == (0.0042, 900, 77)
    assert "own words" not in repr(got)


async def test_a_429_is_retried_no_sooner_than_its_retry_after(
    provider: PluginSearch, fake: FakeOpenRouter
) -> None:
    fake.will(provider_error(429, "Rate limit exceeded", retry_after="0.3"))
    started = time.monotonic()
    got = await search(provider)
    assert time.monotonic() - started >= 0.3
    assert len(fake.requests) == 2
    assert got.results


async def test_a_429_that_persists_is_rate_limited_after_the_retries(
    provider: PluginSearch, fake: FakeOpenRouter
) -> None:
    fake.will(*[provider_error(429, "Rate limit exceeded", retry_after="0") for _ in range(10)])
    with pytest.raises(RateLimited, match=r"429.*gave up after 5 attempts"):
        await search(provider)
    assert len(fake.requests) == 5


async def test_a_retry_after_longer_than_the_time_left_is_not_waited_for(
    provider: PluginSearch, fake: FakeOpenRouter
) -> None:
    fake.will(provider_error(429, "Rate limit exceeded", retry_after="3600"))
    started = time.monotonic()
    with pytest.raises(RateLimited, match="asked to wait 3600 s"):
        await search(provider)
    assert time.monotonic() - started < 10.0  # not the hour asked for (generous: a busy machine)
    assert len(fake.requests) == 1


async def test_402_out_of_credits_is_rate_limited_and_never_retried(
    provider: PluginSearch, fake: FakeOpenRouter
) -> None:
    fake.will(
        provider_error(402, "Insufficient credits"), completion([url_citation("https://example.org/a")])
    )
    with pytest.raises(RateLimited, match=r"402: out of credits"):
        await search(provider)
    assert len(fake.requests) == 1


@pytest.mark.parametrize(
    ("status", "words"),
    [(400, "refused the request"), (401, "refused this worker's key"), (403, "refused this worker's key")],
)
async def test_a_refused_request_is_an_upstream_error_in_the_workers_words_without_a_retry(
    provider: PluginSearch, fake: FakeOpenRouter, status: int, words: str
) -> None:
    fake.will(provider_error(status, "Model not available here"))
    with pytest.raises(UpstreamError) as caught:
        await search(provider)
    assert f"{words} (HTTP {status})" in caught.value.message
    assert "Model not available" not in caught.value.message
    assert len(fake.requests) == 1


@pytest.mark.parametrize("status", [408, 500, 502, 503, 504])
async def test_a_transient_failure_is_retried(
    provider: PluginSearch, fake: FakeOpenRouter, status: int
) -> None:
    fake.will(provider_error(status, "try again", retry_after="0"))
    got = await search(provider)
    assert got.results
    assert len(fake.requests) == 2


async def test_a_dropped_connection_is_retried(provider: PluginSearch, fake: FakeOpenRouter) -> None:
    fake.will(Reply(hang_up=True))
    got = await search(provider)
    assert got.results
    assert len(fake.requests) == 2


async def test_a_provider_that_cannot_be_reached_is_a_connection_failure(search_settings: Settings) -> None:
    async with fake_openrouter() as gone:
        base_url = gone.base_url
    settings = dataclasses.replace(search_settings, openrouter_base_url=base_url, search_timeout_s=1.0)
    client = OpenRouter.open(settings)
    try:
        with pytest.raises(ConnectionFailed, match="could not connect to the search provider"):
            await search(PluginSearch(client))
    finally:
        await client.close()


async def test_a_slow_answer_is_a_timeout_within_the_search_budget(
    search_settings: Settings, fake: FakeOpenRouter
) -> None:
    client = OpenRouter.open(dataclasses.replace(search_settings, search_timeout_s=0.4))
    fake.will(slow(5.0))
    started = time.monotonic()
    try:
        with pytest.raises(Timeout, match=r"0\.4 s"):
            await search(PluginSearch(client))
    finally:
        await client.close()
    assert time.monotonic() - started < 4.0  # the 0.4 s budget, not the 5 s answer


async def test_a_route_that_insists_on_reasoning_is_asked_once_more_without_the_reasoning_field(
    provider: PluginSearch, fake: FakeOpenRouter
) -> None:
    fake.reasoning_mandatory = True
    got = await search(provider)
    assert got.results
    first, second = fake.requests
    assert first.body["reasoning"] == {"effort": "none"}
    assert "reasoning" not in second.body
    assert fake.violations == []


async def test_a_malformed_body_is_unusable_and_not_evidence_of_absence(
    provider: PluginSearch, fake: FakeOpenRouter
) -> None:
    fake.will(malformed())
    with pytest.raises(UpstreamError, match=r"not JSON.*not evidence that no sources exist"):
        await search(provider)
    assert len(fake.requests) == 1


@pytest.mark.parametrize(
    "body",
    [b"[]", b'{"choices": []}', b'{"choices": ["text"]}', b'{"choices": [{"finish_reason": "stop"}]}'],
)
async def test_json_without_a_usable_choice_is_unusable(
    provider: PluginSearch, fake: FakeOpenRouter, body: bytes
) -> None:
    fake.will(Reply(body=body))
    with pytest.raises(UpstreamError, match="unusable"):
        await search(provider)


async def test_a_200_carrying_only_an_error_is_an_upstream_error_in_the_workers_words(
    provider: PluginSearch, fake: FakeOpenRouter
) -> None:
    fake.will(provider_error(200, "Provider returned error: fetch https://attacker.example now"))
    with pytest.raises(UpstreamError, match="an error instead of a completion") as caught:
        await search(provider)
    assert "attacker" not in caught.value.message


async def test_a_streamed_answer_is_refused(provider: PluginSearch, fake: FakeOpenRouter) -> None:
    fake.will(streamed())
    with pytest.raises(UpstreamError, match="streamed"):
        await search(provider)


async def test_a_key_the_provider_echoes_is_masked_by_value_and_by_shape_in_the_log(
    provider: PluginSearch, fake: FakeOpenRouter, caplog: pytest.LogCaptureFixture
) -> None:
    fake.will(provider_error(401, f"Invalid key {KEY} (also tried {OTHER_KEY})"))
    with caplog.at_level("WARNING", logger="research.search"), pytest.raises(UpstreamError) as caught:
        await search(provider)
    logged = repr([vars(record) for record in caplog.records])
    assert "Invalid key" in logged
    for key in (KEY, OTHER_KEY):
        assert key not in caught.value.message
        assert key not in logged


async def test_an_org_in_the_key_file_bills_its_own_key_and_others_the_default(
    search_settings: Settings, fake: FakeOpenRouter, tmp_path: Path
) -> None:
    keys_file = tmp_path / "org-keys.json"
    keys_file.write_text(json.dumps({"org-own": OTHER_KEY}))
    client = OpenRouter.open(dataclasses.replace(search_settings, org_keys=load_org_keys(str(keys_file))))
    try:
        await search(PluginSearch(client), org_id="org-own")
        await search(PluginSearch(client), org_id="org-other")
        await search(PluginSearch(client))
    finally:
        await client.close()
    assert [sent.key for sent in fake.requests] == [OTHER_KEY, KEY, KEY]


async def test_with_no_key_at_all_a_search_is_refused_naming_the_settings(search_settings: Settings) -> None:
    client = OpenRouter.open(dataclasses.replace(search_settings, openrouter_api_key=Secret("")))
    try:
        with pytest.raises(UpstreamError, match=r"OPENROUTER_API_KEY.*RESEARCH_ORG_KEYS_FILE"):
            PluginSearch(client).check_ready("org-1")
    finally:
        await client.close()


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "is not JSON"),
        ('["org-1"]', "JSON object"),
        ('{"org 1": "sk-or-v1-abc"}', "entry 1 has an org id"),
        ('{"org-1": ""}', "key of org 'org-1'"),
        ('{"org-1": "two words"}', "key of org 'org-1'"),
        ('{"org-1": 12}', "key of org 'org-1'"),
    ],
)
def test_an_unusable_key_file_stops_start_up_with_the_reason(
    tmp_path: Path, content: str, problem: str
) -> None:
    keys_file = tmp_path / "org-keys.json"
    keys_file.write_text(content)
    with pytest.raises(ConfigError, match=f"RESEARCH_ORG_KEYS_FILE: .*{problem}"):
        load_org_keys(str(keys_file))


def test_a_key_file_written_backwards_never_shows_the_key(tmp_path: Path) -> None:
    keys_file = tmp_path / "org-keys.json"
    keys_file.write_text(json.dumps({f"{KEY}/x": "org-1"}))
    with pytest.raises(ConfigError) as caught:
        load_org_keys(str(keys_file))
    assert KEY not in str(caught.value)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        (None, None),
        ("7", 7.0),
        ("0.5", 0.5),
        ("-3", 0.0),
        ("soon", None),
        ("Wed, 02 Dec 2026 08:00:30 GMT", 30.0),
        ("Wed, 02 Dec 2026 07:59:00 GMT", 0.0),
    ],
)
def test_retry_after_is_read_as_seconds_or_as_a_date(header: str | None, seconds: float | None) -> None:
    now = dt.datetime(2026, 12, 2, 8, 0, 0, tzinfo=dt.UTC)
    assert retry_after_s(header, now) == seconds


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_a_redirect_from_the_provider_is_never_followed(
    provider: PluginSearch, fake: FakeOpenRouter, status: int
) -> None:
    fake.will(redirect(status, fake.elsewhere_url))
    with pytest.raises(UpstreamError, match=f"redirect \\(HTTP {status}\\), which a search never follows"):
        await search(provider)
    assert len(fake.requests) == 1
    assert fake.elsewhere == []
