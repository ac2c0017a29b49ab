"""ResearchClient: how the orchestrator calls the tools.

It enqueues under a job id it chooses, then blocks on the job's wake-up list (written in the same
transaction as the result), so it learns of completion within a millisecond and sends nothing
while it waits. Past its deadline it returns a ``timeout`` result; the job may still finish, and its
result then lands in ``research:result:{job_id}`` as usual.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
import uuid
from collections.abc import Iterable
from types import TracebackType
from typing import Any

from arq.connections import ArqRedis

from worker import keys
from worker.config import Settings
from worker.envelope import parse_report_id
from worker.errors import Timeout
from worker.menu import Menu
from worker.queue import Enqueuer
from worker.redis_conn import connect
from worker.results import ResultStore, error_result

DEFAULT_WAIT_S = 120.0
# A blocking pop longer than this is split, so a dropped connection is noticed and retried.
MAX_BLOCK_S = 30.0


class ResearchClient:
    def __init__(
        self,
        redis_url: str | None = None,
        *,
        settings: Settings | None = None,
        wait_s: float = DEFAULT_WAIT_S,
        job_id_prefix: str = "",
    ) -> None:
        base = settings or Settings.from_env()
        if redis_url is not None:
            base = dataclasses.replace(base, redis_url=redis_url)
        self.settings = base
        self.wait_s = wait_s
        self._job_id_prefix = job_id_prefix
        self._redis: ArqRedis | None = None
        self._enqueuer: Enqueuer | None = None
        self._results: ResultStore | None = None

    async def __aenter__(self) -> ResearchClient:
        self._redis = await connect(self.settings)
        self._enqueuer = Enqueuer(self._redis, self.settings.queue_name)
        self._results = ResultStore(
            self._redis, ttl_s=self.settings.result_ttl_s, queue_name=self.settings.queue_name
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._redis is not None:
            await self._redis.aclose()
            self._redis = None

    @property
    def redis(self) -> ArqRedis:
        if self._redis is None:
            raise RuntimeError("use ResearchClient as an async context manager")
        return self._redis

    async def search(
        self, report_id: str, query: str, max_results: int = 5, org_id: str | None = None
    ) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"report_id": report_id, "query": query, "max_results": max_results}
        if org_id is not None:
            kwargs["org_id"] = org_id
        return await self.call("web_search", kwargs)

    async def fetch(self, report_id: str, url: str, extract: str = "main") -> dict[str, Any]:
        return await self.call("fetch_page", {"report_id": report_id, "url": url, "extract": extract})

    async def call(
        self, function: str, kwargs: dict[str, Any], *, wait_s: float | None = None
    ) -> dict[str, Any]:
        job_id = await self.enqueue(function, kwargs)
        report_id = kwargs.get("report_id")
        return await self.wait(job_id, function=function, report_id=report_id, wait_s=wait_s, fresh=True)

    async def enqueue(self, function: str, kwargs: dict[str, Any], job_id: str | None = None) -> str:
        assert self._enqueuer is not None, "use ResearchClient as an async context manager"
        job_id = job_id or f"{self._job_id_prefix}{uuid.uuid4().hex}"
        if not await self._enqueuer.enqueue(function, job_id, kwargs):
            raise ValueError(f"a job with id {job_id!r} already exists")
        return job_id

    async def wait(
        self,
        job_id: str,
        *,
        function: str = "unknown",
        report_id: object = None,
        wait_s: float | None = None,
        fresh: bool = False,
    ) -> dict[str, Any]:
        """The job's result, waking when it is written; a ``timeout`` result past the deadline.

        ``fresh`` skips the first read for a job enqueued a moment ago: its wake-up list will hold
        the result, so the blocking pop alone finds it.
        """
        results = self._results
        assert results is not None, "use ResearchClient as an async context manager"
        limit = self.wait_s if wait_s is None else wait_s
        deadline = time.monotonic() + limit
        if not fresh and (done := await results.read(job_id)) is not None:
            return done
        while (left := deadline - time.monotonic()) > 0:
            block = min(left, MAX_BLOCK_S)
            with contextlib.suppress(TimeoutError):
                woken = await asyncio.wait_for(results.wait(job_id, block), block + 5.0)
                if woken is not None:
                    return woken
        # The wake-up may have gone to another waiter or expired: the result key is the record.
        if (done := await results.read(job_id)) is not None:
            return done
        return error_result(
            function,
            report_id if isinstance(report_id, str) else None,
            job_id,
            Timeout(
                f"no result within {limit:g} s; the job may still finish and write {keys.result(job_id)}"
            ),
        )

    async def seed_urls(self, report_id: str, urls: Iterable[str]) -> int:
        """Put the briefing's URLs on the report's menu; returns how many were new.

        Only https URLs the guardian would parse enter the menu; others are skipped silently.
        """
        parse_report_id(report_id)
        return await Menu(self.redis, self.settings).record(report_id, urls)
