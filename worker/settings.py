"""The composition root: where the runtime meets the tools.

The worker (``worker.runtime.worker``) knows only the ``ToolJob`` interface; this module names the tools
it runs and builds a worker with them. It is the only module in ``worker/`` that imports ``jobs/``.

It also keeps arq's own convention working: ``arq worker.settings.WorkerSettings`` runs the same
worker as ``research-worker run``. arq builds its plain ``Worker`` from a settings class and has no
way to be handed another class, so the Worker it builds is a shell: its start-up hook runs a
``ResearchWorker`` (our tools, the wake-up, per-replica health keys, our signal handling) in the
same event loop until it stops, then ends the shell the way a signal ends it. ``arq --check
worker.settings.WorkerSettings`` reads the queue's health key, which every replica refreshes
(``worker.state.health``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import sys
from typing import Any

import click
from aiohttp.abc import AbstractResolver

from jobs.cite.tool import CiteTool, VerifyTool
from jobs.fetch.tool import FetchPageTool
from jobs.search import WebSearchTool
from worker import embedded, logs
from worker.archive.service import SharedArchive
from worker.config import ConfigError, Settings
from worker.runtime.context import ArqContext
from worker.runtime.envelope import ToolJob, arq_function
from worker.runtime.worker import ResearchWorker
from worker.serialization import dumps, loads
from worker.state import health
from worker.state.redis_conn import redis_settings as arq_redis_settings

__all__ = ["build_worker", "render_tools", "render_worker_settings", "tools"]

EXIT_CONFIGURATION = 2


def tools(resolver: AbstractResolver | None = None) -> tuple[ToolJob, ...]:
    """The tools a worker runs, sharing one evidence archive writer; tests pass a fake resolver,
    production uses the system's."""
    archive = SharedArchive()
    return (WebSearchTool(archive), FetchPageTool(resolver, archive), CiteTool(), VerifyTool())


def build_worker(settings: Settings, *, burst: bool = False, render: bool = False) -> ResearchWorker:
    """A fetch-and-search worker, or with ``render`` a render worker (``run --render``): the only
    kind that starts browsers, on its own queue, so their memory never shares a fetch worker's."""
    if render:
        return ResearchWorker(render_worker_settings(settings), render_tools(), burst=burst)
    return ResearchWorker(settings, tools(), burst=burst)


def render_tools(resolver: AbstractResolver | None = None) -> tuple[ToolJob, ...]:
    from jobs.render.tool import RenderPageTool  # Playwright is imported by render workers only

    return (RenderPageTool(resolver),)


def render_worker_settings(settings: Settings) -> Settings:
    """A render worker takes renders from the render queue, a few at a time: each is a browser."""
    from jobs.render.tool import RENDER_SLOTS

    return dataclasses.replace(
        settings, queue_name=settings.render_queue, max_jobs=min(settings.max_jobs, RENDER_SLOTS)
    )


def __getattr__(name: str) -> Any:
    # Built on first use, so importing this module (as the command line does) reads no environment.
    if name == "WorkerSettings":
        return arq_worker_settings()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def arq_worker_settings() -> type:
    """The settings class ``arq`` reads, from the environment, with Redis found as every command finds it."""
    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        sys.stderr.write(f"research-worker: configuration error: {exc}\n")
        raise SystemExit(EXIT_CONFIGURATION) from None
    found = embedded.locate(settings.redis_url, settings.runtime_dir, forced=settings.embedded)
    settings = dataclasses.replace(settings, redis_url=found.url)

    async def run_research_worker(ctx: ArqContext) -> None:
        _log_like_research_worker_run(settings)
        worker = build_worker(settings, burst=_arq_burst())
        try:
            await worker.async_run()
        finally:
            await worker.close()
        # arq's Worker.run takes a cancelled main task for a shutdown: it closes and returns.
        raise asyncio.CancelledError

    async def settle_queue_health(ctx: ArqContext) -> None:
        # arq's shell deletes the queue's health key as it closes, even with other replicas running.
        await health.withdraw(ctx["redis"], settings.queue_name)

    class WorkerSettings:
        """``arq worker.settings.WorkerSettings``: a shell whose start-up runs ResearchWorker."""

        functions = tuple(arq_function(tool, settings) for tool in tools())
        queue_name = settings.queue_name
        redis_settings = arq_redis_settings(settings.redis_target)
        job_serializer = dumps
        job_deserializer = loads
        on_startup = run_research_worker
        on_shutdown = settle_queue_health

    return WorkerSettings


def _arq_burst() -> bool:
    """``arq --burst``: arq hands the flag to its own Worker only, so read it where arq parsed it."""
    context = click.get_current_context(silent=True)
    return bool(context is not None and context.params.get("burst"))


def _log_like_research_worker_run(settings: Settings) -> None:
    """Our log lines, in our format, unless whoever runs arq configured logging for them already."""
    if not logging.getLogger().handlers and not logging.getLogger("research").handlers:
        logs.configure(settings.log_level, settings.log_format, logger_name="research")
