"""The fetch worker's side of a render: hand it to the render queue, wait, take the page back.

The render job's id is the fetch job's id with ``:render``, so a fetch that arq runs again (its
worker died) finds the render it asked for instead of asking twice. The render's result is read
back through the same checks the page cache uses on what it reads from Redis (shared state is
never trusted for its shape), and an error result becomes the same error kind here.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import TYPE_CHECKING

from worker.errors import ErrorKind, ResearchError, Timeout
from worker.logs import fields
from worker.serialization import JsonObject
from worker.state import health
from worker.state.budget import Tool
from worker.state.pages.entry import Page
from worker.state.queue import Enqueuer
from worker.state.result_records import RENDER_PAGE, ErrorResult, FetchFields
from worker.state.results import ResultStore
from worker.tracing.context import TRACEPARENT
from worker.tracing.phases import RENDER, phase

if TYPE_CHECKING:
    from worker.guardian.urls import Target
    from worker.runtime.context import JobContext

log = logging.getLogger("research.fetch")

RENDER_JOB = RENDER_PAGE


class NoRenderWorker(ResearchError):
    kind = ErrorKind.TIMEOUT


@functools.cache
def relayed(kind: ErrorKind) -> type[ResearchError]:
    """An error of ``kind`` as the render worker reported it (counted there, not again here)."""
    return type(f"Relayed_{kind.value}", (ResearchError,), {"kind": kind})


async def render_on_worker(job: JobContext, target: Target, extract: str, fmt: str, until: float) -> Page:
    """The rendered page, or the render's error; ``until`` is event-loop time."""
    runtime = job.runtime
    queue = runtime.settings.render_queue
    if not await health.any_alive(runtime.redis, queue):
        raise NoRenderWorker("no render worker is running; fetch the page without render")
    render_id = f"{job.job_id}:render"
    loop = asyncio.get_running_loop()
    left = until - loop.time()
    kwargs: JsonObject = {
        "report_id": job.report_id,
        "url": target.url,
        "extract": extract,
        "format": fmt,
        "deadline_at": time.time() + left,
    }
    if job.traceparent is not None:
        kwargs[TRACEPARENT] = job.traceparent  # the render job's span is a child of this job's
    with phase(RENDER):
        await Enqueuer(runtime.redis, queue, runtime.clock).enqueue(RENDER_JOB, render_id, kwargs)
        store = ResultStore(runtime.redis, ttl_s=runtime.settings.result_ttl_s, queue_name=queue)
        result = await store.wait(render_id, max(0.1, left)) or await store.read(render_id)
    if result is None:
        raise Timeout(f"the render of {target.host} did not finish within the fetch's time")
    if isinstance(result, ErrorResult):
        # The render worker's own words, as every message.
        raise relayed(result.kind)(result.message, status=result.status)
    if not isinstance(result.fields, FetchFields):
        raise relayed(ErrorKind.INTERNAL_ERROR)("the render worker's result was not a page")
    return result.fields.page


async def auto_render(job: JobContext, target: Target, extract: str, fmt: str, until: float) -> Page | None:
    """RESEARCH_RENDER=auto: a script shell is rendered unasked while the render budget lasts; None
    when it cannot be (no budget, no render worker, a failed render), and the static page stands,
    saying ``script_shell``."""
    try:
        await job.charge(Tool.RENDER)
        return await render_on_worker(job, target, extract, fmt, until)
    except ResearchError as failure:
        log.info(
            "a script shell was not rendered",
            extra=fields(job_id=job.job_id, host=target.host, kind=failure.kind.value),
        )
        return None
