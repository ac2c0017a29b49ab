"""One job in detail: its arguments, its result (previews only), arq's record, where it ran.

Read in one pipeline from our result key and arq's keys: the payload while the job waits or runs
(``arq:job:``), the try counter (``arq:retry:``), the claim (``arq:in-progress:``), the queue's
score, and arq's record once it finished (``arq:result:``), of which only the bookkeeping is used:
that record also holds the whole result, page text included, which the page never shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from redis.asyncio import Redis

import worker.dashboard.decode as decode
from worker.archive.ids import parse_record_id
from worker.dashboard.data import PhaseRow, RecentRow
from worker.limits import REPORT_ID
from worker.serialization import JobArguments, JsonObject
from worker.state import keys
from worker.state.result_records import outcome, parse_object

MAX_JOB_ID = 200
# What a preview keeps of the result and the arguments: enough to diagnose, never a page's text.
STRING_PREVIEW = 300
LIST_PREVIEW = 20
KEYS_PREVIEW = 50
DEPTH_PREVIEW = 6


@dataclass(frozen=True)
class JobDetail:
    job_id: str
    # finished, running, queued or deferred; "finished, result expired" when only its recent line
    # is left; gone when arq dropped it without a result.
    state: str
    function: str | None
    arguments: str | None  # pretty JSON of the previews
    result: str | None  # pretty JSON of the previews
    outcome: str | None
    message: str | None
    enqueued_at: float | None
    started_at: float | None
    finished_at: float | None
    due_at: float | None
    tries: int | None
    queue_wait_ms: float | None
    duration_ms: float | None
    worker_id: str | None
    target: str | None
    report_id: str | None
    screenshot_record: str | None = None  # a rendered page's screenshot in the archive
    # What the job spent its time on, when it is among the recent results (its worker measured it).
    phases: tuple[PhaseRow, ...] = ()

    @property
    def phases_end_ms(self) -> float:
        """Where the last phase ends: the scale of the phase bars."""
        return max((p.start_ms + p.duration_ms for p in self.phases), default=0.0)


async def read_job(
    redis: Redis, queue_name: str, job_id: str, line: RecentRow | None, now: float
) -> JobDetail | None:
    """The job's detail, or None when nothing about it is left in Redis.

    ``line`` is the job's line among the recent results, when it is there: the worker that ran
    it and its own measures. A job whose result expired is still shown from its line.
    """
    if not 0 < len(job_id) <= MAX_JOB_ID:
        return None
    async with redis.pipeline(transaction=False) as pipe:
        pipe.get(keys.result(job_id))
        pipe.get(keys.arq_job(job_id))
        pipe.get(keys.arq_result(job_id))
        pipe.get(keys.arq_retry(job_id))
        pipe.exists(keys.arq_in_progress(job_id))
        pipe.zscore(queue_name, job_id)
        raw_result, raw_payload, raw_record, raw_tries, claimed, score = await pipe.execute()
    if raw_result is None and raw_payload is None and raw_record is None and score is None and line is None:
        return None
    result = decode.json_object(raw_result) if raw_result is not None else None
    record = decode.json_object(raw_record)
    job = decode.json_object(raw_payload) or record  # arq drops the payload when it records the finish
    enqueued_ms = decode.number(job.get("et"))
    started_ms = decode.number(record.get("st"))
    finished_ms = decode.number(record.get("ft"))
    arq_wait = started_ms - enqueued_ms if started_ms is not None and enqueued_ms is not None else None
    arq_duration = finished_ms - started_ms if finished_ms is not None and started_ms is not None else None
    about = _About.of(result, job, line)
    return JobDetail(
        job_id=job_id,
        state=_state(result, record, claimed, score, now, line),
        function=decode.short_or_none(about.tool, 60),
        arguments=pretty(_arguments(job)) if job else None,
        result=pretty(result) if result is not None else None,
        outcome=about.outcome,
        message=decode.short_or_none(about.message, STRING_PREVIEW),
        enqueued_at=enqueued_ms / 1000 if enqueued_ms is not None else None,
        started_at=started_ms / 1000 if started_ms is not None else None,
        finished_at=finished_ms / 1000 if finished_ms is not None else None,
        due_at=score / 1000 if isinstance(score, float) else None,
        # While the job waits or runs its claims count tries in its score's sixteenths (arq's own
        # worker beside it); once finished, in its record.
        tries=(
            decode.integer_or_none(raw_tries)
            or (round(score % 1 * 16) or None if isinstance(score, float) else None)
            or decode.integer_or_none(record.get("t"))
            or (line.tries if line is not None else None)
        ),
        # The worker's own measures first; arq's clock (which includes the result write) else.
        queue_wait_ms=_first(line.queue_wait_ms if line else None, arq_wait),
        duration_ms=_first(line.duration_ms if line else None, arq_duration),
        worker_id=line.worker_id if line is not None else None,
        target=decode.short_or_none(about.target, STRING_PREVIEW) if about.target else None,
        report_id=_report_id(about.report_id),
        screenshot_record=parse_record_id(result.get("screenshot_record")) if result is not None else None,
        phases=line.phases if line is not None else (),
    )


@dataclass(frozen=True)
class _About:
    """What the job was about and how it ended: from its result, else its payload, else its line."""

    tool: object
    report_id: object
    target: object
    outcome: str | None
    message: object

    @classmethod
    def of(cls, result: JsonObject | None, job: dict[str, Any], line: RecentRow | None) -> _About:
        raw_kwargs = job.get("k")
        kwargs: JobArguments = raw_kwargs if isinstance(raw_kwargs, dict) else {}
        if result is not None:
            error = result.get("error")
            return cls(
                tool=result.get("tool") or job.get("f"),
                report_id=result.get("report_id") or kwargs.get("report_id"),
                target=result.get("url") or result.get("query") or kwargs.get("url") or kwargs.get("query"),
                outcome=outcome(parsed) if (parsed := parse_object(result)) is not None else None,
                message=error.get("message") if isinstance(error, dict) else None,
            )
        if job:
            return cls(
                job.get("f"), kwargs.get("report_id"), kwargs.get("url") or kwargs.get("query"), None, None
            )
        if line is not None:
            return cls(line.tool, line.report_id, line.target, line.outcome, line.message)
        return cls(None, None, None, None, None)


def _first(*values: float | None) -> float | None:
    return next((max(0.0, value) for value in values if value is not None), None)


def _state(
    result: JsonObject | None,
    record: dict[str, Any],
    claimed: object,
    score: object,
    now: float,
    line: RecentRow | None,
) -> str:
    if result is not None or record:
        return "finished"
    if claimed:
        return "running"
    if isinstance(score, float):
        return "queued" if score <= now * 1000 else "deferred"
    return "finished, result expired" if line is not None else "gone"


def _report_id(value: object) -> str | None:
    """Only a well-formed report id is shown as one (and linked to its results)."""
    return value if isinstance(value, str) and REPORT_ID.fullmatch(value) else None


def _arguments(job: dict[str, Any]) -> dict[str, Any]:
    args = job.get("a")
    kwargs = job.get("k")
    shown: dict[str, Any] = dict(kwargs) if isinstance(kwargs, dict) else {}
    if isinstance(args, list) and args:
        shown["(positional)"] = args
    return shown


def preview(value: object, depth: int = 0) -> object:
    """The value with every string, list and object cut short: page text becomes a preview."""
    if isinstance(value, str):
        if len(value) <= STRING_PREVIEW:
            return value
        return f"{value[:STRING_PREVIEW]}… ({len(value) - STRING_PREVIEW} more characters not shown)"
    if depth >= DEPTH_PREVIEW and isinstance(value, (list, dict)):
        return "… (nested too deep to show)"
    if isinstance(value, list):
        shown: list[object] = [preview(item, depth + 1) for item in value[:LIST_PREVIEW]]
        if len(value) > LIST_PREVIEW:
            shown.append(f"… ({len(value) - LIST_PREVIEW} more items not shown)")
        return shown
    if isinstance(value, dict):
        items = list(value.items())
        cut = {str(preview(str(key))): preview(item, depth + 1) for key, item in items[:KEYS_PREVIEW]}
        if len(items) > KEYS_PREVIEW:
            cut["…"] = f"{len(items) - KEYS_PREVIEW} more fields not shown"
        return cut
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 2**63:
        return str(value)  # orjson writes 64-bit integers only
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return decode.short(value, STRING_PREVIEW)


def pretty(value: object) -> str:
    return orjson.dumps(preview(value), option=orjson.OPT_INDENT_2).decode()
