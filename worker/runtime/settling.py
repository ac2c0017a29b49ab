"""Every job ends with a result: the results the envelope could not write, written here.

The envelope (``worker.runtime.envelope``) writes the result of every job whose tool ran. A job can
also end before or around its tool: its payload expired before a worker took it, it was started
more often than ``MAX_TRIES`` (its workers died or lost it each time), arq's own timeout fired, its
payload is malformed, or the run itself failed in the worker. Each of those ends here, by name
(``Ending``), with an ``internal_error`` or ``invalid_request`` result written first-wins (a result
that stands is kept) before arq's bookkeeping lets the job leave the queue: a crash between the two
leaves the job queued, never finished without a result.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Collection, Mapping
from enum import Enum
from typing import TYPE_CHECKING, Any

from arq.jobs import serialize_result

from worker.errors import ErrorKind, InternalError, MissingReportId
from worker.logs import fields
from worker.metrics import UNKNOWN_TOOL
from worker.runtime.envelope import MAX_TRIES, parse_report_id, write_result
from worker.runtime.payload import MalformedJob
from worker.serialization import dumps, loads_object
from worker.state import keys
from worker.state.result_records import ErrorResult, Head, Result, outcome

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from worker.runtime.claims import JobLeases
    from worker.runtime.context import Runtime

log = logging.getLogger("research.worker")


class Ending(Enum):
    """Why a job ended without the envelope's result: each case is known where it happens (the
    claim found no payload, the try counter passed the limit, arq's timeout fired, the run failed),
    never read back from the text of an arq exception."""

    EXPIRED = "the job's payload expired before a worker took it"
    TRIES_USED_UP = (
        f"the job was started {MAX_TRIES} times and never finished (its worker stopped or lost the "
        "job each time); it is not run again"
    )
    TIMED_OUT = "the job ended without a result: its time ran out"
    UNRUNNABLE = "the worker could not run this job"


class Settling:
    """Writes the result of a job that ends without the envelope's, then finishes it for arq."""

    def __init__(
        self,
        runtime: Runtime,
        redis: Redis,
        leases: JobLeases,
        *,
        queue_name: str,
        functions: Collection[str],
        result_ttl_ms: int,
    ) -> None:
        self._runtime = runtime
        self._redis = redis
        self._leases = leases
        self._queue_name = queue_name
        self._functions = functions
        self.result_ttl_ms = result_ttl_ms

    async def end(
        self, job_id: str, job: Mapping[str, Any] | None, ending: Ending, record: bytes | None
    ) -> None:
        """The job's error result (unless one stands), then arq's finish with its own ``record``."""
        await self.settle(job_id, job, ending)
        await self._leases.finish(job_id, finish=True, arq_result=record, result_ttl_ms=self.result_ttl_ms)

    async def settle(self, job_id: str, job: Mapping[str, Any] | None, ending: Ending) -> None:
        """Write an error result for a job that has none (a first-wins write: one that has stays).

        ``job`` is the job's arq payload as far as it could be read, for its tool and report id.
        """
        function = job.get("f") if job else None
        tool = function if isinstance(function, str) and function in self._functions else UNKNOWN_TOOL
        kwargs = job.get("k") if job else None
        report_id: str | None = None
        with contextlib.suppress(MissingReportId):
            report_id = parse_report_id(kwargs.get("report_id") if isinstance(kwargs, dict) else None)
        await self.write(ErrorResult.of(Head(tool, report_id, job_id), InternalError(ending.value)))

    async def refuse_malformed(self, job_id: str, malformed: MalformedJob) -> None:
        """A payload arq must not read: an invalid_request result, out of the queue, logged once.

        The job never reached a tool, so its result and its count say ``tool: "unknown"``, even
        when the payload named one of ours.
        """
        log.warning(
            "refused a malformed job payload",
            extra=fields(job_id=job_id, function=(malformed.function or "")[:60], reason=malformed.message),
        )
        await self.write(ErrorResult.of(Head(UNKNOWN_TOOL, malformed.report_id, job_id), malformed))
        # arq's own record too, so a plain arq client waiting on the job learns it failed.
        record = arq_record(job_id, self._queue_name, UNKNOWN_TOOL, success=False, result=malformed.message)
        await self._leases.finish(job_id, finish=True, arq_result=record, result_ttl_ms=self.result_ttl_ms)

    async def drop_unreadable_id(self, raw_id: bytes) -> None:
        """A queue member that is not UTF-8 names no result key: it is only removed and counted."""
        log.warning("removed a queued job whose id is not UTF-8", extra=fields(job_id=repr(raw_id[:80])))
        async with self._redis.pipeline(transaction=True) as tx:
            tx.zrem(self._queue_name, raw_id)
            tx.delete(*(prefix.encode() + raw_id for prefix in keys.ARQ_JOB_PREFIXES))
            await tx.execute()
        self._runtime.metrics.jobs.labels(UNKNOWN_TOOL, ErrorKind.INVALID_REQUEST.value).inc()

    async def write(self, result: Result) -> None:
        standing, first = await write_result(self._runtime, result, 0.0)
        self._runtime.settled.discard(result.head.job_id)
        if first:
            self._runtime.metrics.jobs.labels(standing.head.tool, outcome(standing)).inc()


def arq_record(
    job_id: str,
    queue_name: str,
    function: str,
    *,
    success: bool,
    result: Any,
    job: Mapping[str, Any] | None = None,
    job_try: int = 1,
    start_ms: int | None = None,
) -> bytes | None:
    """arq's result record (what ``arq.jobs.Job.result`` reads), written by the job's finish."""
    now_ms = int(time.time() * 1000)
    args = job.get("a") if job else None
    kwargs = job.get("k") if job else None
    enqueued = job.get("et") if job else None
    return serialize_result(
        function=function,
        args=tuple(args) if isinstance(args, list) else (),
        kwargs=kwargs if isinstance(kwargs, dict) else {},
        job_try=job_try,
        enqueue_time_ms=enqueued if isinstance(enqueued, int) else now_ms,
        success=success,
        result=result,
        start_ms=now_ms if start_ms is None else start_ms,
        finished_ms=now_ms,
        ref=f"{job_id}:{function}",
        queue_name=queue_name,
        job_id=job_id,
        serializer=dumps,
    )


def payload_of(raw: bytes | None) -> dict[str, Any] | None:
    """A job's arq payload read as far as it can be (for its tool and report id), or None."""
    return loads_object(raw)
