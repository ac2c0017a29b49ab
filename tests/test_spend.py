"""Search spend: counters per organization, usage source and UTC day, and per report, with their TTLs."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging

import pytest
import redis.asyncio as aioredis
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from tests.support.spend_rows import org_rows
from worker.config import Secret, Settings
from worker.runtime.context import Runtime
from worker.runtime.worker import build_runtime
from worker.state import keys
from worker.state.spend import (
    MAX_SEARCH_COST_USD,
    MAX_SEARCH_TOKENS,
    NO_ORG,
    ORG_DAY_TTL_S,
    OTHER_ORG,
    REPORT_MIN_TTL_S,
    Spend,
    org_days,
    read_spend,
    record_search,
    report_spend,
)

PLUGIN = "openrouter-plugin"
DAY_ONE = dt.datetime(2026, 12, 1, 23, 59, tzinfo=dt.UTC)
DAY_TWO = dt.datetime(2026, 12, 2, 0, 1, tzinfo=dt.UTC)


@pytest.fixture
def source(token: str) -> str:
    return f"src-{token}"


@pytest.fixture
async def runtime(settings: Settings, redis: aioredis.Redis, source: str) -> Runtime:
    return await build_runtime(dataclasses.replace(settings, usage_source=source), redis)


async def test_a_search_adds_its_cost_and_tokens_to_its_org_day_and_its_report(
    runtime: Runtime, redis: aioredis.Redis, report: str, token: str, source: str
) -> None:
    org = f"org-{token}"
    await record_search(runtime, report, org, Spend(0.002, 1000, 150), provider=PLUGIN, now=DAY_TWO)
    await record_search(runtime, report, org, Spend(0.0035, 800, 90), provider=PLUGIN, now=DAY_TWO)
    assert await report_spend(redis, report) == {
        "cost_usd": 0.0055,
        "prompt_tokens": 1800,
        "completion_tokens": 240,
        "searches": 2,
        "by_provider": {PLUGIN: 2},
    }
    assert await org_rows(redis, source) == [
        {
            "day": "2026-12-02",
            "org_id": org,
            "usage_source": source,
            "cost_usd": 0.0055,
            "prompt_tokens": 1800,
            "completion_tokens": 240,
            "searches": 2,
            "by_provider": {PLUGIN: 2},
        }
    ]


async def test_a_search_without_an_org_is_attributed_to_none(
    runtime: Runtime, redis: aioredis.Redis, report: str, source: str
) -> None:
    await record_search(runtime, report, None, Spend(0.001, 10, 1), provider=PLUGIN, now=DAY_TWO)
    [row] = await org_rows(redis, source)
    assert row["org_id"] == NO_ORG == "(none)"
    assert await redis.exists(keys.spend_org_day(NO_ORG, source, "2026-12-02")) == 1


async def test_a_search_the_provider_did_not_price_still_counts_as_a_search(
    runtime: Runtime, redis: aioredis.Redis, report: str
) -> None:
    await record_search(runtime, report, None, Spend(), provider=PLUGIN, now=DAY_TWO)
    assert await report_spend(redis, report) == {
        "cost_usd": 0.0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "searches": 1,
        "by_provider": {PLUGIN: 1},
    }


async def test_the_utc_day_decides_which_day_a_search_counts_for(
    runtime: Runtime, redis: aioredis.Redis, report: str, token: str, source: str
) -> None:
    org = f"org-{token}"
    await record_search(runtime, report, org, Spend(0.001, 1, 1), provider=PLUGIN, now=DAY_ONE)
    await record_search(runtime, report, org, Spend(0.004, 1, 1), provider=PLUGIN, now=DAY_TWO)
    await record_search(
        runtime, report, org, Spend(0.002, 1, 1), provider=PLUGIN, now=DAY_TWO - dt.timedelta(days=9)
    )
    rows = await org_rows(redis, source)
    assert [(row["day"], row["cost_usd"]) for row in rows] == [
        ("2026-12-02", 0.004),
        ("2026-12-01", 0.001),
        ("2026-11-23", 0.002),
    ]
    assert await org_rows(redis, f"{source}-other") == []


async def test_rows_of_one_day_come_highest_cost_first(
    runtime: Runtime, redis: aioredis.Redis, report: str, token: str, source: str
) -> None:
    for org, cost in ((f"a-{token}", 0.001), (f"b-{token}", 0.009), (f"c-{token}", 0.004)):
        await record_search(runtime, report, org, Spend(cost, 1, 1), provider=PLUGIN, now=DAY_TWO)
    rows = await org_rows(redis, source)
    assert [row["org_id"] for row in rows] == [f"b-{token}", f"c-{token}", f"a-{token}"]


async def test_an_org_id_with_colons_is_read_back_whole(
    runtime: Runtime, redis: aioredis.Redis, report: str, token: str, source: str
) -> None:
    org = f"acme:{token}:eu"
    await record_search(runtime, report, org, Spend(0.001, 1, 1), provider=PLUGIN, now=DAY_TWO)
    [row] = await org_rows(redis, source)
    assert row["org_id"] == org


async def test_what_something_else_wrote_under_the_spend_prefix_is_passed_over_or_read_as_zero(
    redis: aioredis.Redis, token: str, source: str
) -> None:
    garbled = keys.spend_org_day(f"org-{token}", source, "2026-12-02")
    not_a_hash = keys.spend_org_day(f"odd-{token}", source, "2026-12-02")
    await redis.hset(garbled, mapping={"cost_usd": "lots", "searches": "inf", "prompt_tokens": 5})
    await redis.set(not_a_hash, b"oops")
    for key in (garbled, not_a_hash):
        await redis.expire(key, 60)
    assert await org_days(redis, [garbled, not_a_hash]) == [
        {
            "day": "2026-12-02",
            "org_id": f"org-{token}",
            "usage_source": source,
            "cost_usd": 0.0,
            "prompt_tokens": 5,
            "completion_tokens": 0,
            "searches": 0,
            "by_provider": {},
        }
    ]


async def test_spend_counters_expire(
    runtime: Runtime, redis: aioredis.Redis, report: str, token: str, source: str
) -> None:
    await record_search(runtime, report, f"org-{token}", Spend(0.001, 1, 1), provider=PLUGIN, now=DAY_TWO)
    org_ttl = await redis.ttl(keys.spend_org_day(f"org-{token}", source, "2026-12-02"))
    report_ttl = await redis.ttl(keys.spend_report(report))
    assert ORG_DAY_TTL_S - 5 <= org_ttl <= ORG_DAY_TTL_S
    expected_report_ttl = max(REPORT_MIN_TTL_S, runtime.settings.budget_window_s)
    assert expected_report_ttl - 5 <= report_ttl <= expected_report_ttl


async def test_a_report_keeps_its_spend_at_least_as_long_as_its_budget_window(
    settings: Settings, redis: aioredis.Redis, report: str, source: str
) -> None:
    long_window = 30 * 86_400
    runtime = await build_runtime(
        dataclasses.replace(settings, usage_source=source, budget_window_s=long_window), redis
    )
    await record_search(runtime, report, None, Spend(0.001, 1, 1), provider=PLUGIN, now=DAY_TWO)
    assert await redis.ttl(keys.spend_report(report)) > long_window - 5


async def test_an_unknown_report_has_spent_nothing(redis: aioredis.Redis, report: str) -> None:
    assert await report_spend(redis, report) == {
        "cost_usd": 0.0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "searches": 0,
        "by_provider": {},
    }


async def test_metrics_count_cost_and_tokens_per_org_of_the_key_file_and_source(
    settings: Settings, redis: aioredis.Redis, report: str, token: str, source: str
) -> None:
    org = f"org-{token}"
    runtime = await build_runtime(
        dataclasses.replace(settings, usage_source=source, org_keys={org: Secret("sk-or-v1-own")}), redis
    )
    await record_search(runtime, report, org, Spend(0.002, 1000, 150), provider=PLUGIN)
    await record_search(runtime, report, org, Spend(0.003, 500, 50), provider=PLUGIN)
    sample = runtime.metrics.registry.get_sample_value
    assert sample("research_search_cost_usd_total", {"org": org, "usage_source": source}) == pytest.approx(
        0.005
    )
    labels = {"org": org, "usage_source": source}
    assert sample("research_search_tokens_total", labels | {"direction": "prompt"}) == 1500
    assert sample("research_search_tokens_total", labels | {"direction": "completion"}) == 200


async def test_a_redis_failure_is_logged_and_does_not_fail_the_search(
    settings: Settings, report: str, caplog: pytest.LogCaptureFixture
) -> None:
    unreachable = aioredis.Redis.from_url("redis://127.0.0.1:1/0")
    try:
        runtime = await build_runtime(settings, unreachable)
        with caplog.at_level(logging.WARNING, logger="research.spend"):
            await record_search(runtime, report, None, Spend(0.001, 1, 1), provider=PLUGIN)
    finally:
        await unreachable.aclose()
    assert any(record.getMessage() == "search spend not recorded" for record in caplog.records)


async def test_each_search_counts_for_the_provider_that_answered(
    runtime: Runtime, redis: aioredis.Redis, report: str, token: str, source: str
) -> None:
    org = f"org-{token}"
    await record_search(runtime, report, org, Spend(0.002, 10, 1), provider=PLUGIN, now=DAY_TWO)
    await record_search(runtime, report, org, Spend(0.004, 10, 1), provider="openrouter-tool", now=DAY_TWO)
    await record_search(runtime, report, org, Spend(0.004, 10, 1), provider="openrouter-tool", now=DAY_TWO)
    by_provider = {PLUGIN: 1, "openrouter-tool": 2}
    assert (await report_spend(redis, report))["by_provider"] == by_provider
    [row] = await org_rows(redis, source)
    assert row["by_provider"] == by_provider
    assert row["searches"] == 3


async def test_orgs_outside_the_key_file_share_one_metrics_label_however_many_there_are(
    settings: Settings, redis: aioredis.Redis, report: str, token: str, source: str
) -> None:
    listed = f"org-{token}-listed"
    runtime = await build_runtime(
        dataclasses.replace(settings, usage_source=source, org_keys={listed: Secret("sk-or-v1-own")}), redis
    )
    for n in range(300):
        await record_search(runtime, report, f"org-{token}-{n}", Spend(0.001, 1, 1), provider=PLUGIN)
    await record_search(runtime, report, listed, Spend(0.001, 1, 1), provider=PLUGIN)
    await record_search(runtime, report, None, Spend(0.001, 1, 1), provider=PLUGIN)
    [cost] = [m for m in runtime.metrics.registry.collect() if m.name == "research_search_cost_usd"]
    orgs = {sample.labels["org"] for sample in cost.samples}
    assert orgs == {listed, OTHER_ORG, NO_ORG}
    sample = runtime.metrics.registry.get_sample_value
    assert sample(
        "research_search_cost_usd_total", {"org": OTHER_ORG, "usage_source": source}
    ) == pytest.approx(0.3)
    # Redis keeps attributing spend to each org by its id: that is bounded by its TTL, not a scrape.
    assert len(await org_rows(redis, source)) == 302


hostile_figures = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**62, max_value=2**90),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e308, -1e308, 2.0**63, float(2**64), 0.5, 1e-300, -0.0]),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=2),
)


@hypothesis_settings(max_examples=200, deadline=None)
@given(cost=hostile_figures, prompt=hostile_figures, completion=hostile_figures)
def test_any_usage_figures_read_as_a_plausible_finite_spend(
    cost: object, prompt: object, completion: object
) -> None:
    spend = read_spend(cost, prompt, completion)
    assert 0.0 <= spend.cost_usd <= MAX_SEARCH_COST_USD
    for tokens in (spend.prompt_tokens, spend.completion_tokens):
        assert isinstance(tokens, int)
        assert 0 <= tokens <= MAX_SEARCH_TOKENS
    if isinstance(cost, float) and 0.0 <= cost <= MAX_SEARCH_COST_USD:
        assert spend.cost_usd == cost


@pytest.mark.parametrize(
    "figures",
    [
        {"cost_usd": 1e308},
        {"cost_usd": float("inf")},
        {"cost_usd": float("nan")},
        {"cost_usd": -0.01},
        {"prompt_tokens": 2**63},
        {"completion_tokens": -1},
        {"prompt_tokens": 1.5},
    ],
)
def test_a_spend_with_an_implausible_figure_cannot_be_built(figures: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="plausible"):
        Spend(**figures)  # type: ignore[arg-type]


@hypothesis_settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(usages=st.lists(st.tuples(hostile_figures, hostile_figures, hostile_figures), min_size=1, max_size=4))
async def test_hostile_usage_never_makes_stored_spend_infinite_or_half_written(
    settings: Settings, redis: aioredis.Redis, token: str, usages: list[tuple[object, object, object]]
) -> None:
    runtime = await build_runtime(dataclasses.replace(settings, usage_source=f"src-{token}"), redis)
    report = f"r-{token}-{len(usages)}-{id(usages)}"
    for cost, prompt, completion in usages:
        await record_search(runtime, report, None, read_spend(cost, prompt, completion), provider=PLUGIN)
    stored = await report_spend(redis, report)
    await redis.delete(keys.spend_report(report))
    assert stored["searches"] == len(usages)
    assert stored["by_provider"] == {PLUGIN: len(usages)}
    assert 0.0 <= stored["cost_usd"] <= MAX_SEARCH_COST_USD * len(usages)
    assert 0 <= stored["prompt_tokens"] <= MAX_SEARCH_TOKENS * len(usages)
    assert 0 <= stored["completion_tokens"] <= MAX_SEARCH_TOKENS * len(usages)
