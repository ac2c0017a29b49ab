"""The ``cite`` tool (one quote, for the agent) and the ``verify_citations`` job (a dossier, for
``research-worker verify`` and ``ResearchClient.verify``): arq jobs like any other.

They run on the workers because only a worker has what verification reads (the kept documents on
the page cache's Redis, the archive's store and its credentials, the reader to reduce an archived
record again) and the client and the MCP server import no tool. Both are read-only and free: no
budget is charged, no read budget spent, nothing fetched; the menu and domain lists do not apply
(a URL the report never fetched is ``not_fetched``).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from redis.asyncio import Redis

from jobs.cite.archived import ArchivedReport
from jobs.cite.check import Checker, as_json, check_quote, check_url_text, parse_citations, summary
from jobs.cite.matcher import Found
from jobs.cite.sources import ReportTexts
from jobs.facts import url_about
from worker.archive.service import open_store
from worker.archive.store import Store
from worker.config import Settings
from worker.limits import CITE, VERIFY_CITATIONS
from worker.runtime.context import JobContext, Runtime
from worker.serialization import JobArguments
from worker.state.pages.documents import KeptDocuments
from worker.state.redis_conn import connect
from worker.state.result_records import About, CitationCheck, OtherFields


class _Verifying:
    """What both jobs hold, built once per worker: the kept documents and the archive's store."""

    def __init__(self) -> None:
        self._documents: KeptDocuments | None = None
        self._store: Store | None = None
        self._cache_redis: Redis | None = None

    async def start(self, runtime: Runtime) -> None:
        settings = runtime.settings
        if settings.cache_redis_url is not None:
            # Kept documents live with the page cache, on its own Redis when it has one.
            self._cache_redis = await connect(
                dataclasses.replace(settings, redis_url=settings.cache_redis_url)
            )
        self._documents = KeptDocuments(
            self._cache_redis or runtime.redis, ttl_s=settings.budget_window_s, queue_name=settings.queue_name
        )
        self._store = open_store(settings.archive, settings.archive_endpoint)

    async def stop(self) -> None:
        if self._store is not None:
            await self._store.close()
        if self._cache_redis is not None:
            await self._cache_redis.aclose()

    def deadline_s(self, settings: Settings) -> float:
        # A fetch's time: within arq's own bound. A long dossier is split by the client (worker.citations).
        return settings.fetch_deadline_s

    def checker(self, job: JobContext) -> Checker:
        if self._documents is None:
            raise RuntimeError("citation checks were not started by this worker")
        settings = job.settings
        archived = (
            ArchivedReport(
                job.runtime.redis,
                self._store,
                job.report_id,
                max_bytes=settings.fetch_max_bytes,
                max_pdf_bytes=settings.fetch_max_pdf_bytes,
            )
            if self._store is not None
            else None
        )
        texts = ReportTexts(
            self._documents,
            archived,
            job.report_id,
            cpu_budget_s=settings.reduce_cpu_budget_s,
            until=job.deadline,
        )

        async def offload(size: int, work: Callable[[], Found]) -> Found:
            # Folding a long text is CPU work: in a thread, under the worker's reduce slots.
            async with job.runtime.cpu_slots.slot(size):
                return await asyncio.to_thread(work)

        return Checker(texts, offload)


class CiteTool(_Verifying):
    name = CITE
    params = ("url", "quote")

    def about(self, arguments: Mapping[str, Any]) -> About | None:
        return url_about(arguments)

    async def run(self, job: JobContext, arguments: JobArguments) -> OtherFields:
        url = check_url_text(arguments.get("url"))
        quote = check_quote(arguments.get("quote"))
        return OtherFields(as_json(await self.checker(job).check(url, quote)))


class VerifyTool(_Verifying):
    name = VERIFY_CITATIONS
    params = ("citations",)

    def about(self, arguments: Mapping[str, Any]) -> About | None:
        return None

    async def run(self, job: JobContext, arguments: JobArguments) -> OtherFields:
        citations = parse_citations(arguments.get("citations"))
        checker = self.checker(job)
        loop = asyncio.get_running_loop()
        # Room for one more document read again from the archive, at worst: a job that would run
        # past its deadline answers with what it checked, and the client sends the rest again.
        margin = 2 * job.settings.reduce_cpu_budget_s + 1.0
        checked: list[CitationCheck] = []
        for url, quote in citations:
            if checked and loop.time() > job.deadline - margin:
                break
            checked.append(await checker.check(url, quote))
        answer = summary(checked)
        if len(checked) < len(citations):
            answer["unchecked"] = len(citations) - len(checked)
        return OtherFields(answer)
