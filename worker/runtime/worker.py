"""The arq worker: orjson jobs, a wake-up instead of a poll, per-replica health, resilient to Redis restarts.

``ResearchWorker`` keeps arq's job handling (retries, timeouts, signals) and changes four things:

- the wait between polls: an idle worker blocks on the queue's wake list, so a job enqueued through
  ``Enqueuer`` starts within a millisecond, while an idle worker sends Redis about two commands a
  second. arq's fixed poll remains the fallback for jobs enqueued by plain arq clients;
- claims are leases (``worker.runtime.claims``): renewed every few seconds while the job runs, so a dead
  worker's jobs run again elsewhere seconds later, and finished only by the worker that holds them;
- a payload is checked before arq reads it (``worker.runtime.payload``): a malformed job gets an
  ``invalid_request`` result and leaves the queue, and never stops a worker;
- every job ends with a result: arq's own failures (retries used up, a payload that expired, its
  timeout) get one too, and nothing a job does can end the worker's poll loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import socket
import time
from collections.abc import Sequence
from typing import Any

from aiohttp import web
from arq.constants import in_progress_key_prefix, job_key_prefix, retry_key_prefix
from arq.jobs import serialize_result
from arq.worker import Function, Worker
from redis.exceptions import RedisError, ResponseError

from worker.config import ConfigError, Settings
from worker.errors import ErrorKind, InternalError, MissingReportId, ResearchError
from worker.logs import fields
from worker.metrics import UNKNOWN_TOOL, Metrics
from worker.runtime import fingerprint, metrics_server
from worker.runtime.claims import LEASE_MS, JobLeases
from worker.runtime.context import Runtime
from worker.runtime.cpu_slots import CpuSlots
from worker.runtime.envelope import MAX_TRIES, ToolJob, arq_function, parse_report_id, write_result
from worker.runtime.payload import MalformedJob, read_payload
from worker.serialization import dumps, loads
from worker.state import activity, health, keys
from worker.state.budget import Budgets
from worker.state.memory import is_out_of_memory
from worker.state.menu import Menu
from worker.state.queue import Claimed, Claimer, blocking_pop
from worker.state.redis_conn import connect
from worker.state.results import Result, ResultStore, error_result, outcome

log = logging.getLogger("research.worker")

FALLBACK_POLL_S = 1.0
BURST_POLL_S = 0.05
SLOT_FREED = object()
HEALTH_INTERVAL_S = 5.0
HEALTH_TTL_S = 3 * HEALTH_INTERVAL_S
MAX_REDIS_BACKOFF_S = 5.0
# Wake tokens one wake-up may take (worker.state.queue.CLAIM_WOKEN_SCRIPT).
WAKE_BATCH = 32


class ResearchWorker(Worker):
    def __init__(
        self,
        settings: Settings,
        tools: Sequence[ToolJob],
        *,
        burst: bool = False,
        handle_signals: bool = True,
        poll_delay_s: float = FALLBACK_POLL_S,
        extra_functions: Sequence[Function] = (),
        lease_ms: int = LEASE_MS,
    ) -> None:
        self.settings = settings
        self._lease_ms = lease_ms
        self._tools = tuple(tools)
        functions = [arq_function(tool, settings) for tool in self._tools] + list(extra_functions)
        self.runtime: Runtime | None = None
        self._slot_free = asyncio.Event()
        self._backlog = False
        self._claimer: Claimer
        self._leases: JobLeases
        self._metrics_runner: web.AppRunner | None = None
        self._started_at = time.time()
        self._fingerprint = fingerprint.published(settings)
        self._depth_sampled_minute = -1
        super().__init__(
            functions=functions,
            queue_name=settings.queue_name,
            burst=burst,
            on_startup=self._on_startup,
            on_shutdown=self._on_shutdown,
            handle_signals=handle_signals,
            job_completion_wait=math.ceil(settings.grace_s),
            max_jobs=settings.max_jobs,
            job_timeout=settings.job_timeout_s,
            keep_result=settings.result_ttl_s,
            poll_delay=poll_delay_s,
            max_tries=MAX_TRIES,
            health_check_interval=HEALTH_INTERVAL_S,
            health_check_key=keys.health(settings.queue_name, settings.worker_id),
            job_serializer=dumps,
            job_deserializer=loads,
            log_results=False,
        )

    async def _on_startup(self, ctx: dict[str, Any]) -> None:
        runtime = await build_runtime(self.settings, self.pool)
        for tool in self._tools:
            await tool.start(runtime)
        if self.settings.metrics_port is not None:
            try:
                self._metrics_runner = await metrics_server.start(runtime.metrics, self.settings.metrics_port)
            except OSError as exc:
                port = self.settings.metrics_port
                raise ConfigError(
                    f"RESEARCH_METRICS_PORT: cannot listen on port {port}: {exc.strerror}"
                ) from None
        self.runtime = runtime
        ctx["runtime"] = runtime
        log.info(
            "worker started",
            extra=fields(
                worker_id=self.settings.worker_id,
                queue=self.settings.queue_name,
                tools=sorted(self.functions),
                max_jobs=self.max_jobs,
                job_timeout_s=self.settings.job_timeout_s,
                grace_s=self.settings.grace_s,
            ),
        )

    async def _on_shutdown(self, ctx: dict[str, Any]) -> None:
        if self._metrics_runner is not None:
            await self._metrics_runner.cleanup()
        await health.withdraw(self.pool, self.queue_name)  # arq has just deleted this replica's key
        log.info(
            "worker stopped",
            extra=fields(
                worker_id=self.settings.worker_id,
                jobs_complete=self.jobs_complete,
                jobs_failed=self.jobs_failed,
                jobs_retried=self.jobs_retried,
            ),
        )
        if self.runtime is None:
            return
        for tool in self._tools:
            await tool.stop()

    async def main(self) -> None:
        """arq's loop with three changes: wait on the wake list, claim with leases that a task of
        their own renews, and survive Redis going away."""
        if self._pool is None:
            self._pool = await connect(self.settings)
        self._leases = JobLeases(self.pool, self.queue_name, self.settings.worker_id, self._lease_ms)
        self._claimer = Claimer(self.pool, self.queue_name, self._lease_ms, self._leases.value)
        self.ctx["redis"] = self.pool
        if self.on_startup:
            await self.on_startup(self.ctx)
        renewer = asyncio.create_task(self._renew_leases())
        try:
            await self._loop()
        finally:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        poll_every = min(self.poll_delay_s, BURST_POLL_S) if self.burst else self.poll_delay_s
        poll_due = 0.0
        backoff = 0.1
        while True:
            try:
                if loop.time() >= poll_due:
                    await self._poll_iteration()
                    poll_due = loop.time() + poll_every
                    if self.burst and await self._burst_done():
                        return
                woke = await self._wait_for_work(max(0.001, poll_due - loop.time()))
                if woke is SLOT_FREED:
                    poll_due = 0.0  # take the oldest queued jobs now, in queue order
                elif isinstance(woke, bytes):
                    await self._start_woken(woke)
                backoff = 0.1
            except (RedisError, OSError) as exc:
                log.warning(
                    "redis unavailable; retrying",
                    extra=fields(error=type(exc).__name__, retry_in_s=backoff),
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MAX_REDIS_BACKOFF_S)

    async def _burst_done(self) -> bool:
        if 0 <= self.max_burst_jobs <= self._jobs_started():
            await asyncio.gather(*self.tasks.values())
            return True
        if await self.pool.zcard(self.queue_name) == 0:
            await asyncio.gather(*self.tasks.values())
            return True
        return False

    async def _wait_for_work(self, timeout_s: float) -> bytes | object | None:
        """A woken job id, SLOT_FREED, or None when the wait ran out."""
        if self.burst or not self.allow_pick_jobs:
            await asyncio.sleep(timeout_s)
            return None
        if self.job_counter >= self.max_jobs or self._backlog:
            # Full: a wake token taken now would be wasted on a worker that cannot start the job,
            # so wait for a slot instead and leave the tokens to idle workers. With a backlog (the
            # last poll filled every free slot), a freed slot polls at once: queued jobs beyond the
            # wake list's cap have no token, and must not wait for the next timed poll.
            if self.job_counter >= self.max_jobs:
                self._slot_free.clear()  # full now, so any earlier signal is stale
            try:
                await asyncio.wait_for(self._slot_free.wait(), timeout_s)
            except TimeoutError:
                return None
            return SLOT_FREED
        return await blocking_pop(self.pool, keys.wake(self.queue_name), timeout_s)

    async def _start_woken(self, job_id: bytes) -> None:
        if not self.allow_pick_jobs:
            # Shutting down: hand the token back so an idle replica starts the job at once.
            await self.pool.lpush(keys.wake(self.queue_name), job_id)  # type: ignore[misc]
            return
        free = self.max_jobs - self.job_counter
        if free <= 0:
            await self.pool.lpush(keys.wake(self.queue_name), job_id)  # type: ignore[misc]
            return
        for claimed in await self._claimer.claim_woken(job_id, min(free, WAKE_BATCH) - 1):
            await self._start_claimed(claimed)

    async def _renew_leases(self) -> None:
        """The beat that keeps this worker's claims: it runs between the reducer's slices too."""
        while True:
            await asyncio.sleep(self._leases.renew_every_s)
            try:
                lost = await self._leases.renew()
            except (RedisError, OSError) as exc:
                log.warning("lease renewal failed; retrying", extra=fields(error=type(exc).__name__))
                continue
            for job_id in lost:
                # Paused past the lease (SIGSTOP, a stalled host): another worker has the job now,
                # or has finished it. This run could only produce a second result, which would be
                # dropped anyway, so it stops here.
                log.warning("lost the lease of a running job; this run stops", extra=fields(job_id=job_id))
                task = self.job_tasks.get(job_id)
                if task is not None:
                    task.cancel()

    async def _poll_iteration(self) -> None:
        """arq's poll, with every due job claimed in one script instead of one transaction each."""
        if self.allow_pick_jobs and self.job_counter < self.max_jobs:
            wanted = self.max_jobs - self.job_counter
            if self.burst and self.max_burst_jobs >= 0:
                wanted = min(wanted, self.max_burst_jobs - self._jobs_started())
            if wanted > 0:
                self._slot_free.clear()
                claimed = await self._claim_due(wanted)
                self._backlog = len(claimed) == wanted
                for item in claimed:
                    await self._start_claimed(item)
        for job_id, task in list(self.tasks.items()):
            if task.done():
                del self.tasks[job_id]
                # arq re-raises a failed run_job here and the worker exits with every job in
                # flight; run_job is guarded below, so this only logs what slipped through.
                if not task.cancelled() and (exc := task.exception()) is not None:
                    log.error("a job's run ended in an error", extra=fields(job_id=job_id), exc_info=exc)
        await self.heart_beat()

    async def _claim_due(self, wanted: int) -> list[Claimed | bytes]:
        """The poll's claim; one Redis refuses for memory claims nothing, so the health beat after
        it still goes out (the jobs wait in the queue until Redis has room; worker.state.memory)."""
        try:
            return await self._claimer.claim_due(wanted)
        except ResponseError as exc:
            if not is_out_of_memory(exc):
                raise
            log.warning("Redis is out of memory: no job claimed this poll")
            return []

    async def start_jobs(self, job_ids: list[bytes]) -> None:
        """arq's start_jobs with the claim done by one script instead of a WATCH transaction."""
        for job_id_b in job_ids:
            if self.job_counter >= self.max_jobs:
                return
            try:
                job_id = job_id_b.decode()
            except UnicodeDecodeError:
                continue  # a token no enqueue of ours pushed: the poll deals with whatever it names
            claimed = await self._claimer.claim(job_id)
            if claimed is not None:
                await self._start_claimed(claimed)

    async def _start_claimed(self, claimed: Claimed | bytes) -> None:
        """Run a job this worker has just claimed, after checking its payload."""
        if isinstance(claimed, bytes):
            await self._drop_unreadable_id(claimed)
            return
        job_id = claimed.job_id
        self._leases.hold(job_id)
        running = self.tasks.get(job_id)
        if running is not None and not running.done():
            # Its lease lapsed while this worker was stalled, nobody took it, and this worker's
            # own poll claimed it again: the run in progress goes on under the new lease.
            return
        if claimed.payload is not None:  # a missing payload is arq's "job expired", handled there
            try:
                read_payload(claimed.payload, self.functions)
            except MalformedJob as malformed:
                await self._refuse_malformed(job_id, malformed)
                return
        await self._run_claimed(job_id, claimed.score)

    async def _run_claimed(self, job_id: str, score: int) -> None:
        await self.sem.acquire()
        self.job_counter += 1
        task = self.loop.create_task(self.run_job(job_id, score))
        task.add_done_callback(lambda _: self._release_sem_dec_counter_on_complete())
        self.tasks[job_id] = task

    def _release_sem_dec_counter_on_complete(self) -> None:
        super()._release_sem_dec_counter_on_complete()
        self._slot_free.set()

    async def record_health(self) -> None:
        now = time.time()
        if now - self._last_health_check < self.health_check_interval:
            return
        self._last_health_check = now
        queued = await self.pool.zcard(self.queue_name)
        ongoing = sum(not t.done() for t in self.tasks.values())
        if self.runtime is not None:
            self.runtime.metrics.queue_depth.set(queued)
        if activity.minute_of(now) != self._depth_sampled_minute:
            # Once a minute is what the chart needs; more would only add to an idle worker's traffic.
            self._depth_sampled_minute = activity.minute_of(now)
            await activity.sample_depth(self.pool, self.queue_name, now=now)
        info = {
            "worker_id": self.settings.worker_id,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started_at": self._started_at,
            "beat_at": now,
            "jobs_complete": self.jobs_complete,
            "jobs_failed": self.jobs_failed,
            "jobs_retried": self.jobs_retried,
            "jobs_ongoing": ongoing,
            "max_jobs": self.max_jobs,
            "queued": queued,
            fingerprint.FIELD: self._fingerprint,  # what changes results, compared across replicas
        }
        await health.publish(self.pool, self.queue_name, self.health_check_key, info, HEALTH_TTL_S)

    async def run_job(self, job_id: str, score: int) -> None:
        """arq's run_job, guarded: whatever escapes it ends this job with a result, not the worker."""
        try:
            await super().run_job(job_id, score)
        except Exception:
            log.exception(
                "arq could not run this job; it ends with an internal_error", extra=fields(job_id=job_id)
            )
            with contextlib.suppress(RedisError, OSError):
                await self._settle(job_id, None, InternalError("the worker could not run this job"))
                await self._leases.finish(
                    job_id, finish=True, arq_result=None, result_ttl_ms=self._result_ttl_ms
                )

    async def finish_job(
        self,
        job_id: str,
        finish: bool,
        result_data: bytes | None,
        result_timeout_s: float | None,
        keep_result_forever: bool,
        incr_score: int | None,
        keep_in_progress: float | None,
    ) -> None:
        """arq's finish, by the lease holder only; a finished job without a result gets one first."""
        if finish and self.runtime is not None and job_id not in self.runtime.settled:
            # arq ended the job without the envelope writing a result: its own timeout fired, or
            # the job failed before the envelope ran.
            await self._settle(
                job_id, result_data, InternalError("the job ended without a result: its time ran out")
            )
        if self.runtime is not None:
            self.runtime.settled.discard(job_id)
        if not await self._leases.finish(
            job_id,
            finish=finish,
            arq_result=result_data if finish else None,
            result_ttl_ms=self._result_ttl_ms,
            incr_score=incr_score,
        ):
            log.info(
                "this worker no longer holds the job; its holder finishes it", extra=fields(job_id=job_id)
            )

    async def finish_failed_job(self, job_id: str, result_data: bytes | None) -> None:
        """arq's own failures (retries used up, a payload that expired) still get a result; the
        result is written before the job leaves the queue, so a crash between leaves it queued."""
        record = _record(result_data)
        reason = str(record.get("r") or "")
        error: ResearchError
        if "retries exceeded" in reason:
            error = InternalError(
                f"the job was started {MAX_TRIES} times and never finished (its worker stopped or "
                "lost the job each time); it is not run again"
            )
        elif "expired" in reason:
            error = InternalError("the job's payload expired before a worker took it")
        else:
            error = InternalError("the job could not be completed")
        if self.runtime is not None:
            await self._settle(job_id, result_data, error)
            self.runtime.settled.discard(job_id)
        await self._leases.finish(
            job_id, finish=True, arq_result=result_data, result_ttl_ms=self._result_ttl_ms
        )

    async def _refuse_malformed(self, job_id: str, malformed: MalformedJob) -> None:
        """A payload arq must not read: an invalid_request result, out of the queue, logged once.

        The job never reached a tool, so its result and its count say ``tool: "unknown"``, even
        when the payload named one of ours.
        """
        tool = UNKNOWN_TOOL
        log.warning(
            "refused a malformed job payload",
            extra=fields(job_id=job_id, function=(malformed.function or "")[:60], reason=malformed.message),
        )
        result = error_result(tool, malformed.report_id, job_id, malformed)
        await self._write(result)
        # arq's own record too, so a plain arq client waiting on the job learns it failed.
        now_ms = int(time.time() * 1000)
        record = serialize_result(
            function=tool,
            args=(),
            kwargs={},
            job_try=1,
            enqueue_time_ms=now_ms,
            success=False,
            result=malformed.message,
            start_ms=now_ms,
            finished_ms=now_ms,
            ref=job_id,
            queue_name=self.queue_name,
            job_id=job_id,
            serializer=dumps,
        )
        await self._leases.finish(job_id, finish=True, arq_result=record, result_ttl_ms=self._result_ttl_ms)

    async def _drop_unreadable_id(self, raw_id: bytes) -> None:
        """A queue member that is not UTF-8 names no result key: it is only removed and counted."""
        log.warning("removed a queued job whose id is not UTF-8", extra=fields(job_id=repr(raw_id[:80])))
        async with self.pool.pipeline(transaction=True) as tx:
            tx.zrem(self.queue_name, raw_id)
            tx.delete(*(prefix.encode() + raw_id for prefix in ARQ_JOB_PREFIXES))
            await tx.execute()
        if self.runtime is not None:
            self.runtime.metrics.jobs.labels(UNKNOWN_TOOL, ErrorKind.INVALID_REQUEST.value).inc()

    async def _settle(self, job_id: str, record_data: bytes | None, error: ResearchError) -> None:
        """Write an error result for a job that has none (a first-wins write: one that has stays)."""
        record = _record(record_data)
        function = record.get("f")
        tool = function if isinstance(function, str) and function in self.functions else UNKNOWN_TOOL
        kwargs = record.get("k")
        report_id: str | None = None
        with contextlib.suppress(MissingReportId):
            report_id = parse_report_id(kwargs.get("report_id") if isinstance(kwargs, dict) else None)
        await self._write(error_result(tool, report_id, job_id, error))

    async def _write(self, result: Result) -> None:
        if self.runtime is None:
            return
        standing, first = await write_result(self.runtime, result, 0.0)
        self.runtime.settled.discard(str(result["job_id"]))
        if first:
            self.runtime.metrics.jobs.labels(str(standing.get("tool")), outcome(standing)).inc()

    @property
    def _result_ttl_ms(self) -> int:
        return int(self.keep_result_s * 1000)


ARQ_JOB_PREFIXES = (in_progress_key_prefix, job_key_prefix, retry_key_prefix)


def _record(data: bytes | None) -> dict[str, Any]:
    """arq's failure record, read as far as it can be (for the job's tool and report id)."""
    if not data:
        return {}
    try:
        record = loads(data)
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


async def build_runtime(settings: Settings, redis: Any) -> Runtime:
    return Runtime(
        settings=settings,
        redis=redis,
        budgets=Budgets(redis, settings),
        results=ResultStore(redis, ttl_s=settings.result_ttl_s, queue_name=settings.queue_name),
        metrics=Metrics(),
        menu=Menu(redis, settings),
        cpu_slots=CpuSlots(settings.reduce_slots),
    )
