"""The arq worker: orjson jobs, a wake-up instead of a poll, per-replica health, resilient to Redis restarts.

``ResearchWorker`` keeps arq's worker (settings, signals, graceful shutdown, health keys, the
counters) and replaces these arq 0.28 internals, each for the reason given at its override (and
``tests/test_arq_overrides.py`` fails when an arq upgrade changes one of them):

- ``main`` and ``_poll_iteration``: an idle worker blocks on the queue's wake list instead of
  sleeping between polls, so a job enqueued through ``Enqueuer`` starts within a millisecond,
  while an idle worker sends Redis about two commands a second. arq's fixed poll remains the
  fallback for jobs enqueued by plain arq clients. Every claim is one script and a lease
  (``worker.runtime.claims``), renewed while the job runs, so a dead worker's jobs run again
  elsewhere seconds later;
- ``run_job``: the job as its claim read it (payload, try, a standing result), each way it can
  end known by name (``worker.runtime.settling``), finished only by the lease holder;
- ``record_health``: a health key per replica, with what the dashboard shows;
- ``_release_sem_dec_counter_on_complete``: a freed slot wakes the loop to take the next job.

A payload is checked before the job runs (``worker.runtime.payload``): a malformed job gets an
``invalid_request`` result and leaves the queue, and never stops a worker. Every job ends with a
result, and nothing a job does can end the worker's poll loop.
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
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from arq.jobs import deserialize_job_raw
from arq.utils import ms_to_datetime, timestamp_ms
from arq.worker import Function, Retry, RetryJob, Worker
from redis.exceptions import RedisError, ResponseError

from worker import __version__
from worker.config import ConfigError, Settings
from worker.logs import fields
from worker.metrics import UNKNOWN_TOOL, Metrics
from worker.runtime import fingerprint, metrics_server
from worker.runtime.claims import LEASE_MS, JobLeases
from worker.runtime.context import ArqContext, Runtime
from worker.runtime.cpu_slots import CpuSlots
from worker.runtime.envelope import FINISHING, MAX_TRIES, ToolJob, arq_function
from worker.runtime.payload import MalformedJob, read_payload
from worker.runtime.settling import Ending, Settling, arq_record, payload_of
from worker.serialization import JsonObject, dumps, loads
from worker.state import activity, health, keys
from worker.state.budget import Budgets
from worker.state.clock import RedisClock
from worker.state.memory import is_out_of_memory
from worker.state.menu import Menu
from worker.state.queue import OURS_FIELD, Claimed, Claimer, Finish, blocking_pop
from worker.state.redis_conn import connect
from worker.state.results import ResultStore
from worker.tracing.export import Tracing

log = logging.getLogger("research.worker")

FALLBACK_POLL_S = 1.0
BURST_POLL_S = 0.05
SLOT_FREED = object()
MAX_REDIS_BACKOFF_S = health.RECONNECT_MAX_S
# Wake tokens one wake-up may take (worker.state.queue.CLAIM_WOKEN_SCRIPT).
WAKE_BATCH = 32


# What arq's record keeps of a result our own client reads from research:result: the head, what
# the job was about, and its error; never the page text, links or citations a second time.
RESULT_HEAD = ("ok", "tool", "report_id", "job_id", "url", "query", "error", "cached")


def result_head(result: Any) -> Any:
    if not isinstance(result, dict):
        return result
    return {name: result[name] for name in RESULT_HEAD if name in result}


@dataclass
class JobFinishing:
    """arq's finish of a running job, handed to its envelope (``envelope.Finishing``) so that the
    result's write carries it: one step, one round trip, for the job's end."""

    leases: JobLeases
    queue_name: str
    job_id: str
    function_name: str
    job: dict[str, Any]
    job_try: int
    start_ms: int
    record_ttl_ms: int  # 0: arq keeps no result record
    done: bool = False

    def finish_of(self, result: JsonObject) -> Finish:
        return self.leases.finishing(self.job_id, self.record(True, result), self.record_ttl_ms)

    def record(self, success: bool, result: Any) -> bytes | None:
        """arq's record of the job's end (None when arq keeps none): a job our client queued keeps
        only its result's head there (it reads research:result); a plain arq client's, all of it."""
        if self.record_ttl_ms <= 0:
            return None
        kept = result_head(result) if self.job.get(OURS_FIELD) else result
        return arq_record(
            self.job_id, self.queue_name, self.function_name, success=success, result=kept,
            job=self.job, job_try=self.job_try, start_ms=self.start_ms,
        )  # fmt: skip

    def finished(self, done: bool) -> None:
        self.done = done
        if done:
            self.leases.release(self.job_id)  # its lease is gone with the finish: renew it no more


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
        self._redis_clock: RedisClock
        self._settling: Settling
        self._claims: dict[str, Claimed] = {}  # claimed, handed to run_job, not yet read by it
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
            health_check_interval=health.INTERVAL_S,
            health_check_key=keys.health(settings.queue_name, settings.worker_id),
            job_serializer=dumps,
            job_deserializer=loads,
            log_results=False,
        )

    async def _on_startup(self, ctx: ArqContext) -> None:
        runtime = await build_runtime(self.settings, self.pool, self._redis_clock)
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

    async def _on_shutdown(self, ctx: ArqContext) -> None:
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
        await self.runtime.results.buckets.close()
        for tool in self._tools:
            await tool.stop()
        # The last jobs' spans leave before the process does (the SDK's flush blocks).
        await asyncio.to_thread(self.runtime.tracing.close)

    async def main(self) -> None:
        """Replaces arq 0.28's ``Worker.main``, which sleeps ``poll_delay`` between polls, claims
        each job with a WATCH transaction and dies when Redis goes away: here an idle worker
        waits on the wake list (a job starts within a millisecond), claims are leases that a task
        of their own renews (a dead worker's job runs again seconds later, not after its timeout),
        and the loop rides out a Redis outage with a backoff."""
        if self._pool is None:
            self._pool = await connect(self.settings)
        self._redis_clock = RedisClock(self.pool)
        self._leases = JobLeases(
            self.pool, self.queue_name, self.settings.worker_id, self._lease_ms, redis_clock=self._redis_clock
        )
        self._claimer = Claimer(
            self.pool, self.queue_name, self._lease_ms, self._leases.value, self._redis_clock
        )
        self.ctx["redis"] = self.pool
        if self.on_startup:
            await self.on_startup(self.ctx)
        assert self.runtime is not None  # built by on_startup
        self._settling = Settling(
            self.runtime,
            self.pool,
            self._leases,
            queue_name=self.queue_name,
            functions=self.functions,
            result_ttl_ms=self._result_ttl_ms,
        )
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
                # Beat at the first poll that reaches Redis again: a restarted Redis has lost every
                # health key, and clients wait only one beat for them (health.WorkerWatch).
                self._last_health_check = 0.0

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
        """Replaces arq 0.28's ``Worker._poll_iteration``, which reads the due ids and claims each
        in its own transaction (a round trip for every job other workers run) and re-raises a
        failed job's exception, ending the worker: here every due job is claimed in one script
        whose cost does not grow with the jobs in flight, and a failed run is only logged."""
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

    async def _start_claimed(self, claimed: Claimed | bytes) -> None:
        """Run a job this worker has just claimed, after checking its payload."""
        if isinstance(claimed, bytes):
            await self._settling.drop_unreadable_id(claimed)
            return
        job_id = claimed.job_id
        self._leases.hold(job_id, claimed.job_try, claimed.sent_at, claimed.lease)
        running = self.tasks.get(job_id)
        if running is not None and not running.done():
            # Its lease lapsed while this worker was stalled, nobody took it, and this worker's
            # own poll claimed it again: the run in progress goes on under the new lease.
            return
        if claimed.payload is not None and claimed.standing is None:
            try:
                read_payload(claimed.payload, self.functions)
            except MalformedJob as malformed:
                await self._settling.refuse_malformed(job_id, malformed)
                return
        await self.sem.acquire()
        self.job_counter += 1
        self._claims[job_id] = claimed
        task = self.loop.create_task(self.run_job(job_id, claimed.score))
        task.add_done_callback(lambda _: self._release_sem_dec_counter_on_complete())
        self.tasks[job_id] = task

    def _release_sem_dec_counter_on_complete(self) -> None:
        """Extends arq 0.28's: a freed slot also wakes the loop, which claims the next job at once
        instead of at its next poll."""
        super()._release_sem_dec_counter_on_complete()
        self._slot_free.set()

    async def record_health(self) -> None:
        """Replaces arq 0.28's ``Worker.record_health``, which writes one health string per queue
        (so one replica stopping hides another): each replica publishes its own JSON record
        (``worker.state.health``) and refreshes arq's key too, so ``arq --check`` still works."""
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
        await health.publish(self.pool, self.queue_name, self.health_check_key, info, health.TTL_S)

    async def run_job(self, job_id: str, score: int) -> None:
        """arq 0.28's ``Worker.run_job``, replaced: the job as its claim found it, run and finished.

        arq's run_job opens with a transaction (GET the payload, INCR and EXPIRE the try counter)
        that the claim script has already done, reads a job's end from the text of the exception
        it made ("max 3 retries exceeded", "job expired"), and finishes without asking whose job
        it is. Here each ending is known where it happens (``settling.Ending``), the finish is the
        lease holder's (``JobLeases.finish``), and whatever escapes ends this job with a result,
        not the worker. What arq's version does that this one keeps: the try counter raised to the
        payload's own try, the job's ctx (job_id, job_try, enqueue_time, score), its timeout,
        ``Retry`` (handed back with its delay), a cancelled run handed back to run again, the
        counters jobs_complete / jobs_failed / jobs_retried, and arq's result record. Not kept:
        cron jobs, aborts (``allow_abort_jobs`` is off, as in arq by default) and the job hooks,
        none of which this worker uses.
        """
        claimed = self._claims.pop(job_id, None) or Claimed(job_id, score, None)
        try:
            await self._run(claimed)
        except Exception:
            log.exception(
                "the worker could not run this job; it ends with an internal_error",
                extra=fields(job_id=job_id),
            )
            with contextlib.suppress(RedisError, OSError):
                await self._settling.end(job_id, payload_of(claimed.payload), Ending.UNRUNNABLE, None)

    async def _run(self, claimed: Claimed) -> None:
        job_id, score, job_try = claimed.job_id, claimed.score, claimed.job_try
        start_ms = timestamp_ms()
        job = payload_of(claimed.payload)
        if claimed.standing is not None:
            # Its result stands (a worker wrote it and died before arq's finish, or it was
            # written some other way): it is not run, asked for or charged again.
            self.jobs_complete += 1
            result = loads(claimed.standing)
            name = str(job.get("f")) if job else UNKNOWN_TOOL
            record = arq_record(job_id, self.queue_name, name, success=True, result=result, job=job)
            await asyncio.shield(self._finish(job_id, job, True, record, settled=True))
            return
        if job is None or claimed.payload is None:
            self.jobs_failed += 1
            expired = Ending.EXPIRED.value
            record = arq_record(job_id, self.queue_name, UNKNOWN_TOOL, success=False, result=expired)
            await asyncio.shield(self._settling.end(job_id, None, Ending.EXPIRED, record))
            return
        function_name, args, kwargs, enqueue_job_try, enqueue_time_ms = deserialize_job_raw(
            claimed.payload, deserializer=loads
        )
        function = self.functions[function_name]  # read_payload checked the name
        if enqueue_job_try and enqueue_job_try > job_try:
            job_try = enqueue_job_try  # the payload's own count, which arq honours too
            self._leases.hold(job_id, job_try)
        max_tries = self.max_tries if function.max_tries is None else function.max_tries
        if job_try > max_tries:
            self.jobs_failed += 1
            record = arq_record(
                job_id, self.queue_name, function_name, success=False, job=job, job_try=job_try,
                result=Ending.TRIES_USED_UP.value,
            )  # fmt: skip
            await asyncio.shield(self._settling.end(job_id, job, Ending.TRIES_USED_UP, record))
            return
        finishing = JobFinishing(
            self._leases, self.queue_name, job_id, function_name, job, job_try, start_ms,
            self._result_ttl_ms if self.keep_result_s > 0 else 0,
        )  # fmt: skip
        ctx = {
            **self.ctx,
            "job_id": job_id,
            "job_try": job_try,
            "enqueue_time": ms_to_datetime(enqueue_time_ms),
            "score": score,
            FINISHING: finishing,
        }
        timeout_s = self.job_timeout_s if function.timeout_s is None else function.timeout_s
        task = self.loop.create_task(function.coroutine(ctx, *args, **kwargs))
        self.job_tasks[job_id] = task
        finish, success, result, requeue_score = True, False, None, None
        try:
            try:
                result = await asyncio.wait_for(task, timeout_s)
            finally:
                del self.job_tasks[job_id]
        except Retry as retry:
            # arq's Retry: queued again, due after its delay (or at once).
            finish, requeue_score = False, timestamp_ms() + (retry.defer_score or 0)
            self.jobs_retried += 1
        except (asyncio.CancelledError, RetryJob):
            # Shutdown, or the lease was lost: handed back with its own score, to run again.
            finish, requeue_score = False, score
            self.jobs_retried += 1
        except Exception as exc:
            # The envelope wrote the result of anything its tool raised; arq's timeout (a
            # TimeoutError here) is the one case it could not, and the finish settles it.
            result = exc
            self.jobs_failed += 1
        else:
            success = True
            self.jobs_complete += 1
        if finishing.done:
            # The result's write finished the job for arq in the same step (a job cancelled or
            # timed out after it is finished all the same, never handed back).
            if self.runtime is not None:
                self.runtime.settled.discard(job_id)
            return
        record = finishing.record(success, result) if finish else None
        await asyncio.shield(self._finish(job_id, job, finish, record, requeue_score=requeue_score))

    async def _finish(
        self,
        job_id: str,
        job: dict[str, Any] | None,
        finish: bool,
        record: bytes | None,
        *,
        requeue_score: int | None = None,
        settled: bool = False,
    ) -> None:
        """arq's finish, by the lease holder only; a finished job without a result gets one first."""
        runtime = self.runtime
        if finish and not settled and runtime is not None and job_id not in runtime.settled:
            # The job ended without the envelope writing a result: arq's own timeout fired.
            await self._settling.settle(job_id, job, Ending.TIMED_OUT)
        if runtime is not None:
            runtime.settled.discard(job_id)
        if not await self._leases.finish(
            job_id,
            finish=finish,
            arq_result=record if finish else None,
            result_ttl_ms=self._result_ttl_ms,
            requeue_score=requeue_score,
        ):
            log.info(
                "this worker no longer holds the job; its holder finishes it", extra=fields(job_id=job_id)
            )

    @property
    def _result_ttl_ms(self) -> int:
        return int(self.keep_result_s * 1000)


async def build_runtime(settings: Settings, redis: Any, clock: RedisClock | None = None) -> Runtime:
    return Runtime(
        settings=settings,
        redis=redis,
        budgets=Budgets(redis, settings),
        results=ResultStore(redis, ttl_s=settings.result_ttl_s, queue_name=settings.queue_name),
        metrics=Metrics(),
        menu=Menu(redis, settings),
        cpu_slots=CpuSlots(settings.reduce_slots),
        clock=clock or RedisClock(redis),
        tracing=Tracing(
            settings.otel_traces_endpoint, service_instance=settings.worker_id, version=__version__
        ),
    )
