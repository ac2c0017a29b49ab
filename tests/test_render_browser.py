"""The browser process: unprivileged, in a process group of its own, and gone after the render."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from playwright.async_api import Playwright

from jobs.render.browser import FLAGS, BrowserLauncher, Limits, Watch, find_chromium, tree_of
from tests.support.rendering import CHROMIUM, driver, needs_chromium
from tests.support.tls import TestCA


@pytest_asyncio.fixture(loop_scope="module")
async def playwright() -> AsyncIterator[Playwright]:
    async with driver() as running:
        yield running


def _status(pid: int, field: str) -> list[str]:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return line.split()[1:]
    return []


@needs_chromium[0]
@needs_chromium[1]
@needs_chromium[2]
async def test_the_browser_runs_unprivileged_in_its_own_group_and_its_whole_tree_dies_with_the_render(
    playwright: Playwright, ca: TestCA
) -> None:
    assert CHROMIUM is not None
    watch = Watch()
    launcher = BrowserLauncher(CHROMIUM, str(ca.bundle))
    async with launcher.launch(
        playwright, "http://127.0.0.1:9", Limits(seconds=10, memory_bytes=2**30), watch
    ) as context:
        page = context.pages[0] if context.pages else await context.new_page()
        await page.set_content("<p>idle</p>")
        for _ in range(50):
            if watch.pid is not None:
                break
            await asyncio.sleep(0.1)
        assert watch.pid is not None
        tree = tree_of(watch.pid)
        assert len(tree) >= 2  # the browser and at least one renderer or helper
        assert os.getpgid(watch.pid) == watch.pid
        for pid in tree:
            uids = _status(pid, "Uid")
            if not uids:
                continue
            if os.geteuid() == 0:
                assert set(uids) == {"65534"}, f"process {pid} runs as {uids}"
            else:
                assert "0" not in uids
            assert _status(pid, "NoNewPrivs") == ["1"]
        # Where user namespaces allow it (here they do, as root or not), Chromium's own sandbox runs.
        commands = [
            Path(f"/proc/{pid}/cmdline").read_bytes() for pid in tree if Path(f"/proc/{pid}").exists()
        ]
        assert launcher.sandboxed is not None
        assert any(b"--no-sandbox" in command for command in commands) == (not launcher.sandboxed)
    await asyncio.sleep(0.2)
    alive = [pid for pid in tree if Path(f"/proc/{pid}").exists() and _status(pid, "State")[:1] != ["Z"]]
    assert alive == []


def test_every_way_around_the_proxy_has_its_flag() -> None:
    flags = " ".join(FLAGS)
    for needed in (
        "--disable-quic",
        "disable_non_proxied_udp",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-breakpad",
        "--disable-extensions",
        "--block-new-web-contents",
        "--safebrowsing-disable-auto-update",
        "WebTransport",
    ):
        assert needed in flags, needed


def test_a_browser_that_is_not_there_is_a_configuration_error(tmp_path: Path) -> None:
    from jobs.render.browser import BrowserMissing

    with pytest.raises(BrowserMissing):
        find_chromium(str(tmp_path / "no-such-chromium"))
    with pytest.raises(BrowserMissing):
        find_chromium("no-such-browser-on-path")
