"""The operator's policy through a real worker: domain lists (deployment and per report) and robots.txt.

Pages come from a local TLS server under names the fake resolver maps to 127.0.0.1; every
refusal here is decided before the budget is charged, so each test also checks what it cost.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from aiohttp import web

from jobs import robots
from jobs.fetch.tool import FetchPageTool
from tests.support.fake_dns import FakeResolver
from tests.support.fetching import fetch_settings
from tests.support.tls import TestCA, TlsServer, serve
from tests.support.workers import running_worker
from worker.client import ClientError, ResearchClient
from worker.config import Settings
from worker.state import keys

NAMES = {
    name: ["127.0.0.1"]
    for name in ("site.test", "www.site.test", "a.site.test", "other.test", "a.other.test")
}


class Site:
    """Answers pages, and robots.txt as a test sets it; records every path asked for."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.robots: web.StreamResponse | None = None
        self.robots_by_host: dict[str, web.StreamResponse] = {}
        self.robots_delay_s = 0.0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.asked.append(f"{request.host.split(':')[0]}{request.path}")
        if request.path == "/robots.txt":
            await asyncio.sleep(self.robots_delay_s)
            return (
                self.robots_by_host.get(request.host.split(":")[0]) or self.robots or web.Response(status=404)
            )
        if request.path.startswith("/to-other"):
            raise web.HTTPFound(f"https://other.test:{request.url.port}/landing")
        return web.Response(text=f"<title>t</title><p>page {request.path}</p>", content_type="text/html")


@contextlib.asynccontextmanager
async def policy_worker(
    settings: Settings, ca: TestCA, token: str, site: Site, **changes: Any
) -> AsyncIterator[tuple[TlsServer, ResearchClient]]:
    tuned = fetch_settings(settings, ca, cache_ttl_s=0, **changes)
    async with (
        serve({"/{p:.*}": site.handle}, ca.server_context()) as server,
        running_worker(tuned, [FetchPageTool(FakeResolver(NAMES))]),
        ResearchClient(settings=tuned, job_id_prefix=f"{token}-", wait_s=30) as client,
    ):
        yield server, client


async def charged(redis: aioredis.Redis, report: str) -> int:
    return int(await redis.hget(keys.budget(report), "fetch") or 0)


@pytest.mark.parametrize("name", ["other.test", "a.other.test", "OTHER.test"])
async def test_a_fetch_on_a_blocked_domain_or_its_subdomain_is_domain_not_allowed_and_costs_nothing(
    settings: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis, name: str
) -> None:
    site = Site()
    async with policy_worker(settings, ca, token, site, blocked_domains=frozenset({"other.test"})) as (s, c):
        refused = await c.fetch(report, s.url("/page", name=name))
        allowed = await c.fetch(report, s.url("/page", name="site.test"))
    assert refused["ok"] is False and refused["error"]["kind"] == "domain_not_allowed", refused
    assert allowed["ok"] is True
    assert site.asked == ["site.test/page"]
    assert await charged(redis, report) == 1


async def test_with_an_allow_list_only_its_domains_and_their_subdomains_are_fetched(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    site = Site()
    async with policy_worker(settings, ca, token, site, allowed_domains=frozenset({"site.test"})) as (s, c):
        results = [
            await c.fetch(report, s.url("/p", name=n)) for n in ("site.test", "a.site.test", "other.test")
        ]
    assert [r["ok"] for r in results] == [True, True, False]
    assert results[2]["error"]["kind"] == "domain_not_allowed"
    assert "not on the allowed domain list" in results[2]["error"]["message"]


async def test_a_redirect_hop_to_a_blocked_domain_is_domain_not_allowed(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    site = Site()
    async with policy_worker(settings, ca, token, site, blocked_domains=frozenset({"other.test"})) as (s, c):
        result = await c.fetch(report, s.url("/to-other", name="site.test"))
    assert result["error"]["kind"] == "domain_not_allowed"
    assert site.asked == ["site.test/to-other"]  # the blocked host was never asked


async def test_a_reports_own_lists_narrow_the_deployments_for_that_report_only(
    settings: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis
) -> None:
    site = Site()
    async with policy_worker(settings, ca, token, site) as (s, c):
        await c.set_domains(report, blocked=["site.test"])
        await c.set_domains(f"{report}-b", allowed=["other.test"])
        mine = await c.fetch(report, s.url("/p", name="a.site.test"))
        mine_other = await c.fetch(report, s.url("/p", name="other.test"))
        theirs = await c.fetch(f"{report}-b", s.url("/p", name="site.test"))
        neutral = await c.fetch(f"{report}-c", s.url("/p", name="site.test"))
    assert [mine["ok"], mine_other["ok"], theirs["ok"], neutral["ok"]] == [False, True, False, True]
    assert {mine["error"]["kind"], theirs["error"]["kind"]} == {"domain_not_allowed"}
    assert await charged(redis, report) == 1


@pytest.mark.parametrize("entry", ["10.0.0.5", "*.*.site.test", "site.test/path", "site.test:443"])
async def test_set_domains_refuses_what_is_not_a_domain_name(
    settings: Settings, token: str, report: str, entry: str
) -> None:
    async with ResearchClient(settings=settings, job_id_prefix=f"{token}-") as client:
        with pytest.raises(ClientError, match="set_domains"):
            await client.set_domains(report, blocked=[entry])
        with pytest.raises(ClientError):
            await client.set_domains(report, allowed="site.test")  # type: ignore[arg-type]


async def test_a_report_list_redis_holds_in_another_shape_allows_nothing(
    settings: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis
) -> None:
    site = Site()
    async with policy_worker(settings, ca, token, site) as (s, c):
        await redis.hset(keys.domains(report), "allowed", b"{not json")
        result = await c.fetch(report, s.url("/p", name="site.test"))
    assert result["error"]["kind"] == "domain_not_allowed"


ROBOTS = "User-agent: research-worker\nDisallow: /private\n\nUser-agent: *\nDisallow: /\n"


def robots_file(text: str | bytes, content_type: str = "text/plain", **headers: str) -> web.Response:
    body = text.encode() if isinstance(text, str) else text
    return web.Response(body=body, headers={"Content-Type": content_type, **headers})


async def test_robots_txt_disallows_for_this_worker_and_the_refusal_costs_nothing(
    settings: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis
) -> None:
    site = Site()
    site.robots = robots_file(ROBOTS)
    async with policy_worker(settings, ca, token, site, robots=True) as (s, c):
        refused = await c.fetch(report, s.url("/private/a", name="site.test"))
        allowed = await c.fetch(report, s.url("/public", name="site.test"))
        again = await c.fetch(report, s.url("/private/b", name="site.test"))
    assert refused["error"]["kind"] == "robots_disallowed", refused
    assert again["error"]["kind"] == "robots_disallowed"
    assert allowed["ok"] is True
    # robots.txt asked once for the site, then kept; only the allowed page was fetched.
    assert site.asked == ["site.test/robots.txt", "site.test/public"]
    assert await charged(redis, report) == 1


async def test_a_redirect_to_another_site_whose_robots_txt_disallows_is_robots_disallowed(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    site = Site()
    site.robots_by_host["other.test"] = robots_file("User-agent: *\nDisallow: /landing\n")
    async with policy_worker(settings, ca, token, site, robots=True) as (s, c):
        result = await c.fetch(report, s.url("/to-other", name="site.test"))
    assert result["error"]["kind"] == "robots_disallowed", result
    assert "other.test/landing" not in site.asked  # the disallowed page was never asked for


@pytest.mark.parametrize(
    ("answer", "ok"),
    [
        pytest.param(web.Response(status=404), True, id="404: no rules, everything allowed"),
        pytest.param(web.Response(status=410), True, id="410: no rules"),
        pytest.param(web.Response(status=503), False, id="503: unreachable, everything disallowed"),
        pytest.param(web.Response(status=500), False, id="500: unreachable"),
        pytest.param(web.Response(status=429), False, id="429: treated as unreachable"),
        pytest.param(
            robots_file(b"\x00\xff\xfe" * 1000, "application/octet-stream"), True, id="binary: no rules"
        ),
        pytest.param(robots_file("\x00garbage\xff"), True, id="garbage text: no rules"),
        pytest.param(
            web.Response(status=302, headers={"Location": "http://site.test/robots.txt"}),
            True,
            id="redirect to http: unavailable",
        ),
    ],
)
async def test_what_robots_txt_answers_decides_as_rfc_9309_says(
    settings: Settings, ca: TestCA, token: str, report: str, answer: web.StreamResponse, ok: bool
) -> None:
    site = Site()
    site.robots = answer
    async with policy_worker(settings, ca, token, site, robots=True) as (s, c):
        result = await c.fetch(report, s.url("/page", name="site.test"))
    assert result["ok"] is ok, result
    if not ok:
        assert result["error"]["kind"] == "robots_disallowed"


async def test_a_robots_txt_that_answers_slowly_is_unreachable_and_disallows(
    settings: Settings, ca: TestCA, token: str, report: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(robots, "FETCH_TIMEOUT_S", 0.3)
    site = Site()
    site.robots_delay_s = 2.0
    async with policy_worker(settings, ca, token, site, robots=True) as (s, c):
        result = await c.fetch(report, s.url("/page", name="site.test"))
    assert result["error"]["kind"] == "robots_disallowed"
    assert "could not be read" in result["error"]["message"]


async def test_only_the_first_500_kib_of_a_huge_robots_txt_is_read(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    site = Site()
    filler = "# " + "x" * 1000 + "\n"
    site.robots = robots_file("User-agent: *\nDisallow: /early\n" + filler * 600 + "Disallow: /late\n")
    async with policy_worker(settings, ca, token, site, robots=True) as (s, c):
        early = await c.fetch(report, s.url("/early", name="site.test"))
        late = await c.fetch(report, s.url("/late", name="site.test"))
    assert early["error"]["kind"] == "robots_disallowed"
    assert late["ok"] is True  # its rule lies past 500 KiB, so it was never read


def test_the_product_token_is_the_user_agents_first_word() -> None:
    assert robots.product_token("research-worker/0.1 (+https://example.org/site-owners)") == "research-worker"
    assert robots.product_token("MyBot") == "MyBot"


@pytest.mark.parametrize(
    ("cache_control", "fresh_s"),
    [
        (None, 86400),
        ("max-age=600", 600),
        ("max-age=10", 60),
        ("max-age=999999999", 86400),
        ("no-cache", 86400),
    ],
)
def test_a_robots_verdict_is_kept_for_its_freshness_and_at_most_a_day(
    cache_control: str | None, fresh_s: int
) -> None:
    assert robots._fresh_s(cache_control) == fresh_s


def test_the_user_agent_points_site_owners_at_a_page_that_exists() -> None:
    url = Settings().user_agent.split("+", 1)[1].rstrip(")")
    assert url.endswith("/docs/site-owners.md")
    page = Path(__file__).resolve().parents[1] / "docs" / "site-owners.md"
    assert "RESEARCH_ROBOTS" in page.read_text() and "robots.txt" in page.read_text()


async def test_search_results_on_refused_domains_never_reach_the_agent_nor_the_menu(
    settings: Settings, token: str, report: str, redis: aioredis.Redis
) -> None:
    from jobs.search import WebSearchTool
    from tests.support.fake_openrouter import KEY, completion, fake_openrouter, url_citation
    from worker.config import Secret
    from worker.state.menu import Menu

    async with fake_openrouter() as fake:
        tuned = dataclasses.replace(
            settings,
            openrouter_base_url=fake.base_url,
            openrouter_api_key=Secret(KEY),
            blocked_domains=frozenset({"blocked.example"}),
        )
        fake.will(
            completion(
                [
                    url_citation("https://kept.example/a", "Kept", "A."),
                    url_citation("https://news.blocked.example/b", "Blocked", "B."),
                    url_citation("https://evil-blocked.example/c", "Lookalike", "C."),
                    url_citation("https://narrowed.example/d", "Narrowed", "D."),
                ]
            )
        )
        async with (
            running_worker(tuned, [WebSearchTool()]),
            ResearchClient(settings=tuned, job_id_prefix=f"{token}-", wait_s=20) as client,
        ):
            await client.set_domains(report, blocked=["narrowed.example"])
            result = await client.search(report, "who owns the company", max_results=10)
    assert [r["url"] for r in result["results"]] == [
        "https://kept.example/a",
        "https://evil-blocked.example/c",
    ]
    menu = Menu(redis, tuned)
    assert not await menu.contains(report, "https://news.blocked.example/b")
    assert await menu.contains(report, "https://kept.example/a")
