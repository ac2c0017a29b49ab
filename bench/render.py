"""Rendering on one render worker, beside the static fetch of the same page.

A script-built page (tests/support/hostile_render.py's APP_SHELL: a mount point, a module bundle,
and text fetched by the app from its own API after load) served over TLS on loopback; a fetch
worker and one render worker (``run --render``: two browsers at a time) in this process, a private
Redis. Figures:

- time to the page's text, p50 and p99: ``render: true`` (the text the app writes) against the static
  fetch of the same page (which gets only the shell, ``script_shell: true``), each call end to end
  through the queue (client, fetch worker, render queue, render worker, browser, reader);
- renders per second, one after another and two at a time (the render worker's slots);
- peak memory per render: the browser's whole process tree (proportional set size, the watchdog's
  measure), p50 and max, and the render worker process's own peak (VmHWM).

Anchor: the static fetch is the floor; a render launches a fresh browser per page by design (fresh
profile, its own process group and limits), which is most of its cost.

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
from tests.support.hostile_render import APP_TEXT, hostile_world, resolver  # noqa: E402
from tests.support.tls import make_ca  # noqa: E402
from tests.support.workers import running_worker  # noqa: E402
from worker.client import ResearchClient  # noqa: E402
from worker.config import RenderMode, Settings  # noqa: E402
from worker.settings import render_tools, render_worker_settings, tools  # noqa: E402

PEAKS: list[int] = []


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


async def main(renders: int) -> int:
    if shutil.which("chromium") is None or shutil.which("certutil") is None:
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
    try:
        async with (
            hostile_world(ca) as site,
            running_worker(render_worker_settings(settings), list(render_tools(dns))),
            running_worker(settings, list(tools(dns))),
            ResearchClient(settings=dataclasses.replace(settings), wait_s=60) as client,
        ):
            url = f"{site.site}/shell"
            await _timed(client, url, False)  # warm: connections, imports
            static = []
            for _ in range(max(20, renders)):
                seconds, result = await _timed(client, url, False)
                assert result["ok"] and result["script_shell"] and APP_TEXT not in result["text"], result
                static.append(seconds)
            rendered = []
            for _ in range(renders):
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
            assert site.reached == []
    finally:
        redis.stop()
        shutil.rmtree(folder, ignore_errors=True)
    ms = lambda values, q: percentile(values, q) * 1000  # noqa: E731
    print(f"time to text, shell page ({renders} renders, {len(static)} static fetches, end to end):")
    print(f"  {'':28} {'p50':>10} {'p99':>10}")
    print(f"  {'static fetch (shell only)':28} {ms(static, 50):8.1f} ms {ms(static, 99):8.1f} ms")
    print(f"  {'render: true (its text)':28} {ms(rendered, 50):8.1f} ms {ms(rendered, 99):8.1f} ms")
    print(f"  render / static at p50: {percentile(rendered, 50) / percentile(static, 50):.0f}x")
    print(
        f"renders per second, one render worker: {1 / statistics.fmean(rendered):.2f} one at a time, "
        f"{two_at_a_time:.2f} two at a time"
    )
    peaks = sorted(p / 2**20 for p in PEAKS)
    print(
        f"peak memory per render (browser tree, PSS): p50 {percentile(peaks, 50):.0f} MB, "
        f"max {max(peaks):.0f} MB over {len(peaks)} renders; this process (both workers) VmHWM "
        f"{peak_rss_mb(os.getpid()):.0f} MB"
    )
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--renders", type=int, default=12)
    raise SystemExit(asyncio.run(main(parser.parse_args().renders)))
