"""Load: thousands of fetch jobs on 4 workers and 200 reports, with slow, huge and failing pages.

Every job gets exactly one result, no report exceeds its budget, worker memory stays bounded; the
run prints throughput and the worst queue wait. `make chaos` runs the full size, CI a short one.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from bench._support import free_port, peak_rss_mb, wait_for_port, write_test_ca
from tests.support.processes import ROOT, start_worker, stop, wait_healthy
from worker.client import ResearchClient
from worker.config import Settings
from worker.state import keys

pytestmark = pytest.mark.chaos

MAX_RSS_MB = 400


@pytest.fixture
def page_server(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    bundle = write_test_ca(tmp_path)
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench._tls_server", str(tmp_path), str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port)
        yield port, bundle
    finally:
        proc.terminate()
        proc.wait(10)


def job_url(i: int, port: int) -> str:
    kind = i % 10
    if kind == 7:
        return f"https://127.0.0.1:{port}/slow/{i}?s=1.5"
    if kind == 8:
        return f"https://127.0.0.1:{port}/huge/{i}"
    if kind == 9:
        return f"https://127.0.0.1:{port}/fail/{i}"
    return f"https://127.0.0.1:{port}/page/{i}"


async def test_a_mixed_load_gets_one_result_per_job_and_never_overspends(
    settings: Settings,
    page_server: tuple[int, Path],
    redis: aioredis.Redis,
    token: str,
    chaos_short: bool,
) -> None:
    port, bundle = page_server
    workers_n, jobs_n, reports_n = (2, 300, 30) if chaos_short else (4, 2000, 200)
    env = {
        "RESEARCH_GUARDIAN_ALLOW_CIDRS": "127.0.0.1/32",
        "RESEARCH_CA_BUNDLE": str(bundle),
        "RESEARCH_URL_MENU": "off",
    }
    procs = [
        start_worker(settings, f"load{i}", module="tests.support.run_cli_worker", env=env)
        for i in range(workers_n)
    ]
    try:
        wait_healthy(settings, workers_n)
        # Ten jobs per report, plus five reports pushed 15 jobs past their 25-fetch budget.
        plan = [(f"load-{token}-{i % reports_n}", job_url(i, port)) for i in range(jobs_n)]
        plan += [(f"load-{token}-hot{h}", job_url(h * 40 + j, port)) for h in range(5) for j in range(40)]
        async with ResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=600) as client:
            started = time.monotonic()
            ids = [
                (await client.enqueue("fetch_page", {"report_id": r, "url": u, "extract": "main"}), r)
                for r, u in plan
            ]
            results = [(await client.wait(job_id), r) for job_id, r in ids]
            elapsed = time.monotonic() - started
            stored = [bool(await client.redis.exists(keys.result(job_id))) for job_id, _ in ids]
            charged = {r: int(await redis.hget(keys.budget(r), "fetch") or 0) for _, r in ids}
        rss = [peak_rss_mb(p.pid) for p in procs]
    finally:
        logs = [stop(p, timeout_s=90) for p in procs]

    kinds = collections.Counter("ok" if r["ok"] else r["error"]["kind"] for r, _ in results)
    ok_per_report = collections.Counter(rep for r, rep in results if r["ok"])
    waits = [
        line["queue_wait_ms"]
        for text in logs
        for raw in text.splitlines()
        if raw.startswith("{") and (line := json.loads(raw)).get("msg") == "job finished"
    ]
    print(
        f"\nload: {len(plan)} jobs, {workers_n} workers, {reports_n + 5} reports in {elapsed:.1f} s "
        f"= {len(plan) / elapsed:.1f} jobs/s; worst queue wait {max(waits) / 1000:.1f} s; "
        f"peak RSS per worker {max(rss):.0f} MB; outcomes {dict(kinds)}"
    )
    assert all(stored)
    assert len(waits) == len(plan)  # exactly one finished job per job: no job ran twice
    assert all(n <= 25 for n in charged.values())
    assert all(n <= 25 for n in ok_per_report.values())
    assert kinds["budget_exhausted"] == 5 * 15
    assert kinds["ok"] > 0
    assert set(kinds) <= {"ok", "budget_exhausted", "http_status", "timeout"}
    assert max(rss) < MAX_RSS_MB
