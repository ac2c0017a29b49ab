"""What workers record for the dashboard beside each result: a capped line per finished job.

Written in the result's own transaction (``ResultStore.write``), so the dashboard never shows an
outcome whose result is missing. It never holds page text: a short preview of the target only.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from worker import keys
from worker.serialization import dumps

if TYPE_CHECKING:
    from redis.asyncio.client import Pipeline

RECENT_LIMIT = 200
TARGET_PREVIEW_CHARS = 120


def summary(result: Mapping[str, Any], outcome: str, duration_ms: float) -> dict[str, Any]:
    """The dashboard's line for one result: never page text, a short preview of the target only."""
    target = result.get("url") or result.get("query") or ""
    return {
        "job_id": result.get("job_id"),
        "tool": result.get("tool"),
        "report_id": result.get("report_id"),
        "outcome": outcome,
        "target": str(target)[:TARGET_PREVIEW_CHARS],
        "at": time.time(),
        "duration_ms": round(duration_ms, 1),
    }


def record(
    tx: Pipeline, queue_name: str, result: Mapping[str, Any], outcome: str, duration_ms: float
) -> None:
    """Queue the activity commands on the result's transaction."""
    recent = keys.recent(queue_name)
    tx.lpush(recent, dumps(summary(result, outcome, duration_ms)))
    tx.ltrim(recent, 0, RECENT_LIMIT - 1)
