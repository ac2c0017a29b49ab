"""Shared pieces for benchmarks: a private Redis, percentiles, worker processes, figure tables."""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import redis as syncredis

from worker.embedded import EmbeddedRedis
from worker.state import keys

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def private_redis() -> EmbeddedRedis:
    """A redis-server of our own on loopback TCP, so command counts include nobody else's traffic."""
    server = EmbeddedRedis(port=free_port())
    server.start()
    return server


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary_ms(values: Sequence[float]) -> str:
    ms = [v * 1000 for v in values]
    return (
        f"p50 {percentile(ms, 50):7.2f} ms  p90 {percentile(ms, 90):7.2f} ms  "
        f"p99 {percentile(ms, 99):7.2f} ms  mean {statistics.fmean(ms):7.2f} ms  n={len(ms)}"
    )


def command_counts(url: str) -> dict[str, int]:
    """Calls per command so far, as Redis counts them (commands inside scripts included)."""
    client = syncredis.Redis.from_url(url)
    try:
        stats = client.info("commandstats")
    finally:
        client.close()
    return {name.removeprefix("cmdstat_"): int(row["calls"]) for name, row in stats.items()}


def commands_processed(url: str) -> int:
    client = syncredis.Redis.from_url(url)
    try:
        return int(client.info("stats")["total_commands_processed"])
    finally:
        client.close()


def start_module(module: str, env: dict[str, str], args: Sequence[str] = ()) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", module, *args],
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def wait_for_health(url: str, queue: str, count: int, timeout_s: float = 30) -> None:
    client = syncredis.Redis.from_url(url)
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if len(list(client.scan_iter(match=keys.health_pattern(queue)))) >= count:
                return
            time.sleep(0.05)
    finally:
        client.close()
    raise TimeoutError("workers did not start")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def write_test_ca(directory: Path) -> Path:
    """A trustme CA and a server certificate for 127.0.0.1; returns the CA bundle for the workers."""
    import trustme

    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    server = ca.issue_cert("127.0.0.1", "localhost")
    server.private_key_and_cert_chain_pem.write_to_path(str(directory / "server.pem"))
    return directory / "ca.pem"


def wait_for_port(port: int, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port}")


def peak_rss_mb(pid: int) -> float:
    """A process's peak resident memory (VmHWM), in MB; NaN when it cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")
