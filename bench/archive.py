"""The evidence archive's cost: fetch throughput with it on (a directory, and S3 on a loopback
server) against off, in one run; bytes stored per page with and without deduplication for 50
reports citing the same 20 pages; the time to export a 25-fetch report.

Throughput: one worker process per mode fetches the same mix of 20-500 KB pages from a local TLS
server (its own process) with the page cache off, so every job goes to the network and writes its
records (the 64 distinct pages repeat, so later copies are revisits, as re-fetches are). S3 is
moto in its own process on 127.0.0.1, served with keep-alive (``bench/_moto_keepalive.py``:
moto's own server closes every connection, which no real store does). Storage and export run in
this process against a directory archive, with real captures of the server's pages. The worker's
CPU per job is printed beside each rate: on a shared machine it is the steadier figure. Each round
runs every mode once, off first, so each round gives a share of off measured minutes apart; the
median of those shares is printed beside the best rates' share, and so is the share of the worker's
CPU (off's CPU per job over the mode's: what throughput would be where the worker's CPU is what
limits it), with the S3 server's own CPU per job, since on loopback it runs on the same cores.

    python bench/archive.py [--jobs 300] [--concurrency 16] [--modes off,directory,s3]

Targets (issues 27, 37): throughput with the archive on is at least 90 % of off, for both stores.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import io
import os
import shutil
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._support import (
    free_port,
    private_redis,
    start_module,
    stop,
    wait_for_health,
    wait_for_port,
    write_test_ca,
)
from worker.archive.capture import Capture, Hop
from worker.archive.directory import DirectoryStore
from worker.archive.export import export
from worker.archive.index import cited
from worker.archive.writer import Archive
from worker.client import ResearchClient
from worker.config import Settings
from worker.metrics import Metrics

REPORTS = 50
PAGES = 20
EXPORT_FETCHES = 25


async def through_worker(url: str, queue: str, port: int, jobs: int) -> tuple[float, int]:
    settings = Settings(redis_url=url, queue_name=queue)
    async with ResearchClient(settings=settings, wait_s=600) as client:
        started = time.perf_counter()
        ids = [
            await client.enqueue(
                "fetch_page",
                {"report_id": f"ar-{queue[-3:]}-{i // 20}", "url": f"https://127.0.0.1:{port}/page/{i}"},
            )
            for i in range(jobs)
        ]
        results = [await client.wait(job_id) for job_id in ids]
        elapsed = time.perf_counter() - started
    failed = [r for r in results if not r.get("ok")]
    if failed:
        raise SystemExit(f"{len(failed)} jobs failed, e.g. {failed[0]}")
    return elapsed, sum(1 for r in results if r.get("archived"))


def cpu_s(pid: int) -> float:
    """A process's CPU time so far (user and system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def make_bucket(endpoint: str, bucket: str) -> None:
    async def create() -> None:
        from aiobotocore.session import get_session

        async with get_session().create_client("s3", endpoint_url=endpoint) as s3:
            await s3.create_bucket(Bucket=bucket)

    asyncio.run(create())


async def captures_of(port: int, bundle: Path, count: int) -> list[Capture]:
    """Real pages from the server, captured as the fetcher would (head and body as received)."""
    context = ssl.create_default_context(cafile=str(bundle))
    found = []
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(ssl=context), auto_decompress=False
    ) as session:
        for n in range(count):
            url = f"https://127.0.0.1:{port}/page/{n}"
            async with session.get(url) as response:
                body = await response.read()
                head = (
                    b"\r\n".join(
                        [f"HTTP/1.1 {response.status} {response.reason}".encode()]
                        + [k + b": " + v for k, v in response.raw_headers]
                    )
                    + b"\r\n\r\n"
                )
            found.append((url, head, body))
    return [_capture(url, head, body) for url, head, body in found]


def _capture(url: str, head: bytes, body: bytes) -> Capture:
    capture = Capture()
    capture.hops.append(
        Hop(
            url,
            dt.datetime.now(dt.UTC),
            "127.0.0.1",
            b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
            head,
            True,
            [body],
        )
    )
    return capture


def stored_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


async def storage(redis_url: str, pages: list[Capture], root: Path, dedup: bool) -> int:
    import redis.asyncio as aioredis

    redis = aioredis.Redis.from_url(redis_url)
    archive = Archive(
        DirectoryStore(root),
        redis,
        Metrics(),
        queue_name="bench",
        worker_id="bench",
        days=90,
        window_s=3600,
        dedup=dedup,
    )
    archive.start()
    try:
        for report in range(REPORTS):
            receipts = [
                archive.fetched(
                    f"st-{dedup}-{report}", _capture(c.hops[0].url, c.hops[0].response_head, c.hops[0].body())
                )
                for c in pages
            ]
            for receipt in receipts:
                assert await receipt.landed(within_s=60) is not None
    finally:
        await archive.stop()
        await redis.aclose()
    return stored_bytes(root)


async def export_time(redis_url: str, pages: list[Capture], root: Path) -> tuple[float, int]:
    import redis.asyncio as aioredis

    redis = aioredis.Redis.from_url(redis_url)
    store = DirectoryStore(root)
    archive = Archive(store, redis, Metrics(), queue_name="bench", worker_id="bench", days=90, window_s=3600)
    archive.start()
    try:
        receipts = [archive.fetched("export-25", c) for c in pages[:EXPORT_FETCHES]]
        for receipt in receipts:
            assert await receipt.landed(within_s=60) is not None
        started = time.perf_counter()
        out = io.BytesIO()
        async for chunk in export(store, "export-25", await cited(redis, "export-25")):
            out.write(chunk)
        return time.perf_counter() - started, out.tell()
    finally:
        await archive.stop()
        await redis.aclose()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2, help="each mode runs this often; the best counts")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--modes", default="off,directory,s3", help="which modes run (off always does)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        bundle = write_test_ca(Path(tmp))
        port, s3_port = free_port(), free_port()
        server = start_module("bench._tls_server", {}, args=[tmp, str(port)])
        s3 = start_module("bench._moto_keepalive", {}, args=["127.0.0.1", str(s3_port)])
        wait_for_port(port)
        wait_for_port(s3_port)
        endpoint = f"http://127.0.0.1:{s3_port}"
        creds = {
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_DEFAULT_REGION": "us-east-1",
        }

        os.environ.update(creds)
        make_bucket(endpoint, "bench")
        redis = private_redis()
        env = {
            "REDIS_URL": redis.url,
            "RESEARCH_GUARDIAN_ALLOW_CIDRS": "127.0.0.1/32",
            "RESEARCH_CA_BUNDLE": str(bundle),
            "RESEARCH_URL_MENU": "off",
            "RESEARCH_LOG_LEVEL": "WARNING",
            "RESEARCH_CACHE_TTL_S": "0",
            "RESEARCH_FETCH_BUDGET": "1000",
            "RESEARCH_MAX_JOBS": str(args.concurrency),
            **creds,
        }
        modes = {
            "off": {"RESEARCH_ARCHIVE": "off"},
            "directory": {"RESEARCH_ARCHIVE": str(Path(tmp) / "archive")},
            "s3 (moto, loopback)": {
                "RESEARCH_ARCHIVE": "s3://bench/run/",
                "RESEARCH_ARCHIVE_ENDPOINT": endpoint,
            },
        }
        wanted = {"off", *args.modes.split(",")}
        modes = {mode: extra for mode, extra in modes.items() if mode.split(" ")[0] in wanted}
        rates: dict[str, tuple[float, int]] = {}
        cpu: dict[str, float] = {}
        server_cpu: dict[str, float] = {}
        per_round: dict[int, dict[str, float]] = {}
        runs = [(r, mode, extra) for r in range(args.rounds) for mode, extra in modes.items()]
        try:
            for n, (round_, mode, extra) in enumerate(runs):
                queue = f"ar:tp{n:03d}"
                worker = start_module("worker.cli", {**env, **extra, "RESEARCH_QUEUE": queue}, args=["run"])
                try:
                    wait_for_health(redis.url, queue, 1)
                    asyncio.run(through_worker(redis.url, queue, port, 20))  # warm the worker up
                    before, server_before = cpu_s(worker.pid), cpu_s(s3.pid)
                    elapsed, archived = asyncio.run(through_worker(redis.url, queue, port, args.jobs))
                    per_job = (cpu_s(worker.pid) - before) / args.jobs
                    cpu[mode] = min(cpu.get(mode, per_job), per_job)
                    served = (cpu_s(s3.pid) - server_before) / args.jobs
                    server_cpu[mode] = min(server_cpu.get(mode, served), served)
                    per_round.setdefault(round_, {})[mode] = args.jobs / elapsed
                    if mode not in rates or args.jobs / elapsed > rates[mode][0]:
                        rates[mode] = (args.jobs / elapsed, archived)
                finally:
                    stop(worker)

            pages = asyncio.run(captures_of(port, bundle, max(PAGES, EXPORT_FETCHES)))
            with_dedup = asyncio.run(storage(redis.url, pages[:PAGES], Path(tmp) / "dedup", True))
            without = asyncio.run(storage(redis.url, pages[:PAGES], Path(tmp) / "nodedup", False))
            export_s, export_bytes = asyncio.run(export_time(redis.url, pages, Path(tmp) / "export"))
            body_bytes = sum(len(c.hops[0].body()) for c in pages[:PAGES]) / PAGES
        finally:
            redis.stop()
            stop(server)
            stop(s3)
            shutil.rmtree(Path(tmp) / "archive", ignore_errors=True)

    off = rates["off"][0]
    print(
        f"archive throughput, {args.jobs} pages of 20-500 KB over TLS, cache off, c={args.concurrency},"
        f" best of {args.rounds} rounds (modes interleaved)"
    )
    for mode, (rate, archived) in rates.items():
        share = rate / off
        print(
            f"  archive {mode:20s} {rate:7.1f} jobs/s  ({share:.0%} of off; {archived} results archived; "
            f"worker CPU {cpu[mode] * 1000:.1f} ms/job)"
        )
    for mode in [m for m in rates if m != "off"]:
        share = rates[mode][0] / off
        shares = [rounds[mode] / rounds["off"] for rounds in per_round.values()]
        by_server = (
            f"; the S3 server's CPU {server_cpu[mode] * 1000:.1f} ms/job" if mode.startswith("s3") else ""
        )
        print(
            f"  target >= 90 % of off, {mode}: {'met' if share >= 0.9 else 'MISSED'} ({share:.0%}; median"
            f" of the rounds' shares {statistics.median(shares):.0%}; off's worker CPU per job is"
            f" {cpu['off'] / cpu[mode]:.0%} of this mode's{by_server})"
        )
    fetches = REPORTS * PAGES
    print(f"storage, {REPORTS} reports citing the same {PAGES} pages (mean body {body_bytes / 1024:.0f} KB),")
    print("  every fetch from the network (with the page cache on, a repeat is a cache hit: 0 bytes):")
    for label, size in (("without deduplication", without), ("with deduplication", with_dedup)):
        print(
            f"  {label + ':':23s}{size / fetches / 1024:8.1f} KB per page fetched, {size / 1e6:7.1f} MB all"
        )
    print(f"  deduplication stores {without / max(with_dedup, 1):.1f}x less")
    print(f"export of a {EXPORT_FETCHES}-fetch report: {export_s * 1000:.1f} ms, {export_bytes / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
