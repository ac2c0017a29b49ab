"""Rendering on one render worker, before and after the warm pool, beside a cold browser.

A script-built page (tests/support/hostile_render.py's APP_SHELL: a mount point, a module bundle,
and text fetched by the app from its own API after load) served over TLS on loopback; a fetch
worker and one render worker (``run --render``: two browsers at a time) in this process, a private
Redis. In one run:

- ANCHOR: ``chromium --headless --dump-dom`` of the same page, launched from nothing each time
  (fresh profile, the unprivileged user, the render's flags), p50 and p99;
- time to the page's text, p50 and p99, end to end through the queue (client, fetch worker, render
  queue, render worker, browser, reader): the static fetch (the shell only), then ``render: true``
  with the warm pool off (``RESEARCH_RENDER_WARM=0``, before) and on (the default, after); the
  target is a render p50 at most 0.5x the anchor's;
- renders per second, one after another and two at a time (the render worker's slots);
- resident memory (PSS of the browser's tree) of each idle warm slot beside one launched browser's;
- peak memory per render, and the chromium processes and render profiles left once both workers
  stopped (none).

Usage: ``python bench/render.py [--renders N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import ipaddress
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._support import peak_rss_mb, percentile, private_redis  # noqa: E402
from jobs.render import page as render_page  # noqa: E402
from jobs.render.browser import (  # noqa: E402
    FLAGS,
    Launched,
    Limits,
    discard,
    resident_bytes,
    tree_of,
)
from jobs.render.pool import WarmPool  # noqa: E402
from tests.support.hostile_render import APP_TEXT, hostile_world, resolver  # noqa: E402
from tests.support.rendering import POLICY  # noqa: E402
from tests.support.tls import make_ca  # noqa: E402
from tests.support.workers import running_worker  # noqa: E402
from worker.client import ResearchClient  # noqa: E402
from worker.config import RenderMode, Settings  # noqa: E402
from worker.guardian.egress_proxy import EgressBounds, EgressProxy  # noqa: E402
from worker.settings import render_tools, render_worker_settings, tools  # noqa: E402

PEAKS: list[int] = []
PAUSE_S = 1.0
IDLE_S = 8.0  # the age at which idle browsers are measured: past their start-up's own work


def _record_peaks() -> None:
    original = render_page.PageRenderer.render

    async def measured(self: Any, *args: Any, **kwargs: Any) -> Any:
        rendered = await original(self, *args, **kwargs)
        PEAKS.append(rendered.peak_memory_bytes)
        return rendered

    render_page.PageRenderer.render = measured  # type: ignore[method-assign]


async def _timed(client: ResearchClient, url: str, render: bool) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    result = await client.run(
        "fetch_page",
        {"report_id": f"bench-{uuid.uuid4().hex[:8]}", "url": url, "fresh": True, "render": render},
    )
    return time.perf_counter() - started, result


def _cold_dump_dom(chromium: str, url: str) -> float:
    """The anchor: ``chromium --headless --dump-dom`` of the page, launched from nothing (a fresh
    profile, as the unprivileged user a render runs as), with the render's flags where they apply."""
    profile = Path(tempfile.mkdtemp(prefix="bench-cold-"))
    profile.chmod(0o777)
    command = [
        chromium,
        "--headless",
        f"--user-data-dir={profile}",
        "--ignore-certificate-errors",  # cheaper than the render's trust store: the anchor is not slowed
        *FLAGS,  # the page is on 127.0.0.1, which the resolver rules leave alone
        "--dump-dom",
        url,
    ]
    if os.geteuid() == 0:
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", *command]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, timeout=60, check=False)
    seconds = time.perf_counter() - started
    shutil.rmtree(profile, ignore_errors=True)
    assert b"app" in done.stdout, done.stderr[-500:]
    return seconds


def _tree_mb(launched: Launched) -> float:
    pid = int(launched.pid_file.read_text())
    return resident_bytes(tree_of(pid)) / 2**20


async def _idle_memory(tool: Any, settings: Settings) -> tuple[list[float], float]:
    """PSS of each idle warm browser's tree, and of one browser launched as a cold render launches
    it (the same launcher, a proxy of its own), measured in one pass once all are IDLE_S old."""
    pool = tool._browsers
    assert isinstance(pool, WarmPool)
    for _ in range(600):
        if pool.ready >= min(settings.render_warm, 2):
            break
        await asyncio.sleep(0.1)
    async with EgressProxy(POLICY, EgressBounds(0, 0, frozenset())) as proxy:
        launched = await pool._launcher.open(tool._playwright, proxy.address, Limits(20.0, 2**30))
        try:
            await asyncio.sleep(IDLE_S)
            warm = [_tree_mb(w.launched) for w in list(pool._ready)]
            one = _tree_mb(launched)
        finally:
            await discard(launched)
    return warm, one


async def _renders(settings: Settings, url: str, renders: int, dns: Any) -> dict[str, Any]:
    tool_list = list(render_tools(dns))
    async with (
        running_worker(render_worker_settings(settings), tool_list),
        running_worker(settings, list(tools(dns))),
        ResearchClient(settings=dataclasses.replace(settings), wait_s=60) as client,
    ):
        await _timed(client, url, False)  # warm: connections, imports
        static = []
        for _ in range(max(20, renders)):
            seconds, result = await _timed(client, url, False)
            assert result["ok"] and result["script_shell"] and APP_TEXT not in result["text"], result
            static.append(seconds)
        memory = await _idle_memory(tool_list[0], settings) if settings.render_warm else None
        rendered = []
        for _ in range(renders):
            await asyncio.sleep(PAUSE_S)  # calls that come one at a time, as an agent's do
            seconds, result = await _timed(client, url, True)
            assert result["ok"] and result["rendered"] and APP_TEXT in result["text"], result
            rendered.append(seconds)
        pairs = max(2, renders // 2) * 2
        slots = asyncio.Semaphore(2)  # as many in flight as the render worker has slots

        async def in_a_slot() -> tuple[float, dict[str, Any]]:
            async with slots:
                return await _timed(client, url, True)

        started = time.perf_counter()
        done = await asyncio.gather(*[in_a_slot() for _ in range(pairs)])
        two_at_a_time = pairs / (time.perf_counter() - started)
        assert all(r["ok"] for _, r in done), [r for _, r in done if not r["ok"]]
    return {"static": static, "rendered": rendered, "two": two_at_a_time, "memory": memory}


def _ours(folder: Path) -> int:
    """Live processes started with a profile in ``folder`` (chromium and its launcher)."""
    count = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                count += str(folder).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
    return count


async def main(renders: int) -> int:
    chromium = shutil.which("chromium")
    if chromium is None or shutil.which("certutil") is None:
        print("chromium and certutil are needed (apt-get install chromium libnss3-tools); nothing measured")
        return 0
    _record_peaks()
    folder = Path(tempfile.mkdtemp())
    ca = make_ca(folder)
    redis = private_redis()
    settings = Settings(
        redis_url=redis.url,
        queue_name="bench-render:queue",
        guardian_allow_cidrs=(ipaddress.ip_network("127.0.0.1/32"),),
        ca_bundle=str(ca.bundle),
        url_menu=False,
        render=RenderMode.ON,
        fetch_budget=10_000,
        render_budget=10_000,
        fetch_timeout_s=20.0,
    )
    dns = resolver()
    # The renders' folders go in a folder of this run's (other processes render at the same time).
    private = Path(tempfile.mkdtemp(prefix="bench-render-"))
    private.chmod(0o711)  # the unprivileged browser reaches its profile inside
    tempfile.tempdir = str(private)
    try:
        async with hostile_world(ca) as site:
            url = f"{site.site}/shell"
            cold = []
            for _ in range(renders):
                cold.append(await asyncio.to_thread(_cold_dump_dom, chromium, url))
            before = await _renders(dataclasses.replace(settings, render_warm=0), url, renders, dns)
            peaks_before = list(PEAKS)
            PEAKS.clear()
            after = await _renders(settings, url, renders, dns)
            assert site.reached == []
    finally:
        redis.stop()
        shutil.rmtree(folder, ignore_errors=True)
    await asyncio.sleep(1.0)
    leaked_profiles = len(list(private.glob("research-render-*")))
    leaked_browsers = _ours(private)
    shutil.rmtree(private, ignore_errors=True)
    ms = lambda values, q: percentile(values, q) * 1000  # noqa: E731
    anchor = percentile(cold, 50)
    print(f"time to text, shell page ({renders} renders each, end to end; one at a time, {PAUSE_S} s apart):")
    print(f"  {'':44} {'p50':>10} {'p99':>10}  {'p50 / anchor':>12}")
    rows = [
        ("ANCHOR cold chromium --headless --dump-dom", cold),
        ("static fetch (shell only)", after["static"]),
        ("render: true, warm pool off (before)", before["rendered"]),
        ("render: true, warm pool on (after)", after["rendered"]),
    ]
    for name, values in rows:
        print(
            f"  {name:44} {ms(values, 50):8.1f} ms {ms(values, 99):8.1f} ms  "
            f"{percentile(values, 50) / anchor:11.2f}x"
        )
    target = percentile(after["rendered"], 50) <= 0.5 * anchor
    print(f"  target render p50 <= 0.5x the anchor: {'met' if target else 'NOT met'}")
    for name, result in (("before", before), ("after", after)):
        print(
            f"renders per second, one render worker ({name}): "
            f"{1 / statistics.fmean(result['rendered']):.2f} one at a time, {result['two']:.2f} two at a time"
        )
    warm, one = after["memory"]
    fits = max(warm) <= one * 1.05
    print(
        f"resident memory (PSS of the browser tree, all {IDLE_S:.0f} s idle, one pass) per idle warm slot: "
        f"{', '.join(f'{m:.0f} MB' for m in warm)}; ANCHOR one launched browser: {one:.0f} MB "
        f"(target: at most one launched browser, within 5% for PSS noise: {'met' if fits else 'NOT met'})"
    )
    for name, values in (("before", peaks_before), ("after", PEAKS)):
        peaks = sorted(p / 2**20 for p in values)
        print(
            f"peak memory per render ({name}, browser tree, PSS): p50 {percentile(peaks, 50):.0f} MB, "
            f"max {max(peaks):.0f} MB over {len(peaks)} renders"
        )
    print(f"this process (all workers) VmHWM {peak_rss_mb(os.getpid()):.0f} MB")
    print(
        f"left behind after both workers stopped: {leaked_browsers} browser processes, "
        f"{leaked_profiles} render folders"
    )
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--renders", type=int, default=12)
    raise SystemExit(asyncio.run(main(parser.parse_args().renders)))
