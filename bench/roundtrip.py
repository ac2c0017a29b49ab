"""Enqueue-to-result latency for a job that does no network I/O, and an idle worker's Redis load.

Runs against a private redis-server on loopback TCP, with the worker in its own process, first ours
(wake-up list, blocking wait in the client), then ours with tracing on (OTEL_EXPORTER_OTLP_ENDPOINT
at an OTLP receiver on loopback in this process, each job carrying a traceparent), then plain arq
with its default settings (0.5 s poll in the worker, 0.5 s poll in Job.result) in the same run.

    python bench/roundtrip.py [--jobs 1000] [--arq-jobs 60] [--idle-s 10]

Targets (issue 2): p50 <= 3 ms, p99 <= 15 ms, idle <= 5 Redis commands per second per worker.
Tracing (issue 40): off costs nothing measurable; on is printed beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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


@contextmanager
def otlp_sink() -> Iterator[tuple[str, list[int]]]:
    """An OTLP/HTTP endpoint on loopback that takes every export and counts its bytes."""
    received: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(len(self.rfile.read(int(self.headers.get("Content-Length", "0")))))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


async def ours(url: str, queue: str, jobs: int, traced: bool = False) -> list[float]:
    settings = Settings(redis_url=url, queue_name=queue)
    latencies = []
    extra = {"traceparent": TRACEPARENT} if traced else {}
    async with ResearchClient(settings=settings, wait_s=10) as client:
        for i in range(jobs + 20):
            started = time.perf_counter()
            result = await client.call("noop", {"report_id": f"bench-{i % 50}", **extra})
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
    sink = otlp_sink()
    otlp_url, exports = sink.__enter__()
    try:
        rows = []
        flavors = (("research-worker", args.jobs), ("tracing on", args.jobs), ("arq-default", args.arq_jobs))
        for flavor, jobs in flavors:
            queue = f"bench:{flavor.replace(' ', '-')}"
            env = {"REDIS_URL": server.url, "RESEARCH_QUEUE": queue, "BENCH_FLAVOR": flavor}
            if flavor == "tracing on":
                env["OTEL_EXPORTER_OTLP_ENDPOINT"] = otlp_url
            proc = start_module("bench._noop_worker", env)
            try:
                if flavor != "arq-default":
                    wait_for_health(server.url, queue, 1)
                else:
                    time.sleep(2.0)
                time.sleep(1.0)
                idle = idle_rate(server.url, args.idle_s)
                if flavor == "arq-default":
                    latencies = asyncio.run(arq_default(server.url, queue, jobs))
                else:
                    latencies = asyncio.run(ours(server.url, queue, jobs, traced=flavor == "tracing on"))
            finally:
                stop(proc)
            rows.append((flavor, latencies, idle))

        print("enqueue -> result latency, no-op job, one worker process, private Redis on loopback TCP")
        for flavor, latencies, idle in rows:
            print(f"  {flavor:16s} {summary_ms(latencies)}  idle {idle:5.2f} Redis cmds/s/worker")
        off_p50, on_p50 = percentile(rows[0][1], 50) * 1000, percentile(rows[1][1], 50) * 1000
        print(
            f"  tracing: off p50 {off_p50:.2f} ms, on p50 {on_p50:.2f} ms ({on_p50 / off_p50:.2f}x); "
            f"the receiver took {len(exports)} exports, {sum(exports):,} bytes"
        )
        mine = rows[0][1]
        p50, p99 = percentile(mine, 50) * 1000, percentile(mine, 99) * 1000
        print(
            f"  targets: p50 <= 3 ms ({'met' if p50 <= 3 else 'MISSED'}), "
            f"p99 <= 15 ms ({'met' if p99 <= 15 else 'MISSED'}), "
            f"idle <= 5 cmds/s ({'met' if rows[0][2] <= 5 else 'MISSED'})"
        )
    finally:
        sink.__exit__(None, None, None)
        server.stop()


if __name__ == "__main__":
    main()
