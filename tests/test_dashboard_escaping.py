"""Whatever a result or a dashboard line holds, every page shows it as text: never an element, an
attribute, a link off the dashboard, or a control or bidi character that could disguise it."""

from __future__ import annotations

import json
import time
import unicodedata
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import quote

import html5lib
import pytest
import redis.asyncio as aioredis
from arq.constants import job_key_prefix
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.test_dashboard import get, record, serving
from worker.config import Settings
from worker.dashboard.formatting import visible
from worker.serialization import dumps
from worker.state import activity, keys

SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

PIECES = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "'><svg onload=alert(1)>",
    "</td></tr></table><h1>",
    "</textarea></pre></title>",
    "<!--",
    "]]>",
    "javascript:alert(1)",
    "&amp;&lt;&#x3c;",
    "{{ 7*7 }}{% raw %}",
    "\u202e",  # right-to-left override
    "\u2066",  # left-to-right isolate
    "\u200b",  # zero-width space
    "\u2028",  # line separator
    "\U000e0041",  # tag character
    "\x00",
    "\x1b[31m",
    "\x7f",
    "\x85",
    "https://evil.example/",
    "/",
    "%2F",
    "..",
    "?#",
]
hostile = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=8)), min_size=1, max_size=6).map(
    "".join
)

# The elements the templates write; anything else in a page was made from data.
OUR_ELEMENTS = {
    "html", "head", "body", "meta", "title", "link", "header", "h1", "h2", "h3", "p", "a", "code", "time",
    "dl", "dt", "dd", "div", "section", "table", "thead", "tbody", "tr", "th", "td", "span", "strong",
    "ul", "li", "nav", "pre", "svg", "g", "rect", "line", "text", "path", "circle",
    "wbr",  # a line-break opportunity in a target (formatting.breakable), never from data
}  # fmt: skip
HIDDEN = {"Cc", "Cf", "Cs", "Zl", "Zp"}


def local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def check_page(page: str, shown: list[str]) -> None:
    root = html5lib.parse(page, namespaceHTMLElements=False)
    for element in root.iter():
        tag = local(str(element.tag))
        assert tag in OUR_ELEMENTS, f"an element made from data: {tag}"
        for name, value in element.attrib.items():
            assert not local(name).lower().startswith("on"), f"an event handler attribute: {name}"
            if local(name) == "href":
                assert value.startswith("/") and not value.startswith("//"), value
                assert value.isascii() and " " not in value
    text = "".join(_texts(root))
    hidden = {ch for ch in text if ch not in "\t\n" and unicodedata.category(ch) in HIDDEN}
    assert not hidden, f"characters that hide or reorder text: {sorted(map(hex, map(ord, hidden)))}"
    for value in shown:
        assert visible(value) in text


def _texts(element: ET.Element) -> Iterator[str]:
    if element.text:
        yield element.text
    for child in element:
        yield from _texts(child)
        if child.tail:
            yield child.tail


@pytest.fixture
async def base(settings: Settings) -> AsyncIterator[str]:
    async with serving(settings) as url:
        yield url


@given(
    job_suffix=hostile,
    report=hostile,
    target=hostile,
    message=hostile,
    provider=hostile,
    text=hostile,
    tool=st.one_of(st.sampled_from(["fetch_page", "web_search"]), hostile),
    fails=st.booleans(),
)
@SETTINGS
async def test_any_result_and_line_contents_are_escaped_on_every_page(
    settings: Settings,
    redis: aioredis.Redis,
    base: str,
    token: str,
    job_suffix: str,
    report: str,
    target: str,
    message: str,
    provider: str,
    text: str,
    tool: str,
    fails: bool,
) -> None:
    job_id = f"{token}{job_suffix}"[:200]
    result: dict[str, Any] = {"ok": not fails, "tool": tool, "report_id": report, "job_id": job_id}
    result["url" if tool != "web_search" else "query"] = target
    if fails:
        result["error"] = {"kind": "http_status", "message": message}
        result["status"] = 503
    else:
        result |= {"provider": provider, "text": text, "title": text, "links": [target]}
    await record(redis, settings, result, run=activity.JobRun(provider[:60], 1, 2.0))
    await redis.set(keys.result(job_id), dumps(result), ex=600)
    waiting = f"{job_id}-waiting"[:200]
    payload = {"t": None, "f": tool, "a": [message], "k": {"report_id": report, "url": target}, "et": 1}
    await redis.set(job_key_prefix + waiting, dumps(payload), ex=600)
    await redis.zadd(settings.queue_name, {waiting: time.time() * 1000 - 1000})

    status, _, front = await get(f"{base}/")
    assert status == 200
    check_page(front, [job_id, target[: activity.TARGET_PREVIEW_CHARS]] + ([message[:200]] if fails else []))
    for shown_id in (job_id, waiting):
        status, _, detail = await get(f"{base}/job/{quote(shown_id, safe='')}")
        assert status == 200, shown_id
        check_page(detail, [shown_id])
    status, _, state = await get(f"{base}/api/state")
    assert status == 200
    assert job_id in [row["job_id"] for row in json.loads(state)["recent"]]


@given(
    fields=st.fixed_dictionaries(
        {
            name: hostile
            for name in (
                "job_id",
                "tool",
                "report_id",
                "outcome",
                "target",
                "message",
                "provider",
                "worker_id",
            )
        }
    ),
    numbers=st.fixed_dictionaries(
        {
            name: st.one_of(hostile, st.integers(min_value=-(2**63), max_value=2**63 - 1), st.floats())
            for name in ("status", "duration_ms", "tries", "at")
        }
    ),
)
@SETTINGS
async def test_any_line_and_bucket_contents_are_escaped_on_the_page_and_in_the_charts(
    settings: Settings, redis: aioredis.Redis, base: str, fields: dict[str, str], numbers: dict[str, Any]
) -> None:
    # Not what a worker writes, but what a list and a hash could hold: the page must not care.
    line = {**fields, **numbers, "job_id": fields["job_id"][:200]}
    await redis.lpush(keys.recent(settings.queue_name), dumps(line))
    minute = keys.minute(settings.queue_name, activity.minute_of(time.time()))
    await redis.hset(
        minute, mapping={f"n:{fields['tool']}:{fields['outcome']}": 3, f"d:{fields['tool']}:9": 1}
    )
    await redis.expire(minute, 600)
    status, _, front = await get(f"{base}/")
    assert status == 200
    check_page(front, [line["job_id"], fields["message"][:199]])
    status, _, detail = await get(f"{base}/job/{quote(line['job_id'], safe='')}")
    assert status in (200, 404)
    check_page(detail, [])
