"""Horizontal scale: the same fetch workload on 1, 2 and 4 worker processes.

A private redis-server and a TLS page server (synthetic 20-500 KB article pages) on loopback; the
workers are real `research-worker run` processes trusting only 127.0.0.1 and the bench's CA. Jobs
are spread over many reports, a few of which run past their 25-fetch budget on purpose.

    python bench/scale.py [--jobs 3000] [--reports 110] [--workers 1,2,4]

Prints throughput, the ratio to one worker, Redis commands per job, peak worker memory, and checks
that every job has exactly one result and that no report exceeded its budget.
Target (issue 8): 2 processes at least 1.8x one process on this 2-core machine.

``--commands`` also prints the Redis commands per job by name, and what one claim costs with 1 to
64 jobs already in flight, beside the claim script of before (issue 23: at most 50 commands per
fetch job, against about 93 before, and a claim whose cost does not grow with the jobs in flight).
A job's commands are counted from its enqueue to the client reading its result; the bench's own
seeding and checks are not a job's and are left out.
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

# Issue 23's anchors: a fetch job's Redis commands before this release's work on them (the cache,
# politeness, leases, first-wins results and dashboard buckets had taken it from 46 to this), and
# the target.
COMMANDS_BEFORE = 93
COMMANDS_TARGET = 50
IN_FLIGHT = (1, 8, 32, 64)

# The claim script of before, kept here only to measure beside today's: it walked the due head of
# the queue and paid an EXISTS for every job another claim already held.
OLD_CLAIM_DUE = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[4]))
local claimed = {}
local wanted = tonumber(ARGV[3])
for i = 1, #due, 2 do
  local key = ARGV[5] .. due[i]
  if redis.call('EXISTS', key) == 0 then
    redis.call('SET', key, ARGV[6], 'PX', ARGV[2])
    claimed[#claimed + 1] = due[i]
    claimed[#claimed + 1] = due[i + 1]
    claimed[#claimed + 1] = redis.call('GET', ARGV[7] .. due[i])
    if #claimed >= wanted * 3 then
      break
    end
  end
end
return claimed
"""


# What a bench connection itself sends to read the counters (INFO, and a new connection's CLIENT
# SETINFO): not a claim's.
READING = frozenset({"info", "client|setinfo", "client", "hello", "select"})


def spent(url: str, before: dict[str, int]) -> dict[str, int]:
    """Commands Redis ran since ``before`` (command_counts), by name, its own reading aside."""
    return {n: d for n, c in command_counts(url).items() if n not in READING and (d := c - before.get(n, 0))}


async def claim_costs(url: str) -> list[tuple[int, int, int]]:
    """(jobs in flight, commands of one claim today, of one claim with the script of before)."""
    from arq.constants import in_progress_key_prefix, job_key_prefix
    from redis.asyncio import Redis

    from worker.state.queue import Claimer

    redis = Redis.from_url(url)
    rows = []
    try:
        for in_flight in IN_FLIGHT:
            costs = []
            for old in (False, True):
                queue = f"claim-cost:{in_flight}:{int(old)}"
                now_ms = int(time.time() * 1000)
                for i in range(in_flight + 1):
                    job_id = f"{queue}:{i}"
                    await redis.set(job_key_prefix + job_id, b"{}")
                    await redis.zadd(queue, {job_id: now_ms - 60_000 + i})
                claimer = Claimer(redis, queue, 10_000, lambda ms: f"bench/0@{ms}")
                if not old:
                    assert len(await claimer.claim_due(in_flight)) == in_flight  # now in flight
                    before = command_counts(url)
                    assert len(await claimer.claim_due(1)) == 1
                else:
                    script = redis.register_script(OLD_CLAIM_DUE)
                    args = [
                        now_ms,
                        10_000,
                        in_flight,
                        1000,
                        in_progress_key_prefix,
                        "bench/0@1",
                        job_key_prefix,
                    ]
                    await script(keys=[queue], args=args)
                    before = command_counts(url)
                    await script(keys=[queue], args=[*args[:2], 1, *args[3:]])
                costs.append(sum(spent(url, before).values()))
            rows.append((in_flight, costs[0], costs[1]))
    finally:
        await redis.aclose()
    return rows


async def run_workload(
    url: str, queue: str, port: int, jobs: int, reports: int
) -> tuple[float, dict[str, int], dict[str, int]]:
    """Elapsed seconds, outcomes, and the Redis commands by name from the first enqueue to the
    last result read (the jobs' own; the seeding before and the checks after are left out)."""
    settings = Settings(redis_url=url, queue_name=queue)
    plan = [(f"scale-{i % reports}", f"https://127.0.0.1:{port}/page/{i}") for i in range(jobs)]
    async with ResearchClient(settings=settings, wait_s=600) as client:
        # As a briefing would: every URL is on its report's menu before the clock starts.
        for report in {r for r, _ in plan}:
            await client.seed_urls(report, [u for r, u in plan if r == report])
        by_name_before = command_counts(url)
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
        by_name = command_counts(url)
        job_commands = {n: c - by_name_before.get(n, 0) for n, c in by_name.items() if n != "info"}
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
    return elapsed, dict(outcomes), job_commands


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
        claims: list[tuple[int, int, int]] = []
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
                    elapsed, outcomes, by_name = asyncio.run(
                        run_workload(redis.url, queue, port, args.jobs, args.reports)
                    )
                    if args.commands:
                        top = sorted(by_name.items(), key=lambda item: -item[1])
                        print(f"  {count} worker(s), Redis commands per job by name:")
                        print("    " + ", ".join(f"{n} {c / args.jobs:.2f}" for n, c in top if c))
                        if count == 1:
                            claims = asyncio.run(claim_costs(redis.url))
                    cpu = {k: sum(cpu_s(p) for p in v) - cpu_before[k] for k, v in pids.items()}
                    cpu["client"] = time.process_time() - client_before
                    rss = [peak_rss_mb(w.pid) for w in workers]
                finally:
                    for w in workers:
                        stop(w)
                    redis.stop()
                rows.append((count, elapsed, outcomes, sum(by_name.values()) / args.jobs, max(rss), cpu))
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
    one = [r for r in rows if r[0] == 1]
    if one:
        per_job = one[0][3]
        met = "met" if per_job <= COMMANDS_TARGET else "MISSED"
        print(
            f"  Redis commands per fetch job (1 worker, 64 slots, cache misses, menu on): {per_job:.1f} "
            f"(before: {COMMANDS_BEFORE}; target <= {COMMANDS_TARGET}: {met})"
        )
    if args.commands and claims:
        print(
            "  one claim, as Redis counts it, with N jobs already in flight (today / the script of before):"
        )
        print("    " + ", ".join(f"N={n}: {now} / {old}" for n, now, old in claims))
        flat = len({now for _, now, _ in claims}) == 1
        print(f"  target: claim cost flat from 1 to 64 jobs in flight ({'met' if flat else 'MISSED'})")
    two = [r for r in rows if r[0] == 2]
    if two:
        ratio = (args.jobs / two[0][1]) / base
        print(f"  target: 2 processes >= 1.8x one ({'met' if ratio >= 1.8 else 'MISSED'}: x{ratio:.2f})")


if __name__ == "__main__":
    main()
