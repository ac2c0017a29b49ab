"""What a job receives: the runtime built once at start-up, and its own identity and budget handle."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from worker.errors import BudgetExhausted
from worker.state.budget import Tool, utc_day_of_ms
from worker.tracing.export import Tracing
from worker.tracing.phases import MENU_AND_BUDGET, phase

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from worker.config import Settings
    from worker.metrics import Metrics
    from worker.runtime.cpu_slots import CpuSlots
    from worker.state.budget import Budgets
    from worker.state.clock import RedisClock
    from worker.state.menu import Menu
    from worker.state.results import ResultStore


# arq's ``ctx``: a dict arq hands every job and hook, holding arq's own values ("redis", "job_id",
# "job_try", ...) of arq's choosing; the one place its type is written.
ArqContext: TypeAlias = dict[str, Any]


@dataclass
class Runtime:
    """The shared state every job runs against, built by the worker's start-up hook."""

    settings: Settings
    redis: Redis
    budgets: Budgets
    results: ResultStore
    metrics: Metrics
    menu: Menu
    cpu_slots: CpuSlots
    clock: RedisClock  # Redis's clock, for the times that scripts on the main Redis store
    tracing: Tracing = field(default_factory=lambda: Tracing(None))  # off unless configured
    # Job ids whose result this worker wrote (or found written) and whose finish arq has not
    # recorded yet: at the finish, a job that is not here gets a stand-in result, so no job ends
    # without one.
    settled: set[str] = field(default_factory=set)


@dataclass
class JobContext:
    runtime: Runtime
    tool: str
    job_id: str
    job_try: int
    report_id: str
    deadline: float  # event-loop time by which the job's result must be ready
    # The trace context a job this one hands work to carries (this job's span, or its caller's).
    traceparent: str | None = None
    org_id: str | None = None  # the organization the orchestrator (or an MCP token) named

    @property
    def settings(self) -> Settings:
        return self.runtime.settings

    async def charge(self, tool: Tool) -> None:
        """Charge the report once for this job id; a re-run of the same job is not charged again."""
        with phase(MENU_AND_BUDGET):
            org = None
            if self.org_id is not None:
                # Redis's clock names the day, so every worker starts the organization's day together.
                org = (self.org_id, utc_day_of_ms(await self.runtime.clock.now_ms()))
            charge = await self.runtime.budgets.charge(self.report_id, tool, self.job_id, org)
        if not charge.allowed:
            self.runtime.metrics.budget_refusals.labels(tool.value).inc()
            noun = {Tool.SEARCH: "searches", Tool.FETCH: "fetches", Tool.RENDER: "renders"}[tool]
            if charge.by_org:
                raise BudgetExhausted(
                    f"organization {self.org_id} has used all {charge.org_limit} {noun} of its daily "
                    "budget; it renews at 00:00 UTC"
                )
            raise BudgetExhausted(f"report {self.report_id} has used all {charge.limit} {noun} of its budget")
