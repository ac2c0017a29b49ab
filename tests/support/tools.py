"""Tools that exist only for the foundation's tests: they exercise the envelope, not the network."""

from __future__ import annotations

import asyncio
from typing import Any

from worker.errors import InvalidRequest
from worker.runtime.context import JobContext
from worker.runtime.envelope import FunctionTool
from worker.state.budget import Tool


async def _echo(job: JobContext, args: dict[str, Any]) -> dict[str, Any]:
    if "value" in args and not isinstance(args["value"], str):
        raise InvalidRequest("value must be a string")
    await job.charge(Tool.FETCH)
    return {"echo": args.get("value", ""), "job_try": job.job_try}


async def _slow(job: JobContext, args: dict[str, Any]) -> dict[str, Any]:
    await job.charge(Tool.FETCH)
    await asyncio.sleep(float(args.get("seconds", 1.0)))
    return {"slept": args.get("seconds", 1.0)}


async def _boom(job: JobContext, args: dict[str, Any]) -> dict[str, Any]:
    raise RuntimeError("a bug in a tool")


async def _noop(job: JobContext, args: dict[str, Any]) -> dict[str, Any]:
    return {}


ECHO = FunctionTool("echo", ("value",), lambda s: 5.0, _echo)
SLOW = FunctionTool("slow", ("seconds",), lambda s: 30.0, _slow)
BOOM = FunctionTool("boom", (), lambda s: 5.0, _boom)
NOOP = FunctionTool("noop", (), lambda s: 5.0, _noop)
TEST_TOOLS = (ECHO, SLOW, BOOM, NOOP)
