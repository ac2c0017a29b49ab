"""The URL menu: a report fetches only what it has seen (search results, fetched links, the briefing)."""

from __future__ import annotations

import dataclasses
import logging

import pytest
import redis.asyncio as aioredis
from aiohttp import web

from tests.support.fake_dns import FakeResolver
from tests.support.fetching import fetch_settings, fetching
from tests.support.tls import TestCA, serve
from worker.client import ResearchClient
from worker.config import Settings
from worker.state import keys
from worker.state.menu import MENU_CAP, RENEW_EVERY_S, Menu

SITE = {"site.test": ["127.0.0.1"], "www.site.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]}


async def linked_page(request: web.Request) -> web.Response:
    port = request.url.port
    return web.Response(
        content_type="text/html",
        text=(
            "<html><body><p>start</p>"
            '<a href="relative">r</a>'
            f'<a href="https://site.test:{port}/absolute">a</a>'
            f'<a href="http://site.test:{port}/plain-http">h</a>'
            "</body></html>"
        ),
    )


async def echo_path(request: web.Request) -> web.Response:
    return web.Response(text=f"<p>at {request.path}</p>", content_type="text/html")


def menu_settings(settings: Settings, ca: TestCA) -> Settings:
    return fetch_settings(settings, ca, url_menu=True)


async def test_a_fetch_before_anything_was_seen_is_refused_and_costs_nothing(
    settings: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis
) -> None:
    async with serve({"/{p:.*}": echo_path}, ca.server_context()) as server:
        async with fetching(menu_settings(settings, ca), token, report, FakeResolver(SITE)) as h:
            result = await h.fetch(server.url("/secret?q=data", name="site.test"))
    assert result["error"]["kind"] == "url_not_in_menu"
    assert await redis.exists(keys.budget(report)) == 0


async def test_a_seeded_url_is_fetchable_whatever_its_fragment_and_host_case(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    async with serve({"/{p:.*}": echo_path}, ca.server_context()) as server:
        async with fetching(menu_settings(settings, ca), token, report, FakeResolver(SITE)) as h:
            await h.client.seed_urls(report, [f"https://SITE.Test:{server.port}/page#section-2"])
            result = await h.fetch(f"https://site.test:{server.port}/page#other")
    assert result["ok"] is True, result
    assert result["url"] == f"https://site.test:{server.port}/page"


async def test_a_fetched_pages_links_unlock_the_next_hop_but_http_links_never_enter(
    settings: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis
) -> None:
    routes = {"/start": linked_page, "/{p:.*}": echo_path}
    async with serve(routes, ca.server_context()) as server:
        async with fetching(menu_settings(settings, ca), token, report, FakeResolver(SITE)) as h:
            await h.client.seed_urls(report, [server.url("/start", name="site.test")])
            first = await h.fetch(server.url("/start", name="site.test"))
            relative = await h.fetch(server.url("/relative", name="site.test"))
            absolute = await h.fetch(server.url("/absolute", name="site.test"))
            not_seen = await h.fetch(server.url("/never-linked", name="site.test"))
    assert first["ok"] is True
    assert server.url("/relative", name="site.test") in first["links"]
    assert relative["ok"] is True
    assert absolute["ok"] is True
    assert not_seen["error"]["kind"] == "url_not_in_menu"
    members = {m.decode() for m in await redis.smembers(keys.menu(report))}
    assert all(m.startswith("https://") for m in members)
    assert not any("plain-http" in m for m in members)


async def test_a_cross_site_redirect_must_land_on_the_menu_while_a_same_site_one_is_followed(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    async def to_www(request: web.Request) -> web.Response:
        raise web.HTTPFound(f"https://www.site.test:{request.url.port}/landing")

    async def to_other(request: web.Request) -> web.Response:
        raise web.HTTPFound(f"https://other.test:{request.url.port}/{request.match_info['where']}")

    routes = {"/www": to_www, "/away/{where}": to_other, "/{p:.*}": echo_path}
    async with serve(routes, ca.server_context()) as server:
        async with fetching(menu_settings(settings, ca), token, report, FakeResolver(SITE)) as h:
            await h.client.seed_urls(
                report,
                [
                    server.url("/www", name="site.test"),
                    server.url("/away/unseen", name="site.test"),
                    server.url("/away/seen", name="site.test"),
                    server.url("/seen", name="other.test"),
                ],
            )
            same_site = await h.fetch(server.url("/www", name="site.test"))
            unseen = await h.fetch(server.url("/away/unseen", name="site.test"))
            seen = await h.fetch(server.url("/away/seen", name="site.test"))
    assert same_site["ok"] is True
    assert same_site["final_url"] == server.url("/landing", name="www.site.test")
    assert unseen["error"]["kind"] == "url_not_in_menu"
    assert seen["ok"] is True


async def test_the_menu_is_per_report(settings: Settings, ca: TestCA, token: str, report: str) -> None:
    async with serve({"/{p:.*}": echo_path}, ca.server_context()) as server:
        async with fetching(menu_settings(settings, ca), token, report, FakeResolver(SITE)) as h:
            await h.client.seed_urls(report, [server.url("/mine", name="site.test")])
            mine = await h.fetch(server.url("/mine", name="site.test"))
            theirs = await h.fetch(server.url("/mine", name="site.test"), report=f"{report}-b")
    assert mine["ok"] is True
    assert theirs["error"]["kind"] == "url_not_in_menu"


async def test_the_cap_holds_and_the_overflow_is_logged(
    settings: Settings, redis: aioredis.Redis, report: str, caplog: pytest.LogCaptureFixture
) -> None:
    menu = Menu(redis, settings)
    await menu.record(report, [f"https://site.test/{i}" for i in range(MENU_CAP - 10)])
    with caplog.at_level(logging.WARNING):
        added = await menu.record(report, [f"https://site.test/more/{i}" for i in range(50)])
    assert added == 10
    assert await menu.size(report) == MENU_CAP
    assert sum("menu full" in r.getMessage() for r in caplog.records) == 1
    with caplog.at_level(logging.WARNING):
        again = await menu.record(report, [f"https://site.test/later/{i}" for i in range(5)])
    assert again == 0
    assert sum("menu full" in r.getMessage() for r in caplog.records) == 1  # said once, counted after
    ttl = await redis.ttl(keys.menu(report))
    assert settings.budget_window_s < ttl <= settings.budget_window_s + 2 * RENEW_EVERY_S


async def test_a_menus_ttl_is_set_when_it_starts_and_renewed_once_a_minute_by_a_write_that_adds(
    settings: Settings, redis: aioredis.Redis, report: str
) -> None:
    window = settings.budget_window_s + 2 * RENEW_EVERY_S
    key = keys.menu(report)
    first, second = Menu(redis, settings), Menu(redis, settings)  # two workers
    await first.record(report, ["https://site.test/1"])
    assert window - 2 <= await redis.ttl(key) <= window
    await redis.expire(key, 1000)  # as if a minute had gone by since
    await first.record(report, ["https://site.test/2"])
    assert await redis.ttl(key) <= 1000  # this worker renewed it within the minute
    await second.record(report, ["https://site.test/1"])  # adds nothing: changes nothing
    assert await redis.ttl(key) <= 1000
    await second.record(report, ["https://site.test/3"])  # its renewal was not spent: this one renews
    assert window - 2 <= await redis.ttl(key) <= window
    await redis.delete(key)
    await first.record(report, ["https://site.test/4"])  # starts the set again: always given its ttl
    assert window - 2 <= await redis.ttl(key) <= window


async def test_only_https_urls_the_guardian_would_parse_enter_the_menu(
    settings: Settings, redis: aioredis.Redis, report: str
) -> None:
    menu = Menu(redis, settings)
    added = await menu.record(
        report,
        [
            "http://site.test/a",
            "javascript:alert(1)",
            "https://user@site.test/b",
            "https://0x7f.1/c",
            "https://Site.Test/d#x",
            "https://site.test/d",
        ],
    )
    assert added == 1
    assert {m.decode() for m in await redis.smembers(keys.menu(report))} == {"https://site.test/d"}


async def test_with_the_menu_off_any_url_may_be_fetched(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    s = dataclasses.replace(menu_settings(settings, ca), url_menu=False)
    async with serve({"/{p:.*}": echo_path}, ca.server_context()) as server:
        async with fetching(s, token, report, FakeResolver(SITE)) as h:
            result = await h.fetch(server.url("/anything", name="site.test"))
    assert result["ok"] is True


async def test_seed_urls_refuses_a_bad_report_id(settings: Settings) -> None:
    from worker.errors import MissingReportId

    async with ResearchClient(settings=settings) as client:
        with pytest.raises(MissingReportId):
            await client.seed_urls("bad id", ["https://site.test/"])
