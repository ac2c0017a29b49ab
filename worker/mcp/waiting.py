"""A call that finds no worker alive waits for one, as a host started before its worker needs.

A host may start at login, before ``research-worker run``; its first call would otherwise be an
error for a gap of seconds. So the call waits up to the client's own wait deadline, telling a
caller that asked for progress how long it has waited, and if no worker comes it ends as a tool
result (``timeout``, ``isError: true``), never a protocol error: the model reads why.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Mapping
from typing import Any

from mcp.server.context import ServerRequestContext

from jobs.facts import about_of
from worker.client import ResearchClient, error_result
from worker.errors import Timeout
from worker.redact import redact_url
from worker.serialization import JsonObject

POLL_S = 1.0


async def worker_or_error(
    ctx: ServerRequestContext[Any, Any],
    client: ResearchClient,
    tool: str,
    arguments: Mapping[str, object],
    report_id: str,
    *,
    every_s: float,
) -> JsonObject | None:
    """None once a worker beats on the queue; the ``timeout`` result when none did in time."""
    started = time.monotonic()
    reported = started
    while not await client.workers_alive():
        waited = time.monotonic() - started
        if waited >= client.wait_s:
            return no_worker(client, tool, arguments, report_id)
        if time.monotonic() - reported >= every_s:
            reported = time.monotonic()
            # A no-op when the request carried no progress token.
            await ctx.session.report_progress(
                waited, None, f"{tool}: no worker is running yet; waiting for one ({waited:.0f} s)"
            )
        await asyncio.sleep(min(POLL_S, every_s, max(0.0, client.wait_s - waited)))
    return None


def no_worker(
    client: ResearchClient, tool: str, arguments: Mapping[str, object], report_id: str
) -> JsonObject:
    """The tool result for a call no worker took: nothing was enqueued or charged."""
    settings = client.settings
    late = Timeout(
        f"no worker came to queue {settings.queue_name} at {redact_url(client.redis_url or '')} within "
        f"{client.wait_s:g} s; start one with `research-worker run` and call again (nothing was "
        "enqueued or charged)"
    )
    return error_result(tool, report_id, uuid.uuid4().hex, late, about_of(tool, arguments))
