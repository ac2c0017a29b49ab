"""Per-organization daily caps (RESEARCH_ORG_DAILY_SEARCHES, RESEARCH_ORG_DAILY_FETCHES).

Charged in the same script as each report's own budget, so concurrent charges from many reports
never pass the organization's cap, a refusal by either leaves both counters as they were, and a
refund gives back both. One MCP token across many sessions (each its own report) stays within
its organization's cap; ``research-worker budget --org`` prints the day's counters.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from aiohttp import web
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from jobs.search import WebSearchTool
from tests.support.fake_openrouter import KEY, fake_openrouter
from tests.support.fetching import fetch_settings, fetching
from tests.support.mcp_http import TOKEN, serving, tokens_for
from tests.support.processes import settings_env
from tests.support.run_cli import run_cli
from tests.support.tls import TestCA, serve
from tests.support.workers import running_worker
from worker.client import ResearchClient
from worker.config import ConfigError, Secret, Settings
from worker.state import keys
from worker.state.budget import Budgets, Tool, utc_day_of_ms

DAY = "2026-12-07"


def capped(settings: Settings, searches: int | None = None, fetches: int | None = None) -> Settings:
    return dataclasses.replace(settings, org_daily_searches=searches, org_daily_fetches=fetches)


async def test_concurrent_charges_from_many_reports_never_pass_the_orgs_cap(
    settings: Settings, redis: aioredis.Redis, token: str
) -> None:
    budgets = Budgets(redis, capped(settings, fetches=7))
    org = (f"acme-{token}", DAY)
    charges = await asyncio.gather(
        *(budgets.charge(f"r-{token}-{i % 10}", Tool.FETCH, f"job-{token}-{i}", org) for i in range(60))
    )
    assert sum(c.allowed for c in charges) == 7
    refused = [c for c in charges if not c.allowed]
    assert all(c.by_org and c.org_limit == 7 for c in refused)
    assert int(await redis.hget(keys.org_day(*org), "fetch")) == 7
    # The reports were charged exactly for what the organization allowed.
    reports = [await redis.hget(keys.budget(f"r-{token}-{i}"), "fetch") for i in range(10)]
    assert sum(int(r or 0) for r in reports) == 7


@hypothesis_settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    report_limit=st.integers(1, 6),
    org_limit=st.integers(1, 6),
    calls=st.lists(st.tuples(st.integers(0, 2), st.booleans()), min_size=1, max_size=20),
)
async def test_charges_and_refunds_keep_both_counters_as_a_model_of_them_says(
    settings: Settings,
    redis: aioredis.Redis,
    token: str,
    report_limit: int,
    org_limit: int,
    calls: list[tuple[int, bool]],
) -> None:
    """A model of two counters, against the script: a charge passes only under both limits, a
    refund gives back both. ``calls``: (report number, refund it right after)."""
    run = f"{token}-{abs(hash((report_limit, org_limit, tuple(calls))))}"
    budgets = Budgets(
        redis, capped(dataclasses.replace(settings, search_budget=report_limit), searches=org_limit)
    )
    org = (f"org-{run}", DAY)
    report_used = [0, 0, 0]
    org_used = 0
    try:
        for n, (report_no, refund) in enumerate(calls):
            report_id, job = f"r-{run}-{report_no}", f"j-{run}-{n}"
            charge = await budgets.charge(report_id, Tool.SEARCH, job, org)
            expected = report_used[report_no] < report_limit and org_used < org_limit
            assert charge.allowed is expected
            assert charge.by_org is (report_used[report_no] < report_limit and org_used >= org_limit)
            if expected:
                report_used[report_no] += 1
                org_used += 1
                if refund:
                    assert await budgets.refund(report_id, job)
                    report_used[report_no] -= 1
                    org_used -= 1
            assert int(await redis.hget(keys.org_day(*org), "search") or 0) == org_used
        for report_no in range(3):
            stored = await redis.hget(keys.budget(f"r-{run}-{report_no}"), "search")
            assert int(stored or 0) == report_used[report_no]
    finally:
        await redis.delete(keys.org_day(*org), *(keys.budget(f"r-{run}-{i}") for i in range(3)))


async def test_a_rerun_of_a_charged_job_charges_the_org_nothing_more(
    settings: Settings, redis: aioredis.Redis, token: str
) -> None:
    budgets = Budgets(redis, capped(settings, fetches=1))
    org = (f"acme-{token}", DAY)
    first = await budgets.charge(f"r-{token}", Tool.FETCH, "job-1", org)
    again = await budgets.charge(f"r-{token}", Tool.FETCH, "job-1", org)
    assert first.allowed and again.allowed and again.already_charged
    assert int(await redis.hget(keys.org_day(*org), "fetch")) == 1


async def test_without_caps_the_org_is_still_counted_and_a_render_is_not(
    settings: Settings, redis: aioredis.Redis, token: str
) -> None:
    budgets = Budgets(redis, settings)
    org = (f"acme-{token}", DAY)
    for i in range(30):
        assert (await budgets.charge(f"r-{token}-{i}", Tool.FETCH, f"j{i}", org)).allowed
    assert (await budgets.charge(f"r-{token}-0", Tool.RENDER, "j0", org)).allowed
    assert await redis.hgetall(keys.org_day(*org)) == {b"fetch": b"30"}
    assert 0 < await redis.ttl(keys.org_day(*org)) <= 3 * 86_400


def test_the_day_is_the_utc_day_of_redis_time() -> None:
    midnight = dt.datetime(2026, 12, 7, tzinfo=dt.UTC)
    assert utc_day_of_ms(int(midnight.timestamp() * 1000) - 1) == "2026-12-06"
    assert utc_day_of_ms(int(midnight.timestamp() * 1000)) == "2026-12-07"


@pytest.mark.parametrize("raw", ["0", "-1", "many", "1.5"])
def test_a_cap_that_is_not_a_positive_whole_number_stops_start_up(raw: str) -> None:
    with pytest.raises(ConfigError, match="RESEARCH_ORG_DAILY_FETCHES"):
        Settings.from_env({"RESEARCH_ORG_DAILY_FETCHES": raw})


def test_caps_are_read_from_the_environment() -> None:
    read = Settings.from_env({"RESEARCH_ORG_DAILY_SEARCHES": "40", "RESEARCH_ORG_DAILY_FETCHES": "500"})
    assert (read.org_daily_searches, read.org_daily_fetches) == (40, 500)
    assert (Settings.from_env({}).org_daily_searches, Settings.from_env({}).org_daily_fetches) == (None, None)


async def test_one_token_across_many_mcp_sessions_stays_within_its_orgs_daily_searches(
    settings: Settings, redis: aioredis.Redis, token: str, tmp_path: Path
) -> None:
    """The red team's case: 3 sessions of 2 searches each, under a daily cap of 2."""
    org = f"acme-{token}"
    async with fake_openrouter() as fake:
        s = dataclasses.replace(
            capped(settings, searches=2),
            openrouter_base_url=fake.base_url,
            openrouter_api_key=Secret(KEY),
            search_timeout_s=3.0,
            usage_source=f"src-{token}",
            result_ttl_s=60,
        )
        tokens = tokens_for(tmp_path / "tokens.json", {TOKEN: org})
        answers = []
        async with (
            running_worker(s, [WebSearchTool()]),
            ResearchClient(settings=s, job_id_prefix=f"{token}-", wait_s=20) as client,
            serving(s, client, tokens, report_prefix=f"mcp-{token}-") as srv,
        ):
            for _ in range(3):
                async with srv.client() as mcp:
                    for query in ("tidal energy", "wave power"):
                        answers.append(
                            (await mcp.call_tool("web_search", {"query": query})).structured_content
                        )
        paid = len(fake.requests)
    assert [a["ok"] for a in answers] == [True, True, False, False, False, False]
    assert len({a["report_id"] for a in answers}) == 3  # three sessions, three reports
    refusal = answers[2]["error"]
    assert refusal["kind"] == "budget_exhausted"
    assert f"organization {org}" in refusal["message"] and "daily budget" in refusal["message"]
    assert paid == 2  # the provider was asked twice, not six times
    env = settings_env(s, RESEARCH_ORG_DAILY_SEARCHES="2")
    proc = await asyncio.to_thread(run_cli, "budget", "--org", org, env=env)
    printed = json.loads(proc.stdout)
    assert proc.returncode == 0, proc.stderr
    assert printed["org_id"] == org
    assert printed["search"] == {"used": 2, "limit": 2, "remaining": 0}
    assert printed["fetch"] == {"used": 0, "limit": None, "remaining": None}


def test_budget_takes_a_report_or_an_org_not_both_nor_neither(settings: Settings) -> None:
    both = run_cli("budget", "r-1", "--org", "acme", env=settings_env(settings))
    neither = run_cli("budget", env=settings_env(settings))
    assert both.returncode == neither.returncode == 2
    assert "--org" in both.stderr and "--org" in neither.stderr


async def test_a_fetch_carries_its_org_to_the_cap_and_a_bad_org_id_is_refused(
    settings: Settings, ca: TestCA, redis: aioredis.Redis, token: str, report: str
) -> None:
    async def page(request: web.Request) -> web.Response:
        return web.Response(text="<title>A</title><p>text</p>", content_type="text/html")

    s = fetch_settings(capped(settings, fetches=1), ca)
    org = f"acme-{token}"
    async with serve({"/": page}, ca.server_context()) as site, fetching(s, token, report) as harness:
        first = await harness.client.call_result(
            "fetch_page", {"url": site.url("/")}, report_id=report, org_id=org
        )
        second = await harness.client.call_result(
            "fetch_page", {"url": site.url("/"), "fresh": True}, report_id=f"{report}-2", org_id=org
        )
        forged = await harness.client.run(
            "fetch_page", {"report_id": report, "url": site.url("/"), "org_id": "a b"}
        )
    assert first["ok"] is True
    assert second["error"]["kind"] == "budget_exhausted" and org in second["error"]["message"]
    assert forged["error"]["kind"] == "invalid_request" and "org_id" in forged["error"]["message"]
    day = utc_day_of_ms(int((await redis.time())[0]) * 1000)
    assert int(await redis.hget(keys.org_day(org, day), "fetch")) == 1
