"""Start and stop real worker processes for tests that need them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import redis as syncredis

from worker.config import Settings
from worker.state import keys

ROOT = Path(__file__).resolve().parents[2]


def settings_env(settings: Settings, **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "REDIS_URL": settings.redis_url or "",
        "RESEARCH_QUEUE": settings.queue_name,
        "RESEARCH_MAX_JOBS": str(settings.max_jobs),
        "RESEARCH_FETCH_BUDGET": str(settings.fetch_budget),
        "RESEARCH_SEARCH_BUDGET": str(settings.search_budget),
        "RESEARCH_LOG_LEVEL": "INFO",
    }
    env.update(extra)
    return env


def start_worker(
    settings: Settings,
    name: str,
    *,
    module: str = "tests.support.worker_process",
    env: Mapping[str, str] = {},
) -> subprocess.Popen[bytes]:
    full_env = settings_env(settings, RESEARCH_WORKER_ID=f"{settings.worker_id}-{name}", **env)
    # The log goes to a file, not a pipe: a pipe nobody drains fills up and blocks the worker.
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop(), after the process ends
    process = subprocess.Popen(
        [sys.executable, "-m", module],
        env=full_env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    LOGS[process.pid] = log
    return process


LOGS: dict[int, IO[bytes]] = {}


def read_log(process: subprocess.Popen[bytes]) -> str:
    log = LOGS.get(process.pid)
    if log is None:
        return ""
    log.seek(0)
    return log.read().decode(errors="replace")


def wait_healthy(
    settings: Settings, count: int, timeout_s: float = 120.0, *, redis_url: str | None = None
) -> None:
    """Wait until ``count`` replicas have written their health keys (read at ``redis_url`` when the
    settings name Redis through Sentinel, which a plain client cannot follow)."""
    client = syncredis.Redis.from_url(redis_url or settings.redis_url or "")
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if len(list(client.scan_iter(match=keys.health_pattern(settings.queue_name)))) >= count:
                return
            time.sleep(0.05)
    finally:
        client.close()
    raise TimeoutError(f"{count} workers did not report healthy within {timeout_s} s")


def stop(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout_s: float = 60.0) -> str:
    """Signal the process, wait for it, and return what it logged."""
    if process.poll() is None:
        process.send_signal(sig)
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    text = read_log(process)
    log = LOGS.pop(process.pid, None)
    if log is not None:
        log.close()
    return text


@contextmanager
def worker_processes(
    settings: Settings, count: int, **kwargs: object
) -> Iterator[list[subprocess.Popen[bytes]]]:
    procs = [start_worker(settings, f"p{i}", **kwargs) for i in range(count)]  # type: ignore[arg-type]
    try:
        wait_healthy(settings, count)
        yield procs
    finally:
        for proc in procs:
            stop(proc)


def forget_jobs(settings: Settings, job_ids: list[str]) -> None:
    """Delete the keys of jobs whose ids carry no test token (jobs enqueued by the real CLI)."""
    client = syncredis.Redis.from_url(settings.redis_url or "")
    try:
        for job_id in job_ids:
            client.delete(
                *(
                    f"{prefix}{job_id}"
                    for prefix in ("arq:job:", "arq:result:", "arq:retry:", "arq:in-progress:")
                ),
                keys.result(job_id),
                keys.done(job_id),
            )
    finally:
        client.close()
