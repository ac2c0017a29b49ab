"""The shared page cache: 50 reports reading the same 20 pages at once over 2 worker processes.

A private redis-server, a TLS page server (the synthetic 20-500 KB article pages of the fetch
benchmarks) that counts the requests it receives, the requests in flight at once and the open
connections, and real `research-worker run` processes trusting only 127.0.0.1 and the bench's
CA, with the URL menu on (every report's 20 URLs seeded, as a briefing would). The same workload
runs with the cache on (RESEARCH_CACHE_TTL_S=900) and off (0), each on a fresh Redis.

    python bench/cache.py [--reports 50] [--pages 20] [--workers 2] [--max-jobs 16] [--host-limit 4]
                          [--server-delay-ms 20]

Prints, cache on beside cache off: requests reaching the server (target: one per page), jobs per
second, the run time of the jobs served from the cache (measured by the workers, from a job's
start to its result written): with all 1,000 jobs at once, where 32 jobs share two cores and each
waits for the others, and then 200 hits one at a time (target p50 at most 5 ms), beside the same
hits as a client sees them (enqueue to result in hand); the peak of requests in flight to the one
host (at most the host limit; the server thinks 20 ms before answering, as real servers do, or no
two requests would overlap) and of open connections to it (idle keep-alive connections count
there, so it may pass the limit), and Redis memory per cached page.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import ssl
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import redis as syncredis
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._support import (
    free_port,
    percentile,
    private_redis,
    start_module,
    stop,
    wait_for_health,
    wait_for_port,
    write_test_ca,
)
from bench._tls_server import build_app
from worker.client import ResearchClient
from worker.config import Settings
from worker.serialization import loads
from worker.state import keys
from worker.state.pages.entry import KeptPage, decode

SEQUENTIAL_HITS = 200


class Counter:
    """What the page server saw: requests, requests in flight, connections that carried one."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.requests = 0
        self.in_flight = 0
        self.peak_in_flight = 0
        self.open: set[int] = set()
        self.transports: dict[int, asyncio.BaseTransport] = {}
        self.peak_open = 0

    def stats(self) -> dict[str, int]:
        return {
            "requests": self.requests,
            "peak_in_flight": self.peak_in_flight,
            "peak_open_connections": self.peak_open,
        }


def serve(cert_dir: Path, port: int, delay_s: float) -> None:
    """The page server (its own process): bench._tls_server's pages after ``delay_s`` of think time
    (a real server's, without which no two requests would ever overlap), counted, and /_stats."""
    counter = Counter()

    @web.middleware
    async def counting(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path.startswith("/_"):
            return await handler(request)  # type: ignore[no-any-return]
        counter.requests += 1
        counter.in_flight += 1
        counter.peak_in_flight = max(counter.peak_in_flight, counter.in_flight)
        transport = request.transport
        if transport is not None:
            counter.transports[id(transport)] = transport
            for key, seen in list(counter.transports.items()):
                if seen.is_closing():
                    del counter.transports[key]
            counter.peak_open = max(counter.peak_open, len(counter.transports))
        try:
            await asyncio.sleep(delay_s)
            # Sent here, not after the middleware returns, so the count covers the body's transfer.
            response: web.StreamResponse = await handler(request)
            await response.prepare(request)
            await response.write_eof()
            return response
        finally:
            counter.in_flight -= 1

    async def stats(request: web.Request) -> web.Response:
        return web.json_response(counter.stats())

    async def reset(request: web.Request) -> web.Response:
        counter.reset()
        return web.json_response({})

    app = build_app()
    app.middlewares.append(counting)
    app.router.add_get("/_stats", stats)
    app.router.add_post("/_reset", reset)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_dir / "server.pem")
    web.run_app(app, host="127.0.0.1", port=port, ssl_context=context, print=None, access_log=None)


async def server_call(port: int, bundle: Path, method: str, path: str) -> dict[str, int]:
    context = ssl.create_default_context(cafile=str(bundle))
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, f"https://127.0.0.1:{port}{path}", ssl=context) as response,
    ):
        return dict(await response.json())


@dataclass
class Run:
    label: str
    jobs: int = 0
    elapsed_s: float = 0.0
    outcomes: dict[str, int] = field(default_factory=dict)
    hits: int = 0
    hit_run_ms: list[float] = field(default_factory=list)
    sequential_hit_ms: list[float] = field(default_factory=list)
    sequential_run_ms: list[float] = field(default_factory=list)
    server: dict[str, int] = field(default_factory=dict)
    cached_pages: int = 0
    page_memory: list[int] = field(default_factory=list)
    entry_bytes: list[int] = field(default_factory=list)


async def workload(url: str, queue: str, port: int, bundle: Path, args: argparse.Namespace, run: Run) -> None:
    settings = Settings(redis_url=url, queue_name=queue)
    pages = [f"https://127.0.0.1:{port}/page/{i}" for i in range(args.pages)]
    reports = [f"cache-{n}" for n in range(args.reports)]
    plan = [(r, p) for r in reports for p in pages]
    random.Random(1).shuffle(plan)  # every report reads its pages at once, in no shared order
    async with ResearchClient(settings=settings, wait_s=600) as client:
        for report in reports:
            await client.seed_urls(report, pages)
        await server_call(port, bundle, "POST", "/_reset")
        started = time.perf_counter()
        ids = [
            await client.enqueue("fetch_page", {"report_id": r, "url": p, "extract": "main"}) for r, p in plan
        ]
        results = [await client.wait(job_id) for job_id in ids]
        run.elapsed_s = time.perf_counter() - started
        run.jobs = len(ids)
        run.server = await server_call(port, bundle, "GET", "/_stats")
        for result in results:
            kind = "ok" if result.get("ok") else result["error"]["kind"]
            run.outcomes[kind] = run.outcomes.get(kind, 0) + 1
        run.hits = sum(1 for r in results if r.get("cached") is True)
        mine = set(ids)
        for raw in await client.redis.lrange(keys.recent(queue), 0, -1):
            line = loads(raw)
            if line.get("job_id") in mine and line.get("cached") is True:
                run.hit_run_ms.append(float(line["duration_ms"]))
        if args.sequential and run.hits:
            sequential: set[str] = set()
            for i in range(SEQUENTIAL_HITS):
                reader = f"cache-sequential-{i // args.pages}"
                if i % args.pages == 0:
                    await client.seed_urls(reader, pages)
                began = time.perf_counter()
                result = await client.fetch(reader, pages[i % args.pages])
                if result.get("cached") is True:
                    run.sequential_hit_ms.append((time.perf_counter() - began) * 1000)
                    sequential.add(result["job_id"])
            for raw in await client.redis.lrange(keys.recent(queue), 0, SEQUENTIAL_HITS - 1):
                line = loads(raw)
                if line.get("job_id") in sequential:
                    run.sequential_run_ms.append(float(line["duration_ms"]))


def page_memory(url: str, queue: str, run: Run) -> None:
    """MEMORY USAGE of every cached page: its entry, the kept document the entry names (which holds
    the page's text), and their share of the cache's and the documents' bookkeeping keys."""
    client = syncredis.Redis.from_url(url)
    try:
        entries = list(client.scan_iter(match=keys.page(queue, "*", "*"), count=1000))
        bookkeeping = sum(
            int(client.memory_usage(key) or 0)
            for key in (
                keys.page_index(queue),
                keys.page_bytes(queue),
                keys.document_index(queue),
                keys.document_bytes(queue),
            )
        )
        run.cached_pages = len(entries)
        for key in entries:
            share = bookkeeping // max(1, len(entries))
            raw = client.get(key) or b""
            entry = decode(raw)
            document = 0
            if isinstance(entry, KeptPage):
                document = int(client.memory_usage(keys.document(entry.document), samples=0) or 0)
            run.page_memory.append(int(client.memory_usage(key, samples=0) or 0) + document + share)
            run.entry_bytes.append(len(raw))
    finally:
        client.close()


def measure(label: str, ttl_s: int, port: int, bundle: Path, args: argparse.Namespace) -> Run:
    run = Run(label)
    redis = private_redis()
    queue = f"cache-bench:{ttl_s}"
    env = {
        "REDIS_URL": redis.url,
        "RESEARCH_QUEUE": queue,
        "RESEARCH_GUARDIAN_ALLOW_CIDRS": "127.0.0.1/32",
        "RESEARCH_CA_BUNDLE": str(bundle),
        "RESEARCH_CACHE_TTL_S": str(ttl_s),
        "RESEARCH_HOST_CONCURRENCY": str(args.host_limit),
        "RESEARCH_MAX_JOBS": str(args.max_jobs),
        "RESEARCH_LOG_LEVEL": "WARNING",
    }
    workers = [
        start_module("worker.cli", {**env, "RESEARCH_WORKER_ID": f"cache-{ttl_s}-{i}"}, args=["run"])
        for i in range(args.workers)
    ]
    try:
        wait_for_health(redis.url, queue, args.workers)
        asyncio.run(workload(redis.url, queue, port, bundle, args, run))
        page_memory(redis.url, queue, run)
    finally:
        for worker in workers:
            stop(worker)
        redis.stop()
    return run


def ms(values: list[float], q: float) -> str:
    return f"{percentile(values, q):.2f} ms" if values else "-"


def report(on: Run, off: Run, args: argparse.Namespace) -> None:
    pages = args.pages
    print(
        f"page cache: {args.reports} reports x {pages} pages (20-500 KB, TLS, extract=main) at once, "
        f"{args.workers} worker processes x {args.max_jobs} jobs, host limit {args.host_limit}"
    )
    rows = [
        ("requests reaching the server", lambda r: str(r.server.get("requests")), f"target {pages}"),
        ("jobs per second", lambda r: f"{r.jobs / r.elapsed_s:.0f}", ""),
        ("outcomes", lambda r: ", ".join(f"{k}: {v}" for k, v in sorted(r.outcomes.items())), ""),
        ("cache hits", lambda r: str(r.hits), f"{args.reports * pages - pages} possible"),
        ("hit job run time, all at once, p50", lambda r: ms(r.hit_run_ms, 50), "32 jobs share 2 cores"),
        ("hit job run time, all at once, p99", lambda r: ms(r.hit_run_ms, 99), ""),
        ("hit job run time, one at a time, p50", lambda r: ms(r.sequential_run_ms, 50), "target <= 5 ms"),
        ("hit job run time, one at a time, p99", lambda r: ms(r.sequential_run_ms, 99), ""),
        ("hit, one at a time, client p50", lambda r: ms(r.sequential_hit_ms, 50), "enqueue to result"),
        ("hit, one at a time, client p99", lambda r: ms(r.sequential_hit_ms, 99), ""),
        (
            "peak requests in flight, one host",
            lambda r: str(r.server.get("peak_in_flight")),
            f"limit {args.host_limit}",
        ),
        (
            "peak open connections, one host",
            lambda r: str(r.server.get("peak_open_connections")),
            "keep-alive too",
        ),
        ("cached pages in Redis", lambda r: str(r.cached_pages), ""),
        (
            "Redis memory per cached page",
            lambda r: kb(r.page_memory),
            "entry + its document (both formats) + bookkeeping",
        ),
        ("cached entry size (mean)", lambda r: kb(r.entry_bytes), ""),
    ]
    print(f"  {'':36} {on.label:>16} {off.label:>16}   anchor")
    for name, value, anchor in rows:
        print(f"  {name:36} {value(on):>16} {value(off):>16}   {anchor}")
    hit_p50 = percentile(on.sequential_run_ms, 50) if on.sequential_run_ms else float("inf")
    verdicts = [
        ("one request per page", on.server.get("requests") == pages),
        ("hit p50 <= 5 ms", hit_p50 <= 5.0),
        (
            "in flight <= host limit",
            max(on.server.get("peak_in_flight", 0), off.server.get("peak_in_flight", 0)) <= args.host_limit,
        ),
    ]
    print("  targets: " + ", ".join(f"{name} {'met' if ok else 'MISSED'}" for name, ok in verdicts))


def kb(values: list[int]) -> str:
    return f"{statistics.fmean(values) / 1024:.1f} KB" if values else "-"


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        serve(Path(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--reports", type=int, default=50)
    parser.add_argument("--pages", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--max-jobs", type=int, default=16)
    parser.add_argument("--host-limit", type=int, default=4)
    parser.add_argument("--server-delay-ms", type=float, default=20.0)
    parser.add_argument("--no-sequential", dest="sequential", action="store_false")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        bundle = write_test_ca(Path(tmp))
        port = free_port()
        delay_s = str(args.server_delay_ms / 1000)
        server = start_module("bench.cache", {}, args=["serve", tmp, str(port), delay_s])
        try:
            wait_for_port(port)
            on = measure("cache on", 900, port, bundle, args)
            off = measure("cache off", 0, port, bundle, args)
        finally:
            stop(server)
    report(on, off, args)


if __name__ == "__main__":
    main()
