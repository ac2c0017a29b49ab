"""Run a command while busy loops hold the machine's cores: ``make test-under-load``.

    python tests/support/busy.py [--loops N] -- COMMAND ...

Starts N processes that spin (default: one per core), runs COMMAND, and stops the loops it started
whatever the outcome (a failure, Ctrl-C, a SIGTERM), by their own process ids. Exits with the
command's status, so the suite's verdict is the target's.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

SPIN = "while True: pass"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--loops", type=int, default=os.cpu_count() or 2)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command to run")
    loops = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(max(0, args.loops))]
    # A SIGTERM to this process ends the command and the loops alike (the finally below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.monotonic()
    try:
        print(f"busy.py: {len(loops)} busy loops running beside: {' '.join(command)}", flush=True)
        return subprocess.call(command)
    finally:
        for loop in loops:
            loop.kill()
        for loop in loops:
            loop.wait()
        print(f"busy.py: loops stopped after {time.monotonic() - started:.0f} s", flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
