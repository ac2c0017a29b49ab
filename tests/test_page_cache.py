"""The shared page cache: one fetch per page, and every report still pays and sees only what it may."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from aiohttp import web
from redis.exceptions import OutOfMemoryError

from jobs.definitions import fetch_page_definition
from jobs.fetch.tool import FetchPageTool
from tests.support.fake_dns import FakeResolver
from tests.support.fetching import fetch_settings
from tests.support.tls import Handler, TestCA, TlsServer, serve
from tests.support.workers import running_worker
from worker.client import ResearchClient
from worker.config import Settings
from worker.guardian.urls import canonical_url
from worker.runtime.worker import ResearchWorker
from worker.state import keys
from worker.state.pages import cache as page_cache
from worker.state.pages import documents
from worker.state.pages.cache import url_digest
from worker.state.pages.entry import KeptPage, Page, decode

SITE = {"site.test": ["127.0.0.1"], "www.site.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]}


class Site:
    """A TLS site whose pages name their path and link to two others, counting every request."""

    def __init__(self) -> None:
        self.hits: collections.Counter[str] = collections.Counter()
        self.headers: dict[str, dict[str, str]] = {}
        self.delay_s = 0.0
        self.status: dict[str, int] = {}

    def page(self, path: str, port: int) -> str:
        return (
            f"<html><head><title>Page {path}</title></head><body><main><h1>About {path}</h1>"
            f"<p>The text of {path}, long enough to be the main content of the page.</p>"
            f'<a href="https://site.test:{port}{path}/next">next</a>'
            f'<a href="https://other.test:{port}/elsewhere">elsewhere</a></main></body></html>'
        )

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.hits[request.path] += 1
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        status = self.status.get(request.path, 200)
        if status != 200:
            return web.Response(status=status, text="no", headers=self.headers.get(request.path, {}))
        return web.Response(
            text=self.page(request.path, request.url.port or 443),
            content_type="text/html",
            headers=self.headers.get(request.path, {}),
        )


@contextlib.asynccontextmanager
async def site_server(
    ca: TestCA, site: Site, extra: dict[str, Handler] | None = None
) -> AsyncIterator[TlsServer]:
    async with serve({**(extra or {}), "/{p:.*}": site.handle}, ca.server_context()) as server:
        yield server


@contextlib.asynccontextmanager
async def worker_and_client(
    settings: Settings, token: str
) -> AsyncIterator[tuple[ResearchWorker, ResearchClient]]:
    async with (
        running_worker(settings, [FetchPageTool(FakeResolver(SITE))]) as worker,
        ResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=30) as client,
    ):
        yield worker, client


def cache_settings(settings: Settings, ca: TestCA, **changes: object) -> Settings:
    return fetch_settings(settings, ca, **changes)  # type: ignore[arg-type]


def counted(worker: ResearchWorker, series: str) -> float:
    assert worker.runtime is not None
    return worker.runtime.metrics.registry.get_sample_value(series) or 0.0


def entry_key(settings: Settings, url: str, extract: str = "main.markdown") -> str:
    """The entry of a fetch in the default format (markdown); the plain text's is under "main"."""
    canonical = canonical_url(url)
    assert canonical is not None
    return keys.page(settings.queue_name, extract, url_digest(canonical))


async def cached_entry(redis: aioredis.Redis, settings: Settings, url: str) -> object:
    """What the cache holds for ``url`` (in the default format), as a worker reads it."""
    return decode(await redis.get(entry_key(settings, url)) or b"")


async def test_a_second_report_gets_the_cached_page_without_a_request_and_with_the_original_fetch_time(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    site = Site()
    async with (
        site_server(ca, site) as server,
        worker_and_client(cache_settings(settings, ca), token) as (
            worker,
            client,
        ),
    ):
        url = server.url("/a", name="site.test")
        first = await client.fetch(report, url)
        await asyncio.sleep(1.1)  # fetched_at is to the second: a new fetch would show a later time
        second = await client.fetch(f"{report}-2", url)
    assert site.hits["/a"] == 1
    assert first["ok"] is True and second["ok"] is True, (first, second)
    assert first["cached"] is False
    assert second["cached"] is True
    assert second["fetched_at"] == first["fetched_at"]
    for field in ("url", "final_url", "status", "title", "text", "links", "content_type", "bytes_read"):
        assert second[field] == first[field], field
    assert counted(worker, "research_page_cache_hits_total") == 1
    assert counted(worker, "research_page_cache_misses_total") == 1


async def test_a_cache_hit_is_charged_to_the_report_like_a_fetch(
    settings: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis
) -> None:
    site = Site()
    async with (
        site_server(ca, site) as server,
        worker_and_client(cache_settings(settings, ca, fetch_budget=1), token) as (_, client),
    ):
        url = server.url("/a", name="site.test")
        await client.fetch(f"{report}-first", url)
        hit = await client.fetch(report, url)
        over = await client.fetch(report, url)
    assert hit["cached"] is True
    assert int(await redis.hget(keys.budget(report), "fetch") or 0) == 1
    assert over["error"]["kind"] == "budget_exhausted"
    assert site.hits["/a"] == 1


async def test_a_report_that_has_not_seen_a_url_is_refused_even_when_the_page_is_cached(
    settings: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis
) -> None:
    site = Site()
    async with (
        site_server(ca, site) as server,
        worker_and_client(cache_settings(settings, ca, url_menu=True), token) as (_, client),
    ):
        url = server.url("/a", name="site.test")
        await client.seed_urls(f"{report}-seen", [url])
        seen = await client.fetch(f"{report}-seen", url)
        unseen = await client.fetch(report, url)
    assert seen["ok"] is True
    assert unseen["error"]["kind"] == "url_not_in_menu"
    assert "text" not in unseen
    assert await redis.exists(keys.budget(report)) == 0  # a menu refusal costs nothing, cached or not


async def test_a_cached_pages_links_land_on_the_second_reports_menu(
    settings: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis
) -> None:
    site = Site()
    async with (
        site_server(ca, site) as server,
        worker_and_client(cache_settings(settings, ca, url_menu=True), token) as (_, client),
    ):
        url = server.url("/a", name="site.test")
        second = f"{report}-2"
        await client.seed_urls(report, [url])
        await client.seed_urls(second, [url])
        await client.fetch(report, url)
        hit = await client.fetch(second, url)
        follow = await client.fetch(second, server.url("/a/next", name="site.test"))
    assert hit["cached"] is True
    menu = {m.decode() for m in await redis.smembers(keys.menu(second))}
    assert set(hit["links"]) <= menu
    assert server.url("/elsewhere", name="other.test") in menu
    assert follow["ok"] is True, follow


async def test_a_cached_cross_site_redirect_is_refused_for_a_report_that_has_not_seen_its_target(
    settings: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis
) -> None:
    async def away(request: web.Request) -> web.Response:
        site.hits["/away"] += 1
        raise web.HTTPFound(f"https://other.test:{request.url.port}/target")

    site = Site()
    async with (
        site_server(ca, site, {"/away": away}) as server,
        worker_and_client(cache_settings(settings, ca, url_menu=True), token) as (_, client),
    ):
        url = server.url("/away", name="site.test")
        target = server.url("/target", name="other.test")
        knows, stranger, also_knows = report, f"{report}-stranger", f"{report}-knows"
        await client.seed_urls(knows, [url, target])
        await client.seed_urls(stranger, [url])
        await client.seed_urls(also_knows, [url, target])
        first = await client.fetch(knows, url)
        refused = await client.fetch(stranger, url)
        allowed = await client.fetch(also_knows, url)
    assert first["ok"] is True and first["final_url"] == target
    assert refused["error"]["kind"] == "url_not_in_menu"
    assert "other.test" in refused["error"]["message"]
    assert allowed["ok"] is True and allowed["cached"] is True
    assert (site.hits["/away"], site.hits["/target"]) == (1, 1)
    # The refused report learned nothing from the page: none of its links reached its menu.
    assert await redis.smembers(keys.menu(stranger)) == {url.encode()}


@pytest.mark.parametrize(
    "cache_control",
    [
        pytest.param("no-store", id="no-store"),
        pytest.param("private", id="private"),
        pytest.param("max-age=600, No-Store", id="no-store among others, any case"),
        pytest.param('private="Set-Cookie"', id="private for some fields"),
        pytest.param('public, ext="a, b", private', id="private after a quoted comma"),
    ],
)
async def test_a_page_whose_response_forbids_keeping_it_is_fetched_again(
    settings: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis, cache_control: str
) -> None:
    site = Site()
    site.headers["/a"] = {"Cache-Control": cache_control}
    async with (
        site_server(ca, site) as server,
        worker_and_client(cache_settings(settings, ca), token) as (
            _,
            client,
        ),
    ):
        url = server.url("/a", name="site.test")
        first = await client.fetch(report, url)
        second = await client.fetch(f"{report}-2", url)
        kept = await redis.exists(entry_key(settings, url))
    assert first["ok"] is True and second["ok"] is True
    assert second["cached"] is False
    assert site.hits["/a"] == 2
    assert kept == 0


async def test_a_page_asking_only_for_revalidation_is_kept(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    site = Site()
    site.headers["/a"] = {"Cache-Control": "no-cache, max-age=0, must-revalidate"}
    async with (
        site_server(ca, site) as server,
        worker_and_client(cache_settings(settings, ca), token) as (
            _,
            client,
        ),
    ):
        url = server.url("/a", name="site.test")
        await client.fetch(report, url)
        second = await client.fetch(f"{report}-2", url)
    assert second["cached"] is True
    assert site.hits["/a"] == 1


async def test_fresh_skips_the_cache_and_its_page_replaces_the_kept_copy(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    site = Site()
    async with (
        site_server(ca, site) as server,
        worker_and_client(cache_settings(settings, ca), token) as (
            _,
            client,
        ),
    ):
        url = server.url("/a", name="site.test")
        await client.fetch(report, url)
        await asyncio.sleep(1.1)
        fresh = await client.fetch(f"{report}-2", url, fresh=True)
        after = await client.fetch(f"{report}-3", url)
    assert site.hits["/a"] == 2
    assert fresh["cached"] is False
    assert after["cached"] is True
    assert after["fetched_at"] == fresh["fetched_at"]


@pytest.mark.parametrize("status", [404, 410])
async def test_a_page_that_is_gone_is_kept_briefly_as_gone(
    settings: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis, status: int
) -> None:
    site = Site()
    site.status["/gone"] = status
    async with (
        site_server(ca, site) as server,
        worker_and_client(cache_settings(settings, ca), token) as (
            _,
            client,
        ),
    ):
        url = server.url("/gone", name="site.test")
        first = await client.fetch(report, url)
        second = await client.fetch(f"{report}-2", url)
        ttl_ms = await redis.pttl(entry_key(settings, url))
    assert first["error"]["kind"] == second["error"]["kind"] == "http_status"
    assert first["status"] == second["status"] == status
    assert site.hits["/gone"] == 1
    assert 0 < ttl_ms <= page_cache.GONE_TTL_S * 1000


@pytest.mark.parametrize("status", [500, 403, 429])
async def test_other_failures_are_not_kept(
    settings: Settings, ca: TestCA, token: str, report: str, status: int
) -> None:
    site = Site()
    site.status["/broken"] = status
    async with (
        site_server(ca, site) as server,
        worker_and_client(cache_settings(settings, ca), token) as (
            _,
            client,
        ),
    ):
        url = server.url("/broken", name="site.test")
        first = await client.fetch(report, url)
        second = await client.fetch(f"{report}-2", url)
    assert first["status"] == second["status"] == status
    assert site.hits["/broken"] == 2


async def test_the_extract_modes_are_kept_apart(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    site = Site()
    async with (
        site_server(ca, site) as server,
        worker_and_client(cache_settings(settings, ca), token) as (
            _,
            client,
        ),
    ):
        url = server.url("/a", name="site.test")
        main = await client.fetch(report, url, extract="main")
        full = await client.fetch(report, url, extract="full")
        full_again = await client.fetch(f"{report}-2", url, extract="full")
    assert main["cached"] is False and full["cached"] is False and full_again["cached"] is True
    assert site.hits["/a"] == 2


async def test_jobs_wanting_one_page_at_once_make_one_request_and_share_its_page(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    site = Site()
    site.delay_s = 0.5
    async with (
        site_server(ca, site) as server,
        worker_and_client(cache_settings(settings, ca), token) as (
            worker,
            client,
        ),
    ):
        url = server.url("/a", name="site.test")
        results = await asyncio.gather(*(client.fetch(f"{report}-{i}", url) for i in range(8)))
    assert site.hits["/a"] == 1
    assert all(r["ok"] for r in results), results
    assert len({r["text"] for r in results}) == 1
    assert sorted(r["cached"] for r in results) == [False] + [True] * 7
    joins = counted(worker, "research_page_flight_joins_total")
    assert joins + counted(worker, "research_page_cache_hits_total") == 7
    assert joins >= 1


async def test_a_failure_reaches_the_jobs_that_waited_for_it_and_is_then_forgotten(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    site = Site()
    site.delay_s = 0.5
    site.status["/broken"] = 500
    async with (
        site_server(ca, site) as server,
        worker_and_client(cache_settings(settings, ca), token) as (
            _,
            client,
        ),
    ):
        url = server.url("/broken", name="site.test")
        together = await asyncio.gather(*(client.fetch(f"{report}-{i}", url) for i in range(5)))
        later = await client.fetch(f"{report}-later", url)
    assert [r["status"] for r in together] == [500] * 5
    assert all(r["error"]["message"] == "the server answered HTTP 500" for r in together)
    assert later["status"] == 500
    assert site.hits["/broken"] == 2


async def test_a_redirect_the_fetchers_menu_refuses_does_not_refuse_a_waiter_whose_menu_has_it(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    async def away(request: web.Request) -> web.Response:
        site.hits["/away"] += 1
        await asyncio.sleep(0.5)
        raise web.HTTPFound(f"https://other.test:{request.url.port}/target")

    site = Site()
    async with (
        site_server(ca, site, {"/away": away}) as server,
        worker_and_client(cache_settings(settings, ca, url_menu=True), token) as (_, client),
    ):
        url = server.url("/away", name="site.test")
        target = server.url("/target", name="other.test")
        stranger, knows = f"{report}-stranger", f"{report}-knows"
        await client.seed_urls(stranger, [url])
        await client.seed_urls(knows, [url, target])
        leading = asyncio.create_task(client.fetch(stranger, url))
        while site.hits["/away"] == 0:
            await asyncio.sleep(0.01)
        waiting = await client.fetch(knows, url)
        refused = await leading
    assert refused["error"]["kind"] == "url_not_in_menu"
    assert waiting["ok"] is True and waiting["final_url"] == target
    assert site.hits["/away"] == 2


async def test_with_the_cache_off_every_fetch_reaches_the_server(
    settings: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis
) -> None:
    site = Site()
    site.delay_s = 0.2
    async with (
        site_server(ca, site) as server,
        worker_and_client(cache_settings(settings, ca, cache_ttl_s=0), token) as (_, client),
    ):
        url = server.url("/a", name="site.test")
        together = await asyncio.gather(*(client.fetch(f"{report}-{i}", url) for i in range(3)))
        after = await client.fetch(f"{report}-after", url)
        kept = await redis.exists(entry_key(settings, url))
    assert [r["cached"] for r in [*together, after]] == [False] * 4
    assert site.hits["/a"] == 4
    assert kept == 0


async def test_a_page_is_cached_once_as_the_entry_that_names_its_kept_document(
    settings: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis
) -> None:
    site = Site()
    async with (
        site_server(ca, site) as server,
        worker_and_client(cache_settings(settings, ca), token) as (_, client),
    ):
        url = server.url("/a", name="site.test")
        first = await client.fetch(report, url)
        entry = await cached_entry(redis, settings, url)
        second = await client.fetch(f"{report}-2", url)
    # The entry is the document's name and the hops: the page's text is in Redis once, in the
    # document, which serves the hit; nothing of the cache's own index counts it twice.
    assert isinstance(entry, KeptPage) and entry.url == first["url"]
    assert await redis.exists(keys.document(entry.document))
    assert await redis.zcard(keys.page_index(settings.queue_name)) == 0
    assert second["cached"] is True and site.hits["/a"] == 1
    assert {k: v for k, v in second.items() if k not in ("cached", "job_id", "report_id")} == {
        k: v for k, v in first.items() if k not in ("cached", "job_id", "report_id")
    }


async def test_a_page_whose_document_does_not_fit_is_served_but_not_cached(
    settings: Settings,
    ca: TestCA,
    token: str,
    report: str,
    redis: aioredis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The documents are full (their bound is 0): the cache would only hold a name for nothing.
    monkeypatch.setattr(documents, "MAX_DOCUMENT_BYTES", 0)
    site = Site()
    async with (
        site_server(ca, site) as server,
        worker_and_client(cache_settings(settings, ca), token) as (_, client),
    ):
        url = server.url("/a", name="site.test")
        first = await client.fetch(report, url)
        cached = await redis.exists(entry_key(settings, url))
        second = await client.fetch(f"{report}-2", url)
    assert first["ok"] is True and second["ok"] is True and second["cached"] is False
    assert cached == 0 and site.hits["/a"] == 2


async def test_a_page_whose_document_redis_refused_is_cached_whole_and_a_hit_serves_its_first_piece(
    settings: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis
) -> None:
    site = Site()
    tool = FetchPageTool(FakeResolver(SITE))
    async with (
        site_server(ca, site) as server,
        running_worker(cache_settings(settings, ca), [tool]),
        ResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=30) as client,
    ):
        pages = tool._started().pages
        finish = pages._finish

        async def refusing(keys: list[str], args: list[object]) -> object:
            if len(keys) > 5:  # a flight's end that keeps a document: Redis is full
                raise OutOfMemoryError("OOM command not allowed when used memory > 'maxmemory'.")
            return await finish(keys=keys, args=args)

        pages._finish = refusing  # type: ignore[assignment]
        url = server.url("/a", name="site.test")
        first = await client.fetch(report, url)
        entry = await cached_entry(redis, settings, url)
        second = await client.fetch(f"{report}-2", url)
    assert isinstance(entry, Page) and entry.document is None and entry.text
    assert first["ok"] is True and second["cached"] is True and site.hits["/a"] == 1
    assert second["text"] == first["text"]


async def test_a_hit_whose_document_is_gone_fetches_the_page_again(
    settings: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis
) -> None:
    site = Site()
    async with (
        site_server(ca, site) as server,
        worker_and_client(cache_settings(settings, ca), token) as (_, client),
    ):
        url = server.url("/a", name="site.test")
        await client.fetch(report, url)
        entry = await cached_entry(redis, settings, url)
        assert isinstance(entry, KeptPage)
        await redis.delete(keys.document(entry.document))  # shed by a full Redis, say
        again = await client.fetch(f"{report}-2", url)
        later = await client.fetch(f"{report}-3", url)
    assert again["ok"] is True and again["cached"] is False and site.hits["/a"] == 2
    assert later["cached"] is True and site.hits["/a"] == 2


async def test_the_cache_stays_within_its_bound_by_evicting_the_entries_closest_to_expiry(
    settings: Settings,
    ca: TestCA,
    token: str,
    report: str,
    redis: aioredis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What the cache holds whole (here, pages gone with a 404) is indexed, sized and bounded.
    site = Site()
    paths = [f"/p{i}" for i in range(5)]
    site.status.update({path: 404 for path in paths})
    async with site_server(ca, site) as server:
        urls = [server.url(path, name="site.test") for path in paths]
        async with worker_and_client(cache_settings(settings, ca), token) as (_, client):
            await client.fetch(report, urls[0])
            one_entry = await redis.strlen(entry_key(settings, urls[0]))
            # Room for two and a half entries of this size (the paths differ by a few bytes at most).
            bound = one_entry * 5 // 2
            monkeypatch.setattr(page_cache, "MAX_CACHE_BYTES", bound)
            for url in urls[1:]:
                await client.fetch(report, url)
            kept = [await redis.exists(entry_key(settings, url)) for url in urls]
            total = int(await redis.get(keys.page_bytes(settings.queue_name)) or 0)
            members = await redis.zrange(keys.page_index(settings.queue_name), 0, -1)
            await client.fetch(f"{report}-2", urls[0])
    assert kept == [0, 0, 0, 1, 1]
    assert total <= bound
    # Each index member carries its entry's size: the total is their sum.
    assert total == sum(int(member.rpartition(b"|")[2]) for member in members)
    assert len(members) == 2
    assert site.hits[paths[0]] == 2  # evicted: asked of the server again


async def test_every_cache_key_carries_the_queue_so_deployments_sharing_a_redis_do_not_share_pages(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    site = Site()
    other_queue = dataclasses.replace(settings, queue_name=f"{settings.queue_name}-other")
    async with site_server(ca, site) as server:
        url = server.url("/a", name="site.test")
        async with worker_and_client(cache_settings(settings, ca), token) as (_, client):
            await client.fetch(report, url)
        async with worker_and_client(cache_settings(other_queue, ca), token) as (_, client):
            other = await client.fetch(report, url)
    assert other["cached"] is False
    assert site.hits["/a"] == 2


def test_the_tool_definition_offers_fresh_to_the_model_and_says_it_costs_the_same(settings: Settings) -> None:
    fresh = fetch_page_definition(settings)["input_schema"]["properties"]["fresh"]
    assert fresh["type"] == "boolean" and fresh["default"] is False
    assert "again" in fresh["description"] and "costs the same" in fresh["description"]
    assert "fresh" in FetchPageTool.params
