"""A page renderer for the browser tests: the system's chromium, the guardian trusting 127.0.0.1
only, the fake resolver, and bounds small enough that a hostile page ends quickly."""

from __future__ import annotations

import contextlib
import ipaddress
import shutil
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import pytest

from jobs.render.browser import BrowserLauncher
from jobs.render.page import PageRenderer, RenderBounds
from jobs.render.settle import QUIET_S
from tests.support.fake_dns import FakeResolver
from tests.support.tls import TestCA
from worker.guardian.policy import AddressPolicy

if TYPE_CHECKING:
    from playwright.async_api import Playwright

CHROMIUM = shutil.which("chromium")
POLICY = AddressPolicy([ipaddress.ip_network("127.0.0.1/32")])

browser_only = [
    pytest.mark.browser,
    pytest.mark.skipif(
        CHROMIUM is None or shutil.which("certutil") is None,
        reason="needs Debian's chromium and certutil (apt-get install chromium libnss3-tools)",
    ),
]
# The page-level suites share one Playwright driver per module, so their tests run in its loop.
needs_chromium = [*browser_only, pytest.mark.asyncio(loop_scope="module")]


def bounds(port: int, **changes: int) -> RenderBounds:
    values = {
        "max_requests": 100,
        "max_bytes": 8_000_000,
        "dom_bytes": 2_097_152,
        "memory_bytes": 1024 * 2**20,
    }
    values.update(changes)
    return RenderBounds(ports=frozenset({443, port}), **values)


@contextlib.asynccontextmanager
async def driver() -> AsyncIterator[Playwright]:
    """Playwright's driver, shared by a module's tests (each render still launches its own browser)."""
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        yield playwright


def renderer(
    playwright: Playwright, ca: TestCA, resolver: FakeResolver, quiet_s: float = QUIET_S
) -> PageRenderer:
    assert CHROMIUM is not None
    launcher = BrowserLauncher(CHROMIUM, str(ca.bundle))
    return PageRenderer(playwright, launcher, POLICY, resolver, quiet_s=quiet_s)


# A render's deadline in the browser tests is what it needs on a quiet machine, stretched by how much
# slower a trivial render is here now than on a quiet one (mostly the browser's launch), plus that
# render's own time: on a loaded machine (load 14 and two busy loops) a trivial render took 9.6 s and
# a hostile page with every channel at once needed more than 37 s.
QUIET_PACE_S = 1.0


async def measured_pace_s(pages: PageRenderer, site: str, port: int) -> float:
    """How long a trivial render takes on this machine now."""
    started = time.monotonic()
    await pages.render(
        f"{site}/page",
        b"<html><body><p>pace</p></body></html>",
        "text/html; charset=utf-8",
        bounds(port),
        120.0,
    )
    return time.monotonic() - started


def scaled_s(base_s: float, pace_s: float) -> float:
    return base_s * max(1.0, pace_s / QUIET_PACE_S) + pace_s
