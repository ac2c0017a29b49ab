"""The page cache on a Redis of its own (RESEARCH_CACHE_REDIS_URL, for large deployments with
allkeys-lru): the setting is validated like REDIS_URL, and pages land there, not in the main Redis."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis.asyncio as aioredis
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st

from tests.support.fetching import fetch_settings
from tests.support.redis_process import RedisProcess
from tests.support.tls import TestCA, serve
from tests.test_page_cache import entry_key, worker_and_client
from worker.config import ConfigError, Settings
from worker.state import keys

VARIABLE = "RESEARCH_CACHE_REDIS_URL"


@given(
    url=st.sampled_from(
        [
            "redis://cache:6380/0",
            "rediss://user:secret@cache.internal:6380/3",
            "unix:///run/redis-cache.sock",
            "redis+sentinel://s1:26379,s2:26379/cache/1",
        ]
    )
)
def test_a_usable_cache_redis_url_is_read(url: str) -> None:
    assert Settings.from_env({VARIABLE: url}).cache_redis_url == url


@given(
    url=st.sampled_from(
        [
            "http://cache:6380",
            "redis://cache:notaport",
            "redis://cache:6380/db",
            "redis+sentinel://s1:26379",
            "redis:///0",
            "cache:6380",
        ]
    ),
    password=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=8, max_size=20),
)
def test_an_unusable_cache_redis_url_stops_start_up_naming_the_variable_and_never_its_password(
    url: str, password: str
) -> None:
    with_password = url.replace("://", f"://user:{password}@", 1) if "://" in url else url
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({VARIABLE: with_password})
    assert str(caught.value).startswith(VARIABLE)
    assert password not in str(caught.value)


def test_without_it_the_cache_uses_the_main_redis() -> None:
    assert Settings.from_env({}).cache_redis_url is None


async def test_pages_go_to_the_cache_redis_and_host_slots_stay_on_the_main_one(
    settings: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis, tmp_path: Path
) -> None:
    cache_server = RedisProcess(
        tmp_path, persistent=False, extra_args=["--maxmemory", "16mb", "--maxmemory-policy", "allkeys-lru"]
    )
    cache_server.start()

    async def page(request: web.Request) -> web.Response:
        return web.Response(
            text="<main><p>A page kept in the cache's own Redis.</p></main>", content_type="text/html"
        )

    try:
        tuned = fetch_settings(settings, ca, cache_redis_url=cache_server.url)
        cache = aioredis.Redis.from_url(cache_server.url)
        try:
            async with (
                serve({"/{p:.*}": page}, ca.server_context()) as server,
                worker_and_client(tuned, token) as (
                    _,
                    client,
                ),
            ):
                url = server.url("/a", name="site.test")
                first = await client.fetch(report, url)
                second = await client.fetch(f"{report}-2", url)
            in_cache_redis = await cache.exists(entry_key(tuned, url))
            in_main_redis = await redis.exists(entry_key(tuned, url))
            # The page's document, which its entry names, is kept and indexed there too.
            indexed = await cache.zcard(keys.document_index(tuned.queue_name))
        finally:
            await cache.aclose()
    finally:
        cache_server.stop()
    assert first["ok"] and second["cached"] is True, (first, second)
    assert (in_cache_redis, in_main_redis, indexed) == (1, 0, 1)
