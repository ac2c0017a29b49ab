"""Warm browsers: launched ahead, each still for one page, as isolated as a cold one, never handed out
dead or stale, and nothing left once the pool stops (processes and profiles counted from /proc and
the file system, not from the pool's own books)."""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from playwright.async_api import Playwright

from jobs.render.browser import BrowserLauncher, Limits, Watch, kill_tree, tree_of
from jobs.render.page import PageRenderer
from jobs.render.pool import WarmPool
from tests.support.hostile_render import APP_SHELL, APP_TEXT, RAN, Traps, channels, hostile_world, resolver
from tests.support.rendering import CHROMIUM, POLICY, bounds, driver, needs_chromium
from tests.support.tls import TestCA
from worker.config import ConfigError, Settings
from worker.guardian.egress_proxy import EgressBounds
from worker.metrics import Metrics

LIMITS = Limits(seconds=30, memory_bytes=2**30)


def test_warm_browsers_default_to_the_render_slots_and_zero_turns_them_off() -> None:
    assert Settings.from_env({}).render_warm == 2
    assert Settings.from_env({"RESEARCH_RENDER_WARM": "0"}).render_warm == 0
    assert Settings.from_env({"RESEARCH_RENDER_WARM": "3"}).render_warm == 3


@pytest.mark.parametrize("bad", ["-1", "9", "many", "1.5"])
def test_a_bad_warm_count_is_a_configuration_error_naming_the_variable(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"^RESEARCH_RENDER_WARM: "):
        Settings.from_env({"RESEARCH_RENDER_WARM": bad})


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def playwright() -> AsyncIterator[Playwright]:
    async with driver() as running:
        yield running


@pytest.fixture
def private_tmp() -> Iterator[Path]:
    """Profiles go here, so this test counts its own (other tests render at the same time); the
    folder must be reachable by the unprivileged browser, as the system's temp dir is."""
    folder = Path(tempfile.mkdtemp(prefix="pool-test-"))
    folder.chmod(0o711)
    saved = tempfile.tempdir
    tempfile.tempdir = str(folder)
    try:
        yield folder
    finally:
        tempfile.tempdir = saved
        shutil.rmtree(folder, ignore_errors=True)


def _ours(folder: Path) -> set[int]:
    """Live processes started with a profile in ``folder`` (a zombie's command line is empty)."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            command = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if str(folder).encode() in command:
            found.add(int(entry))
    return found


def _profiles(folder: Path) -> list[Path]:
    """The renders' folders, and the trust store the launcher copies into each."""
    return list(folder.glob("research-render-*"))


async def _until(check: object, seconds: float = 60.0) -> None:
    for _ in range(int(seconds / 0.1)):
        if check():  # type: ignore[operator]
            return
        await asyncio.sleep(0.1)
    raise AssertionError("not reached in time")


def _pool(playwright: Playwright, ca: TestCA, size: int, **kwargs: object) -> WarmPool:
    assert CHROMIUM is not None
    launcher = BrowserLauncher(CHROMIUM, str(ca.bundle))
    return WarmPool(size, LIMITS, playwright, launcher, POLICY, resolver(), **kwargs)  # type: ignore[arg-type]


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] in ("Z", "X")
    except OSError:
        return True


def _cpu_limit(pid: int) -> str:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max cpu time"):
            return line.split()[3]
    return ""


@needs_chromium[0]
@needs_chromium[1]
@needs_chromium[2]
async def test_each_render_takes_its_own_warm_browser_with_the_renders_limits_and_nothing_is_left(
    playwright: Playwright, ca: TestCA, private_tmp: Path
) -> None:
    metrics = Metrics()
    pool = _pool(playwright, ca, 2, metrics=metrics)
    pool.start()
    await _until(lambda: pool.ready == 2)
    assert len([p for p in _profiles(private_tmp) if "-trust-" not in p.name]) == 2
    assert _ours(private_tmp)
    assert metrics.registry.get_sample_value("research_render_browsers_warm") == 2
    browsers = []
    seen_trees: set[int] = set()
    for _ in range(3):
        watch = Watch()
        async with pool.browser(EgressBounds(10, 10**6), Limits(7, 2**30), watch) as held:
            page = held.context.pages[0] if held.context.pages else await held.context.new_page()
            await page.set_content("<p>one page</p>")
            await _until(functools.partial(lambda w: w.pid is not None, watch), 10)
            assert watch.pid is not None
            tree = tree_of(watch.pid)
            # The render's CPU limit (7 s + 2), not the launch's (30 s + 2), on every process.
            assert {_cpu_limit(pid) for pid in tree if Path(f"/proc/{pid}").exists()} == {"9"}
            if os.geteuid() == 0:
                assert "65534" in Path(f"/proc/{watch.pid}/status").read_text().split("Uid:")[1].split()[0]
            browsers.append(watch.pid)
            seen_trees |= set(tree)
        # Killed on the way out (SIGKILL, delivered within moments), not left for later.
        await _until(functools.partial(_gone, watch.pid), 5)
    assert len(set(browsers)) == 3  # one browser per page, never reused
    await pool.stop()
    assert _ours(private_tmp) == set()
    assert _profiles(private_tmp) == []
    # The browsers themselves were reaped (Playwright waits for its child), not left as zombies.
    assert [pid for pid in browsers if Path(f"/proc/{pid}").exists()] == []
    launches = metrics.registry.get_sample_value("research_render_launch_seconds_count", {"when": "ahead"})
    assert launches is not None and launches >= 3
    assert metrics.registry.get_sample_value("research_render_browsers_warm") == 0


@needs_chromium[0]
@needs_chromium[1]
@needs_chromium[2]
async def test_a_warm_browser_that_died_or_went_stale_is_replaced_not_handed_out(
    playwright: Playwright, ca: TestCA, private_tmp: Path
) -> None:
    metrics = Metrics()
    pool = _pool(playwright, ca, 1, metrics=metrics)
    pool.start()
    try:
        await _until(lambda: pool.ready == 1)
        dead = pool._ready[0].launched
        dead_pid = int(dead.pid_file.read_text())
        kill_tree(dead.pid_file)
        await _until(functools.partial(_gone, dead_pid), 5)  # it died while idle
        watch = Watch()
        async with pool.browser(EgressBounds(10, 10**6), Limits(7, 2**30), watch) as held:
            page = held.context.pages[0] if held.context.pages else await held.context.new_page()
            await page.set_content("<p>alive</p>")
            assert await page.inner_text("p") == "alive"
        retired = "research_render_warm_retired_total"
        assert metrics.registry.get_sample_value(retired, {"reason": "dead"}) == 1
    finally:
        await pool.stop()
    stale_pool = _pool(playwright, ca, 1, metrics=metrics, max_idle_s=0.5)
    stale_pool.start()
    try:
        await _until(lambda: stale_pool.ready == 1)
        first = stale_pool._ready[0].launched.home
        await asyncio.sleep(1.0)
        async with stale_pool.browser(EgressBounds(10, 10**6), Limits(7, 2**30), Watch()) as held:
            assert held.context is not None
        retired = metrics.registry.get_sample_value("research_render_warm_retired_total", {"reason": "stale"})
        assert retired is not None and retired >= 1
        await _until(lambda: not first.exists(), 10)  # the stale one's profile is gone
    finally:
        await stale_pool.stop()
    assert _ours(private_tmp) == set()
    assert _profiles(private_tmp) == []


@needs_chromium[0]
@needs_chromium[1]
@needs_chromium[2]
async def test_an_idle_warm_browsers_proxy_opens_no_tunnel_before_a_render_takes_it(
    playwright: Playwright, ca: TestCA, private_tmp: Path
) -> None:
    pool = _pool(playwright, ca, 1)
    pool.start()
    try:
        await _until(lambda: pool.ready == 1)
        proxy = pool._ready[0].proxy
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(b"CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n")
        await writer.drain()
        status = await asyncio.wait_for(reader.readline(), 10)
        writer.close()
        assert status.split()[1] == b"403"
        assert proxy.log.tunnels == 0
    finally:
        await pool.stop()


@pytest_asyncio.fixture(loop_scope="module")
async def warm_world(ca: TestCA, playwright: Playwright) -> AsyncIterator[tuple[Traps, PageRenderer]]:
    assert CHROMIUM is not None
    pool = _pool(playwright, ca, 1)
    pool.start()
    pages = PageRenderer(playwright, BrowserLauncher(CHROMIUM, str(ca.bundle)), POLICY, resolver(), pool)
    try:
        async with hostile_world(ca) as traps:
            yield traps, pages
    finally:
        await pool.stop()


async def _render(pages: PageRenderer, traps: Traps, path: str, body: str) -> bytes:
    rendered = await pages.render(
        f"{traps.site}{path}", body.encode(), "text/html; charset=utf-8", bounds(traps.site_port), 12.0
    )
    return rendered.html


@needs_chromium[0]
@needs_chromium[1]
@needs_chromium[2]
async def test_through_warm_browsers_every_hostile_channel_reaches_nothing_and_apps_still_render(
    warm_world: tuple[Traps, PageRenderer],
) -> None:
    traps, pages = warm_world
    render = functools.partial(_render, pages, traps)
    hostile = channels(traps)
    everything = "".join(body.split("<body>", 1)[1].split("</body>", 1)[0] for body in hostile.values())
    heads = "".join(body.split("<head>", 1)[1].split("</head>", 1)[0] for body in hostile.values())
    html = await render("/page", f"<!doctype html><html><head>{heads}</head><body>{everything}</body></html>")
    assert traps.reached == []
    assert RAN.encode() in html
    for _ in range(2):  # the second on a browser launched after the first render
        assert APP_TEXT.encode() in await render("/shell", APP_SHELL)
    assert traps.reached == []
