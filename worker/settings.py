"""The composition root: where the runtime meets the tools.

The worker (``worker.runtime``) knows only the ``ToolJob`` interface; this module names the tools
it runs and builds a worker with them. It is the only module in ``worker/`` that imports ``jobs/``.
"""

from __future__ import annotations

from aiohttp.abc import AbstractResolver

from jobs.definitions import tool_definitions
from jobs.fetch import FetchPageTool
from jobs.search import WebSearchTool
from worker.config import Settings
from worker.envelope import ToolJob
from worker.runtime import ResearchWorker

__all__ = ["build_worker", "tool_definitions", "tools"]


def tools(resolver: AbstractResolver | None = None) -> tuple[ToolJob, ...]:
    """The tools a worker runs; tests pass a fake resolver, production uses the system's."""
    return (WebSearchTool(), FetchPageTool(resolver))


def build_worker(settings: Settings, *, burst: bool = False) -> ResearchWorker:
    return ResearchWorker(settings, tools(), burst=burst)
