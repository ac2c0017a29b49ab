"""The job envelope: report id -> arguments -> the tool (which charges its budget) -> result key.

Every job runs inside it. An expected failure is a ``ResearchError`` turned into the contract's
result object here, in one place; the job never raises to arq for it. Only a bug reaches arq, and
even then the envelope first writes an ``internal_error`` record, because arq keeps no usable
exception when results are JSON.

The result is written once: the first write for a job stands (a worker that lost the job's lease
finds it written and returns it), and a result that cannot be written is replaced by a stand-in
that says so, so no job ends without one. The job's deadline runs from its start, so time spent
waiting inside the worker counts against it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from arq.worker import Function, func
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from worker.errors import InternalError, InvalidRequest, MissingReportId, ResearchError, Timeout
from worker.limits import REPORT_ID
from worker.logs import bind, bound, fields
from worker.runtime.context import ArqContext, JobContext, Runtime
from worker.serialization import JobArguments, JsonObject
from worker.state.activity import JobRun
from worker.state.memory import relieving
from worker.state.queue import Finish
from worker.state.result_records import (
    About,
    ErrorResult,
    FetchFields,
    Fields,
    Head,
    OkResult,
    OtherFields,
    Result,
    SearchFields,
    as_json,
    outcome,
    unstored,
)
from worker.tracing import phases
from worker.tracing.context import TRACEPARENT, parse_traceparent
from worker.tracing.export import AttributeValue, JobSpan

if TYPE_CHECKING:
    from worker.config import Settings

log = logging.getLogger("research.jobs")

# arq runs a job at most this often: the first run, and two more after a worker died or shut down.
MAX_TRIES = 3
RESULT_WRITE_ATTEMPTS = 8


class ToolJob(Protocol):
    """A tool as the worker runs it: its job name, its arguments after ``report_id``, its time
    budget, what a job is about (for its result, even a failed one) and its body.

    ``start`` runs once per worker before the first job, to build what the tool holds (a guarded
    HTTP session, a search provider client); ``stop`` closes it.
    """

    @property
    def name(self) -> str: ...

    @property
    def params(self) -> tuple[str, ...]: ...

    def deadline_s(self, settings: Settings) -> float: ...

    def about(self, arguments: Mapping[str, Any]) -> About | None: ...

    async def start(self, runtime: Runtime) -> None: ...

    async def stop(self) -> None: ...

    async def run(self, job: JobContext, arguments: JobArguments) -> Fields: ...


class Finishing(Protocol):
    """arq's finish of the running job, which its result's write carries in the same step (the
    worker puts one in the job's ctx as ``FINISHING``; a job run any other way has none)."""

    def finish_of(self, result: JsonObject) -> Finish: ...

    def finished(self, done: bool) -> None:
        """What the write's finish did: done, or found the job another worker's."""


FINISHING = "finishing"


# A tool outside the contract (tests, benchmarks) hands back its own JSON object.
ToolBody = Callable[[JobContext, JobArguments], Awaitable[JsonObject]]


@dataclass(frozen=True)
class FunctionTool:
    """A tool that is one function and holds nothing (tests, benchmarks)."""

    name: str
    params: tuple[str, ...]
    deadline: Callable[[Settings], float]
    body: ToolBody

    def deadline_s(self, settings: Settings) -> float:
        return self.deadline(settings)

    def about(self, arguments: Mapping[str, Any]) -> About | None:
        return None

    async def start(self, runtime: Runtime) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def run(self, job: JobContext, arguments: JobArguments) -> Fields:
        return OtherFields(dict(await self.body(job, arguments)))


def parse_report_id(value: object) -> str:
    if value is None or value == "":
        raise MissingReportId("the job has no report id; every job must name the report it serves")
    if not isinstance(value, str):
        raise MissingReportId(f"the report id must be a string, not {type(value).__name__}")
    if len(value) > 200:
        raise MissingReportId("the report id is longer than 200 characters")
    if not REPORT_ID.fullmatch(value):
        raise MissingReportId("the report id may contain only letters, digits and the characters - _ . :")
    return value


def bind_arguments(tool: ToolJob, args: tuple[Any, ...], kwargs: JobArguments) -> JobArguments:
    names = ("report_id", *tool.params)
    if len(args) > len(names):
        raise InvalidRequest(f"{tool.name} takes at most {len(names)} arguments, got {len(args)}")
    bound = dict(zip(names, args, strict=False))
    for name, value in kwargs.items():
        if name in bound:
            raise InvalidRequest(f"argument {name!r} was given twice")
        bound[name] = value
    return bound


def parse_org_id(tool: ToolJob, arguments: JobArguments) -> str | None:
    """The organization the job is charged to, for its daily caps: the orchestrator's ``org_id``,
    which any tool's job may carry (a tool that does not take it as an argument loses it here)."""
    value = arguments.get("org_id") if "org_id" in tool.params else arguments.pop("org_id", None)
    if value is None:
        return None
    # The org id becomes part of Redis keys, so it keeps the report id's rules.
    if not isinstance(value, str) or not REPORT_ID.fullmatch(value):
        raise InvalidRequest("org_id must be 1-200 letters, digits and the characters - _ . :")
    return value


def check_known(tool: ToolJob, arguments: JobArguments) -> None:
    unknown = sorted(set(arguments) - set(tool.params))
    if unknown:
        shown = ", ".join(repr(name[:40]) for name in unknown[:5])
        raise InvalidRequest(
            # report_id is not named: the orchestrator sets it, and a model told it may send one
            # would try to spend another report's budget.
            f"{tool.name} does not take {shown}; its arguments are {', '.join(tool.params)}"
        )


async def run_tool(ctx: ArqContext, tool: ToolJob, args: tuple[Any, ...], kwargs: JobArguments) -> Result:
    # Every line logged while the job runs, by any module, names the job (``worker.logs.bound``).
    with bound(job_id=ctx["job_id"], tool=tool.name, job_try=ctx.get("job_try", 1)):
        return await _run_tool(ctx, tool, args, kwargs)


async def _run_tool(ctx: ArqContext, tool: ToolJob, args: tuple[Any, ...], kwargs: JobArguments) -> Result:
    runtime: Runtime = ctx["runtime"]
    job_id: str = ctx["job_id"]
    job_try: int = ctx.get("job_try", 1)
    started = time.perf_counter()
    started_ns = time.time_ns()
    enqueued_ns = int(ctx["enqueue_time"].timestamp() * 1e9) if "enqueue_time" in ctx else started_ns
    queue_wait_s = max(0.0, (started_ns - enqueued_ns) / 1e9)
    # The caller's trace context rides among the keyword arguments but is no argument of the tool.
    caller_trace = parse_traceparent(kwargs.pop(TRACEPARENT, None))
    span = runtime.tracing.start_job(
        tool=tool.name,
        job_id=job_id,
        traceparent=caller_trace,
        enqueued_ns=enqueued_ns,
        started_ns=started_ns,
    )
    phase_log, phase_token = phases.open_log()
    trace = JobTrace(phase_log, span, started_ns)
    runtime.metrics.queue_wait.labels(tool.name).observe(queue_wait_s)
    runtime.metrics.in_progress.inc()
    # The deadline runs from here, the moment the worker started the job: time the job spends
    # waiting inside the worker (for a host's turn, for a reduce slot) counts against it.
    deadline = asyncio.get_running_loop().time() + tool.deadline_s(runtime.settings)
    try:
        report_id: str | None = None
        about: About | None = None
        try:
            arguments = bind_arguments(tool, args, kwargs)
            about = tool.about(arguments)
            bind(**(about or {}))
            report_id = parse_report_id(arguments.pop("report_id", None))
            bind(report_id=report_id)
            org_id = parse_org_id(tool, arguments)
            check_known(tool, arguments)
            job = JobContext(
                runtime,
                tool.name,
                job_id,
                job_try,
                report_id,
                deadline,
                traceparent=span.traceparent() if span is not None else caller_trace,
                org_id=org_id,
            )
            try:
                async with asyncio.timeout_at(deadline):
                    produced = await tool.run(job, arguments)
            except TimeoutError:
                raise Timeout(f"{tool.name} ran out of time") from None
            result: Result = OkResult(Head(tool.name, report_id, job_id), produced)
        except ResearchError as exc:
            result = ErrorResult.of(Head(tool.name, report_id, job_id), exc, about)
        except Exception:
            log.exception("job failed with an unexpected error", extra=fields(job_id=job_id, tool=tool.name))
            bug = InternalError("the worker hit an unexpected error and did not complete this job")
            await _finish(
                runtime,
                tool,
                ErrorResult.of(Head(tool.name, report_id, job_id), bug, about),
                started,
                job_try,
                queue_wait_s,
                trace,
            )
            raise
        return await _finish(runtime, tool, result, started, job_try, queue_wait_s, trace, ctx.get(FINISHING))
    finally:
        phases.close_log(phase_token)
        runtime.metrics.in_progress.dec()


@dataclass(frozen=True)
class JobTrace:
    """What a job measured of itself: its phases, and its span when tracing is on."""

    phases: phases.PhaseLog
    span: JobSpan | None
    started_ns: int

    def summary(self) -> list[list[str | float]]:
        return self.phases.summary(self.started_ns)

    def end(self, result: Result) -> None:
        if self.span is not None:
            kind = result.kind.value if isinstance(result, ErrorResult) else None
            self.span.finish(self.phases, span_attributes(result), kind, time.time_ns())


def span_attributes(result: Result) -> dict[str, AttributeValue]:
    """What a job's span says of its result: ids, host, status, bytes, outcome; never a URL's
    path or query, a search's words or page text."""
    head = result.head
    found: dict[str, AttributeValue] = {"research.outcome": outcome(result)}
    if head.report_id is not None:
        found["research.report_id"] = head.report_id
    url = result.url if isinstance(result, ErrorResult) else None
    if isinstance(result, ErrorResult) and result.status is not None:
        found["http.response.status_code"] = result.status
    if isinstance(result, OkResult) and isinstance(result.fields, FetchFields):
        page = result.fields.page
        url = page.url
        found["http.response.status_code"] = page.status
        found["research.cached"] = result.fields.cached
        found["research.bytes"] = page.bytes_read
    if isinstance(result, OkResult) and isinstance(result.fields, SearchFields):
        found["research.results"] = len(result.fields.results)
    if url and (host := urlsplit(url).hostname):
        found["server.address"] = host
    return found


async def _finish(
    runtime: Runtime,
    tool: ToolJob,
    result: Result,
    started: float,
    job_try: int,
    queue_wait_s: float,
    trace: JobTrace,
    finishing: Finishing | None = None,
) -> Result:
    """Write the result (with arq's finish, when ``finishing``) and count it; returns the result
    that stands (another worker's, when its write came first)."""
    duration_s = time.perf_counter() - started
    trace.end(result)
    run = JobRun(runtime.settings.worker_id, job_try, queue_wait_s * 1000, trace.summary())
    standing, first = await write_result(runtime, result, duration_s * 1000, run, finishing)
    if not first:
        log.warning(
            "another worker wrote this job's result first; this run's result is dropped",
            extra=fields(job_id=result.head.job_id, tool=tool.name, job_try=job_try),
        )
        return standing
    result = standing
    kind = outcome(result)
    runtime.metrics.jobs.labels(tool.name, kind).inc()
    runtime.metrics.job_duration.labels(tool.name).observe(duration_s)
    log.info(
        "job finished",
        extra=fields(
            job_id=result.head.job_id,
            report_id=result.head.report_id,
            tool=tool.name,
            outcome=kind,
            **finished_fields(result),
            duration_ms=round(duration_s * 1000, 1),
            queue_wait_ms=round(queue_wait_s * 1000, 1),
            job_try=job_try,
        ),
    )
    return result


async def write_result(
    runtime: Runtime,
    result: Result,
    duration_ms: float,
    run: JobRun | None = None,
    finishing: Finishing | None = None,
) -> tuple[Result, bool]:
    """Write the job's result if it is the first, with arq's finish when ``finishing`` (and the
    write stands); returns the result that stands, and whether it is this one.

    A result that cannot be serialized, or that Redis refuses (out of memory, too large), is
    replaced by ``unstored_result``: the job's identity and a kind, so the agent learns the job
    ended instead of waiting out its deadline. Refused for memory, it is first tried again while
    the page cache gives memory back (``worker.state.memory``). A job whose own result was not
    stored gets its budget charge back: a report pays for results, not for work it never saw. A
    short Redis outage is ridden out; a longer one raises, leaving the job queued under its lease,
    to be run again once Redis is back.
    """
    job_id = result.head.job_id
    run = run or JobRun(runtime.settings.worker_id)
    candidate = result
    delay = 0.1
    for attempt in range(RESULT_WRITE_ATTEMPTS):
        finish = finishing.finish_of if finishing is not None else None
        try:
            written = await relieving(
                runtime.redis,
                runtime.settings.queue_name,
                functools.partial(runtime.results.write, candidate, duration_ms, run, finish),
            )
        except (TypeError, ValueError, ResponseError) as exc:
            # orjson's encode error is a TypeError; Redis refusing a write is a ResponseError.
            if candidate is not result and isinstance(exc, (TypeError, ValueError)):
                raise
            log.error(
                "result could not be written; writing a stand-in that says so",
                extra=fields(job_id=job_id, error=type(exc).__name__, attempt=attempt + 1),
            )
            candidate = unstored(result.head)
            if isinstance(exc, ResponseError):
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
            continue
        except (RedisConnectionError, RedisTimeoutError, OSError):
            if attempt == RESULT_WRITE_ATTEMPTS - 1:
                raise
            log.warning("result write failed; retrying", extra=fields(job_id=job_id, attempt=attempt + 1))
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
            continue
        runtime.settled.add(job_id)
        if finishing is not None and written.finished is not None:
            finishing.finished(written.finished)
        standing = written.standing
        if candidate is not result and standing is None:
            await refund_charge(runtime, result)
        return (candidate, True) if standing is None else (standing, False)
    await refund_charge(runtime, result)
    raise ResponseError(f"the result of job {job_id} was refused {RESULT_WRITE_ATTEMPTS} times")


async def refund_charge(runtime: Runtime, result: Result) -> None:
    """Give the report back the charge of a job whose result could not be stored."""
    report_id = result.head.report_id
    if report_id is None:
        return
    try:
        refunded = await runtime.budgets.refund(report_id, result.head.job_id)
    except (RedisError, OSError) as exc:
        log.error("could not refund a job whose result was lost", extra=fields(error=type(exc).__name__))
        return
    if refunded:
        log.warning(
            "refunded the charge of a job whose result could not be stored",
            extra=fields(job_id=result.head.job_id, report_id=report_id),
        )


def finished_fields(result: Result) -> dict[str, str]:
    """What the job was about and, for an error, its kind and message (the worker's own words)."""
    if isinstance(result, ErrorResult):
        about = {name: value for name, value in (("url", result.url), ("query", result.query)) if value}
        return {**about, "error_kind": result.kind.value, "error_message": result.message}
    given = result.fields
    if isinstance(given, FetchFields):
        return {"url": given.page.url}
    if isinstance(given, SearchFields):
        return {"query": given.query}
    return {name: value for name in ("url", "query") if isinstance(value := given.values.get(name), str)}


def arq_function(tool: ToolJob, settings: Settings) -> Function:
    # ctx is positional-only, so a job whose keyword arguments include "ctx" still reaches the
    # envelope (and gets invalid_request) instead of failing in the call with no result.
    async def job(ctx: ArqContext, /, *args: Any, **kwargs: Any) -> JsonObject:
        return as_json(await run_tool(ctx, tool, args, kwargs))

    job.__qualname__ = job.__name__ = tool.name
    # arq's WorkerCoroutine protocol names ctx as a keyword-capable parameter; positional-only is
    # what arq actually calls (coroutine(ctx, *args, **kwargs)).
    return func(job, name=tool.name, timeout=settings.job_timeout_s, max_tries=MAX_TRIES)  # type: ignore[arg-type]
