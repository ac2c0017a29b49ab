"""Real worker processes that fetch from the test's own TLS servers on 127.0.0.1.

The servers run in the test's event loop, so starting and stopping the processes (which waits)
runs in a thread: a worker finishing its last fetch on SIGTERM must find the server answering.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from tests.support.processes import start_worker, stop, wait_healthy
from tests.support.tls import TestCA
from worker.config import Settings


def fetch_env(ca: TestCA, **extra: str) -> dict[str, str]:
    """Trust only 127.0.0.1 and the test CA; URLs are IP literals, so no process asks DNS."""
    return {
        "RESEARCH_GUARDIAN_ALLOW_CIDRS": "127.0.0.1/32",
        "RESEARCH_CA_BUNDLE": str(ca.bundle),
        "RESEARCH_FETCH_TIMEOUT_S": "10",
        "RESEARCH_SHUTDOWN_GRACE_S": "2",
        **extra,
    }


@asynccontextmanager
async def fetch_workers(
    settings: Settings, ca: TestCA, count: int = 2, **env: str
) -> AsyncIterator[list[subprocess.Popen[bytes]]]:
    procs = [start_worker(settings, f"p{i}", env=fetch_env(ca, **env)) for i in range(count)]
    try:
        await asyncio.to_thread(wait_healthy, settings, count)
        yield procs
    finally:
        await asyncio.gather(*(asyncio.to_thread(stop, proc) for proc in procs))
