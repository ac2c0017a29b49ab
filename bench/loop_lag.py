"""The largest event-loop stall while build_document reduces hostile 2 MiB pages, beside the stall
the same page causes when reduced in one blocking call. Target (issue 4): at most 20 ms.

A ticker coroutine sleeps 1 ms at a time next to the reduction and records the longest gap
between its wake-ups; that gap, less its own 1 ms, is the stall any other job on the worker would
feel. The pages come from tests/support/hostile_pages.py and are generated in memory.
Usage: ``python bench/loop_lag.py [--size BYTES] [--budget SECONDS]``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jobs.reader.charset import decode  # noqa: E402
from jobs.reader.document import build_document  # noqa: E402
from jobs.reader.main_content import select_main  # noqa: E402
from jobs.reader.reduce import reduce_all  # noqa: E402
from tests.support.hostile_pages import PAGES, SIZE  # noqa: E402

TARGET_MS = 20.0
TICK_S = 0.001


async def _ticker(stop: asyncio.Event, worst: list[float]) -> None:
    last = time.perf_counter()
    while not stop.is_set():
        await asyncio.sleep(TICK_S)
        now = time.perf_counter()
        worst[0] = max(worst[0], now - last - TICK_S)
        last = now


async def stall_while_reducing(body: bytes, budget: float) -> tuple[float, float, bool]:
    stop = asyncio.Event()
    worst = [0.0]
    ticker = asyncio.create_task(_ticker(stop, worst))
    await asyncio.sleep(TICK_S * 2)
    started = time.perf_counter()
    document = await build_document(
        body,
        "text/html",
        "https://example.org/",
        extract="main",
        max_chars=40_000,
        cpu_budget_s=budget,
        body_truncated=False,
    )
    elapsed = time.perf_counter() - started
    await asyncio.sleep(TICK_S * 2)
    stop.set()
    await ticker
    return worst[0], elapsed, document.truncated


async def idle_stall(seconds: float = 1.0) -> float:
    stop = asyncio.Event()
    worst = [0.0]
    ticker = asyncio.create_task(_ticker(stop, worst))
    await asyncio.sleep(seconds)
    stop.set()
    await ticker
    return worst[0]


def blocking_call(body: bytes) -> float:
    started = time.perf_counter()
    select_main(reduce_all(decode(body, None, "html").text))
    return time.perf_counter() - started


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--size", type=int, default=SIZE)
    parser.add_argument("--budget", type=float, default=3.0, help="the reducer's CPU budget per page")
    args = parser.parse_args()
    print(f"hostile pages of {args.size:,} bytes, CPU budget {args.budget} s, target stall <= {TARGET_MS} ms")
    idle = await idle_stall()
    print(f"the ticker alone (machine noise): largest gap {idle * 1000:.1f} ms")
    print(f"{'page':34} {'stall ms':>9} {'took s':>7} {'truncated':>9} {'one blocking call ms':>21}")
    worst_stall = 0.0
    for name, make in PAGES.items():
        body = make(args.size)
        stall, elapsed, truncated = await stall_while_reducing(body, args.budget)
        blocking = blocking_call(body)
        worst_stall = max(worst_stall, stall)
        print(f"{name:34} {stall * 1000:9.1f} {elapsed:7.2f} {truncated!s:>9} {blocking * 1000:21.0f}")
    verdict = "meets" if worst_stall * 1000 <= TARGET_MS else "misses"
    print(f"largest stall {worst_stall * 1000:.1f} ms: {verdict} the {TARGET_MS:.0f} ms target")


if __name__ == "__main__":
    asyncio.run(main())
