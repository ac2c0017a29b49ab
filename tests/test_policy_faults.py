"""The operator's policy where the red team found it leaking (issue 36).

robots.txt's own redirects are judged by the domain lists (a blocked domain is never reached); a
robots.txt that starts with a byte-order mark is read; a group written for the product token with
a version (``research-worker/0.1``) is this worker's group (RFC 9309 2.2.1); ``check-url`` applies
the domain lists; search results are filtered before the cut to ``max_results``, so blocked ones
never crowd out allowed ones.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest
import redis.asyncio as aioredis
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st
from protego import Protego

from jobs.robots import rules_text
from jobs.search import WebSearchTool
from tests.support.fake_searxng import fake_searxng, result, results_answer
from tests.support.run_cli import run_cli
from tests.support.tls import TestCA
from tests.support.workers import running_worker
from tests.test_operator_policy import Site, policy_worker, robots_file
from worker.client import ResearchClient
from worker.config import SearchProvider, Settings
from worker.state.budget import Budgets, Tool


class RobotsMovedAway(Site):
    """site.test's robots.txt redirects to other.test's, whose file would disallow everything."""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.path == "/robots.txt" and request.host.startswith("site.test"):
            self.asked.append("site.test/robots.txt")
            raise web.HTTPFound(f"https://other.test:{request.url.port}/robots.txt")
        return await super().handle(request)


async def test_a_robots_txt_that_redirects_to_a_blocked_domain_never_reaches_it(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    site = RobotsMovedAway()
    site.robots = robots_file("User-agent: *\nDisallow: /\n")
    blocked = frozenset({"other.test"})
    async with policy_worker(settings, ca, token, site, robots=True, blocked_domains=blocked) as (s, c):
        result = await c.fetch(report, s.url("/page", name="site.test"))
    assert site.asked == ["site.test/robots.txt", "site.test/page"]  # other.test never asked
    # The file could not be read (its hop was to a blocked domain): no rules, as RFC 9309 says.
    assert result["ok"] is True, result


@pytest.mark.parametrize(
    "body",
    [
        "\ufeffUser-agent: *\nDisallow: /private\n".encode(),
        "\ufeffUser-agent: research-worker\r\nDisallow: /private\r\n".encode(),
    ],
)
async def test_a_robots_txt_that_starts_with_a_byte_order_mark_is_read(
    settings: Settings, ca: TestCA, token: str, report: str, body: bytes
) -> None:
    site = Site()
    site.robots = robots_file(body)
    async with policy_worker(settings, ca, token, site, robots=True) as (s, c):
        refused = await c.fetch(report, s.url("/private/x", name="site.test"))
        allowed = await c.fetch(report, s.url("/public", name="site.test"))
    assert refused["error"]["kind"] == "robots_disallowed", refused
    assert allowed["ok"] is True


@pytest.mark.parametrize(
    "group",
    [
        "research-worker/0.1",
        "Research-Worker/0.1",
        "research-worker/0.1 (+https://example.org/bot)",
        "RESEARCH-WORKER",
    ],
)
async def test_a_group_for_the_product_token_with_a_version_is_this_workers_group(
    settings: Settings, ca: TestCA, token: str, report: str, group: str
) -> None:
    site = Site()
    site.robots = robots_file(f"User-agent: {group}\nDisallow: /private\n\nUser-agent: *\nDisallow: /\n")
    async with policy_worker(settings, ca, token, site, robots=True) as (s, c):
        refused = await c.fetch(report, s.url("/private/x", name="site.test"))
        allowed = await c.fetch(report, s.url("/public", name="site.test"))
    assert refused["error"]["kind"] == "robots_disallowed", refused
    assert allowed["ok"] is True, allowed  # the catch-all group's Disallow: / is not ours


TOKEN_CHARS = st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_-")


@given(
    name=st.text(TOKEN_CHARS, min_size=1, max_size=20),
    suffix=st.sampled_from(["", "/0.1", "/2.0 (+https://x.example/bot)", "/1 # a comment", " extra words"]),
)
def test_a_user_agent_line_is_read_for_its_product_token(name: str, suffix: str) -> None:
    """Oracle: protego's own matching of the bare token, the one form it reads as RFC 9309 says."""
    text = f"User-agent: {name}{suffix}\nDisallow: /private\n\nUser-agent: *\nAllow: /\n"
    bare = f"User-agent: {name}\nDisallow: /private\n\nUser-agent: *\nAllow: /\n"
    url = "https://a.test/private"
    assert Protego.parse(rules_text(text)).can_fetch(url, name) == Protego.parse(bare).can_fetch(url, name)
    assert not Protego.parse(rules_text(text)).can_fetch(url, name)


@pytest.mark.parametrize(
    ("env", "kind"),
    [
        ({"RESEARCH_BLOCKED_DOMAINS": "example.org"}, "domain_not_allowed"),
        ({"RESEARCH_ALLOWED_DOMAINS": "example.com"}, "domain_not_allowed"),
        ({"RESEARCH_BLOCKED_DOMAINS": "example.com"}, None),
        ({}, None),
    ],
)
def test_check_url_applies_the_domain_lists(env: dict[str, str], kind: str | None) -> None:
    proc = run_cli(
        "check-url",
        "https://www.example.org/a",
        "--resolves-to",
        "93.184.216.34",
        env={"PATH": "/usr/bin:/bin", **env},
    )
    printed = json.loads(proc.stdout)
    if kind is None:
        assert (printed["verdict"], proc.returncode) == ("allow", 0), printed
    else:
        assert printed["verdict"] == "refuse" and printed["kind"] == kind, printed
        assert proc.returncode != 0


async def test_blocked_search_results_never_crowd_out_allowed_ones(
    settings: Settings, token: str, report: str, redis: aioredis.Redis
) -> None:
    """Six blocked results first, then four allowed: max_results=3 still brings three."""
    async with fake_searxng() as fake:
        s = dataclasses.replace(
            settings,
            search_provider=SearchProvider.SEARXNG,
            searxng_url=fake.base_url,
            search_timeout_s=3.0,
            usage_source=f"src-{token}",
            blocked_domains=frozenset({"blocked.example"}),
        )
        listed = [result(f"https://blocked.example/{n}") for n in range(6)]
        listed += [result(f"https://allowed.example/{n}") for n in range(4)]
        fake.will(results_answer(listed))
        async with (
            running_worker(s, [WebSearchTool()]),
            ResearchClient(settings=s, job_id_prefix=f"{token}-", wait_s=20) as client,
        ):
            found = await client.search(report, "tidal energy", max_results=3)
        asked = fake.requests
    assert found["ok"] is True, found
    assert [r["url"] for r in found["results"]] == [f"https://allowed.example/{n}" for n in range(3)]
    assert len(asked) == 1  # one call to the provider
    usage, _ = await Budgets(redis, s).usage(report)
    assert usage[Tool.SEARCH].used == 1  # and one charge


async def test_without_domain_lists_the_provider_is_asked_for_what_the_call_asked(
    settings: Settings, token: str, report: str
) -> None:
    async with fake_searxng() as fake:
        s = dataclasses.replace(
            settings,
            search_provider=SearchProvider.SEARXNG,
            searxng_url=fake.base_url,
            search_timeout_s=3.0,
            usage_source=f"src-{token}",
        )
        fake.will(results_answer([result(f"https://allowed.example/{n}") for n in range(10)]))
        async with (
            running_worker(s, [WebSearchTool()]),
            ResearchClient(settings=s, job_id_prefix=f"{token}-", wait_s=20) as client,
        ):
            found = await asyncio.wait_for(client.search(report, "tidal energy", max_results=2), 30)
    assert [r["url"] for r in found["results"]] == ["https://allowed.example/0", "https://allowed.example/1"]
