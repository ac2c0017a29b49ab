"""What the dashboard's records add to a result write: one transaction timed with and without them.

Runs against a private redis-server on loopback TCP. Three transactions, taken in turn so that
whatever else the machine is doing hits them alike:

- result: the result key and the wake-up list (``ResultStore.write`` without the dashboard);
- + line: and the dashboard line (LPUSH, LTRIM);
- + line + bucket: and the minute bucket's EVAL, which is what workers write.

    python bench/dashboard_writes.py [--writes 2000] [--rounds 5]

Anchor (issue 14): the chart buckets may cost a round trip (bench/roundtrip.py, p50 <= 3 ms) at
most 10 %; this prints the bucket's cost beside that budget.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._support import private_redis
from worker.serialization import dumps
from worker.state import activity, keys

QUEUE = "bench:dashboard-writes"
ROUNDTRIP_P50_BUDGET_MS = 3.0


async def write(redis: aioredis.Redis, index: int, variant: str) -> float:
    result = {"ok": True, "tool": "fetch_page", "report_id": "r-1", "job_id": f"j-{index}"}
    result |= {"url": f"https://example.org/{index}", "text": "x" * 2000, "cached": False}
    payload = dumps(result)
    started = time.perf_counter()
    async with redis.pipeline(transaction=True) as tx:
        tx.set(keys.result(f"j-{index}"), payload, px=60_000)
        tx.delete(keys.done(f"j-{index}"))
        tx.rpush(keys.done(f"j-{index}"), payload)
        tx.pexpire(keys.done(f"j-{index}"), 60_000)
        if variant != "result":
            activity.record(tx, QUEUE, result, "ok", 12.5, activity.JobRun("w-1", 1, 0.8))
            if variant == "+ line":
                tx.command_stack.pop()  # the same transaction without the bucket's EVAL
        await tx.execute()
    return time.perf_counter() - started


async def main(writes: int, rounds: int) -> None:
    server = private_redis()
    redis = aioredis.Redis.from_url(server.url)
    variants = ("result", "+ line", "+ line + bucket")
    timings: dict[str, list[float]] = {variant: [] for variant in variants}
    try:
        await redis.zadd(QUEUE, {f"queued-{i}": i for i in range(50)})
        for index in range(200):  # warm-up: connections, the script cache
            await write(redis, index, variants[index % 3])
        # Round robin, one write of each in turn: a burst of load elsewhere touches all three.
        for index in range(writes * rounds):
            for variant in variants:
                timings[variant].append(await write(redis, index, variant))
        medians = {variant: statistics.median(values) * 1000 for variant, values in timings.items()}
        print(f"result write transaction, {writes * rounds} per variant, private Redis on loopback TCP")
        for variant in variants:
            ordered = sorted(timings[variant])
            p90 = ordered[int(0.9 * (len(ordered) - 1))] * 1000
            print(f"  {variant:18s} p50 {medians[variant]:6.3f} ms  p90 {p90:6.3f} ms")
        bucket = medians["+ line + bucket"] - medians["+ line"]
        share = bucket / ROUNDTRIP_P50_BUDGET_MS * 100
        print(
            f"  the bucket adds {bucket * 1000:.0f} us a write: {share:.1f} % of the 3 ms round-trip budget "
            f"({'within' if share <= 10 else 'OVER'} the 10 % anchor)"
        )
    finally:
        await redis.aclose()
        server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--writes", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.writes, args.rounds))
