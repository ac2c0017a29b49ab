"""Horizontal scale: the same fetch workload on 1, 2 and 4 worker processes.

A private redis-server and a TLS page server (synthetic 20-500 KB article pages) on loopback; the
workers are real `research-worker run` processes trusting only 127.0.0.1 and the bench's CA. Jobs
are spread over many reports, a few of which run past their 25-fetch budget on purpose.

    python bench/scale.py [--jobs 3000] [--reports 110] [--workers 1,2,4]

Prints throughput, the ratio to one worker, Redis commands per job, peak worker memory, and checks
that every job has exactly one result and that no report exceeded its budget.
Target (issue 8): 2 processes at least 1.8x one process on this 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._support import (
    command_counts,
    commands_processed,
    free_port,
    peak_rss_mb,
    private_redis,
    start_module,
    stop,
    wait_for_health,
    wait_for_port,
    write_test_ca,
)
from worker.client import ResearchClient
from worker.config import Settings
from worker.state import keys


async def run_workload(
    url: str, queue: str, port: int, jobs: int, reports: int
) -> tuple[float, dict[str, int]]:
    settings = Settings(redis_url=url, queue_name=queue)
    plan = [(f"scale-{i % reports}", f"https://127.0.0.1:{port}/page/{i}") for i in range(jobs)]
    async with ResearchClient(settings=settings, wait_s=600) as client:
        # As a briefing would: every URL is on its report's menu before the clock starts.
        for report in {r for r, _ in plan}:
            await client.seed_urls(report, [u for r, u in plan if r == report])
        started = time.perf_counter()
        ids = []
        for report, page in plan:
            kwargs = {"report_id": report, "url": page, "extract": "main"}
            ids.append((await client.enqueue("fetch_page", kwargs), report))
        outcomes: collections.Counter[str] = collections.Counter()
        ok_per_report: collections.Counter[str] = collections.Counter()
        for job_id, report in ids:
            result = await client.wait(job_id)
            kind = "ok" if result.get("ok") else result["error"]["kind"]
            outcomes[kind] += 1
            if kind == "ok":
                ok_per_report[report] += 1
        elapsed = time.perf_counter() - started
        # Checks: one result key per job, and no report charged or served past its budget.
        missing = 0
        for job_id, _ in ids:
            if not await client.redis.exists(keys.result(job_id)):
                missing += 1
        over = 0
        for report in {r for _, r in ids}:
            charged = int(await client.redis.hget(keys.budget(report), "fetch") or 0)
            if charged > settings.fetch_budget or ok_per_report[report] > settings.fetch_budget:
                over += 1
        outcomes["_missing_results"] = missing
        outcomes["_reports_over_budget"] = over
    return elapsed, dict(outcomes)


def cpu_s(pid: int) -> float:
    """User plus system CPU seconds a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--reports", type=int, default=110)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--commands", action="store_true", help="print the Redis commands per job, by name")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        bundle = write_test_ca(Path(tmp))
        port = free_port()
        server = start_module("bench._tls_server", {}, args=[tmp, str(port)])
        wait_for_port(port)
        rows = []
        try:
            for count in [int(n) for n in args.workers.split(",")]:
                redis = private_redis()
                queue = f"scale:{count}"
                env = {
                    "REDIS_URL": redis.url,
                    "RESEARCH_QUEUE": queue,
                    "RESEARCH_GUARDIAN_ALLOW_CIDRS": "127.0.0.1/32",
                    "RESEARCH_CA_BUNDLE": str(bundle),
                    "RESEARCH_LOG_LEVEL": "WARNING",
                    # Every page is on one local host; this bench measures CPU scale-out, so the
                    # per-host politeness limit (bench/cache.py measures it) must not bound it.
                    "RESEARCH_HOST_CONCURRENCY": "256",
                }
                workers = [
                    start_module(
                        "worker.cli", {**env, "RESEARCH_WORKER_ID": f"scale-{count}-{i}"}, args=["run"]
                    )
                    for i in range(count)
                ]
                try:
                    wait_for_health(redis.url, queue, count)
                    pids = {
                        "workers": [w.pid for w in workers],
                        "page server": [server.pid],
                        "redis": [redis.pid],
                    }
                    cpu_before = {k: sum(cpu_s(p) for p in v) for k, v in pids.items()}
                    client_before = time.process_time()
                    before = commands_processed(redis.url)
                    by_name_before = command_counts(redis.url)
                    elapsed, outcomes = asyncio.run(
                        run_workload(redis.url, queue, port, args.jobs, args.reports)
                    )
                    after = commands_processed(redis.url)
                    by_name = command_counts(redis.url)
                    if args.commands:
                        spent = {n: c - by_name_before.get(n, 0) for n, c in by_name.items()}
                        top = sorted(spent.items(), key=lambda item: -item[1])[:15]
                        print(f"  {count} worker(s), Redis commands per job by name:")
                        print("    " + ", ".join(f"{n} {c / args.jobs:.1f}" for n, c in top if c))
                    cpu = {k: sum(cpu_s(p) for p in v) - cpu_before[k] for k, v in pids.items()}
                    cpu["client"] = time.process_time() - client_before
                    rss = [peak_rss_mb(w.pid) for w in workers]
                finally:
                    for w in workers:
                        stop(w)
                    redis.stop()
                rows.append((count, elapsed, outcomes, (after - before) / args.jobs, max(rss), cpu))
        finally:
            stop(server)

    base = args.jobs / rows[0][1]
    print(
        f"fetch_page scale-out: {args.jobs} jobs over {args.reports} reports, pages 20-500 KB over TLS, "
        f"extract=main, {os.cpu_count()} cores"
    )
    for count, elapsed, outcomes, per_job, rss, cpu in rows:
        rate = args.jobs / elapsed
        kinds = ", ".join(f"{k}: {v}" for k, v in sorted(outcomes.items()) if not k.startswith("_"))
        print(
            f"  {count} worker(s): {rate:7.1f} jobs/s  x{rate / base:4.2f} of one  "
            f"{per_job:5.1f} Redis cmds/job  peak RSS/worker {rss:6.1f} MB  outcomes {{{kinds}}}  "
            f"missing results {outcomes['_missing_results']}  "
            f"reports over budget {outcomes['_reports_over_budget']}"
        )
        busy = ", ".join(f"{k} {v / elapsed:.2f}" for k, v in cpu.items())
        print(f"      cores busy during the run: {busy} (of {os.cpu_count()})")
    two = [r for r in rows if r[0] == 2]
    if two:
        ratio = (args.jobs / two[0][1]) / base
        print(f"  target: 2 processes >= 1.8x one ({'met' if ratio >= 1.8 else 'MISSED'}: x{ratio:.2f})")


if __name__ == "__main__":
    main()
