"""Evidence archive health, one row per worker: where it writes, whether its last write worked,
and its counts. Each worker's writer publishes its own state (``worker.archive.writer``); a row
whose worker stopped expires with its key."""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis

import worker.dashboard.decode as decode
from worker.archive import journal
from worker.state import keys

MAX_ROWS = 200
TEXT_PREVIEW = 120


@dataclass(frozen=True)
class ArchiveRow:
    worker_id: str
    where: str
    up: bool
    last_failure: str | None
    queued: int
    written: int
    revisits: int
    dropped: int
    failed: int
    last_written_age_s: float | None
    lost: int = 0  # accepted and never written (a failed write; or, for a stopped worker, left pending)


async def read_archive(redis: Redis, queue_name: str, now: float) -> list[ArchiveRow]:
    names = []
    async for name in redis.scan_iter(match=keys.archive_health_pattern(queue_name), count=1000):
        names.append(name)
        if len(names) >= MAX_ROWS:
            break
    values = await redis.mget(names) if names else []
    rows = []
    for raw in values:
        if raw is None:
            continue
        info = decode.json_object(raw)
        written_at = decode.number(info.get("last_written_at"))
        failure = info.get("last_failure")
        rows.append(
            ArchiveRow(
                worker_id=decode.short(info.get("worker_id") or "?", TEXT_PREVIEW),
                where=decode.short(info.get("where") or "?", TEXT_PREVIEW),
                up=info.get("up") is True,
                last_failure=decode.short(failure, TEXT_PREVIEW) if isinstance(failure, str) else None,
                queued=decode.integer(info.get("queued")),
                written=decode.integer(info.get("written")),
                revisits=decode.integer(info.get("revisit")),
                dropped=decode.integer(info.get("dropped")),
                failed=decode.integer(info.get("failed")),
                last_written_age_s=max(0.0, now - written_at) if written_at is not None else None,
                lost=decode.integer(info.get("lost")),
            )
        )
    # Workers gone with records they accepted and never wrote (killed): counted until a sweep
    # moves them to the lost list (worker.archive.journal).
    for worker_id, pending in (await journal.stopped_workers_pending(redis, queue_name)).items():
        rows.append(
            ArchiveRow(
                worker_id=decode.short(worker_id, TEXT_PREVIEW),
                where="-",
                up=False,
                last_failure=f"stopped with {len(pending)} accepted records unwritten",
                queued=0,
                written=0,
                revisits=0,
                dropped=0,
                failed=0,
                last_written_age_s=None,
                lost=len(pending),
            )
        )
    rows.sort(key=lambda row: row.worker_id)
    return rows


async def read_lost_total(redis: Redis, queue_name: str) -> int:
    """Records accepted and never written, ever, on this queue (swept from stopped workers, or
    whose write failed)."""
    return await journal.lost_count(redis, queue_name)
