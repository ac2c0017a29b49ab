"""How long the command line takes to start: ``--version`` and ``fetch --help`` beside bare Python.

Each command runs as a person types it (a new process through the installed ``research-worker``
script, imports included); the three are timed in turn, interleaved so the machine's load falls on
each alike, and the median of each is printed with its ratio to bare Python, beside the figures of
main before the command line deferred its imports (issue 34), measured the same way.

    python bench/cli_start.py [--runs 15]

Targets (issue 34): ``--version`` at most 8x a bare ``python -c pass``; ``fetch --help`` at most 20x.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(sys.executable).parent / "research-worker"

# Main at 18b28f3 (before issue 34), this script, 15 runs, load average 8.8 on 2 cores:
# medians in seconds and their ratios to bare Python measured in the same run.
BEFORE = {"bare python": (0.083, 1.0), "--version": (2.338, 28.3), "fetch --help": (2.180, 26.4)}
TARGETS = {"--version": 8.0, "fetch --help": 20.0}


def commands() -> dict[str, list[str]]:
    launcher = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "worker.cli"]
    return {
        "bare python": [sys.executable, "-c", "pass"],
        "--version": [*launcher, "--version"],
        "fetch --help": [*launcher, "fetch", "--help"],
    }


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, timeout=120, check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    options = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESEARCH_")}
    argvs = commands()
    for argv in argvs.values():  # warm the file cache and the bytecode once
        timed(argv, env)
    samples: dict[str, list[float]] = {label: [] for label in argvs}
    for _ in range(options.runs):
        for label, argv in argvs.items():
            samples[label].append(timed(argv, env))
    medians = {label: statistics.median(values) for label, values in samples.items()}
    bare = medians["bare python"]
    print(f"command line start, median of {options.runs} runs (load average {os.getloadavg()[0]:.1f})")
    print(f"  {'':<14} {'now':>9} {'ratio':>7}   {'before':>9} {'ratio':>7}   target")
    for label, seconds in medians.items():
        before_s, before_ratio = BEFORE[label]
        ratio = seconds / bare
        target = TARGETS.get(label)
        verdict = "" if target is None else f"<= {target:.0f}x  {'met' if ratio <= target else 'NOT MET'}"
        print(
            f"  {label:<14} {seconds:8.3f}s {ratio:6.1f}x   {before_s:8.3f}s {before_ratio:6.1f}x   {verdict}"
        )


if __name__ == "__main__":
    main()
