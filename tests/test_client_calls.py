"""``ResearchClient.call``: a model's tool call as it came in, the JSON to hand back as it goes out.

Whatever the model sends (an unknown name, a name that is not a string, arguments that are not a
JSON object, integers past 64 bits, an attempt to set the report), the answer is a result, never an
exception; only the orchestrator's own mistakes (a bad report id) raise. Every result, error results
included, says what it was about, and a refused redirect names the hop.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import pytest
import redis.asyncio as aioredis
from aiohttp import web
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from jobs.fetch.tool import FetchPageTool
from jobs.search import WebSearchTool
from tests.support.fake_dns import FakeResolver
from tests.support.fetching import fetch_settings
from tests.support.tls import TestCA, serve
from tests.support.workers import running_worker
from worker.client import MODEL_TOOLS, ResearchClient, about_of, model_arguments
from worker.config import Settings
from worker.errors import InvalidRequest, MissingReportId
from worker.settings import tools

CALL_EXAMPLES = hypothesis_settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@asynccontextmanager
async def calling(
    settings: Settings, token: str, resolver: FakeResolver | None = None
) -> AsyncIterator[ResearchClient]:
    """A worker with both real tools (a fake resolver, no network) and a client on its queue."""
    async with (
        running_worker(settings, tools(resolver or FakeResolver({}))),
        ResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=20) as client,
    ):
        yield client


async def page(request: web.Request) -> web.Response:
    return web.Response(text="<title>A page</title><main><p>Some text.</p></main>", content_type="text/html")


async def test_a_tool_call_runs_and_its_json_goes_back_to_the_model(
    settings: Settings, ca: TestCA, token: str, report: str, redis: aioredis.Redis
) -> None:
    s = fetch_settings(settings, ca)
    async with serve({"/": page}, ca.server_context()) as server, calling(s, token) as client:
        as_dict = await client.call("fetch_page", {"url": server.url("/")}, report_id=report)
        as_text = await client.call("fetch_page", json.dumps({"url": server.url("/")}), report_id=report)
    first, second = json.loads(as_dict), json.loads(as_text)
    assert isinstance(as_dict, str)
    assert first["ok"] is True and first["title"] == "A page"
    assert {k: v for k, v in first.items() if k not in {"job_id", "fetched_at", "cached"}} == {
        k: v for k, v in second.items() if k not in {"job_id", "fetched_at", "cached"}
    }
    assert json.loads(await redis.get(f"research:result:{first['job_id']}")) == first


NOT_A_TOOL = st.one_of(
    st.text(max_size=30).filter(lambda name: name not in MODEL_TOOLS),
    st.sampled_from(["fetch_page ", "Fetch_Page", "web-search", "", "delete_everything"]),
    st.none(),
    st.integers(),
    st.floats(allow_nan=True),
    st.lists(st.sampled_from(MODEL_TOOLS), max_size=2),
    st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2),
)


@CALL_EXAMPLES
@given(name=NOT_A_TOOL)
async def test_a_call_to_a_tool_that_does_not_exist_is_an_invalid_request_result(
    name: object, settings: Settings, report: str, redis: aioredis.Redis
) -> None:
    async with ResearchClient(settings=settings, wait_s=1) as client:
        answer = json.loads(await client.call(name, {"url": "https://example.org/"}, report_id=report))
    assert (answer["ok"], answer["tool"], answer["error"]["kind"]) == (False, "unknown", "invalid_request")
    tools = "fetch_page, web_search, cite"
    assert answer["error"]["message"] == f"there is no tool by that name; the tools are {tools}"
    assert await redis.zcard(settings.queue_name) == 0  # nothing enqueued, nothing charged


NOT_AN_OBJECT = st.one_of(
    st.lists(st.integers(), max_size=3),
    st.integers(),
    st.none(),
    st.booleans(),
    st.text(max_size=20).filter(lambda t: t.strip() != "" and not t.strip().startswith("{")),
    st.sampled_from(['{"url": ', "{'url': 'x'}", '{"url": "x",}', "[1, 2]", '"just text"', "1e400", "nan"]),
    st.binary(max_size=20).filter(lambda b: not b.strip().startswith(b"{") and b.strip() != b""),
)


@CALL_EXAMPLES
@given(arguments=NOT_AN_OBJECT)
async def test_arguments_that_are_not_a_json_object_are_an_invalid_request_result(
    arguments: object, settings: Settings, report: str, redis: aioredis.Redis
) -> None:
    async with ResearchClient(settings=settings, wait_s=1) as client:
        answer = json.loads(await client.call("fetch_page", arguments, report_id=report))
    assert (answer["ok"], answer["tool"], answer["error"]["kind"]) == (False, "fetch_page", "invalid_request")
    assert await redis.zcard(settings.queue_name) == 0


HUGE = st.one_of(st.integers(min_value=2**64), st.integers(max_value=-(2**63) - 1))


@CALL_EXAMPLES
@given(value=HUGE, as_text=st.booleans())
async def test_integers_past_64_bits_are_an_invalid_request_never_a_serialization_error(
    value: int, as_text: bool, settings: Settings, token: str, report: str
) -> None:
    arguments: Mapping[str, Any] = {"query": "tidal energy", "max_results": value}
    sent: object = json.dumps(arguments) if as_text else arguments
    async with calling(settings, token) as client:
        answer = json.loads(await client.call("web_search", sent, report_id=report))
    assert (answer["ok"], answer["error"]["kind"]) == (False, "invalid_request")
    assert answer["query"] == "tidal energy"


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("fetch_page", {"url": "https://example.org/", "report_id": "someone-else"}),
        ("web_search", {"query": "tidal energy", "org_id": "another-org"}),
        ("web_search", {"query": "tidal energy", "report_id": "r-other", "org_id": "another-org"}),
    ],
    ids=["fetch naming a report", "search naming an org", "search naming both"],
)
async def test_a_model_cannot_choose_the_report_or_the_organization(
    tool: str, arguments: dict[str, Any], settings: Settings, report: str, redis: aioredis.Redis
) -> None:
    async with ResearchClient(settings=settings, wait_s=1) as client:
        answer = json.loads(await client.call(tool, arguments, report_id=report))
    assert answer["error"] == {
        "kind": "invalid_request",
        "message": "report_id and org_id are set by the orchestrator, never by a tool call",
    }
    assert answer["report_id"] == report
    assert answer.get("url", answer.get("query")) in {"https://example.org/", "tidal energy"}
    assert await redis.zcard(settings.queue_name) == 0


@pytest.mark.parametrize("report_id", ["", "bad id", None, 7, "x" * 201])
async def test_a_bad_report_id_from_the_orchestrator_raises(report_id: object, settings: Settings) -> None:
    async with ResearchClient(settings=settings, wait_s=1) as client:
        with pytest.raises(MissingReportId):
            await client.call("fetch_page", {"url": "https://example.org/"}, report_id=report_id)  # type: ignore[arg-type]


def test_empty_arguments_read_as_an_empty_object() -> None:
    # Some frameworks send "" for a call without arguments; the job then says what is missing.
    assert model_arguments("") == model_arguments("  ") == model_arguments({}) == {}
    with pytest.raises(InvalidRequest):
        model_arguments(b"\xff\xfe")


# Every result says what it was about: url for fetches, query for searches, errors included.


@pytest.mark.parametrize(
    ("tool", "arguments", "kind", "about"),
    [
        (
            "fetch_page",
            {"url": "HTTPS://Example.ORG:443/a#top", "extract": "summary"},
            "invalid_request",
            {"url": "https://example.org/a"},
        ),
        ("fetch_page", {"url": "http://example.org/"}, "scheme_not_allowed", {"url": "http://example.org/"}),
        (
            "fetch_page",
            {"url": "https://127.0.0.2/admin"},
            "destination_blocked",
            {"url": "https://127.0.0.2/admin"},
        ),
        (
            "fetch_page",
            {"url": "https://not-seen.test/"},
            "url_not_in_menu",
            {"url": "https://not-seen.test/"},
        ),
        (
            "web_search",
            {"query": "  tidal energy  ", "max_results": "five"},
            "invalid_request",
            {"query": "tidal energy"},
        ),
    ],
    ids=["bad extract", "plain http", "refused address", "not on the menu", "bad max_results"],
)
async def test_every_error_result_says_what_it_was_about(
    tool: str,
    arguments: dict[str, Any],
    kind: str,
    about: dict[str, str],
    settings: Settings,
    token: str,
    report: str,
) -> None:
    async with calling(dataclasses.replace(settings, url_menu=True), token) as client:
        answer = json.loads(await client.call(tool, arguments, report_id=report))
    assert answer["error"]["kind"] == kind
    assert {key: answer[key] for key in about} == about


@pytest.mark.parametrize(
    ("tool", "arguments", "about"),
    [
        ("fetch_page", {"url": "https://Example.org/paper#s2"}, {"url": "https://example.org/paper"}),
        ("web_search", {"query": " tidal energy "}, {"query": "tidal energy"}),
    ],
)
async def test_the_clients_own_timeout_says_what_it_was_about(
    tool: str, arguments: dict[str, str], about: dict[str, str], settings: Settings, report: str
) -> None:
    async with ResearchClient(settings=settings, wait_s=0.2, require_worker=False) as client:
        answer = json.loads(await client.call(tool, arguments, report_id=report))
    assert answer["error"]["kind"] == "timeout"
    assert {key: answer[key] for key in about} == about


ARGUMENT_VALUES = st.one_of(
    st.text(max_size=60), st.integers(), st.none(), st.lists(st.text(max_size=5), max_size=2)
)
URLISH = st.one_of(
    st.text(max_size=60),
    st.builds(
        lambda host, path: f"https://{host}/{path}",
        st.from_regex(r"[A-Za-z0-9.-]{1,20}", fullmatch=True),
        st.text(max_size=20),
    ),
    st.just(" https://Example.org:443/a b#frag "),
    st.just("https://" + "a" * 9000),
)


@given(url=st.one_of(URLISH, ARGUMENT_VALUES), query=st.one_of(st.text(max_size=2100), ARGUMENT_VALUES))
def test_the_client_says_what_a_job_was_about_exactly_as_the_tool_does(url: object, query: object) -> None:
    assert about_of("fetch_page", {"url": url}) == FetchPageTool().about({"url": url})
    assert about_of("web_search", {"query": query}) == WebSearchTool().about({"query": query})


# A refused redirect names the hop that was refused.


@pytest.mark.parametrize(
    ("location", "kind", "named"),
    [
        (
            "http://127.0.0.1:{port}/plain",
            "scheme_not_allowed",
            "the redirect from 127.0.0.1:{port} was refused",
        ),
        (
            "https://user@127.0.0.1:{port}/",
            "destination_blocked",
            "the redirect from 127.0.0.1:{port} was refused",
        ),
        ("https://127.0.0.2:{port}/", "destination_blocked", "127.0.0.2 is refused"),
        ("https://internal.test:{port}/", "destination_blocked", "internal.test resolves to 127.0.0.2"),
        ("https://other.test:{port}/", "url_not_in_menu", "another site, other.test,"),
    ],
    ids=[
        "to plain http",
        "to a URL with credentials",
        "to a refused address",
        "to a name that resolves to one",
        "off the menu",
    ],
)
async def test_a_refused_redirect_names_the_hop(
    location: str, kind: str, named: str, settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPFound(location.format(port=request.url.port))

    s = fetch_settings(settings, ca, url_menu=True)
    resolver = FakeResolver({"internal.test": ["127.0.0.2"], "other.test": ["127.0.0.1"]})
    async with serve({"/": redirect}, ca.server_context()) as server, calling(s, token, resolver) as client:
        hop = location.format(port=server.port)
        await client.seed_urls(report, [server.url("/")] + ([] if kind == "url_not_in_menu" else [hop]))
        answer = json.loads(await client.call("fetch_page", {"url": server.url("/")}, report_id=report))
    assert answer["error"]["kind"] == kind
    assert named.format(port=server.port) in answer["error"]["message"]
    assert answer["url"] == server.url("/")


async def test_arguments_past_64_kib_are_an_invalid_request_result_and_are_not_enqueued(
    settings: Settings, report: str, redis: aioredis.Redis
) -> None:
    huge = {"url": "https://example.org/" + "a" * 70_000}
    async with ResearchClient(settings=settings, wait_s=1) as client:
        as_dict = json.loads(await client.call("fetch_page", huge, report_id=report))
        as_text = json.loads(await client.call("fetch_page", json.dumps(huge), report_id=report))
    for answer in (as_dict, as_text):
        assert (answer["ok"], answer["error"]["kind"]) == (False, "invalid_request")
        assert "larger than any valid call" in answer["error"]["message"]
    assert await redis.zcard(settings.queue_name) == 0
