"""What the commands that reach Redis share: finding it, reaching it in time, and saying why not."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import sys
import time
from collections.abc import Awaitable

import orjson
from arq.connections import ArqRedis
from redis.exceptions import AuthenticationError, InvalidResponse, RedisError

from worker import embedded
from worker.cli.exits import UsageError
from worker.config import ConfigError, Settings, redact_url
from worker.embedded import Located, Origin
from worker.errors import MissingReportId
from worker.runtime.envelope import parse_report_id
from worker.state.redis_conn import connect

REACH_S = 2.0  # how long a command tries to reach Redis before it says it cannot
HEALTH_REACH_S = 0.4  # a container probe answers within about a second, start-up included
RETRY_PAUSE_S = 0.2


class RedisUnreachable(Exception):
    def __init__(self, found: Located, reason: str) -> None:
        super().__init__(reason)
        self.found = found
        self.reason = reason

    def line(self) -> str:
        where = redact_url(self.found.url)
        if self.found.source is Origin.REDIS_URL:
            advice = "start that Redis, or point REDIS_URL at one that runs"
        else:
            advice = (
                "start a worker with `research-worker run` (it brings its own Redis when none runs), "
                "or set REDIS_URL"
            )
        return f"cannot reach Redis at {where} ({self.reason}); {advice}"


class NoWorker(Exception):
    def __init__(self, queue_name: str, url: str) -> None:
        super().__init__(queue_name)
        self.queue_name = queue_name
        self.url = url

    def line(self) -> str:
        return (
            f"no worker is running on queue {self.queue_name} at {redact_url(self.url)}; start one with "
            "`research-worker run`, or pass --enqueue-anyway to queue the job for a worker that starts later"
        )


class RedisFull(Exception):
    """Redis refused a write for memory: reachable, but full."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.url = url

    def line(self) -> str:
        return (
            f"Redis is out of memory at {redact_url(self.url)}: it refused a write (maxmemory reached, "
            "noeviction); nothing was queued. Free memory in Redis or raise its maxmemory "
            "(docs/operations.md)"
        )


def print_json(value: object) -> None:
    sys.stdout.write(orjson.dumps(value).decode() + "\n")
    sys.stdout.flush()


async def close(pool: Awaitable[ArqRedis]) -> None:
    await (await pool).aclose()


async def reach(found: Located, settings: Settings, within_s: float) -> ArqRedis:
    """An open connection to the Redis ``found``, trying for ``within_s``; ``RedisUnreachable`` after that.

    ``settings`` must already point at it (``locate``).
    """
    deadline = time.monotonic() + within_s
    while True:
        try:
            async with asyncio.timeout(max(deadline - time.monotonic(), RETRY_PAUSE_S)):
                return await connect(settings, fail_fast=True)
        except AuthenticationError:
            source = "REDIS_URL" if found.source is Origin.REDIS_URL else "Redis"
            raise ConfigError(f"{source}: Redis at {redact_url(found.url)} refused the credentials") from None
        except (RedisError, OSError, TimeoutError) as exc:
            if time.monotonic() + RETRY_PAUSE_S >= deadline:
                raise RedisUnreachable(found, why(exc)) from None
            await asyncio.sleep(RETRY_PAUSE_S)


ERRNO = re.compile(r"^Error (-?\d+) ")


def why(exc: BaseException) -> str:
    """Why a connection failed, in our words (the system's name for an errno at most)."""
    if isinstance(exc, TimeoutError) or "timeout" in str(exc).lower():
        return "no answer in time"
    if isinstance(exc, InvalidResponse):
        return "what answers there does not speak Redis"
    match = ERRNO.match(str(exc))
    if match is not None:
        number = int(match.group(1))
        return "the host does not resolve" if number < 0 else os.strerror(number).lower()
    return type(exc).__name__


def locate(settings: Settings) -> tuple[Settings, Located]:
    """Where Redis is, as every command finds it, and the settings pointing there."""
    found = embedded.locate(settings.redis_url, settings.runtime_dir, forced=settings.embedded)
    return dataclasses.replace(settings, redis_url=found.url), found


def report_id(value: str, argument: str = "--report") -> str:
    try:
        return parse_report_id(value)
    except MissingReportId as exc:
        raise UsageError(f"{argument}: {exc.message}") from None
