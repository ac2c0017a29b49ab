"""What a search provider is to web_search: a name, a readiness check, a search, and what it found.

A provider returns ``Found``: results already cleaned (``jobs.providers.cleaning``) and the spend
to record, ``None`` for a provider that costs nothing. It fails with a ``ResearchError``, or with
a ``PaidFailure`` (an ``UpstreamError`` with its spend) when the failing answer was billed; the two
failures after which another provider may still answer are ``RateLimited`` (credits out, or rate
limited after the retries) and ``ProviderUnavailable`` (a 5xx after the retries).

Every search runs against one ``Deadline`` for the job, shared with a fallback: the primary may
retry only while enough time is left for the fallback to run once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from worker.config import SearchProvider
from worker.errors import RateLimited, ResearchError, UpstreamError
from worker.state.result_records import Citation
from worker.state.spend import Spend

NOT_EVIDENCE = "the search may not have run, so this is not evidence that no sources exist"


class ProviderUnavailable(UpstreamError):
    """The provider answered with a server error (5xx) and kept doing so through the retries."""


@dataclass(frozen=True)
class Deadline:
    """When a search must be over (``at``, loop time) and the last moment a retry may start a wait."""

    at: float
    retry_until: float
    budget_s: float  # the whole search's time, for messages


@dataclass(frozen=True)
class Found:
    results: list[Citation]
    spend: Spend | None  # None: the provider is free, there is nothing to record


class Provider(Protocol):
    @property
    def name(self) -> SearchProvider: ...

    def check_ready(self, org_id: str | None) -> None:
        """Raise when this provider cannot search for ``org_id`` at all (no key): before any charge."""

    async def search(self, query: str, max_results: int, org_id: str | None, deadline: Deadline) -> Found: ...


class PaidFailure(UpstreamError):
    """An ``upstream_error`` on an answer the provider billed (a completion that cited nothing
    usable): web_search records ``spend`` before the failure is the result, since a failure
    nobody learns was paid for is spend nobody counts."""

    def __init__(self, message: str, spend: Spend = Spend()) -> None:  # noqa: B008 - frozen, shared safely
        super().__init__(message)
        self.spend = spend


def falls_back(error: ResearchError) -> bool:
    """Whether another provider may answer where this failure came from."""
    return isinstance(error, RateLimited | ProviderUnavailable)
