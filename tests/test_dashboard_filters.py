"""Filters by outcome, tool and report, and paging: on ``/`` and on ``/api/state`` alike."""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import html5lib
import pytest
import redis.asyncio as aioredis
from hypothesis import given
from hypothesis import strategies as st

from tests.test_dashboard import get, get_json, seed, serving
from worker.config import Settings
from worker.dashboard.filters import PAGE_SIZE, BadFilter, Filters
from worker.state import activity

JOBS = 130
TOOLS = ("web_search", "fetch_page")


def job(token: str, index: int) -> dict[str, object]:
    """Job ``index`` of the seeded history: tools alternate, reports cycle by three, every fifth fails."""
    tool = TOOLS[index % 2]
    result: dict[str, object] = {
        "ok": index % 5 != 0,
        "tool": tool,
        "report_id": f"r-{token}-{index % 3}",
        "job_id": f"{token}-{index:03d}",
        "url" if tool == "fetch_page" else "query": f"target {index}",
    }
    if index % 5 == 0:
        result["error"] = {"kind": "timeout" if index % 2 else "upstream_error", "message": "out of time"}
    return result


def outcome(result: dict[str, object]) -> str:
    error = result.get("error")
    return str(error["kind"]) if isinstance(error, dict) else "ok"


@pytest.fixture
async def history(settings: Settings, redis: aioredis.Redis, token: str) -> list[dict[str, object]]:
    now = time.time()
    results = [job(token, index) for index in range(JOBS)]
    async with redis.pipeline(transaction=False) as pipe:
        for result in results:
            activity.record(
                pipe, settings.queue_name, result, outcome(result), 5.0, activity.JobRun("w"), now=now
            )
        await pipe.execute()
    return results[::-1]  # newest first, as the page lists them


def table_rows(page: str) -> list[dict[str, str]]:
    """The recent-results table as the browser sees it: one dict per row, by column heading."""
    root = html5lib.parse(page, namespaceHTMLElements=False)
    section = root.find(".//section[@id='recent']")
    assert section is not None
    headings = ["".join(th.itertext()).strip() for th in section.iterfind(".//thead/tr/th")]
    return [
        dict(zip(headings, ("".join(td.itertext()).strip() for td in tr.iterfind("td")), strict=True))
        for tr in section.iterfind(".//tbody/tr")
    ]


def link(page: str, element_id: str) -> str | None:
    root = html5lib.parse(page, namespaceHTMLElements=False)
    found = root.find(f".//*[@id='{element_id}']")
    return None if found is None else found.get("href")


FILTERS = [
    {"outcome": "timeout"},
    {"outcome": "ok"},
    {"tool": "fetch_page"},
    {"report": "REPORT-1"},
    {"outcome": "upstream_error", "tool": "web_search"},
    {"outcome": "ok", "tool": "fetch_page", "report": "REPORT-2"},
    {"outcome": "timeout", "tool": "web_search"},  # no such rows: timeouts are all fetches
]


@pytest.mark.parametrize(
    "chosen", FILTERS, ids=lambda chosen: "&".join(f"{k}={v}" for k, v in chosen.items())
)
async def test_a_filter_returns_every_matching_row_and_only_those(
    settings: Settings, token: str, history: list[dict[str, object]], chosen: dict[str, str]
) -> None:
    query = {name: value.replace("REPORT", f"r-{token}") for name, value in chosen.items()}

    def matches(result: dict[str, object]) -> bool:
        fields = {"outcome": outcome(result), "tool": result["tool"], "report": result["report_id"]}
        return all(fields[name] == value for name, value in query.items())

    expected = [str(result["job_id"]) for result in history if matches(result)]
    shown_api: list[str] = []
    shown_page: list[str] = []
    async with serving(settings) as base:
        for number in range(1, max(1, -(-len(expected) // PAGE_SIZE)) + 1):
            status, state = await get_json(
                f"{base}/api/state?" + "&".join(f"{k}={v}" for k, v in query.items()) + f"&page={number}"
            )
            assert status == 200
            assert state["page"]["matching"] == len(expected)
            assert state["filters"] == {name: query.get(name) for name in ("outcome", "tool", "report")}
            shown_api += [row["job_id"] for row in state["recent"]]
            _, _, page = await get(f"{base}/", params={**query, "page": str(number)})
            rows = table_rows(page)
            for row in rows:
                assert query.get("outcome", row["outcome"]) == row["outcome"]
                assert query.get("tool", row["tool"]) == row["tool"]
                assert query.get("report", row["report"]) == row["report"]
            shown_page += [row["job"] for row in rows]
    assert shown_api == expected
    assert shown_page == expected


async def test_paging_walks_the_rows_newest_first_with_next_and_previous_links(
    settings: Settings, history: list[dict[str, object]]
) -> None:
    async with serving(settings) as base:
        _, _, first = await get(f"{base}/")
        second_href = link(first, "next-page")
        assert second_href == "/?page=2"
        assert link(first, "previous-page") is None
        _, _, second = await get(f"{base}{second_href}")
        third_href = link(second, "next-page")
        assert link(second, "previous-page") == "/"
        _, _, third = await get(f"{base}{third_href}")
        _, _, beyond = await get(f"{base}/?page=9")
    assert [row["job"] for row in table_rows(first)] == [str(r["job_id"]) for r in history[:PAGE_SIZE]]
    assert [row["job"] for row in table_rows(second)] == [
        str(r["job_id"]) for r in history[PAGE_SIZE : 2 * PAGE_SIZE]
    ]
    assert [row["job"] for row in table_rows(third)] == [str(r["job_id"]) for r in history[2 * PAGE_SIZE :]]
    assert link(third, "next-page") is None
    assert "page 3 of 3" in third
    assert table_rows(beyond) == [] and "None on this page." in beyond


async def test_outcome_chips_tool_and_report_names_link_to_their_filters_keeping_the_others(
    settings: Settings, token: str, history: list[dict[str, object]]
) -> None:
    report = f"r-{token}-1"
    async with serving(settings) as base:
        _, _, page = await get(f"{base}/", params={"report": report})
        _, _, later = await get(f"{base}/", params={"report": report, "page": "2"})
    root = html5lib.parse(later, namespaceHTMLElements=False)
    chips = {"".join(a.itertext()).strip(): a.get("href") for a in root.iterfind(".//ul[@id='outcomes']//a")}
    assert chips.keys() == {"ok", "timeout", "upstream_error"}
    for kind, href in chips.items():
        # A chip narrows the current filters and starts again at page 1.
        assert parse_qs(urlsplit(str(href)).query) == {"report": [report], "outcome": [kind]}
    root = html5lib.parse(page, namespaceHTMLElements=False)
    tool_links = {a.get("href") for a in root.iterfind(".//section[@id='recent']//a[@class='tool']")}
    assert tool_links == {f"/?tool={tool}&report={report}" for tool in TOOLS}
    report_links = {a.get("href") for a in root.iterfind(".//section[@id='recent']//a[@class='report']")}
    assert report_links == {f"/?report={report}"}


async def test_the_report_and_tool_filters_narrow_jobs_in_flight_and_budgets_too(
    settings: Settings, redis: aioredis.Redis, token: str, tmp_path: Path
) -> None:
    s = await seed(redis, settings, token, tmp_path / "marker")
    async with serving(settings) as base:
        _, mine = await get_json(f"{base}/api/state?report={s.report}")
        _, searches = await get_json(f"{base}/api/state?tool=web_search")
        _, other = await get_json(f"{base}/api/state?report=r-{token}-nobody")
    assert [row["job_id"] for row in mine["in_progress"]] == [s.running_job]
    assert [row["job_id"] for row in mine["waiting"]] == [s.waiting_job]
    assert [row["report_id"] for row in mine["budgets"]] == [s.report]
    assert searches["in_progress"] == [] and [row["job_id"] for row in searches["waiting"]] == [s.waiting_job]
    assert other["in_progress"] == other["waiting"] == other["budgets"] == other["recent"] == []
    # The filters narrow rows; the queue's own figures stay whole.
    assert other["queue"]["depth"] == mine["queue"]["depth"] == 4


QUERY_TEXT = st.text(max_size=30) | st.sampled_from(
    ["ok", "fetch_page", "r-1", "0", "1", "999999", "1e3", "-1"]
)


@given(st.dictionaries(st.sampled_from(["outcome", "tool", "report", "page", "other"]), QUERY_TEXT))
def test_any_query_is_a_filter_or_a_clear_refusal_and_a_filter_links_back_to_itself(
    query: dict[str, str],
) -> None:
    try:
        filters = Filters.parse(query)
    except BadFilter as refusal:
        refused = str(refusal)
        filters = None
    if filters is None:
        assert refused.startswith(("the ", "page must"))
        return
    again = filters.href(page=filters.page)
    assert again is not None
    assert Filters.parse({k: v[0] for k, v in parse_qs(urlsplit(again).query).items()}) == filters
