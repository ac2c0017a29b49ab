"""``research-worker mcp --http``: the SDK's own streamable HTTP client against the server on 127.0.0.1.

Both tools list and run as jobs (a local TLS page, the fake OpenRouter); every result is text and
structured content valid against the tool's output schema; an error is ``isError``. The gate
answers 401 without a valid token, 403 for a foreign Origin, 429 past the rate limit and 413 for
a body past the bound; a session is one report, bound to the token that opened it; a call whose
session ends still leaves its job's result.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import jsonschema
import pytest
import redis.asyncio as aioredis
from aiohttp import web
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from starlette.responses import JSONResponse

from jobs.definitions import ToolFormat, formatted
from jobs.fetch.tool import FetchPageTool
from jobs.output_schemas import output_schema
from jobs.search import WebSearchTool
from tests.support.fake_dns import FakeResolver
from tests.support.fake_openrouter import KEY, FakeOpenRouter, fake_openrouter
from tests.support.fetching import fetch_settings
from tests.support.held_page import HeldPage
from tests.support.mcp_http import OTHER_TOKEN, TOKEN, McpHttp, serving, tokens_for
from tests.support.tls import TestCA, serve
from tests.support.workers import running_worker
from worker.client import ResearchClient
from worker.config import Secret, Settings
from worker.mcp.http import Gate, RateLimiter, transport_security
from worker.mcp.tokens import Tokens

ORG_KEY = "sk-or-v1-" + "ac3e11" * 10
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


async def page(request: web.Request) -> web.Response:
    return web.Response(text="<title>A page</title><main><p>Some text.</p></main>", content_type="text/html")


async def slow_page(request: web.Request) -> web.Response:
    await asyncio.sleep(1.5)
    return await page(request)


@pytest.fixture
def tokens(tmp_path: Path) -> Tokens:
    return tokens_for(tmp_path / "tokens.json", {TOKEN: "acme", OTHER_TOKEN: "globex"})


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenRouter]:
    async with fake_openrouter() as server:
        yield server


@pytest.fixture
def mcp_settings(settings: Settings, ca: TestCA, fake: FakeOpenRouter, token: str) -> Settings:
    return fetch_settings(
        settings,
        ca,
        openrouter_base_url=fake.base_url,
        openrouter_api_key=Secret(KEY),
        org_keys={"acme": Secret(ORG_KEY)},
        search_timeout_s=3.0,
        usage_source=f"src-{token}",
    )


@asynccontextmanager
async def mcp_server(
    settings: Settings,
    token: str,
    tokens: Tokens,
    *,
    progress_every_s: float = 2.0,
    built_for: str = "127.0.0.1",
) -> AsyncIterator[McpHttp]:
    """A worker with both tools, a client on its queue, and the MCP app in front of that client."""
    resolver = FakeResolver({})
    async with (
        running_worker(settings, [FetchPageTool(resolver), WebSearchTool()]),
        ResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=20) as client,
        serving(
            settings,
            client,
            tokens,
            progress_every_s=progress_every_s,
            report_prefix=f"mcp-{token}-",
            built_for=built_for,
        ) as srv,
    ):
        yield srv


@pytest.fixture
async def http(mcp_settings: Settings, token: str, tokens: Tokens) -> AsyncIterator[McpHttp]:
    async with mcp_server(mcp_settings, token, tokens) as srv:
        yield srv


def checked(tool: str, result: Any) -> dict[str, Any]:
    """The result's text is its JSON, the same object as its structured content, valid for the tool."""
    assert len(result.content) == 1 and result.content[0].type == "text"
    structured = result.structured_content
    assert json.loads(result.content[0].text) == structured
    jsonschema.Draft202012Validator(output_schema(tool)).validate(structured)
    assert result.is_error is (not structured["ok"])
    return dict(structured)


async def test_the_sdk_client_lists_the_tools_exactly_as_tools_format_mcp_prints_them(
    http: McpHttp, mcp_settings: Settings
) -> None:
    async with http.client() as client:
        listed = await client.list_tools()
    as_wire = [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in listed.tools]
    assert as_wire == formatted(mcp_settings, ToolFormat.MCP)["tools"]


async def test_fetch_page_runs_as_a_job_and_comes_back_as_text_and_structured_content(
    http: McpHttp, ca: TestCA, redis: aioredis.Redis
) -> None:
    async with serve({"/": page}, ca.server_context()) as site, http.client() as client:
        result = await client.call_tool("fetch_page", {"url": site.url("/")})
    fetched = checked("fetch_page", result)
    assert (fetched["ok"], fetched["title"]) == (True, "A page")
    assert json.loads(await redis.get(f"research:result:{fetched['job_id']}")) == fetched


async def test_web_search_runs_as_a_job_paid_by_the_tokens_org(http: McpHttp, fake: FakeOpenRouter) -> None:
    async with http.client() as client:
        result = await client.call_tool("web_search", {"query": "tidal energy", "max_results": 3})
    async with http.client(OTHER_TOKEN) as client:  # globex has no key of its own
        other = await client.call_tool("web_search", {"query": "tidal energy"})
    found = checked("web_search", result)
    assert found["ok"] is True and len(found["results"]) == 3
    assert checked("web_search", other)["ok"] is True
    assert [r.key for r in fake.requests] == [ORG_KEY, KEY]  # acme's key, then the deployment's


async def test_a_refusal_is_an_is_error_result_whose_text_is_the_error_json(http: McpHttp) -> None:
    async with http.client() as client:
        result = await client.call_tool("fetch_page", {"url": "http://127.0.0.1/"})
    refused = checked("fetch_page", result)
    assert result.is_error is True
    assert refused["error"]["kind"] == "scheme_not_allowed"


async def test_an_unknown_tool_is_an_invalid_request_result_not_a_protocol_error(http: McpHttp) -> None:
    async with http.client() as client:
        result = await client.call_tool("delete_everything", {"url": "https://example.org/"})
    assert result.is_error is True
    answer = json.loads(result.content[0].text)
    assert (answer["tool"], answer["error"]["kind"]) == ("unknown", "invalid_request")


HOSTILE_ARGUMENTS = [
    ("fetch_page", {}),
    ("fetch_page", {"url": 5}),
    ("fetch_page", {"url": None}),
    ("fetch_page", {"url": ["https://example.org/"]}),
    ("fetch_page", {"url": "https://example.org/" + "a" * 9000}),
    ("fetch_page", {"url": "https://example.org/", "report_id": "someone-else"}),
    ("fetch_page", {"url": "https://example.org/", "extract": "everything"}),
    ("fetch_page", {"url": "https://example.org/", "fresh": "yes"}),
    ("web_search", {"query": ""}),
    ("web_search", {"query": "   "}),
    ("web_search", {"query": "q" * 2001}),
    ("web_search", {"query": "tidal", "org_id": "globex"}),
    ("web_search", {"query": "tidal", "max_results": 2**70}),
    ("web_search", {"query": {"nested": ["deep"]}}),
]


async def test_hostile_arguments_are_an_invalid_request_result(http: McpHttp, fake: FakeOpenRouter) -> None:
    async with http.client() as client:
        for tool, arguments in HOSTILE_ARGUMENTS:
            result = await client.call_tool(tool, arguments)
            refused = checked(tool, result)
            assert refused["error"]["kind"] == "invalid_request", (tool, arguments)
    assert fake.requests == []  # no search was paid for


JSON_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2),
)
ARGUMENT_NAMES = st.one_of(
    st.sampled_from(["url", "extract", "fresh", "query", "max_results", "report_id", "org_id"]),
    st.text(max_size=8),
)


CALLS = st.lists(
    st.tuples(
        st.sampled_from(["fetch_page", "web_search"]),
        st.dictionaries(ARGUMENT_NAMES, JSON_VALUES, max_size=4),
    ),
    min_size=1,
    max_size=12,
)


# A few sessions, each making many calls: a session costs more than a call.
@hypothesis_settings(
    max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(calls=CALLS)
async def test_whatever_the_arguments_the_answer_is_a_tool_result_valid_for_its_schema(
    http: McpHttp, calls: list[tuple[str, dict[str, Any]]]
) -> None:
    async with http.client() as client:
        for tool, arguments in calls:
            checked(tool, await client.call_tool(tool, arguments))


async def test_one_session_is_one_report_and_another_session_another(http: McpHttp, token: str) -> None:
    async def reports_of_one_session() -> set[str]:
        async with http.client() as client:
            first = await client.call_tool("fetch_page", {"url": "http://127.0.0.1/a"})
            second = await client.call_tool("fetch_page", {"url": "http://127.0.0.1/b"})
        return {first.structured_content["report_id"], second.structured_content["report_id"]}

    one, other = await reports_of_one_session(), await reports_of_one_session()
    assert len(one) == 1 and len(other) == 1 and one != other
    assert all(report.startswith(f"mcp-{token}-") for report in one | other)


async def test_progress_arrives_while_a_slow_fetch_waits(
    mcp_settings: Settings, token: str, tokens: Tokens, ca: TestCA
) -> None:
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with (
        serve({"/": slow_page}, ca.server_context()) as site,
        mcp_server(mcp_settings, token, tokens, progress_every_s=0.2) as srv,
        srv.client() as client,
    ):
        result = await client.call_tool("fetch_page", {"url": site.url("/")}, progress_callback=on_progress)
    assert result.structured_content["ok"] is True
    assert len(progress) >= 2 and progress == sorted(progress)


async def result_keys(redis: aioredis.Redis, token: str) -> list[bytes]:
    return [key async for key in redis.scan_iter(match=f"research:result:{token}-*")]


async def wait_for_one_result(redis: aioredis.Redis, token: str) -> dict[str, Any]:
    for _ in range(200):
        if found := await result_keys(redis, token):
            return dict(json.loads(await redis.get(found[0])))
        await asyncio.sleep(0.05)
    raise AssertionError("the job never wrote its result")


def waiting_calls() -> list[asyncio.Task[Any]]:
    """The server's waits for a call's result, running in this event loop."""
    return [
        task
        for task in asyncio.all_tasks()
        if getattr(task.get_coro(), "__qualname__", "") == "ResearchClient.call_result" and not task.done()
    ]


async def test_a_cancelled_call_stops_the_wait_and_the_job_still_writes_its_result(
    http: McpHttp, ca: TestCA, redis: aioredis.Redis, token: str
) -> None:
    held = HeldPage()

    async def cancel_once_fetching(scope: anyio.CancelScope) -> None:
        await held.asked.wait()
        assert len(waiting_calls()) == 1  # the server waits for the job
        scope.cancel()

    async with serve({"/": held.handler}, ca.server_context()) as site:
        async with http.client() as client:
            with anyio.CancelScope() as scope:
                watcher = asyncio.create_task(cancel_once_fetching(scope))
                await client.call_tool("fetch_page", {"url": site.url("/")})
            await watcher
            assert scope.cancelled_caught
            async with asyncio.timeout(10):  # the server stops waiting (it runs in this loop)
                while waiting_calls():
                    await asyncio.sleep(0.02)
            assert await result_keys(redis, token) == []  # the job is still running
            # The session goes on serving after the cancellation.
            assert (await client.list_tools()).tools
        held.release.set()
        done = await wait_for_one_result(redis, token)
    assert (done["ok"], done["title"]) == (True, "A page")


async def test_a_session_that_ends_mid_call_leaves_the_jobs_result(
    http: McpHttp, ca: TestCA, redis: aioredis.Redis, token: str
) -> None:
    held = HeldPage()
    async with serve({"/": held.handler}, ca.server_context()) as site:

        async def call_and_hang_up() -> None:
            async with http.client() as client:
                await client.call_tool("fetch_page", {"url": site.url("/")})

        task = asyncio.create_task(call_and_hang_up())
        async with asyncio.timeout(20):
            await held.asked.wait()  # the worker is fetching
        task.cancel()  # the client goes away, session and all
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        assert await result_keys(redis, token) == []  # the job is still running
        held.release.set()
        done = await wait_for_one_result(redis, token)
    assert (done["ok"], done["title"]) == (True, "A page")


async def post(http: McpHttp, body: bytes | dict[str, Any], **headers: str) -> Any:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with http.raw() as raw:
        return await raw.post(http.url, content=content, headers={**JSON_HEADERS, **headers})


NOT_A_VALID_BEARER_TOKEN = [
    None,
    "",
    "Bearer",
    "bearer x",
    f"Basic {TOKEN}",
    f"Bearer {TOKEN}x",
    f"Bearer {TOKEN[:-1]}",
    f"Bearer {TOKEN.upper()}",
    "Bearer " + "0" * 64,  # a digest is not a token
    f"Token {TOKEN}",
]


async def test_a_request_without_a_valid_bearer_token_is_401(http: McpHttp) -> None:
    for authorization in NOT_A_VALID_BEARER_TOKEN:
        headers = {} if authorization is None else {"Authorization": authorization}
        answer = await post(http, INITIALIZE, **headers)
        assert answer.status_code == 401, authorization
        assert answer.headers["WWW-Authenticate"].startswith("Bearer")
        assert "mcp-session-id" not in answer.headers


async def test_the_sdk_client_without_a_token_cannot_connect(http: McpHttp) -> None:
    with pytest.raises(BaseException):  # noqa: B017, PT011 - the SDK wraps the 401 in its task group
        async with http.client(token=None) as client:
            await client.list_tools()


FOREIGN_ORIGINS = [
    "https://evil.example",
    "http://127.0.0.1.evil.example",
    "null",
    "http://localhost:3001",
    "https://localhost:3000",
    "http://localhost:3000.evil.example",
    "file://",
]


async def test_a_request_from_a_foreign_origin_is_403_even_with_a_token(
    mcp_settings: Settings, token: str, tokens: Tokens
) -> None:
    allowed = dataclasses.replace(mcp_settings, mcp_origins=("http://localhost:3000",))
    async with mcp_server(allowed, token, tokens) as srv:
        for origin in FOREIGN_ORIGINS:
            refused = await post(srv, INITIALIZE, Authorization=f"Bearer {TOKEN}", Origin=origin)
            assert refused.status_code == 403, origin
        welcome = await post(srv, INITIALIZE, Authorization=f"Bearer {TOKEN}", Origin="http://localhost:3000")
    assert welcome.status_code == 200


async def test_bound_to_another_address_the_gate_alone_refuses_a_foreign_origin(
    mcp_settings: Settings, token: str, tokens: Tokens
) -> None:
    # Built as for 0.0.0.0 the SDK checks neither Host nor Origin: the gate is the only check.
    assert not transport_security("0.0.0.0", ("http://localhost:3000",)).enable_dns_rebinding_protection
    allowed = dataclasses.replace(mcp_settings, mcp_origins=("http://localhost:3000",))
    async with mcp_server(allowed, token, tokens, built_for="0.0.0.0") as srv:
        refused = [
            (await post(srv, INITIALIZE, Authorization=f"Bearer {TOKEN}", Origin=origin)).status_code
            for origin in FOREIGN_ORIGINS
        ]
        welcome = await post(srv, INITIALIZE, Authorization=f"Bearer {TOKEN}", Origin="http://localhost:3000")
        plain = await post(srv, INITIALIZE, Authorization=f"Bearer {TOKEN}")  # not a browser: no Origin
    assert refused == [403] * len(FOREIGN_ORIGINS)
    assert welcome.status_code == 200 and plain.status_code == 200


@pytest.mark.parametrize("origin", FOREIGN_ORIGINS)
async def test_the_gate_refuses_a_foreign_origin_before_the_app_behind_it_hears_of_it(
    origin: str, tokens: Tokens
) -> None:
    heard: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:  # stands for an app with no check of its own
        heard.append(scope["path"])
        await JSONResponse({"ok": True})(scope, receive, send)

    gate = Gate(app, tokens, ("http://localhost:3000",), RateLimiter(60))
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=gate), base_url="http://0.0.0.0") as raw:
        foreign = await raw.post("/mcp", headers={"Authorization": f"Bearer {TOKEN}", "Origin": origin})
        allowed = await raw.post(
            "/mcp", headers={"Authorization": f"Bearer {TOKEN}", "Origin": "http://LOCALHOST:3000/"}
        )
    assert foreign.status_code == 403
    assert allowed.status_code == 200
    assert heard == ["/mcp"]  # the allowed request only


async def test_past_the_rate_limit_a_token_is_429_and_another_token_is_not(
    mcp_settings: Settings, token: str, tokens: Tokens
) -> None:
    limited = dataclasses.replace(mcp_settings, mcp_rate_per_minute=3)
    async with mcp_server(limited, token, tokens) as srv:
        answers = [await post(srv, INITIALIZE, Authorization=f"Bearer {TOKEN}") for _ in range(4)]
        other = await post(srv, INITIALIZE, Authorization=f"Bearer {OTHER_TOKEN}")
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert int(answers[-1].headers["Retry-After"]) >= 1
    assert other.status_code == 200


async def test_a_body_past_the_bound_is_413(http: McpHttp, mcp_settings: Settings) -> None:
    huge = {
        **INITIALIZE,
        "params": {**INITIALIZE["params"], "padding": "x" * mcp_settings.mcp_max_body_bytes},
    }
    answer = await post(http, huge, Authorization=f"Bearer {TOKEN}")
    assert answer.status_code == 413


MALFORMED_BODIES = [
    b"{",
    b"not json",
    b"[]",
    b"null",
    b'{"jsonrpc": "2.0"}',
    b'{"jsonrpc": "1.0", "id": 1, "method": "initialize"}',
    b'{"jsonrpc": "2.0", "id": {"nested": 1}, "method": "initialize"}',
    b"\xff\xfe",
    b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": ' + b"[" * 5000 + b"]" * 5000 + b"}",
]


async def test_a_malformed_message_is_a_client_error_and_the_server_goes_on(http: McpHttp) -> None:
    for body in MALFORMED_BODIES:
        answer = await post(http, body, Authorization=f"Bearer {TOKEN}")
        assert 400 <= answer.status_code < 500, body[:40]
    async with http.client() as client:
        assert (await client.list_tools()).tools


async def test_a_tool_call_before_initialize_is_refused_and_enqueues_nothing(
    http: McpHttp, redis: aioredis.Redis, mcp_settings: Settings
) -> None:
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "fetch_page", "arguments": {"url": "https://example.org/"}},
    }
    answer = await post(http, call, Authorization=f"Bearer {TOKEN}")
    assert 400 <= answer.status_code < 500
    assert await redis.zcard(mcp_settings.queue_name) == 0


async def test_a_session_answers_only_the_token_that_opened_it(http: McpHttp) -> None:
    opened = await post(http, INITIALIZE, Authorization=f"Bearer {TOKEN}")
    session = opened.headers["mcp-session-id"]
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    stolen = await post(http, listing, Authorization=f"Bearer {OTHER_TOKEN}", **{"mcp-session-id": session})
    assert stolen.status_code == 404


async def test_a_sessionless_2026_request_is_told_to_open_a_session(http: McpHttp) -> None:
    discover = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}}
    answer = await post(
        http, discover, Authorization=f"Bearer {TOKEN}", **{"MCP-Protocol-Version": "2026-07-28"}
    )
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == -32022
    assert "2025-11-25" in error["data"]["supported"]
    assert not any(v.startswith("2026") for v in error["data"]["supported"])


async def test_the_sdk_client_in_auto_mode_falls_back_to_a_session(http: McpHttp) -> None:
    async with http.client() as client:
        assert not client.protocol_version.startswith("2026")
