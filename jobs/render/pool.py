"""Where a render's browser comes from: launched for it (cold), or launched ahead (warm).

A browser's launch, its fresh profile and its teardown cost a render most of its time, and none
of them depends on the page. So a render worker keeps ``RESEARCH_RENDER_WARM`` browsers launched
ahead, each exactly as a cold one (its own fresh profile, unprivileged, its limits, its own egress
proxy as its only way out), and a render takes one that is ready: the launch is off its clock. The
isolation is unchanged: each browser still serves exactly one page and is killed after it.

- Until a render takes it, a warm browser's proxy admits nothing (no page has asked for a host),
  so whatever the idle browser tries goes nowhere; on taking, the proxy gets the render's bounds
  and a fresh log, the CPU limit of every process of the tree is lowered to the render's, and the
  memory watchdog starts.
- A warm browser that died (its process is gone, or Playwright lost it) or went stale (idle longer
  than ``MAX_IDLE_S``) is retired and replaced, never handed out; a keeper checks every ``KEEP_S``.
- After the page, the tree is killed at once (on the clock, a signal); Playwright's reaping of it
  and the profile's removal run in the background, and a replacement is already launching.
- The browsers held (ready, launching, serving) never outnumber the render slots: a replacement
  launches after its predecessor's page, not during it (on a busy machine they would share the CPU).
- ``stop()`` (the worker's clean stop) waits for the launches in flight and kills every browser.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from jobs.render.browser import (
    BrowserLauncher,
    Launched,
    Limits,
    Watch,
    discard,
    kill_tree,
    watch_memory,
)
from worker.guardian.egress_proxy import EgressBounds, EgressProxy

if TYPE_CHECKING:
    from aiohttp.abc import AbstractResolver
    from playwright.async_api import BrowserContext, Playwright

    from worker.guardian.policy import AddressPolicy
    from worker.metrics import Metrics
    from worker.runtime.context import Runtime

log = logging.getLogger("research.render")

MAX_IDLE_S = 600.0  # a warm browser older than this is replaced rather than handed out
KEEP_S = 2.0
RETRY_S = 30.0  # after a failed launch, the keeper waits this long before launching ahead again
# A proxy before its render takes it: no port, no tunnel, no byte.
NOTHING = EgressBounds(max_requests=0, max_bytes=0, ports=frozenset())


@dataclass
class Held:
    """A browser serving one render, with the proxy that is its only way out."""

    context: BrowserContext
    proxy: EgressProxy
    asked: set[tuple[str, int]]  # (host, port) the page's own requests named: all the proxy admits


@dataclass(eq=False)
class _Warm:
    launched: Launched
    proxy: EgressProxy
    asked: set[tuple[str, int]] = field(default_factory=set)


class Browsers:
    """A browser per render, launched on the render's clock (no pool, ``RESEARCH_RENDER_WARM=0``)."""

    def __init__(
        self,
        playwright: Playwright,
        launcher: BrowserLauncher,
        policy: AddressPolicy,
        resolver: AbstractResolver | None,
        metrics: Metrics | None = None,
    ) -> None:
        self._playwright = playwright
        self._launcher = launcher
        self._policy = policy
        self._resolver = resolver
        self._metrics = metrics

    def _proxy(self, bounds: EgressBounds, asked: set[tuple[str, int]]) -> EgressProxy:
        return EgressProxy(
            self._policy, bounds, self._resolver, admits=lambda host, port: (host, port) in asked
        )

    @contextlib.asynccontextmanager
    async def browser(self, bounds: EgressBounds, limits: Limits, watch: Watch) -> AsyncIterator[Held]:
        asked: set[tuple[str, int]] = set()
        proxy = self._proxy(bounds, asked)
        await proxy.start()
        try:
            started = time.monotonic()
            async with self._launcher.launch(self._playwright, proxy.address, limits, watch) as context:
                self._count_launch(started, "on_clock")
                yield Held(context, proxy, asked)
        finally:
            await proxy.close()

    def _count_launch(self, started: float, when: str) -> None:
        if self._metrics is not None:
            self._metrics.render_launch.labels(when).observe(time.monotonic() - started)

    async def stop(self) -> None:
        """Nothing is kept between renders but the trust store, removed now."""
        self._launcher.close()


class WarmPool(Browsers):
    """``size`` browsers launched ahead, each for one render; ``limits`` are the longest render's."""

    def __init__(
        self,
        size: int,
        limits: Limits,
        playwright: Playwright,
        launcher: BrowserLauncher,
        policy: AddressPolicy,
        resolver: AbstractResolver | None,
        metrics: Metrics | None = None,
        max_idle_s: float = MAX_IDLE_S,
    ) -> None:
        super().__init__(playwright, launcher, policy, resolver, metrics)
        self._size = size
        self._limits = limits
        self._max_idle_s = max_idle_s
        self._ready: collections.deque[_Warm] = collections.deque()
        self._launching: set[asyncio.Task[None]] = set()
        self._ending: set[asyncio.Task[None]] = set()
        self._arrived = asyncio.Event()
        self._failure: BaseException | None = None
        self._failed_at = -RETRY_S
        self._waiting = 0
        self._serving = 0
        self._closed = False
        self._keeper: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._fill()
        self._keeper = asyncio.get_running_loop().create_task(self._keep())

    @property
    def ready(self) -> int:
        return len(self._ready)

    @contextlib.asynccontextmanager
    async def browser(self, bounds: EgressBounds, limits: Limits, watch: Watch) -> AsyncIterator[Held]:
        warm = await self._take()
        self._serving += 1
        watcher: asyncio.Task[None] | None = None
        try:
            warm.proxy.arm(bounds)
            await self._launcher.narrow_cpu(warm.launched, limits.seconds)
            watcher = watch_memory(warm.launched, limits.memory_bytes, watch)
            yield Held(warm.launched.context, warm.proxy, warm.asked)
        finally:
            # Killed now, on the render's clock (a signal); reaped and removed in the background.
            kill_tree(warm.launched.pid_file)
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
            await warm.proxy.close()
            self._end(warm)
            self._serving -= 1
            self._fill()  # its replacement launches now, not during the page: they share the CPU

    async def _take(self) -> _Warm:
        if self._closed:
            raise RuntimeError("the render worker is stopping")
        self._waiting += 1
        try:
            while True:
                while self._ready:
                    warm = self._ready.popleft()
                    if self._usable(warm):
                        return warm
                    self._end(warm)
                if self._failure is not None:
                    failure, self._failure = self._failure, None
                    raise failure
                self._fill()
                self._arrived.clear()
                await self._arrived.wait()
        finally:
            self._waiting -= 1
            self._gauge()

    def _usable(self, warm: _Warm) -> bool:
        idle = time.monotonic() - warm.launched.born
        if idle > self._max_idle_s or not warm.launched.alive():
            reason = "stale" if idle > self._max_idle_s else "dead"
            if self._metrics is not None:
                self._metrics.render_warm_retired.labels(reason).inc()
            log.info("warm browser retired: %s", reason)
            return False
        return True

    def _fill(self) -> None:
        """Launch until the browsers (ready, launching, serving) make the pool, or one for each render
        serving or waiting if that is more: never more browsers than the worker has render slots."""
        while not self._closed and len(self._ready) + len(self._launching) + self._serving < max(
            self._size, self._serving + self._waiting
        ):
            task = asyncio.get_running_loop().create_task(self._launch())
            self._launching.add(task)
            task.add_done_callback(self._launching.discard)

    async def _launch(self) -> None:
        asked: set[tuple[str, int]] = set()
        proxy = self._proxy(NOTHING, asked)
        started = time.monotonic()
        try:
            await proxy.start()
            launched = await self._launcher.open(self._playwright, proxy.address, self._limits)
        except Exception as exc:
            await proxy.close()
            log.warning("a warm browser failed to launch (%s)", type(exc).__name__)
            self._failed_at = time.monotonic()
            if self._waiting:  # a render waiting for it fails as a cold launch would
                self._failure = exc
            self._arrived.set()
            return
        # A render waiting for a browser waited for this launch: it was on that render's clock.
        self._count_launch(started, "on_clock" if self._waiting else "ahead")
        warm = _Warm(launched, proxy, asked)
        if self._closed:
            self._end(warm)
        else:
            self._ready.append(warm)
            self._gauge()
        self._arrived.set()

    def _end(self, warm: _Warm) -> None:
        """Kill its tree now; let Playwright reap it and remove its profile in the background."""
        kill_tree(warm.launched.pid_file)
        task = asyncio.get_running_loop().create_task(self._discard(warm))
        self._ending.add(task)
        task.add_done_callback(self._ending.discard)

    @staticmethod
    async def _discard(warm: _Warm) -> None:
        await warm.proxy.close()
        await discard(warm.launched)

    async def _keep(self) -> None:
        while True:
            await asyncio.sleep(KEEP_S)
            kept = [warm for warm in self._ready if self._usable(warm)]
            for warm in self._ready:
                if warm not in kept:
                    self._end(warm)
            self._ready = collections.deque(kept)
            if time.monotonic() - self._failed_at > RETRY_S:
                self._fill()
            self._gauge()

    def _gauge(self) -> None:
        if self._metrics is not None:
            self._metrics.render_warm.set(len(self._ready))

    async def stop(self) -> None:
        """Every warm browser killed, every launch in flight waited for and killed, all reaped."""
        self._closed = True
        if self._keeper is not None:
            self._keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keeper
        # Launches are not cancelled halfway (a browser could start after its kill): they finish.
        await asyncio.gather(*self._launching, return_exceptions=True)
        while self._ready:
            self._end(self._ready.popleft())
        self._gauge()
        await asyncio.gather(*self._ending, return_exceptions=True)
        await super().stop()


def browsers_for(
    playwright: Playwright,
    launcher: BrowserLauncher,
    policy: AddressPolicy,
    resolver: AbstractResolver | None,
    runtime: Runtime,
    slots: int,
) -> Browsers:
    """The render worker's browsers: RESEARCH_RENDER_WARM launched ahead (never more than it has
    render slots: a warm browser holds the memory of a launched one), or none (0)."""
    settings = runtime.settings
    size = min(settings.render_warm, slots)
    if size == 0:
        return Browsers(playwright, launcher, policy, resolver, runtime.metrics)
    # Launched for the longest render a job may ask for; each render narrows the CPU limit to its own.
    limits = Limits(settings.fetch_timeout_s, settings.render_memory_mb * 2**20)
    pool = WarmPool(size, limits, playwright, launcher, policy, resolver, runtime.metrics)
    pool.start()
    return pool
