"""Enqueue-to-result latency for a job that does no network I/O, and an idle worker's Redis load.

Runs against a private redis-server on loopback TCP, with the worker in its own process, first ours
(wake-up list, blocking wait in the client), then plain arq with its default settings (0.5 s poll
in the worker, 0.5 s poll in Job.result) in the same run.

    python bench/roundtrip.py [--jobs 1000] [--arq-jobs 60] [--idle-s 10]

Targets (issue 2): p50 <= 3 ms, p99 <= 15 ms, idle <= 5 Redis commands per second per worker.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._support import (
    commands_processed,
    percentile,
    private_redis,
    start_module,
    stop,
    summary_ms,
    wait_for_health,
)
from worker.client import ResearchClient
from worker.config import Settings


def idle_rate(url: str, seconds: float) -> float:
    before = commands_processed(url)
    time.sleep(seconds)
    after = commands_processed(url)
    # Each INFO call is itself a command; the first one is counted in `after`.
    return (after - before - 1) / seconds


async def ours(url: str, queue: str, jobs: int) -> list[float]:
    settings = Settings(redis_url=url, queue_name=queue)
    latencies = []
    async with ResearchClient(settings=settings, wait_s=10) as client:
        for i in range(jobs + 20):
            started = time.perf_counter()
            result = await client.call("noop", {"report_id": f"bench-{i % 50}"})
            elapsed = time.perf_counter() - started
            assert result["ok"], result
            if i >= 20:  # warm-up excluded
                latencies.append(elapsed)
    return latencies


async def arq_default(url: str, queue: str, jobs: int) -> list[float]:
    from arq.connections import RedisSettings, create_pool

    pool = await create_pool(RedisSettings.from_dsn(url), default_queue_name=queue)
    latencies = []
    try:
        for i in range(jobs + 2):
            started = time.perf_counter()
            job = await pool.enqueue_job("arq_noop", _job_id=uuid.uuid4().hex)
            assert job is not None
            await job.result(timeout=10)
            elapsed = time.perf_counter() - started
            if i >= 2:
                latencies.append(elapsed)
    finally:
        await pool.aclose()
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--arq-jobs", type=int, default=60)
    parser.add_argument("--idle-s", type=float, default=10.0)
    args = parser.parse_args()

    server = private_redis()
    try:
        rows = []
        for flavor, jobs in (("research-worker", args.jobs), ("arq-default", args.arq_jobs)):
            queue = f"bench:{flavor}"
            proc = start_module(
                "bench._noop_worker",
                {"REDIS_URL": server.url, "RESEARCH_QUEUE": queue, "BENCH_FLAVOR": flavor},
            )
            try:
                if flavor == "research-worker":
                    wait_for_health(server.url, queue, 1)
                else:
                    time.sleep(2.0)
                time.sleep(1.0)
                idle = idle_rate(server.url, args.idle_s)
                runner = ours if flavor == "research-worker" else arq_default
                latencies = asyncio.run(runner(server.url, queue, jobs))
            finally:
                stop(proc)
            rows.append((flavor, latencies, idle))

        print("enqueue -> result latency, no-op job, one worker process, private Redis on loopback TCP")
        for flavor, latencies, idle in rows:
            print(f"  {flavor:16s} {summary_ms(latencies)}  idle {idle:5.2f} Redis cmds/s/worker")
        mine = rows[0][1]
        p50, p99 = percentile(mine, 50) * 1000, percentile(mine, 99) * 1000
        print(
            f"  targets: p50 <= 3 ms ({'met' if p50 <= 3 else 'MISSED'}), "
            f"p99 <= 15 ms ({'met' if p99 <= 15 else 'MISSED'}), "
            f"idle <= 5 cmds/s ({'met' if rows[0][2] <= 5 else 'MISSED'})"
        )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
