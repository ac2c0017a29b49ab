"""``research-worker mcp`` (stdio) started before its worker, and the JSON-RPC it cannot read.

A call with no worker alive waits for one, sending progress, and runs once a worker comes; with
none by the client's wait deadline it ends as a tool result with ``isError: true`` (never a
JSON-RPC error), having enqueued nothing. Every malformed request gets a JSON-RPC error under its
own id; a malformed notification gets nothing; the session goes on.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import pytest
import redis.asyncio as aioredis
from aiohttp import web
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from jobs.fetch.tool import FetchPageTool
from tests.support.fake_dns import FakeResolver
from tests.support.fetching import fetch_settings
from tests.support.processes import settings_env
from tests.support.run_cli import ROOT
from tests.support.tls import TestCA, serve
from tests.support.workers import running_worker
from tests.test_mcp_stdio import INITIALIZE, INITIALIZED, exchange, message
from worker.config import Settings
from worker.mcp.jsonrpc import malformed

# Short tool deadlines, so the client's wait deadline (the job timeout plus 30 s) is about 43 s.
SHORT = {
    "RESEARCH_FETCH_TIMEOUT_S": "1",
    "RESEARCH_SEARCH_TIMEOUT_S": "1",
    "RESEARCH_REDUCE_CPU_BUDGET_S": "0.1",
}


async def page(request: web.Request) -> web.Response:
    return web.Response(text="<title>A page</title><main><p>Some text.</p></main>", content_type="text/html")


def parameters(settings: Settings, report: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "tests.support.run_cli", "mcp", "--report", report],
        env=settings_env(settings, RESEARCH_URL_MENU="off", **SHORT),
        cwd=str(ROOT),
    )


async def test_with_no_worker_a_call_waits_with_progress_then_ends_as_a_tool_error(
    settings: Settings, report: str, redis: aioredis.Redis
) -> None:
    progress: list[tuple[float, str | None]] = []

    async def on_progress(value: float, total: float | None, said: str | None) -> None:
        progress.append((value, said))

    started = time.monotonic()
    async with Client(stdio_client(parameters(settings, report))) as client:
        result = await client.call_tool(
            "fetch_page",
            {"url": "https://example.org/"},
            progress_callback=on_progress,
            read_timeout_seconds=120,
        )
    waited = time.monotonic() - started
    answer = result.structured_content
    assert result.is_error is True
    assert answer["error"]["kind"] == "timeout"
    assert "no worker" in answer["error"]["message"] and "research-worker run" in answer["error"]["message"]
    assert answer["report_id"] == report and answer["url"] == "https://example.org/"
    assert waited >= 30  # it waited (the deadline is about 43 s), not answered at once
    assert len(progress) >= 5 and all("no worker" in (said or "") for _, said in progress)
    assert [value for value, _ in progress] == sorted(value for value, _ in progress)
    assert await redis.zcard(settings.queue_name) == 0  # nothing was enqueued


async def test_a_call_made_before_the_worker_starts_runs_once_it_does(
    settings: Settings, ca: TestCA, report: str
) -> None:
    s = fetch_settings(settings, ca, result_ttl_s=60)
    async with (
        serve({"/": page}, ca.server_context()) as site,
        Client(stdio_client(parameters(s, report))) as client,
    ):
        call = asyncio.create_task(client.call_tool("fetch_page", {"url": site.url("/")}))
        await asyncio.sleep(3)
        assert not call.done()  # waiting for a worker
        async with running_worker(s, [FetchPageTool(FakeResolver({}))]):
            result = await asyncio.wait_for(call, 60)
    assert result.is_error is False and result.structured_content["title"] == "A page"


MALFORMED = [
    ({"jsonrpc": "2.0", "id": "a", "method": 5}, "a"),
    ({"jsonrpc": "2.0", "id": "b", "method": None}, "b"),
    ({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": "x"}, 7),
    ({"jsonrpc": "2.0", "id": "d", "method": "tools/call", "params": ["fetch_page"]}, "d"),
    ({"jsonrpc": "2.0", "id": {"x": 1}, "method": "tools/list"}, None),
    ({"jsonrpc": "2.0", "id": True, "method": "tools/list"}, None),
]


async def test_every_malformed_request_gets_a_json_rpc_error_and_the_session_goes_on(
    settings: Settings,
) -> None:
    notification = {"jsonrpc": "2.0", "method": 12}  # malformed, but a notification: no answer
    lines = [message(INITIALIZE), message(INITIALIZED), message(notification)]
    lines += [message(request) for request, _ in MALFORMED]
    lines += [
        b"{not json",
        b"[1, 2]",
        b"42",
        message({"jsonrpc": "2.0", "id": "last", "method": "tools/list"}),
    ]
    answers, _ = await exchange(settings, lines, "last")
    errors = [a for a in answers if "error" in a]
    for _, ident in MALFORMED:
        assert any(a["id"] == ident and a["error"]["code"] == -32600 for a in errors), ident
    assert [a["error"]["code"] for a in errors if a["id"] is None].count(-32700) == 1
    assert len(errors) == len(MALFORMED) + 3  # one each, and nothing for the notification
    assert "result" in answers[-1] and answers[-1]["id"] == "last"


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


@hypothesis_settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(method=JSON_VALUES, params=JSON_VALUES, ident=JSON_VALUES)
def test_a_request_is_left_to_the_sdk_exactly_when_its_method_params_and_id_are_well_typed(
    method: Any, params: Any, ident: Any
) -> None:
    line = json.dumps({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
    well_typed = (
        isinstance(method, str)
        and (params is None or isinstance(params, dict))
        and (isinstance(ident, str) or (isinstance(ident, int) and not isinstance(ident, bool)))
    )
    error = malformed(line)
    assert (error is None) is well_typed
    if error is not None:
        kept = (
            ident
            if isinstance(ident, str) or (isinstance(ident, int) and not isinstance(ident, bool))
            else None
        )
        assert error.id == kept and error.error.code == -32600


@pytest.mark.parametrize("line", ["", "   ", '{"jsonrpc": "2.0", "id": 1, "result": {}}'])
def test_blank_lines_and_responses_are_the_sdks(line: str) -> None:
    assert malformed(line) is None
