"""``mcp``: the tools served over MCP, on stdio or streamable HTTP; each call is a job on the queue."""

from __future__ import annotations

import argparse
import asyncio
import uuid
from collections.abc import Awaitable

from arq.connections import ArqRedis

from jobs.facts import ToolFormat, formatted
from worker.cli import common
from worker.cli.common import REACH_S, locate, reach
from worker.cli.exits import Exit, UsageError, say
from worker.cli.parser import version
from worker.config import Settings
from worker.mcp.serve import CannotListen, serve_http, serve_stdio
from worker.mcp.tokens import load_tokens
from worker.state import health


def cmd_mcp(args: argparse.Namespace, settings: Settings) -> int:
    """Serve the tools over MCP; each call is a job on the queue, so a worker must run somewhere."""
    if args.http and args.report is not None:
        raise UsageError("--report is for stdio; over HTTP each MCP session is a report of its own")
    if args.http:
        tokens = load_tokens(settings.mcp_tokens_file)  # a bad file stops here, before Redis
    report_id = common.report_id(args.report) if args.report is not None else f"mcp-{uuid.uuid4().hex}"
    settings, found = locate(settings)
    asyncio.run(_no_worker_warning(reach(found, settings, REACH_S), settings))
    listing = formatted(settings, ToolFormat.MCP)["tools"]  # exactly what `tools --format mcp` prints
    if args.http:
        try:
            asyncio.run(serve_http(settings, listing, tokens, args.host, args.port, version()))
        except CannotListen as exc:
            say(str(exc))
            return Exit.JOB_ERROR  # as the dashboard does
    else:
        if args.report is None:
            say(f"this MCP session's report id is {report_id}")
        asyncio.run(serve_stdio(settings, listing, report_id, version()))
    return Exit.OK


async def _no_worker_warning(pool: Awaitable[ArqRedis], settings: Settings) -> None:
    """Say so on stderr when no worker runs yet: calls wait for one (an MCP host starts us early)."""
    redis = await pool
    try:
        if not await health.any_alive(redis, settings.queue_name):
            say(f"no worker is running on queue {settings.queue_name} yet; calls wait for one to start")
    finally:
        await redis.aclose()
