"""``python -m tests.support.run_cli ...``: the real command line, under the loopback safety net.

``run_cli(...)`` runs it from a test, as a separate process, and returns what it printed.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_cli(
    *args: str, env: Mapping[str, str] | None = None, timeout_s: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.support.run_cli", *args],
        cwd=ROOT,
        env=None if env is None else dict(env),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


if __name__ == "__main__":
    from tests.support.run_cli_site import install
    from worker.cli import main

    install()
    raise SystemExit(main())
