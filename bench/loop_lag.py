"""The largest event-loop stall while build_document reads hostile 2 MiB bodies, beside the stall
the same body causes when read in one blocking call. Target (issues 4 and 19): at most 20 ms.

A ticker coroutine sleeps 1 ms at a time next to the reading and records the longest gap between
its wake-ups; that gap, less its own 1 ms, is the stall any other job on the worker would feel.
Each body is read ``--runs`` times and the smallest of its largest gaps is reported: a stall the
reading causes shows in every run, while another process taking the CPU for a moment does not.
The bodies are the hostile HTML pages of tests/support/hostile_pages.py (served as text/html) and
the bodies of tests/support/hostile_bodies.py aimed at decoding and invisible-character
stripping, each served as every text type (HTML, JSON, plain text, XML, and undeclared), all
generated in memory. Usage: ``python bench/loop_lag.py [--size BYTES] [--budget SECONDS] [--runs N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jobs.reader.charset import decode  # noqa: E402
from jobs.reader.content_types import HTML_TYPES, parse_content_type, sniff  # noqa: E402
from jobs.reader.document import build_document  # noqa: E402
from jobs.reader.hidden import strip_invisible  # noqa: E402
from jobs.reader.html.reduce import reduce_all  # noqa: E402
from jobs.reader.main_content import select_main  # noqa: E402
from tests.support.hostile_bodies import BODIES, TEXT_TYPES  # noqa: E402
from tests.support.hostile_pages import PAGES, SIZE  # noqa: E402

TARGET_MS = 20.0
TICK_S = 0.001

Case = tuple[str, str | None, Callable[[int], bytes]]


async def _ticker(stop: asyncio.Event, worst: list[float]) -> None:
    last = time.perf_counter()
    while not stop.is_set():
        await asyncio.sleep(TICK_S)
        now = time.perf_counter()
        worst[0] = max(worst[0], now - last - TICK_S)
        last = now


async def stall_while_reading(
    body: bytes, content_type: str | None, budget: float
) -> tuple[float, float, bool]:
    stop = asyncio.Event()
    worst = [0.0]
    ticker = asyncio.create_task(_ticker(stop, worst))
    await asyncio.sleep(TICK_S * 2)
    started = time.perf_counter()
    document = await build_document(
        body,
        content_type,
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


def blocking_call(body: bytes, content_type: str | None) -> float:
    """The same reading done in one call: decode, then reduce (HTML) or strip (other text)."""
    parsed = parse_content_type(content_type)
    essence = parsed.essence if parsed is not None else sniff(body)
    flavor = "html" if essence in HTML_TYPES else "xml" if essence.endswith("xml") else "other"
    started = time.perf_counter()
    text = decode(body, None, flavor).text
    if flavor == "html":
        select_main(reduce_all(text))
    else:
        strip_invisible(text)
    return time.perf_counter() - started


def cases() -> list[Case]:
    pages: list[Case] = [(name, "text/html", make) for name, make in PAGES.items()]
    bodies: list[Case] = [(name, kind, make) for name, make in BODIES.items() for kind in TEXT_TYPES]
    return pages + bodies


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--size", type=int, default=SIZE)
    parser.add_argument("--budget", type=float, default=3.0, help="the reader's CPU budget per body")
    parser.add_argument("--runs", type=int, default=3, help="readings of each body; the least stall is shown")
    args = parser.parse_args()
    print(
        f"hostile bodies of {args.size:,} bytes, CPU budget {args.budget} s, "
        f"target stall <= {TARGET_MS:.0f} ms"
    )
    idle = await idle_stall()
    print(f"the ticker alone (machine noise): largest gap {idle * 1000:.1f} ms; {args.runs} runs per body")
    header = f"{'body':34} {'served as':18} {'stall ms':>9} {'target ms':>9} {'took s':>7} {'truncated':>9}"
    print(f"{header} {'one blocking call ms':>21}")
    worst_stall, worst_case = 0.0, ""
    for name, content_type, make in cases():
        body = make(args.size)
        runs = [await stall_while_reading(body, content_type, args.budget) for _ in range(max(1, args.runs))]
        stall, elapsed, truncated = min(runs)
        blocking = blocking_call(body, content_type)
        served = content_type or "(undeclared)"
        if stall > worst_stall:
            worst_stall, worst_case = stall, f"{name}, {served}"
        print(
            f"{name:34} {served:18} {stall * 1000:9.1f} {TARGET_MS:9.0f} {elapsed:7.2f} {truncated!s:>9} "
            f"{blocking * 1000:21.0f}"
        )
    verdict = "meets" if worst_stall * 1000 <= TARGET_MS else "misses"
    print(
        f"largest stall {worst_stall * 1000:.1f} ms ({worst_case}): {verdict} the {TARGET_MS:.0f} ms anchor"
    )


if __name__ == "__main__":
    asyncio.run(main())
