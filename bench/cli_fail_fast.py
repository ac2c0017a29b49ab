"""How long each command takes to say it cannot go on: Redis down, or no worker on the queue.

Every command runs as a person types it (a new process, imports included), against a Redis
address where nothing listens, and ``fetch``/``search`` also against a private Redis where no worker
runs; each is timed several times, and the slowest run is printed beside the issue's anchor.

    python bench/cli_fail_fast.py [--runs 3]

Anchors (issue 13): Redis down, every command within about 3 s and ``health`` within about 1 s;
no worker alive, ``fetch`` within about 3 s. (``dashboard`` is not here: with Redis down it
serves its pages with 503 until Redis is back, issue 24.)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._support import ROOT, free_port, private_redis

DOWN = {
    "run --burst": (["run", "--burst"], 3.0),
    "fetch": (["fetch", "https://example.org/", "--report", "r-1"], 3.0),
    "search": (["search", "tidal energy", "--report", "r-1"], 3.0),
    "budget": (["budget", "r-1"], 3.0),
    "health": (["health"], 1.0),
}
NO_WORKER = {
    "fetch": (["fetch", "https://example.org/", "--report", "r-1"], 3.0),
    "search": (["search", "tidal energy", "--report", "r-1"], 3.0),
}


def timed(args: list[str], env: dict[str, str]) -> tuple[float, int]:
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "worker.cli", *args], cwd=ROOT, env=env, capture_output=True, timeout=60
    )
    return time.perf_counter() - started, proc.returncode


def row(label: str, args: list[str], anchor_s: float, env: dict[str, str], runs: int, want: int) -> None:
    results = [timed(args, env) for _ in range(runs)]
    worst = max(seconds for seconds, _ in results)
    codes = sorted({code for _, code in results})
    verdict = "ok" if worst <= anchor_s and codes == [want] else "OVER"
    print(f"  {label:<14} worst {worst:5.2f} s   anchor {anchor_s:4.1f} s   exit {codes}   {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    base = {k: v for k, v in os.environ.items() if not k.startswith("RESEARCH_")}
    base["PYTHONPATH"] = str(ROOT)

    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import worker.cli"], cwd=ROOT, env=base, check=True)
    startup_s = time.perf_counter() - started
    print(f"machine noise: starting Python and importing the command line takes {startup_s:.2f} s\n")

    down = {**base, "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"}
    print(
        f"Redis down (nothing listens at {down['REDIS_URL']}), {options.runs} runs each, "
        "process start included"
    )
    for label, (args, anchor) in DOWN.items():
        row(label, args, anchor, down, options.runs, want=4)

    server = private_redis()
    try:
        idle = {**base, "REDIS_URL": server.url, "RESEARCH_QUEUE": "bench:no-worker"}
        print(f"\nNo worker alive on the queue (a private Redis at {server.url})")
        for label, (args, anchor) in NO_WORKER.items():
            row(label, args, anchor, idle, options.runs, want=5)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
