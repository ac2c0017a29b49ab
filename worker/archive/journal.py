"""The records a worker accepted and has not stored yet, in Redis, so none is lost unseen.

A fetch no longer waits for its record to be stored: it waits for one Redis round trip that puts
the record in its report's index and in its worker's pending hash (``keys.archive_pending``), then
answers ``archived: true``. The writer stores the file off the job's path and takes the record out
of the hash. What is left in the hash of a worker that is gone (killed, its machine lost) is the
set of records it accepted and never wrote: ``sweep`` moves them to the queue's lost list and
counter, where the dashboard, the metric and ``research-worker archive`` show them. A record whose
write failed in a live worker goes there at once.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

import orjson
from redis.exceptions import ResponseError

from worker.archive.ids import parse_record_id
from worker.state import keys

if TYPE_CHECKING:
    from redis.asyncio import Redis

# The lost list keeps the latest records by id; the counter counts them all.
LOST_KEPT = 10_000
# A pending hash outlives a worker's last write by this much, so one whose worker died is swept
# before it expires on its own (and a hash never outlives a dead worker forever).
PENDING_TTL_S = 7 * 86_400


@dataclass(frozen=True)
class Lost:
    record: str
    report_id: str
    worker_id: str
    why: str
    at: float


def pending_key(queue_name: str, worker_id: str) -> str:
    return keys.archive_pending(queue_name, worker_id)


async def mark_lost(redis: Redis, queue_name: str, lost: list[Lost]) -> None:
    """Records that will never be stored, with why: on the lost list and counter."""
    if not lost:
        return
    async with redis.pipeline(transaction=False) as pipe:
        for item in lost:
            entry = {
                "record": item.record,
                "report_id": item.report_id,
                "worker_id": item.worker_id,
                "why": item.why,
                "at": item.at,
            }
            pipe.lpush(keys.archive_lost(queue_name), orjson.dumps(entry))
        pipe.ltrim(keys.archive_lost(queue_name), 0, LOST_KEPT - 1)
        pipe.incrby(keys.archive_lost_count(queue_name), len(lost))
        await pipe.execute()


async def stopped_workers_pending(redis: Redis, queue_name: str) -> dict[str, dict[str, str]]:
    """The pending hashes of workers that no longer publish their archive's health: worker id to
    its unwritten records (record id to report id)."""
    found: dict[str, dict[str, str]] = {}
    prefix = keys.archive_pending(queue_name, "")
    async for raw in redis.scan_iter(match=keys.archive_pending_pattern(queue_name), count=1000):
        name = raw.decode() if isinstance(raw, bytes) else str(raw)
        worker_id = name.removeprefix(prefix)
        if await redis.exists(keys.archive_health(queue_name, worker_id)):
            continue
        entries = await redis.hgetall(name)  # type: ignore[misc]
        found[worker_id] = {_text(k): _text(v) for k, v in entries.items() if parse_record_id(_text(k))}
    return found


async def sweep(redis: Redis, queue_name: str, *, exclude: str | None = None) -> list[Lost]:
    """Move every stopped worker's pending records to the lost list; returns what was moved. Two
    workers sweeping at once never count a record twice: a hash is renamed away before it is read."""
    moved: list[Lost] = []
    for worker_id in await stopped_workers_pending(redis, queue_name):
        if worker_id == exclude:
            continue
        claimed = f"{keys.archive_pending(queue_name, worker_id)}:sweep:{uuid.uuid4().hex}"
        try:
            await redis.rename(keys.archive_pending(queue_name, worker_id), claimed)
        except ResponseError:  # "no such key": another worker took it first, theirs to count
            continue
        entries = await redis.hgetall(claimed)  # type: ignore[misc]
        await redis.delete(claimed)
        now = time.time()
        lost = [
            Lost(_text(record), _text(report), worker_id, "its worker stopped before writing it", now)
            for record, report in entries.items()
            if parse_record_id(_text(record)) is not None
        ]
        await mark_lost(redis, queue_name, lost)
        moved.extend(lost)
    return moved


async def lost_count(redis: Redis, queue_name: str) -> int:
    raw = await redis.get(keys.archive_lost_count(queue_name))
    try:
        return int(raw) if raw is not None else 0
    except ValueError:
        return 0


async def lost_records(redis: Redis, queue_name: str, report_id: str | None = None) -> list[Lost]:
    """The lost records still listed (the latest ``LOST_KEPT``), of one report when given."""
    raw: list[bytes] = await redis.lrange(keys.archive_lost(queue_name), 0, LOST_KEPT - 1)  # type: ignore[misc]
    found = []
    for value in raw:
        try:
            entry = orjson.loads(value)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(entry, dict) or parse_record_id(entry.get("record")) is None:
            continue
        if report_id is not None and entry.get("report_id") != report_id:
            continue
        at = entry.get("at")
        found.append(
            Lost(
                str(entry["record"]),
                str(entry.get("report_id", "")),
                str(entry.get("worker_id", "")),
                str(entry.get("why", "")),
                float(at) if isinstance(at, int | float) else 0.0,
            )
        )
    return found


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def explain_missing(gone: list[str], cited: int, lost: list[Lost], where: str) -> str:
    """What ``research-worker archive`` says of the cited records it could not read: those known
    never written (and why), and the rest (retention, an unreachable store)."""
    why = {entry.record: entry.why for entry in lost}
    never = [record for record in gone if record in why]
    text = f"{len(gone)} of {cited} cited records could not be read from {where}"
    if never:
        reasons = sorted({why[record] for record in never})
        text += (
            f"; {len(never)} of them were accepted and never written ({'; '.join(reasons)}): "
            + ", ".join(never[:20])
        )
    if len(gone) > len(never):
        text += f"; {len(gone) - len(never)} deleted by retention, or the store is unreachable"
    return text + "; the file holds the others"
