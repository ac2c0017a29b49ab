"""A worker process that runs the test tools: ``python -m tests.support.worker_process``.

Configured from the environment exactly as ``research-worker run`` is; used where a test needs
real separate processes (atomic budgets across workers, SIGKILL, SIGTERM).
"""

from __future__ import annotations

from tests.support import loopback
from tests.support.tools import TEST_TOOLS
from worker import logs
from worker.config import Settings
from worker.runtime.worker import ResearchWorker
from worker.settings import tools


def main() -> None:
    loopback.install()
    settings = Settings.from_env()
    logs.configure(settings.log_level)
    ResearchWorker(settings, (*tools(), *TEST_TOOLS)).run()


if __name__ == "__main__":
    main()
