"""What a job receives: the runtime built once at start-up, and its own identity and budget handle."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from worker.budget import Tool
from worker.errors import BudgetExhausted

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from worker.budget import Budgets
    from worker.config import Settings
    from worker.menu import Menu
    from worker.metrics import Metrics
    from worker.results import ResultStore


@dataclass
class Runtime:
    """The shared state every job runs against, built by the worker's start-up hook."""

    settings: Settings
    redis: Redis
    budgets: Budgets
    results: ResultStore
    metrics: Metrics
    menu: Menu


@dataclass
class JobContext:
    runtime: Runtime
    tool: str
    job_id: str
    job_try: int
    report_id: str
    charged: bool = False

    @property
    def settings(self) -> Settings:
        return self.runtime.settings

    async def charge(self, tool: Tool) -> None:
        """Charge the report once for this job id; a re-run of the same job is not charged again."""
        charge = await self.runtime.budgets.charge(self.report_id, tool, self.job_id)
        if not charge.allowed:
            self.runtime.metrics.budget_refusals.labels(tool.value).inc()
            noun = "searches" if tool is Tool.SEARCH else "fetches"
            raise BudgetExhausted(f"report {self.report_id} has used all {charge.limit} {noun} of its budget")
        self.charged = True
