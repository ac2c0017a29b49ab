"""arq's own conventions keep working: ``arq worker.settings.WorkerSettings`` runs the same worker
as ``research-worker run``, ``arq --check`` answers for the queue however the worker was started,
and a plain arq client (with the orjson serializer) enqueues and reads results."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson
import pytest
import redis.asyncio as aioredis
from arq.connections import RedisSettings, create_pool
from arq.jobs import Job

from tests.support.processes import LOGS, ROOT, forget_jobs, settings_env, start_worker, stop, wait_healthy
from tests.support.run_cli_site import write_sitecustomize
from worker.config import Settings
from worker.serialization import loads_object as decode
from worker.state import keys

ARQ = shutil.which("arq", path=str(Path(sys.executable).parent))


@pytest.fixture
def arq_env(settings: Settings, tmp_path: Path) -> dict[str, str]:
    """The worker's environment, with the loopback guard installed in every arq process."""
    site = write_sitecustomize(tmp_path / "site")
    return settings_env(settings, PYTHONPATH=f"{site}{os.pathsep}{ROOT}", RESEARCH_SHUTDOWN_GRACE_S="2")


def arq(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    assert ARQ is not None, "arq's command line is installed with arq"
    return subprocess.run(
        [ARQ, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False
    )


def start_arq_worker(env: dict[str, str], worker_id: str, *args: str) -> subprocess.Popen[bytes]:
    assert ARQ is not None
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()
    process = subprocess.Popen(
        [ARQ, *args, "worker.settings.WorkerSettings"],
        cwd=ROOT,
        env={**env, "RESEARCH_WORKER_ID": worker_id},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    LOGS[process.pid] = log
    return process


async def plain_arq_client(settings: Settings) -> aioredis.Redis:
    # What docs/cli.md shows: arq's own pool, with orjson both ways (the worker never loads pickle).
    return await create_pool(
        RedisSettings.from_dsn(settings.redis_url or ""),
        job_serializer=orjson.dumps,
        job_deserializer=orjson.loads,
        default_queue_name=settings.queue_name,
    )


async def test_arq_runs_the_research_worker_and_a_plain_arq_client_reads_its_result(
    settings: Settings, arq_env: dict[str, str], redis: aioredis.Redis, report: str
) -> None:
    worker = start_arq_worker(arq_env, f"{settings.worker_id}-arq")
    pool = await plain_arq_client(settings)
    try:
        await asyncio.to_thread(wait_healthy, settings, 1)
        job = await pool.enqueue_job("fetch_page", report, "https://127.0.0.2/internal")
        assert job is not None
        result = await job.result(timeout=20)
    finally:
        await pool.aclose()
        log = await asyncio.to_thread(stop, worker)
    stored = decode(await redis.get(keys.result(job.job_id)))
    forget_jobs(settings, [job.job_id])
    assert result["tool"] == "fetch_page"
    assert result["error"]["kind"] == "destination_blocked"  # our guardian ran
    assert result["url"] == "https://127.0.0.2/internal"
    assert stored == result  # and our result key holds the same object
    assert "worker started" in log and "worker stopped" in log
    assert worker.returncode == 0


@pytest.mark.parametrize("started_by", ["research-worker run", "arq"])
async def test_arq_check_answers_for_the_queue_however_the_worker_was_started(
    started_by: str, settings: Settings, arq_env: dict[str, str], redis: aioredis.Redis
) -> None:
    before = await asyncio.to_thread(arq, "--check", "worker.settings.WorkerSettings", env=arq_env)
    if started_by == "arq":
        worker = start_arq_worker(arq_env, f"{settings.worker_id}-one")
    else:
        worker = start_worker(settings, "one", module="tests.support.run_cli_worker")
    try:
        await asyncio.to_thread(wait_healthy, settings, 1)
        during = await asyncio.to_thread(arq, "--check", "worker.settings.WorkerSettings", env=arq_env)
        replica_keys = [k async for k in redis.scan_iter(match=keys.health_pattern(settings.queue_name))]
    finally:
        await asyncio.to_thread(stop, worker)
    after = await asyncio.to_thread(arq, "--check", "worker.settings.WorkerSettings", env=arq_env)
    assert (before.returncode, during.returncode, after.returncode) == (1, 0, 1)
    assert "Health check successful" in during.stdout + during.stderr
    assert replica_keys == [keys.health(settings.queue_name, f"{settings.worker_id}-one").encode()]


async def test_the_queue_stays_healthy_while_another_replica_runs(
    settings: Settings, arq_env: dict[str, str]
) -> None:
    # arq's own worker deletes the queue's key as it stops, even with other workers running.
    staying = start_worker(settings, "stays", module="tests.support.run_cli_worker")
    leaving = start_arq_worker(arq_env, f"{settings.worker_id}-leaves")
    try:
        await asyncio.to_thread(wait_healthy, settings, 2)
        await asyncio.to_thread(stop, leaving)
        check = await asyncio.to_thread(arq, "--check", "worker.settings.WorkerSettings", env=arq_env)
    finally:
        await asyncio.to_thread(stop, staying)
    assert check.returncode == 0


async def test_arq_burst_runs_the_queued_jobs_then_exits(
    settings: Settings, arq_env: dict[str, str], report: str
) -> None:
    pool = await plain_arq_client(settings)
    try:
        job = await pool.enqueue_job("fetch_page", report, "http://plain.test/")
        assert job is not None
        proc = await asyncio.to_thread(arq, "--burst", "worker.settings.WorkerSettings", env=arq_env)
        info = await Job(job.job_id, pool, _deserializer=orjson.loads).result_info()
    finally:
        await pool.aclose()
    forget_jobs(settings, [job.job_id])
    assert proc.returncode == 0, proc.stderr
    assert info is not None and info.result["error"]["kind"] == "scheme_not_allowed"


def test_arq_with_a_bad_setting_stops_with_one_line(arq_env: dict[str, str]) -> None:
    proc = arq("worker.settings.WorkerSettings", env={**arq_env, "RESEARCH_FETCH_BUDGET": "-1"})
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "research-worker: configuration error: RESEARCH_FETCH_BUDGET: '-1' must be a positive integer"
    ]
