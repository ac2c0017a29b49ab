"""``python -m tests.support.run_cli ...``: the real command line, under the loopback safety net."""

from __future__ import annotations

from tests.support import loopback
from worker.cli import main

if __name__ == "__main__":
    loopback.install()
    raise SystemExit(main())
