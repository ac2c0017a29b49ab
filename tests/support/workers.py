"""Run ResearchWorker in the test's event loop, and stop it cleanly."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence

from worker.config import Settings
from worker.runtime.envelope import ToolJob
from worker.runtime.worker import ResearchWorker

STARTUP_S = 60.0


@contextlib.asynccontextmanager
async def running_worker(
    settings: Settings, tools: Sequence[ToolJob] | None = None, **kwargs: object
) -> AsyncIterator[ResearchWorker]:
    worker = ResearchWorker(settings, tools, handle_signals=False, **kwargs)  # type: ignore[arg-type]
    task = asyncio.create_task(worker.async_run())
    try:
        # Started, and beating: a client refuses to enqueue on a queue where no worker beats. The
        # wait is generous (a loaded machine starts a worker slowly) and fails loudly when it ends.
        async with asyncio.timeout(STARTUP_S):
            while not (worker.runtime is not None and await worker.pool.exists(worker.health_check_key)):
                if task.done():
                    task.result()
                await asyncio.sleep(0.01)
        yield worker
    finally:
        # Let jobs in flight finish (as a SIGTERM with a grace period would), then stop the loop.
        pending = [t for t in worker.tasks.values() if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=30)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        with contextlib.suppress(asyncio.CancelledError):
            await worker.close()
