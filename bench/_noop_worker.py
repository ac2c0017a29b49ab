"""Worker processes for bench/roundtrip.py: ours with a no-op tool, or plain arq with its defaults."""

from __future__ import annotations

import os
import sys
from typing import Any

from worker import logs
from worker.config import Settings
from worker.runtime.envelope import FunctionTool
from worker.runtime.worker import ResearchWorker


async def _noop(job: Any, args: dict[str, Any]) -> dict[str, Any]:
    return {}


NOOP = FunctionTool("noop", (), lambda s: 5.0, _noop)


async def arq_noop(ctx: dict[str, Any]) -> dict[str, Any]:
    return {}


def main() -> None:
    if os.environ.get("BENCH_FLAVOR") == "arq-default":
        from arq.connections import RedisSettings
        from arq.worker import Worker

        worker = Worker(
            functions=[arq_noop],
            redis_settings=RedisSettings.from_dsn(os.environ["REDIS_URL"]),
            queue_name=os.environ["RESEARCH_QUEUE"],
            health_check_key=f"{os.environ['RESEARCH_QUEUE']}:health-check:arq",
        )
        worker.run()
        return
    settings = Settings.from_env()
    logs.configure("WARNING")
    ResearchWorker(settings, (NOOP,)).run()


if __name__ == "__main__":
    sys.exit(main())
