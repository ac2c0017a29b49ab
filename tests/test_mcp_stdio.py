"""``research-worker mcp`` over stdio: the SDK's stdio client spawns the real command line.

The server process reaches only Redis on loopback (the command line's loopback guard is on); the
worker that runs the jobs is the test's own, on the same queue. One process is one report: the
one given with ``--report``, or a new one it names on stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TextIO

import jsonschema
import redis.asyncio as aioredis
from aiohttp import web
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from jobs.definitions import ToolFormat, formatted
from jobs.fetch.tool import FetchPageTool
from jobs.output_schemas import output_schema
from tests.support.fake_dns import FakeResolver
from tests.support.fetching import fetch_settings
from tests.support.held_page import HeldPage
from tests.support.processes import settings_env
from tests.support.run_cli import ROOT
from tests.support.tls import TestCA, serve
from tests.support.workers import running_worker
from worker.config import Settings


async def page(request: web.Request) -> web.Response:
    return web.Response(text="<title>A page</title><main><p>Some text.</p></main>", content_type="text/html")


def server_env(settings: Settings) -> dict[str, str]:
    """The worker's own settings, so the server lists the tools as the worker runs them."""
    return settings_env(settings, RESEARCH_URL_MENU="on" if settings.url_menu else "off")


def server_parameters(settings: Settings, *args: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "tests.support.run_cli", "mcp", *args],
        env=server_env(settings),
        cwd=str(ROOT),
    )


@asynccontextmanager
async def stdio_session(
    settings: Settings, *args: str, errlog: TextIO | None = None
) -> AsyncIterator[Client]:
    transport = stdio_client(server_parameters(settings, *args), errlog=errlog or sys.stderr)
    async with Client(transport) as client:
        yield client


async def test_the_stdio_server_lists_both_tools_and_runs_them_as_jobs_of_its_report(
    settings: Settings, ca: TestCA, report: str, redis: aioredis.Redis
) -> None:
    s = fetch_settings(settings, ca, result_ttl_s=60)  # the server's job ids carry no test token
    async with (
        serve({"/": page}, ca.server_context()) as site,
        running_worker(s, [FetchPageTool(FakeResolver({}))]),
        stdio_session(s, "--report", report) as client,
    ):
        listed = await client.list_tools()
        fetched = await client.call_tool("fetch_page", {"url": site.url("/")})
        refused = await client.call_tool("fetch_page", {"url": "http://127.0.0.1/"})
        unknown = await client.call_tool("web-search", {"query": "q"})
        hostile = await client.call_tool("fetch_page", {"url": "https://example.org/", "report_id": "other"})
    tools = [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in listed.tools]
    assert tools == formatted(s, ToolFormat.MCP)["tools"]
    answer = fetched.structured_content
    assert json.loads(fetched.content[0].text) == answer
    jsonschema.Draft202012Validator(output_schema("fetch_page")).validate(answer)
    assert (fetched.is_error, answer["title"], answer["report_id"]) == (False, "A page", report)
    assert json.loads(await redis.get(f"research:result:{answer['job_id']}")) == answer
    assert refused.is_error and refused.structured_content["error"]["kind"] == "scheme_not_allowed"
    assert unknown.is_error and unknown.structured_content["tool"] == "unknown"
    assert hostile.is_error and hostile.structured_content["error"]["kind"] == "invalid_request"
    assert {r.structured_content["report_id"] for r in (refused, unknown, hostile)} == {report}


async def test_a_session_that_ends_mid_call_leaves_the_jobs_result(
    settings: Settings, ca: TestCA, report: str, redis: aioredis.Redis
) -> None:
    # The server's job ids carry no test token: a short result TTL keeps the shared Redis clean.
    s = fetch_settings(settings, ca, result_ttl_s=60)
    held = HeldPage()
    async with (
        serve({"/": held.handler}, ca.server_context()) as site,
        running_worker(s, [FetchPageTool(FakeResolver({}))]) as worker,
    ):

        async def call_and_hang_up() -> None:
            async with stdio_session(s, "--report", report) as client:
                await client.call_tool("fetch_page", {"url": site.url("/")})

        task = asyncio.create_task(call_and_hang_up())
        async with asyncio.timeout(30):
            await held.asked.wait()  # the worker is fetching
        job_id = next(iter(worker.tasks))
        task.cancel()  # the host goes away: stdin closes, the server process ends
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        assert await redis.get(f"research:result:{job_id}") is None  # the job is still running
        held.release.set()
        async with asyncio.timeout(20):
            while (written := await redis.get(f"research:result:{job_id}")) is None:
                await asyncio.sleep(0.05)
    done = json.loads(written)
    assert (done["ok"], done["title"], done["report_id"]) == (True, "A page", report)


async def exchange(settings: Settings, lines: list[bytes], last_id: str) -> tuple[list[dict[str, Any]], str]:
    """Write raw lines to a stdio server (started without --report) and read what it answers, up
    to the answer to ``last_id``; and what it said on stderr."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.support.run_cli",
        "mcp",
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=server_env(settings),
        limit=2**20,
    )
    assert proc.stdin is not None and proc.stdout is not None
    answers: list[dict[str, Any]] = []
    try:
        for line in lines:
            proc.stdin.write(line + b"\n")
            await proc.stdin.drain()
        async with asyncio.timeout(30):
            while not any(a.get("id") == last_id for a in answers):
                line = await proc.stdout.readline()
                assert line, "the server closed stdout before answering"
                answers.append(json.loads(line))
    finally:
        proc.stdin.close()
        async with asyncio.timeout(15):
            _, said = await proc.communicate()
    return answers, said.decode()


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": "init",
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def message(value: dict[str, Any]) -> bytes:
    return json.dumps(value).encode()


async def test_malformed_huge_and_out_of_order_messages_get_errors_and_the_session_goes_on_for_its_own_report(
    settings: Settings, redis: aioredis.Redis
) -> None:
    early_call = {
        "jsonrpc": "2.0",
        "id": "early",
        "method": "tools/call",
        "params": {"name": "fetch_page", "arguments": {"url": "https://example.org/"}},
    }
    huge_call = {
        "jsonrpc": "2.0",
        "id": "huge",
        "method": "tools/call",
        "params": {"name": "fetch_page", "arguments": {"url": "https://example.org/" + "a" * 3_000_000}},
    }
    listing = {"jsonrpc": "2.0", "id": "list", "method": "tools/list"}
    unknown_method = {"jsonrpc": "2.0", "id": "nope", "method": "tools/delete"}
    answers, said = await exchange(
        settings,
        [
            b"{not json",
            b"\xff\xfe garbage",
            b"[1, 2, 3]",
            message(early_call),
            message(INITIALIZED),  # before initialize
            message(INITIALIZE),
            message({**INITIALIZE, "id": "again"}),  # a second initialize
            message(INITIALIZED),
            message(unknown_method),
            message(huge_call),
            b'{"jsonrpc": "2.0", "id": "deep", "method": "tools/list", "params": '
            + b"[" * 3000
            + b"]" * 3000
            + b"}",
            message(listing),
        ],
        "list",
    )
    by_id = {a.get("id"): a for a in answers if "id" in a}
    assert "error" in by_id["early"]  # a call before initialize is refused
    assert "result" in by_id["init"]
    assert "again" in by_id  # answered, one way or the other
    assert by_id["nope"]["error"]["code"] == -32601
    huge = by_id["huge"]["result"]
    assert huge["isError"] is True and huge["structuredContent"]["error"]["kind"] == "invalid_request"
    assert [t["name"] for t in by_id["list"]["result"]["tools"]] == ["web_search", "fetch_page", "cite"]
    assert await redis.zcard(settings.queue_name) == 0  # nothing reached the queue
    # Started without --report, the server made a report of its own and said which.
    report = huge["structuredContent"]["report_id"]
    assert report.startswith("mcp-")
    assert f"this MCP session's report id is {report}" in said
