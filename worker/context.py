"""What a job receives: the runtime built once at start-up, and its own identity and budget handle."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from worker.budget import Budgets, Tool
from worker.errors import BudgetExhausted

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from worker.config import Settings
    from worker.menu import Menu
    from worker.metrics import Metrics
    from worker.results import ResultStore

T = TypeVar("T")


@dataclass
class Runtime:
    """Built by the worker's start-up hook and handed to every job through arq's ``ctx``."""

    settings: Settings
    redis: Redis
    budgets: Budgets
    results: ResultStore
    metrics: Metrics
    menu: Menu
    clients: dict[type, object] = field(default_factory=dict)

    def provide(self, client: object) -> None:
        """Register a tool's long-lived client (the guarded HTTP session, the search provider)."""
        self.clients[type(client)] = client

    def client(self, kind: type[T]) -> T:
        found = self.clients.get(kind)
        if not isinstance(found, kind):
            raise RuntimeError(f"{kind.__name__} was not started by this worker")
        return found


@dataclass
class JobContext:
    runtime: Runtime
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
