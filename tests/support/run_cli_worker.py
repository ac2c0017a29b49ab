"""``python -m tests.support.run_cli_worker``: ``research-worker run`` under the loopback safety net."""

from __future__ import annotations

from tests.support.run_cli_site import install
from worker.cli import main

if __name__ == "__main__":
    install()
    raise SystemExit(main(["run"]))
