"""The charts of the last hour, drawn on the server as inline SVG: one series per outcome seen."""

from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ET
from collections import Counter

import html5lib
import pytest
import redis.asyncio as aioredis

from tests.support.tools import TEST_TOOLS
from tests.support.workers import running_worker
from tests.test_dashboard import get, serving
from worker.client import ResearchClient
from worker.config import Settings
from worker.dashboard import charts
from worker.dashboard.history import History, Minute


def chart(page: str, chart_id: str) -> ET.Element:
    root = html5lib.parse(page, namespaceHTMLElements=False)
    found = root.find(f".//*[@id='{chart_id}']")
    assert found is not None, chart_id
    return found


SVG = "{http://www.w3.org/2000/svg}"


def series_of(element: ET.Element) -> dict[str, list[ET.Element]]:
    """The series groups of an inline SVG chart (the parser puts SVG elements in their namespace)."""
    return {
        str(g.get("data-series")): g.findall(f".//{SVG}rect")
        for g in element.iter(f"{SVG}g")
        if g.get("class") == "series"
    }


def hour(*minutes: Minute) -> History:
    outcomes = Counter[str]()
    for minute in minutes:
        outcomes.update(minute.jobs)
    ranked = sorted(outcomes, key=lambda kind: (kind != "ok", -outcomes[kind]))
    return History(list(minutes), ranked, [])


def minute(index: int, jobs: dict[str, int] | None = None, depth: int | None = None) -> Minute:
    return Minute(start=1_800_000_000.0 + 60 * index, jobs=jobs or {}, depth=depth, wait_p95_ms=None)


async def test_the_jobs_chart_has_one_series_per_outcome_the_workers_saw(
    settings: Settings, redis: aioredis.Redis, token: str, report: str
) -> None:
    settings = dataclasses.replace(settings, fetch_budget=2)
    async with (
        running_worker(settings, TEST_TOOLS) as worker,
        ResearchClient(settings=settings, job_id_prefix=f"{token}-") as client,
    ):
        results = [
            await client.call("echo", {"report_id": report, "value": "a"}),
            await client.call("echo", {"report_id": report, "value": "b"}),
            await client.call("echo", {"report_id": report, "value": "c"}),  # over the budget
            await client.call("echo", {"report_id": report, "value": 1}),
            await client.call("echo", {"value": "no report"}),
            await client.call("boom", {"report_id": report}),
        ]
        # A worker writes its minute counters once a second (worker.state.activity.Buckets).
        assert worker.runtime is not None
        await worker.runtime.results.buckets.flush()
        async with serving(settings) as base:
            status, _, page = await get(f"{base}/")
    seen = Counter("ok" if r["ok"] else r["error"]["kind"] for r in results)
    assert set(seen) == {"ok", "budget_exhausted", "invalid_request", "missing_report_id", "internal_error"}
    assert status == 200
    jobs_chart = chart(page, "chart-jobs")
    drawn = series_of(jobs_chart)
    assert set(drawn) == set(seen)
    for outcome, rects in drawn.items():
        counted = sum(int(str(rect.findtext(f"{SVG}title")).rsplit(": ", 1)[1]) for rect in rects)
        assert counted == seen[outcome], outcome
    legend = "".join(jobs_chart.itertext())
    for outcome, count in seen.items():
        assert f"{outcome} {count}" in legend
    # The queue held these jobs as they finished: the depth chart has a point for this minute.
    assert chart(page, "chart-depth").findall(f".//{SVG}circle")
    assert "<script" not in page


def test_a_minutes_outcomes_stack_from_the_bottom_in_proportion() -> None:
    drawn = charts.jobs_per_minute(hour(minute(0), minute(1, {"ok": 3, "timeout": 1})))
    [ok_bar] = next(s for s in drawn.series if s.name == "ok").bars
    [timeout_bar] = next(s for s in drawn.series if s.name == "timeout").bars
    assert ok_bar.y + ok_bar.height == pytest.approx(drawn.axes.bottom)
    assert timeout_bar.y + timeout_bar.height == pytest.approx(ok_bar.y)
    assert ok_bar.height == pytest.approx(3 * timeout_bar.height)
    assert timeout_bar.y >= drawn.axes.top - 1e-9
    assert ok_bar.x == timeout_bar.x > drawn.axes.left + drawn.axes.plot_width / 2


def test_a_minute_without_a_sample_breaks_the_line_instead_of_drawing_zero() -> None:
    depths = [None, 2, 3, None, 5]
    drawn = charts.queue_depth(hour(*(minute(i, depth=d) for i, d in enumerate(depths))))
    assert len(drawn.paths) == 2
    assert [len(re.findall(r"[ML]", path)) for path in drawn.paths] == [2, 1]
    assert len(drawn.dots) == 3
    assert drawn.latest == "5"


def test_an_hour_without_jobs_draws_no_series_and_says_so() -> None:
    drawn = charts.jobs_per_minute(hour(minute(0), minute(1)))
    assert drawn.series == []
    assert charts.queue_wait(hour(minute(0))).latest == "no data"


@pytest.mark.parametrize(
    ("value", "top"),
    [
        (0, 1),
        (-3, 1),
        (0.3, 0.5),
        (1, 1),
        (1.2, 2),
        (2.2, 2.5),
        (3, 5),
        (7, 10),
        (10, 10),
        (11, 20),
        (4100, 5000),
    ],
)
def test_the_value_axis_ends_at_a_round_number_at_or_above_the_highest_value(
    value: float, top: float
) -> None:
    assert charts.nice_ceiling(value) == pytest.approx(top)


async def test_an_empty_hour_is_said_in_words_on_the_page(settings: Settings) -> None:
    async with serving(settings) as base:
        _, _, page = await get(f"{base}/")
    assert "No job finished in the last hour." in "".join(chart(page, "chart-jobs").itertext())
    assert not series_of(chart(page, "chart-jobs"))
