"""An idle worker's Redis traffic, measured as an operator would: ``research-worker run`` with its
default settings, nothing queued, on a redis-server of its own, ``INFO commandstats`` over 30 s
(commands a script runs count, as Redis counts them).

    python bench/idle_commands.py [--seconds 30] [--settle-s 5]

Target (issue 2, kept since release 1): at most 5 Redis commands a second. Prints the rate, the
commands behind it (calls per second each), and the target beside it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis as syncredis

from bench._support import ROOT, command_counts, private_redis, stop, wait_for_health

TARGET = 5.0
QUEUE = "research:queue"  # the default


def idle_counts(url: str, seconds: float) -> dict[str, float]:
    """Calls per second of each command over ``seconds`` (our own two INFO calls left out)."""
    before = command_counts(url)
    time.sleep(seconds)
    after = command_counts(url)
    rates = {name: (after[name] - before.get(name, 0)) / seconds for name in after}
    rates["info"] = rates.get("info", 0.0) - 1 / seconds
    return {name: rate for name, rate in rates.items() if rate > 0.001}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--settle-s", type=float, default=10.0, help="after the first beat, before counting")
    args = parser.parse_args()

    server = private_redis()
    home = tempfile.mkdtemp(prefix="bench-idle-")
    try:
        env = {"REDIS_URL": server.url, "XDG_DATA_HOME": home, "PATH": "/usr/bin:/bin"}
        worker = subprocess.Popen(
            [str(Path(sys.executable).with_name("research-worker")), "run"],
            env={**env, "PYTHONPATH": str(ROOT), "HOME": home},
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for_health(server.url, QUEUE, 1, timeout_s=120)
            time.sleep(args.settle_s)
            rates = idle_counts(server.url, args.seconds)
        finally:
            stop(worker)
        client = syncredis.Redis.from_url(server.url)
        try:
            dbsize = client.dbsize()
        finally:
            client.close()
    finally:
        server.stop()
    total = sum(rates.values())
    print(f"idle worker, default settings, nothing queued, own redis-server, {args.seconds:g} s")
    for name, rate in sorted(rates.items(), key=lambda item: -item[1]):
        print(f"  {name:24s} {rate:6.2f} /s")
    print(f"  keys in Redis at the end: {dbsize}")
    verdict = "met" if total <= TARGET else "MISSED"
    print(f"idle Redis commands: {total:.2f} /s   target <= {TARGET:g} /s ({verdict})")


if __name__ == "__main__":
    main()
