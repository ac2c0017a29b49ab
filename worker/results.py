"""The contract's result object: built in one place, written with its TTL and a wake-up for the client."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from worker import keys
from worker.errors import HttpStatus, ResearchError
from worker.queue import blocking_peek
from worker.serialization import dumps, loads

if TYPE_CHECKING:
    from redis.asyncio import Redis

RECENT_LIMIT = 200
# The wake-up list carries a copy of the result so a waiting client needs no second round trip;
# it is short-lived because only a client already waiting (or about to) needs it: a later reader
# reads the result key.
DONE_TTL_MS = 60_000


def ok_result(tool: str, report_id: str, job_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True, "tool": tool, "report_id": report_id, "job_id": job_id, **payload}


def error_result(tool: str, report_id: str | None, job_id: str, error: ResearchError) -> dict[str, Any]:
    result: dict[str, Any] = {
        "ok": False,
        "tool": tool,
        "report_id": report_id,
        "job_id": job_id,
        "error": {"kind": error.kind, "message": error.message},
    }
    if isinstance(error, HttpStatus) or error.status is not None:
        result["status"] = error.status
    return result


def outcome(result: dict[str, Any]) -> str:
    """'ok' or the error kind: the label logs, metrics and the dashboard use."""
    if result.get("ok"):
        return "ok"
    error = result.get("error")
    return str(error.get("kind")) if isinstance(error, dict) else "internal_error"


def summary(result: dict[str, Any], duration_ms: float) -> dict[str, Any]:
    """What the dashboard shows of a result: never page text, a short preview of the target only."""
    target = result.get("url") or result.get("query") or ""
    return {
        "job_id": result.get("job_id"),
        "tool": result.get("tool"),
        "report_id": result.get("report_id"),
        "outcome": outcome(result),
        "target": str(target)[:120],
        "at": time.time(),
        "duration_ms": round(duration_ms, 1),
    }


class ResultStore:
    def __init__(self, redis: Redis, *, ttl_s: int, queue_name: str) -> None:
        self._redis = redis
        self._ttl_ms = ttl_s * 1000
        self._recent = keys.recent(queue_name)

    async def write(self, result: dict[str, Any], duration_ms: float) -> None:
        """Result, wake-up and dashboard line in one transaction: none is seen without the others."""
        job_id = str(result["job_id"])
        payload = dumps(result)
        async with self._redis.pipeline(transaction=True) as tx:
            tx.set(keys.result(job_id), payload, px=self._ttl_ms)
            tx.delete(keys.done(job_id))
            tx.rpush(keys.done(job_id), payload)
            tx.pexpire(keys.done(job_id), min(self._ttl_ms, DONE_TTL_MS))
            tx.lpush(self._recent, dumps(summary(result, duration_ms)))
            tx.ltrim(self._recent, 0, RECENT_LIMIT - 1)
            await tx.execute()

    async def read(self, job_id: str) -> dict[str, Any] | None:
        return decode(await self._redis.get(keys.result(job_id)))

    async def wait(self, job_id: str, timeout_s: float) -> dict[str, Any] | None:
        """Block until the job's result is written (or the time runs out); no polling."""
        return decode(await blocking_peek(self._redis, keys.done(job_id), timeout_s))


def decode(raw: bytes | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    value = loads(raw)
    return value if isinstance(value, dict) else None
