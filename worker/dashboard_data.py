"""What the dashboard shows, read from Redis: arq's keys and ours, every list bounded.

Only reads (SCAN, GET, MGET, ZCARD, ZCOUNT, ZRANGE, ZSCORE, LRANGE, HMGET, SCARD, TTL, PTTL); never
KEYS, which blocks Redis for the whole keyspace. Everything read here was written by code that
handles untrusted input (report ids are validated, but URLs and queries come from the web and the
agent), so values are decoded defensively and the page escapes all of them. Job payloads are
decoded with orjson only; a pickle is shown as unreadable, never loaded.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from arq.connections import ArqRedis, create_pool
from arq.constants import in_progress_key_prefix, job_key_prefix

from worker import keys
from worker.config import Settings
from worker.redis_conn import redis_settings
from worker.runtime import HEALTH_INTERVAL_S
from worker.serialization import dumps, loads

MAX_ROWS = 200
WAITING_ROWS = 20
# Keys examined per SCAN call, and calls per pattern per snapshot: a snapshot looks at no more than
# 200,000 keys per pattern, so a Redis holding millions of result keys is never walked in full.
SCAN_COUNT = 1000
MAX_SCAN_CALLS = 200
# Keys gathered before sorting, so the newest reports (not an arbitrary slice) fill the 200 rows.
MAX_CANDIDATES = 1000
TARGET_PREVIEW = 120
TEXT_PREVIEW = 200
# A replica beats every 5 s and its key lives 15 s: a beat older than two intervals means trouble.
STALE_BEAT_S = 2 * HEALTH_INTERVAL_S
SPEND_FIELDS = ("cost_usd", "prompt_tokens", "completion_tokens", "searches", "org_id", "usage_source", "day")


@dataclass(frozen=True)
class QueueState:
    name: str
    depth: int
    due: int
    deferred: int
    in_progress: int
    waiting: int
    oldest_waiting_age_s: float | None


@dataclass(frozen=True)
class WorkerRow:
    worker_id: str
    host: str
    pid: int | None
    beat_age_s: float | None
    uptime_s: float | None
    jobs_complete: int
    jobs_failed: int
    jobs_retried: int
    jobs_ongoing: int
    max_jobs: int | None
    stale: bool


@dataclass(frozen=True)
class JobRow:
    job_id: str
    tool: str
    report_id: str
    target: str
    age_s: float | None
    running_s: float | None
    job_try: int | None


@dataclass(frozen=True)
class RecentRow:
    job_id: str
    tool: str
    report_id: str
    outcome: str
    target: str
    age_s: float | None
    duration_ms: float | None


@dataclass(frozen=True)
class BudgetRow:
    report_id: str
    search_used: int
    search_limit: int
    fetch_used: int
    fetch_limit: int
    menu_size: int
    cost_usd: float | None
    expires_in_s: int | None


@dataclass(frozen=True)
class SpendRow:
    day: str
    org: str
    usage_source: str
    searches: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float


@dataclass(frozen=True)
class Snapshot:
    generated_at: float
    queue: QueueState | None
    workers: list[WorkerRow] = field(default_factory=list)
    in_progress: list[JobRow] = field(default_factory=list)
    waiting: list[JobRow] = field(default_factory=list)
    recent: list[RecentRow] = field(default_factory=list)
    outcomes: dict[str, int] = field(default_factory=dict)
    budgets: list[BudgetRow] = field(default_factory=list)
    spend: list[SpendRow] = field(default_factory=list)
    # Sections whose scan stopped at a bound: the page says "partial" instead of pretending.
    partial: list[str] = field(default_factory=list)
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


async def open_redis(settings: Settings) -> ArqRedis:
    """A pool that fails fast when Redis is down: the page then says so instead of hanging."""
    connection = redis_settings(settings.redis_target)
    connection.conn_retries = 0
    return await create_pool(
        connection, job_serializer=dumps, job_deserializer=loads, default_queue_name=settings.queue_name
    )


async def collect(redis: ArqRedis, settings: Settings, now: float | None = None) -> Snapshot:
    now = time.time() if now is None else now
    partial: list[str] = []
    workers, complete = await read_workers(redis, settings, now)
    if not complete:
        partial.append("workers")
    in_progress, complete = await read_in_progress(redis, settings, now)
    if not complete:
        partial.append("in_progress")
    queue, waiting = await read_queue(redis, settings, now, {row.job_id for row in in_progress})
    recent = await read_recent(redis, settings, now)
    budgets, complete = await read_budgets(redis, settings)
    if not complete:
        partial.append("budgets")
    spend, complete = await read_spend(redis)
    if not complete:
        partial.append("spend")
    return Snapshot(
        generated_at=now,
        queue=queue,
        workers=workers,
        in_progress=in_progress[:MAX_ROWS],
        waiting=waiting,
        recent=recent,
        outcomes=dict(Counter(row.outcome for row in recent).most_common()),
        budgets=budgets,
        spend=spend,
        partial=partial,
    )


async def scan_keys(redis: ArqRedis, pattern: str, limit: int) -> tuple[list[str], bool]:
    """Up to ``limit`` keys matching ``pattern``, and whether that is all of them."""
    found: dict[str, None] = {}  # SCAN may return a key twice while Redis rehashes
    cursor = 0
    for _ in range(MAX_SCAN_CALLS):
        cursor, batch = await redis.scan(cursor=cursor, match=pattern, count=SCAN_COUNT)
        for raw in batch:
            found[_text(raw)] = None
        if len(found) > limit:
            return list(found)[:limit], False
        if cursor == 0:
            return list(found), True
    return list(found)[:limit], False


def glob_escape(value: str) -> str:
    """A queue name is configuration, but a '*' or '[' in it must not widen a SCAN pattern."""
    return "".join(f"\\{ch}" if ch in "*?[]\\" else ch for ch in value)


async def read_workers(redis: ArqRedis, settings: Settings, now: float) -> tuple[list[WorkerRow], bool]:
    pattern = keys.health_pattern(glob_escape(settings.queue_name))
    names, complete = await scan_keys(redis, pattern, MAX_ROWS)
    prefix = keys.health(settings.queue_name, "")
    values = await redis.mget(names) if names else []
    rows = []
    for name, raw in zip(names, values, strict=True):
        if raw is None:
            continue  # the replica stopped between the SCAN and the read
        info = _json_object(raw)
        beat_at = _float(info.get("beat_at"))
        started_at = _float(info.get("started_at"))
        beat_age = max(0.0, now - beat_at) if beat_at is not None else None
        rows.append(
            WorkerRow(
                worker_id=_short(info.get("worker_id") or name.removeprefix(prefix), TEXT_PREVIEW),
                host=_short(info.get("host") or "", TEXT_PREVIEW),
                pid=_int_or_none(info.get("pid")),
                beat_age_s=beat_age,
                uptime_s=max(0.0, now - started_at) if started_at is not None else None,
                jobs_complete=_int(info.get("jobs_complete")),
                jobs_failed=_int(info.get("jobs_failed")),
                jobs_retried=_int(info.get("jobs_retried")),
                jobs_ongoing=_int(info.get("jobs_ongoing")),
                max_jobs=_int_or_none(info.get("max_jobs")),
                # A key that is not our JSON (a plain arq worker's health line) cannot vouch for a beat.
                stale=beat_age is None or beat_age > STALE_BEAT_S,
            )
        )
    rows.sort(key=lambda row: row.worker_id)
    return rows, complete


async def read_in_progress(redis: ArqRedis, settings: Settings, now: float) -> tuple[list[JobRow], bool]:
    """Jobs of this queue that a worker has claimed: arq keeps them in the queue until they finish."""
    names, complete = await scan_keys(redis, in_progress_key_prefix + "*", MAX_CANDIDATES)
    job_ids = [name.removeprefix(in_progress_key_prefix) for name in names]
    if not job_ids:
        return [], complete
    async with redis.pipeline(transaction=False) as pipe:
        for job_id in job_ids:
            pipe.zscore(settings.queue_name, job_id)
            pipe.pttl(in_progress_key_prefix + job_id)
        replies = await pipe.execute(raise_on_error=False)
    # The in-progress key is set with arq's timeout (the job timeout + 10 s) when the job is
    # claimed and never extended, so its remaining life tells how long the job has been running.
    claim_ttl_s = settings.job_timeout_s + 10.0
    mine: list[tuple[str, float | None]] = []
    for index, job_id in enumerate(job_ids):
        score, pttl = replies[2 * index], replies[2 * index + 1]
        if score is None or isinstance(score, Exception):
            continue  # another queue's job
        running = None
        if isinstance(pttl, int) and pttl >= 0:
            running = max(0.0, claim_ttl_s - pttl / 1000)
        mine.append((job_id, running))
    payloads = await _payloads(redis, [job_id for job_id, _ in mine])
    rows = [_job_row(job_id, payloads.get(job_id), now, running) for job_id, running in mine]
    rows.sort(key=lambda row: -(row.age_s or 0.0))
    return rows, complete


async def read_queue(
    redis: ArqRedis, settings: Settings, now: float, in_progress: set[str]
) -> tuple[QueueState, list[JobRow]]:
    queue = settings.queue_name
    now_ms = int(now * 1000)
    # arq scores a job with the time it becomes due: jobs claimed but not finished are still here.
    head_size = WAITING_ROWS + min(len(in_progress), MAX_ROWS)
    async with redis.pipeline(transaction=False) as pipe:
        pipe.zcard(queue)
        pipe.zcount(queue, "-inf", now_ms)
        pipe.zrange(queue, 0, head_size - 1, withscores=True)
        depth, due, head = await pipe.execute()
    waiting_ids: list[tuple[str, float]] = []
    for raw_id, score in head:
        job_id = _text(raw_id)
        if job_id not in in_progress and score <= now_ms:
            waiting_ids.append((job_id, float(score)))
    waiting_ids = waiting_ids[:WAITING_ROWS]
    payloads = await _payloads(redis, [job_id for job_id, _ in waiting_ids])
    waiting = [_job_row(job_id, payloads.get(job_id), now, None) for job_id, _ in waiting_ids]
    oldest = max(0.0, now - waiting_ids[0][1] / 1000) if waiting_ids else None
    state = QueueState(
        name=queue,
        depth=int(depth),
        due=int(due),
        deferred=max(0, int(depth) - int(due)),
        in_progress=len(in_progress),
        waiting=max(0, int(due) - len(in_progress)),
        oldest_waiting_age_s=oldest,
    )
    return state, waiting


async def read_recent(redis: ArqRedis, settings: Settings, now: float) -> list[RecentRow]:
    lines = await redis.lrange(keys.recent(settings.queue_name), 0, MAX_ROWS - 1)  # type: ignore[misc]
    rows = []
    for raw in lines:
        item = _json_object(raw)
        at = _float(item.get("at"))
        rows.append(
            RecentRow(
                job_id=_short(item.get("job_id") or "", TEXT_PREVIEW),
                tool=_short(item.get("tool") or "", TEXT_PREVIEW),
                report_id=_short(item.get("report_id") or "", TEXT_PREVIEW),
                outcome=_short(item.get("outcome") or "unknown", 60),
                target=_short(item.get("target") or "", TARGET_PREVIEW),
                age_s=max(0.0, now - at) if at is not None else None,
                duration_ms=_float(item.get("duration_ms")),
            )
        )
    return rows


async def read_budgets(redis: ArqRedis, settings: Settings) -> tuple[list[BudgetRow], bool]:
    budget_keys, budgets_complete = await scan_keys(redis, keys.budget_pattern(), MAX_CANDIDATES)
    menu_keys, menus_complete = await scan_keys(redis, keys.menu("*"), MAX_CANDIDATES)
    # A report seeded by its briefing has a menu before it has spent anything: show it too.
    reports = list(
        dict.fromkeys(
            [name.removeprefix(keys.budget("")) for name in budget_keys]
            + [name.removeprefix(keys.menu("")) for name in menu_keys]
        )
    )[:MAX_CANDIDATES]
    if not reports:
        return [], budgets_complete and menus_complete
    async with redis.pipeline(transaction=False) as pipe:
        for report in reports:
            pipe.hmget(keys.budget(report), ["search", "fetch"])
            pipe.ttl(keys.budget(report))
            pipe.scard(keys.menu(report))
            pipe.ttl(keys.menu(report))
            pipe.hget(keys.spend_report(report), "cost_usd")
        replies = await pipe.execute(raise_on_error=False)
    rows: list[tuple[int, BudgetRow]] = []
    for index, report in enumerate(reports):
        counts, budget_ttl, menu_size, menu_ttl, cost = replies[5 * index : 5 * index + 5]
        search, fetch = counts if isinstance(counts, list) else (None, None)
        budget_ttl = budget_ttl if isinstance(budget_ttl, int) else -2
        menu_ttl = menu_ttl if isinstance(menu_ttl, int) else -2
        row = BudgetRow(
            report_id=_short(report, TEXT_PREVIEW),
            search_used=_int(search),
            search_limit=settings.search_budget,
            fetch_used=_int(fetch),
            fetch_limit=settings.fetch_budget,
            menu_size=menu_size if isinstance(menu_size, int) else 0,
            cost_usd=_float(cost),
            expires_in_s=budget_ttl if budget_ttl >= 0 else None,
        )
        # Both keys live one budget window from their last write: the longest life is the newest.
        rows.append((max(budget_ttl, menu_ttl), row))
    rows.sort(key=lambda pair: (-pair[0], pair[1].report_id))
    complete = budgets_complete and menus_complete and len(rows) <= MAX_ROWS
    return [row for _, row in rows[:MAX_ROWS]], complete


async def read_spend(redis: ArqRedis) -> tuple[list[SpendRow], bool]:
    names, complete = await scan_keys(redis, keys.spend_org_pattern(), MAX_CANDIDATES)
    if not names:
        return [], complete
    async with redis.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.hmget(name, list(SPEND_FIELDS))
        replies = await pipe.execute(raise_on_error=False)
    prefix = keys.spend_org_pattern().removesuffix("*")
    rows = []
    for name, values in zip(names, replies, strict=True):
        if not isinstance(values, list):
            continue  # not a hash: written by something else, not ours to show
        cost, prompt, completion, searches, *labels = values
        # The hash names its own org, source and day; the key is the fallback, split from the
        # right because the day and the source carry no colon.
        org, source, day = (
            _text(label) if label is not None else parsed
            for label, parsed in zip(labels, _split_spend_key(name.removeprefix(prefix)), strict=True)
        )
        rows.append(
            SpendRow(
                day=_short(day, 40),
                org=_short(org, TEXT_PREVIEW),
                usage_source=_short(source, TEXT_PREVIEW),
                searches=_int(searches),
                prompt_tokens=_int(prompt),
                completion_tokens=_int(completion),
                cost_usd=_float(cost) or 0.0,
            )
        )
    rows.sort(key=lambda row: (row.day, row.cost_usd), reverse=True)
    return rows[:MAX_ROWS], complete and len(rows) <= MAX_ROWS


def _split_spend_key(rest: str) -> tuple[str, str, str]:
    parts = rest.rsplit(":", 2)
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    return rest, "", ""


async def _payloads(redis: ArqRedis, job_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    if not job_ids:
        return {}
    raw = await redis.mget([job_key_prefix + job_id for job_id in job_ids])
    return {job_id: _json_object(value) for job_id, value in zip(job_ids, raw, strict=True) if value}


def _job_row(job_id: str, payload: dict[str, Any] | None, now: float, running: float | None) -> JobRow:
    if payload is None:
        payload = {}
    raw_kwargs = payload.get("k")
    kwargs: dict[str, Any] = raw_kwargs if isinstance(raw_kwargs, dict) else {}
    enqueued_ms = _float(payload.get("et"))
    target = kwargs.get("url") or kwargs.get("query") or ""
    return JobRow(
        job_id=_short(job_id, TEXT_PREVIEW),
        tool=_short(payload.get("f") or "(unreadable payload)", 60),
        report_id=_short(kwargs.get("report_id") or "", TEXT_PREVIEW),
        target=_short(target, TARGET_PREVIEW),
        age_s=max(0.0, now - enqueued_ms / 1000) if enqueued_ms is not None else None,
        running_s=running,
        job_try=_int_or_none(payload.get("t")),
    )


def _json_object(raw: object) -> dict[str, Any]:
    """An orjson object, or {} for anything else (a pickle, a plain string, garbage)."""
    if not isinstance(raw, (bytes, str)):
        return {}
    with contextlib.suppress(ValueError):
        value = loads(raw.encode() if isinstance(raw, str) else raw)
        if isinstance(value, dict):
            return value
    return {}


def _text(raw: object) -> str:
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)


def _short(value: object, limit: int) -> str:
    text = _text(value) if isinstance(value, (bytes, str)) else str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _float(value: object) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, (bytes, str)):
        try:
            number = float(value)
        except ValueError:
            return None
    else:
        return None
    return number if number == number and abs(number) != float("inf") else None


def _int_or_none(value: object) -> int | None:
    number = _float(value)
    return int(number) if number is not None else None


def _int(value: object) -> int:
    return _int_or_none(value) or 0
