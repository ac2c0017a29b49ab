"""What the dashboard shows, read from Redis: arq's keys and ours, every list bounded.

Only reads (SCAN, GET, MGET, ZCARD, ZCOUNT, ZRANGE, ZRANGEBYSCORE, ZSCORE, LRANGE, HGETALL, HMGET,
HGET, SCARD, TTL, PTTL, TIME); never KEYS, which blocks Redis for the whole keyspace. Everything
read here was written by code that handles untrusted input (report ids are validated, but URLs and
queries come from the web and the agent), so values are decoded defensively and the pages escape
all of them. Job payloads are decoded with orjson only; a pickle is shown as unreadable, never
loaded.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from arq.connections import ArqRedis, create_pool

import worker.dashboard.decode as decode
from worker.config import Settings
from worker.dashboard.archive import ArchiveRow, read_archive, read_lost_total
from worker.dashboard.backoffs import BackoffRow, read_backoffs
from worker.dashboard.history import History, read_history
from worker.dashboard.org_caps import OrgCapRow, near_caps
from worker.runtime import fingerprint
from worker.runtime.claims import parse_lease
from worker.serialization import JobArguments, dumps, loads
from worker.state import activity, budget, health, keys, menu
from worker.state.redis_conn import redis_settings
from worker.state.spend import org_days

MAX_ROWS = 200
WAITING_ROWS = 20
# Keys examined per SCAN call, and calls per pattern per snapshot: a snapshot looks at no more than
# 200,000 keys per pattern, so a Redis holding millions of result keys is never walked in full.
SCAN_COUNT = 1000
MAX_SCAN_CALLS = 200
# Keys gathered before sorting, so the newest reports (not an arbitrary slice) fill the 200 rows.
MAX_CANDIDATES = 1000
TARGET_PREVIEW = activity.TARGET_PREVIEW_CHARS
MESSAGE_PREVIEW = activity.MESSAGE_PREVIEW_CHARS
TEXT_PREVIEW = 200
# A replica beats every 5 s and its key lives 15 s: a beat older than two intervals means trouble.
STALE_BEAT_S = 2 * health.INTERVAL_S


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
    # The settings that change results, as the worker publishes them (``worker.runtime.fingerprint``).
    settings_digest: str | None = None
    settings: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class JobRow:
    job_id: str
    tool: str
    report_id: str
    target: str
    age_s: float | None
    running_s: float | None
    # arq's try counter (``arq:retry:{id}``): the try now running, or the tries a waiting job had.
    tries: int | None


@dataclass(frozen=True)
class PhaseRow:
    """One measured phase of a job (worker.tracing.phases): milliseconds from the job's start."""

    name: str
    start_ms: float
    duration_ms: float


MAX_PHASE_ROWS = 64


def phase_rows(value: object) -> tuple[PhaseRow, ...]:
    """The phases a worker noted on a job's line; anything malformed is left out."""
    if not isinstance(value, list):
        return ()
    rows = []
    for item in value[:MAX_PHASE_ROWS]:
        if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str)):
            continue
        start, duration = decode.number(item[1]), decode.number(item[2])
        if start is not None and duration is not None and duration >= 0:
            rows.append(PhaseRow(decode.short(item[0], 40), start, duration))
    return tuple(rows)


@dataclass(frozen=True)
class RecentRow:
    job_id: str
    tool: str
    report_id: str
    outcome: str
    target: str
    message: str | None
    status: int | None
    provider: str | None
    cached: bool | None
    at: float | None
    age_s: float | None
    duration_ms: float | None
    queue_wait_ms: float | None
    worker_id: str | None
    tries: int | None
    phases: tuple[PhaseRow, ...] = ()


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
    budgets: list[BudgetRow] = field(default_factory=list)
    spend: list[SpendRow] = field(default_factory=list)
    org_caps: list[OrgCapRow] = field(default_factory=list)  # organizations near a daily cap
    history: History | None = None
    # None: the hosts backing off could not be listed (see ``backoffs``).
    backoffs: list[BackoffRow] | None = None
    archive: list[ArchiveRow] = field(default_factory=list)  # each worker's evidence archive writer
    archive_lost: int = 0  # archive records accepted and never written, on this queue, ever
    # Sections whose scan stopped at a bound: the page says "partial" instead of pretending.
    partial: list[str] = field(default_factory=list)
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def line_of(self, job_id: str) -> RecentRow | None:
        return next((row for row in self.recent if row.job_id == job_id), None)


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
    spend, complete = await spend_rows(redis)
    if not complete:
        partial.append("spend")
    near, complete = await near_caps(redis, settings, now)
    if not complete:
        partial.append("org_caps")
    return Snapshot(
        generated_at=now,
        queue=queue,
        workers=workers,
        in_progress=in_progress[:MAX_ROWS],
        waiting=waiting,
        recent=recent,
        budgets=budgets,
        spend=spend,
        org_caps=near[:MAX_ROWS],
        history=await read_history(redis, settings.queue_name, now),
        backoffs=await read_backoffs(redis, settings.queue_name, now),
        archive=await read_archive(redis, settings.queue_name, now),
        archive_lost=await read_lost_total(redis, settings.queue_name),
        partial=partial,
    )


async def scan_keys(redis: ArqRedis, pattern: str, limit: int) -> tuple[list[str], bool]:
    """Up to ``limit`` keys matching ``pattern``, and whether that is all of them."""
    found: dict[str, None] = {}  # SCAN may return a key twice while Redis rehashes
    cursor = 0
    for _ in range(MAX_SCAN_CALLS):
        cursor, batch = await redis.scan(cursor=cursor, match=pattern, count=SCAN_COUNT)
        for raw in batch:
            found[decode.text(raw)] = None
        if len(found) > limit:
            return list(found)[:limit], False
        if cursor == 0:
            return list(found), True
    return list(found)[:limit], False


async def read_workers(redis: ArqRedis, settings: Settings, now: float) -> tuple[list[WorkerRow], bool]:
    """The queue's replicas as their owner reads them (``worker.state.health.replicas``)."""
    found = sorted(await health.replicas(redis, settings.queue_name), key=lambda r: r.worker_id)
    complete = len(found) <= MAX_ROWS
    rows = []
    for replica in found[:MAX_ROWS]:
        info = replica.info
        name = replica.worker_id
        beat_at = decode.number(info.get("beat_at"))
        started_at = decode.number(info.get("started_at"))
        beat_age = max(0.0, now - beat_at) if beat_at is not None else None
        rows.append(
            WorkerRow(
                worker_id=decode.short(info.get("worker_id") or name, TEXT_PREVIEW),
                host=decode.short(info.get("host") or "", TEXT_PREVIEW),
                pid=decode.integer_or_none(info.get("pid")),
                beat_age_s=beat_age,
                uptime_s=max(0.0, now - started_at) if started_at is not None else None,
                jobs_complete=decode.integer(info.get("jobs_complete")),
                jobs_failed=decode.integer(info.get("jobs_failed")),
                jobs_retried=decode.integer(info.get("jobs_retried")),
                jobs_ongoing=decode.integer(info.get("jobs_ongoing")),
                max_jobs=decode.integer_or_none(info.get("max_jobs")),
                # A key that is not our JSON (a plain arq worker's health line) cannot vouch for a beat.
                stale=beat_age is None or beat_age > STALE_BEAT_S,
                **_fingerprint_fields(info),
            )
        )
    rows.sort(key=lambda row: row.worker_id)
    return rows, complete


def _fingerprint_fields(info: Mapping[str, Any]) -> dict[str, Any]:
    published = fingerprint.read(info)
    if published is None:
        return {}
    return {"settings_digest": published.digest, "settings": dict(published.values)}


async def read_in_progress(redis: ArqRedis, settings: Settings, now: float) -> tuple[list[JobRow], bool]:
    """Jobs of this queue that a worker has claimed: arq keeps them in the queue until they finish."""
    names, complete = await scan_keys(redis, keys.arq_in_progress_pattern(), MAX_CANDIDATES)
    job_ids = [name.removeprefix(keys.ARQ_IN_PROGRESS) for name in names]
    if not job_ids:
        return [], complete
    async with redis.pipeline(transaction=False) as pipe:
        for job_id in job_ids:
            pipe.zscore(settings.queue_name, job_id)
            pipe.get(keys.arq_in_progress(job_id))
        replies = await pipe.execute(raise_on_error=False)
    # The in-progress key is the job's lease, whose value says when its worker claimed it.
    mine: list[tuple[str, float | None]] = []
    for index, job_id in enumerate(job_ids):
        score, value = replies[2 * index], replies[2 * index + 1]
        if score is None or isinstance(score, Exception):
            continue  # another queue's job
        lease = parse_lease(value) if isinstance(value, bytes | str) else None
        running = max(0.0, now - lease.claimed_ms / 1000) if lease is not None else None
        mine.append((job_id, running))
    jobs = await _read_jobs(redis, [job_id for job_id, _ in mine])
    rows = [_job_row(job_id, *jobs[job_id], now, running) for job_id, running in mine]
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
        job_id = decode.text(raw_id)
        if job_id not in in_progress and score <= now_ms:
            waiting_ids.append((job_id, float(score)))
    waiting_ids = waiting_ids[:WAITING_ROWS]
    # A claim moves a running job's score to its lease's end (worker.state.queue), out of the due
    # part; a job another kind of worker runs, or whose lease lapsed, may still be in it.
    held_due = sum(1 for raw_id, score in head if decode.text(raw_id) in in_progress and score <= now_ms)
    jobs = await _read_jobs(redis, [job_id for job_id, _ in waiting_ids])
    waiting = [_job_row(job_id, *jobs[job_id], now, None) for job_id, _ in waiting_ids]
    oldest = max(0.0, now - waiting_ids[0][1] / 1000) if waiting_ids else None
    state = QueueState(
        name=queue,
        depth=int(depth),
        due=int(due),
        deferred=max(0, int(depth) - int(due) - (len(in_progress) - held_due)),
        in_progress=len(in_progress),
        waiting=max(0, int(due) - held_due),
        oldest_waiting_age_s=oldest,
    )
    return state, waiting


async def read_recent(redis: ArqRedis, settings: Settings, now: float) -> list[RecentRow]:
    """The workers' lines for the last finished jobs, newest first (``worker.state.activity``)."""
    key = keys.recent(settings.queue_name)
    lines = await redis.lrange(key, 0, activity.RECENT_LIMIT - 1)  # type: ignore[misc]
    return [recent_row(decode.json_object(raw), now) for raw in lines]


def recent_row(item: dict[str, Any], now: float) -> RecentRow:
    at = decode.number(item.get("at"))
    status = decode.integer_or_none(item.get("status"))
    return RecentRow(
        job_id=decode.short(item.get("job_id") or "", TEXT_PREVIEW),
        tool=decode.short(item.get("tool") or "", TEXT_PREVIEW),
        report_id=decode.short(item.get("report_id") or "", TEXT_PREVIEW),
        outcome=decode.short(item.get("outcome") or "unknown", 60),
        target=decode.short(item.get("target") or "", TARGET_PREVIEW),
        message=decode.short_or_none(item.get("message"), MESSAGE_PREVIEW),
        status=status if status is not None and 100 <= status <= 999 else None,
        cached=decode.flag(item.get("cached")),
        provider=decode.short_or_none(item.get("provider"), 60),
        at=at,
        age_s=max(0.0, now - at) if at is not None else None,
        duration_ms=decode.number(item.get("duration_ms")),
        queue_wait_ms=decode.number(item.get("queue_wait_ms")),
        worker_id=decode.short_or_none(item.get("worker_id"), TEXT_PREVIEW),
        tries=decode.integer_or_none(item.get("tries")),
        phases=phase_rows(item.get("phases")),
    )


async def read_budgets(redis: ArqRedis, settings: Settings) -> tuple[list[BudgetRow], bool]:
    budget_keys, budgets_complete = await scan_keys(redis, keys.budget_pattern(), MAX_CANDIDATES)
    menu_keys, menus_complete = await scan_keys(redis, menu.menu_pattern(), MAX_CANDIDATES)
    # A report seeded by its briefing has a menu before it has spent anything: show it too.
    reports = list(
        dict.fromkeys(
            [name.removeprefix(keys.budget("")) for name in budget_keys]
            + [menu.report_of(name) for name in menu_keys]
        )
    )[:MAX_CANDIDATES]
    limits = budget.limits(settings)
    if not reports:
        return [], budgets_complete and menus_complete
    async with redis.pipeline(transaction=False) as pipe:
        for report in reports:
            pipe.hmget(keys.budget(report), list(budget.COUNTERS))
            pipe.ttl(keys.budget(report))
            pipe.scard(keys.menu(report))
            pipe.ttl(keys.menu(report))
            pipe.hget(keys.spend_report(report), "cost_usd")
        replies = await pipe.execute(raise_on_error=False)
    rows: list[tuple[int, BudgetRow]] = []
    for index, report in enumerate(reports):
        counts, budget_ttl, menu_size, menu_ttl, cost = replies[5 * index : 5 * index + 5]
        used = dict(zip(budget.COUNTERS, counts, strict=True)) if isinstance(counts, list) else {}
        budget_ttl = budget_ttl if isinstance(budget_ttl, int) else -2
        menu_ttl = menu_ttl if isinstance(menu_ttl, int) else -2
        row = BudgetRow(
            report_id=decode.short(report, TEXT_PREVIEW),
            search_used=decode.integer(used.get(budget.Tool.SEARCH.value)),
            search_limit=limits[budget.Tool.SEARCH],
            fetch_used=decode.integer(used.get(budget.Tool.FETCH.value)),
            fetch_limit=limits[budget.Tool.FETCH],
            menu_size=menu_size if isinstance(menu_size, int) else 0,
            cost_usd=decode.number(cost),
            expires_in_s=budget_ttl if budget_ttl >= 0 else None,
        )
        # Both keys live one budget window from their last write: the longest life is the newest.
        rows.append((max(budget_ttl, menu_ttl), row))
    rows.sort(key=lambda pair: (-pair[0], pair[1].report_id))
    complete = budgets_complete and menus_complete and len(rows) <= MAX_ROWS
    return [row for _, row in rows[:MAX_ROWS]], complete


async def spend_rows(redis: ArqRedis) -> tuple[list[SpendRow], bool]:
    """Each organization's days, as their owner reads them (``worker.state.spend``)."""
    names, complete = await scan_keys(redis, keys.spend_org_pattern(), MAX_CANDIDATES)
    rows = [
        SpendRow(
            day=decode.short(row["day"], 40),
            org=decode.short(row["org_id"], TEXT_PREVIEW),
            usage_source=decode.short(row["usage_source"], TEXT_PREVIEW),
            searches=row["searches"],
            prompt_tokens=row["prompt_tokens"],
            completion_tokens=row["completion_tokens"],
            cost_usd=row["cost_usd"],
        )
        for row in await org_days(redis, names)
    ]
    return rows[:MAX_ROWS], complete and len(rows) <= MAX_ROWS


async def _read_jobs(redis: ArqRedis, job_ids: Sequence[str]) -> dict[str, tuple[dict[str, Any], int | None]]:
    """Each job's arq payload and arq's try counter, which arq keeps beside the payload, not in it."""
    if not job_ids:
        return {}
    async with redis.pipeline(transaction=False) as pipe:
        pipe.mget([keys.arq_job(job_id) for job_id in job_ids])
        pipe.mget([keys.arq_retry(job_id) for job_id in job_ids])
        payloads, tries = await pipe.execute()
    return {
        job_id: (decode.json_object(payload), decode.integer_or_none(tried))
        for job_id, payload, tried in zip(job_ids, payloads, tries, strict=True)
    }


def _job_row(
    job_id: str, payload: dict[str, Any], tries: int | None, now: float, running: float | None
) -> JobRow:
    raw_kwargs = payload.get("k")
    kwargs: JobArguments = raw_kwargs if isinstance(raw_kwargs, dict) else {}
    enqueued_ms = decode.number(payload.get("et"))
    target = kwargs.get("url") or kwargs.get("query") or ""
    return JobRow(
        job_id=decode.short(job_id, TEXT_PREVIEW),
        tool=decode.short(payload.get("f") or "(unreadable payload)", 60),
        report_id=decode.short(kwargs.get("report_id") or "", TEXT_PREVIEW),
        target=decode.short(target, TARGET_PREVIEW),
        age_s=max(0.0, now - enqueued_ms / 1000) if enqueued_ms is not None else None,
        running_s=running,
        tries=tries,
    )
