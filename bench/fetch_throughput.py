"""fetch_page throughput for one worker process, beside a bare aiohttp GET plus the same reducer.

Both sides fetch the same mix of 20-500 KB article pages from a local TLS server (its own process)
with the same concurrency and reduce them with the same code (jobs.reader.document.build_document,
extract="main"). The worker side adds everything a job is: the queue, the envelope, the budget
charge, the guardian, the result write and the client's wake-up. Then 50 concurrent 2 MiB pages
on a worker allowed 50 jobs at once, for its peak memory.

    python bench/fetch_throughput.py [--jobs 600] [--concurrency 16]

Targets (issue 4): the worker reaches at least 80 % of the bare figure; peak worker memory with 50
concurrent 2 MiB pages stays under 300 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._support import (
    free_port,
    peak_rss_mb,
    private_redis,
    start_module,
    stop,
    wait_for_health,
    wait_for_port,
    write_test_ca,
)
from jobs.reader.document import build_document
from worker.client import ResearchClient
from worker.config import Settings


async def bare(port: int, bundle: Path, jobs: int, concurrency: int) -> float:
    context = ssl.create_default_context(cafile=str(bundle))
    limit = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session:

        async def one(i: int) -> None:
            async with limit:
                url = f"https://127.0.0.1:{port}/page/{i}"
                async with session.get(url) as response:
                    body = await response.read()
                    content_type = response.headers.get("Content-Type")
                await build_document(
                    body,
                    content_type,
                    url,
                    extract="main",
                    max_chars=40_000,
                    cpu_budget_s=3.0,
                    body_truncated=False,
                )

        started = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(jobs)))
        return time.perf_counter() - started


async def through_worker(url: str, queue: str, port: int, jobs: int, path: str = "page") -> float:
    settings = Settings(redis_url=url, queue_name=queue)
    async with ResearchClient(settings=settings, wait_s=600) as client:
        started = time.perf_counter()
        ids = [
            await client.enqueue(
                "fetch_page",
                {"report_id": f"tp-{path}-{i // 20}", "url": f"https://127.0.0.1:{port}/{path}/{i}"},
            )
            for i in range(jobs)
        ]
        results = [await client.wait(job_id) for job_id in ids]
        elapsed = time.perf_counter() - started
    failed = [r for r in results if not r.get("ok")]
    if failed:
        raise SystemExit(f"{len(failed)} jobs failed, e.g. {failed[0]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=600)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        bundle = write_test_ca(Path(tmp))
        port = free_port()
        server = start_module("bench._tls_server", {}, args=[tmp, str(port)])
        wait_for_port(port)
        redis = private_redis()
        env = {
            "REDIS_URL": redis.url,
            "RESEARCH_GUARDIAN_ALLOW_CIDRS": "127.0.0.1/32",
            "RESEARCH_CA_BUNDLE": str(bundle),
            "RESEARCH_URL_MENU": "off",
            "RESEARCH_LOG_LEVEL": "WARNING",
        }
        try:
            asyncio.run(bare(port, bundle, 40, args.concurrency))  # warm the server's caches
            bare_s = asyncio.run(bare(port, bundle, args.jobs, args.concurrency))

            queue = "tp:throughput"
            worker = start_module(
                "worker.cli",
                {**env, "RESEARCH_QUEUE": queue, "RESEARCH_MAX_JOBS": str(args.concurrency)},
                args=["run"],
            )
            try:
                wait_for_health(redis.url, queue, 1)
                worker_s = asyncio.run(through_worker(redis.url, queue, port, args.jobs))
            finally:
                stop(worker)

            queue = "tp:memory"
            worker = start_module(
                "worker.cli", {**env, "RESEARCH_QUEUE": queue, "RESEARCH_MAX_JOBS": "50"}, args=["run"]
            )
            try:
                wait_for_health(redis.url, queue, 1)
                asyncio.run(through_worker(redis.url, queue, port, 50, path="big"))
                rss = peak_rss_mb(worker.pid)
            finally:
                stop(worker)
        finally:
            redis.stop()
            stop(server)

    bare_rate = args.jobs / bare_s
    worker_rate = args.jobs / worker_s
    share = worker_rate / bare_rate
    print(
        f"fetch throughput, {args.jobs} pages of 20-500 KB over TLS, extract=main, "
        f"concurrency {args.concurrency}"
    )
    print(f"  bare aiohttp GET + reducer, one process: {bare_rate:7.1f} pages/s")
    print(f"  research-worker, one worker process:     {worker_rate:7.1f} jobs/s  ({share:.0%} of bare)")
    print(f"  peak worker RSS, 50 concurrent 2 MiB pages: {rss:.0f} MB")
    print(
        f"  targets: >= 80 % of bare ({'met' if share >= 0.8 else 'MISSED'}), "
        f"< 300 MB ({'met' if rss < 300 else 'MISSED'})"
    )


if __name__ == "__main__":
    main()
