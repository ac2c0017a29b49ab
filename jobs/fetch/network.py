"""The network side of a fetch: one guarded GET under a turn at the host and one time bound.

The bound covers the whole chain (the wait for the host's turn, DNS, connects, every redirect and
every body). Redirects go through the fetch's ``HopLog``, which judges each hop to another site by
the report's rule and remembers the host that answered last, so a Retry-After holds that host.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from jobs.fetcher import Fetched, Fetcher, FetchLimits
from worker.archive.capture import Capture
from worker.config import Settings
from worker.errors import HttpStatus, Timeout
from worker.guardian.connector import CONNECTED
from worker.guardian.redirects import HopLog
from worker.guardian.urls import Target
from worker.state.politeness import Politeness


async def guarded_get(
    fetcher: Fetcher,
    hosts: Politeness,
    target: Target,
    hops: HopLog,
    *,
    timeout_s: float,
    until: float,
    capture: Capture | None = None,
) -> Fetched:
    """GET ``target`` with a turn at its host, within ``timeout_s`` and ``until`` (loop
    time); an archive ``capture`` hears the exchange and the peers it connected to."""
    loop = asyncio.get_running_loop()
    seconds = max(0.0, min(timeout_s, until - loop.time()))
    async with time_bound(seconds, target), hosts.turn(target, loop.time() + seconds):
        try:
            if capture is None:
                return await fetcher.get(target, hops.follow)
            hearing = CONNECTED.set(capture.peers)
            try:
                return await fetcher.get(target, hops.follow, capture)
            finally:
                CONNECTED.reset(hearing)
        except HttpStatus as answer:
            status = answer.status or 0
            asked = await hosts.hold_if_asked(hops.answering, status, answer.retry_after_s)
            if (late := hosts.past_deadline(hops.answering, status, asked, until)) is not None:
                raise late from None
            raise


@contextlib.asynccontextmanager
async def time_bound(seconds: float, target: Target) -> AsyncIterator[None]:
    """One bound for the whole chain: DNS, connects, redirects and the body of every hop."""
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError:
        raise Timeout(f"fetching from {target.host} took longer than {seconds:g} s") from None


def fetch_limits(settings: Settings) -> FetchLimits:
    """A fetch's bounds from the settings (fetch_page's, and the render job's first GET)."""
    return FetchLimits(
        max_bytes=settings.fetch_max_bytes,
        max_pdf_bytes=settings.fetch_max_pdf_bytes,
        max_redirects=settings.fetch_max_redirects,
    )
