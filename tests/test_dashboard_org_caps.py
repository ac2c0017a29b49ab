"""The dashboard shows the organizations near their daily caps: from 80 % of either cap, fullest
first, with the counts the workers charged today; none when no cap is set."""

from __future__ import annotations

import dataclasses
import time

import redis.asyncio as aioredis

from tests.test_dashboard import get, get_json, serving, text_of
from worker.config import Settings
from worker.state.budget import Budgets, Tool, utc_day_of_ms


async def charge(budgets: Budgets, org: str, tool: Tool, count: int) -> None:
    day = utc_day_of_ms(int(time.time() * 1000))
    for n in range(count):
        assert (await budgets.charge(f"r-{org}-{n}", tool, f"j-{org}-{tool.value}-{n}", (org, day))).allowed


async def test_organizations_near_a_cap_are_shown_fullest_first_and_calm_ones_are_not(
    settings: Settings, redis: aioredis.Redis, token: str
) -> None:
    capped = dataclasses.replace(settings, org_daily_searches=10, org_daily_fetches=100)
    budgets = Budgets(redis, capped)
    full, near, busy_fetching, calm = (f"{name}-{token}" for name in ("full", "near", "fetcher", "calm"))
    await charge(budgets, full, Tool.SEARCH, 10)
    await charge(budgets, near, Tool.SEARCH, 8)
    await charge(budgets, busy_fetching, Tool.FETCH, 85)
    await charge(budgets, calm, Tool.SEARCH, 2)
    async with serving(capped) as base:
        status, _, page = await get(f"{base}/")
        _, state = await get_json(f"{base}/api/state")
    assert status == 200
    shown = text_of(page, "org-caps")
    assert full in shown and near in shown and busy_fetching in shown and calm not in shown
    assert "10 / 10" in shown and "8 / 10" in shown and "85 / 100" in shown
    ours = [row for row in state["org_caps"] if row["org"].endswith(token)]
    assert [row["org"] for row in ours] == [full, busy_fetching, near]  # 100 %, 85 %, 80 %
    assert ours[0]["searches"] == 10 and ours[0]["search_limit"] == 10


async def test_without_caps_no_organization_is_shown(
    settings: Settings, redis: aioredis.Redis, token: str
) -> None:
    await charge(Budgets(redis, settings), f"acme-{token}", Tool.SEARCH, 50)
    async with serving(settings) as base:
        _, _, page = await get(f"{base}/")
        _, state = await get_json(f"{base}/api/state")
    assert 'id="org-caps"' not in page and state["org_caps"] == []
