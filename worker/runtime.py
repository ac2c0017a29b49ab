"""The arq worker: orjson jobs, a wake-up instead of a poll, per-replica health, resilient to Redis restarts.

``ResearchWorker`` keeps arq's job handling (claiming, retries, timeouts, signals) and replaces only
the wait between polls: an idle worker blocks on the queue's wake list, so a job enqueued through
``Enqueuer`` starts within a millisecond, while an idle worker sends Redis about two commands a
second. arq's fixed poll remains the fallback for jobs enqueued by plain arq clients.
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
from arq.worker import Function, Worker
from redis.exceptions import RedisError

from worker import keys, metrics_server
from worker.budget import Budgets
from worker.config import ConfigError, Settings
from worker.context import Runtime
from worker.envelope import MAX_TRIES, ToolJob, arq_function, parse_report_id, write_result
from worker.errors import InternalError, InvalidRequest, MissingReportId, ResearchError
from worker.logs import fields
from worker.menu import Menu
from worker.metrics import Metrics
from worker.queue import Claimer, blocking_pop
from worker.redis_conn import connect
from worker.results import ResultStore, error_result
from worker.serialization import dumps, loads

log = logging.getLogger("research.worker")

FALLBACK_POLL_S = 1.0
BURST_POLL_S = 0.05
SLOT_FREED = object()
HEALTH_INTERVAL_S = 5.0
HEALTH_TTL_S = 3 * HEALTH_INTERVAL_S
MAX_REDIS_BACKOFF_S = 5.0


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
    ) -> None:
        self.settings = settings
        self._tools = tuple(tools)
        functions = [arq_function(tool, settings) for tool in self._tools] + list(extra_functions)
        self.runtime: Runtime | None = None
        self._slot_free = asyncio.Event()
        self._backlog = False
        self._claimer: Claimer
        self._metrics_runner: web.AppRunner | None = None
        self._started_at = time.time()
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
        if self.runtime is None:
            return
        for tool in self._tools:
            await tool.stop()

    async def main(self) -> None:
        """arq's loop with two changes: wait on the wake list, and survive Redis going away."""
        if self._pool is None:
            self._pool = await connect(self.settings)
        self._claimer = Claimer(self.pool, self.queue_name, self.in_progress_timeout_s)
        self.ctx["redis"] = self.pool
        if self.on_startup:
            await self.on_startup(self.ctx)
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
        await self.start_jobs([job_id])

    async def _poll_iteration(self) -> None:
        """arq's poll, with every due job claimed in one script instead of one transaction each."""
        if self.allow_pick_jobs and self.job_counter < self.max_jobs:
            wanted = self.max_jobs - self.job_counter
            if self.burst and self.max_burst_jobs >= 0:
                wanted = min(wanted, self.max_burst_jobs - self._jobs_started())
            if wanted > 0:
                self._slot_free.clear()
                claimed = await self._claimer.claim_due(wanted)
                self._backlog = len(claimed) == wanted
                for job_id, score in claimed:
                    await self._run_claimed(job_id, score)
        for job_id, task in list(self.tasks.items()):
            if task.done():
                del self.tasks[job_id]
                task.result()  # a bug in run_job surfaces here, as in arq
        await self.heart_beat()

    async def start_jobs(self, job_ids: list[bytes]) -> None:
        """arq's start_jobs with the claim done by one script instead of a WATCH transaction."""
        for job_id_b in job_ids:
            if self.job_counter >= self.max_jobs:
                return
            job_id = job_id_b.decode()
            score = await self._claimer.claim(job_id)
            if score is not None:
                await self._run_claimed(job_id, score)

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
        }
        await self.pool.set(self.health_check_key, dumps(info), px=int(HEALTH_TTL_S * 1000))

    async def finish_failed_job(self, job_id: str, result_data: bytes | None) -> None:
        """arq's own failures (unreadable payload, unknown job, retries used up) still get a result."""
        await super().finish_failed_job(job_id, result_data)
        if self.runtime is None or await self.runtime.results.read(job_id) is not None:
            return
        record: dict[str, Any] = {}
        with contextlib.suppress(Exception):
            record = loads(result_data) if result_data else {}
        function = str(record.get("f") or "unknown")
        reason = str(record.get("r") or "")
        kwargs = record.get("k") if isinstance(record.get("k"), dict) else {}
        report_id: str | None = None
        with contextlib.suppress(MissingReportId):
            report_id = parse_report_id((kwargs or {}).get("report_id"))
        error: ResearchError
        if "deserialize" in reason.lower():
            error = InvalidRequest(
                "the job payload is not JSON; payloads are read with orjson only (pickle is never loaded)"
            )
            log.error("refused a job payload that is not JSON", extra=fields(job_id=job_id))
        elif "not found" in reason:
            error = InvalidRequest(
                f"this worker has no job named {function[:60]!r}; it runs {', '.join(sorted(self.functions))}"
            )
        else:
            error = InternalError(f"the job could not be completed ({reason[:120] or 'failed in arq'})")
        tool = function if function in self.functions else "unknown"
        await write_result(self.runtime, error_result(tool, report_id, job_id, error), 0.0)


async def build_runtime(settings: Settings, redis: Any) -> Runtime:
    return Runtime(
        settings=settings,
        redis=redis,
        budgets=Budgets(redis, settings),
        results=ResultStore(redis, ttl_s=settings.result_ttl_s, queue_name=settings.queue_name),
        metrics=Metrics(),
        menu=Menu(redis, settings),
    )
