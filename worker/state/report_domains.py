"""One report's own domain lists, set by its orchestrator for the report's budget window.

A report's lists narrow the deployment's, never widen them: its blocked domains are added to the
deployment's, and its allow list is a second list a host must also be on. What Redis holds is
shared state, so a value of any other shape reads as no lists at all rather than an exception.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import orjson

from worker.guardian.domains import DomainPolicy, domains_of
from worker.state import keys

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from worker.config import Settings

# An allow or block list Redis holds in a shape no worker wrote: fail closed, allow nothing.
NOTHING = frozenset({"(unreadable list)"})


def deployment_policy(settings: Settings) -> DomainPolicy:
    return DomainPolicy(
        settings.blocked_domains, (settings.allowed_domains,) if settings.allowed_domains else ()
    )


def report_domains(redis: Redis, settings: Settings) -> ReportDomains:
    return ReportDomains(redis, window_s=settings.budget_window_s, deployment=deployment_policy(settings))


class ReportDomains:
    def __init__(self, redis: Redis, *, window_s: int, deployment: DomainPolicy) -> None:
        self._redis = redis
        self._window_s = window_s
        self.deployment = deployment

    async def set(self, report_id: str, *, allowed: Iterable[str] = (), blocked: Iterable[str] = ()) -> None:
        """Replace the report's lists; raise DomainListError for an entry that is not a domain."""
        value = {"allowed": sorted(domains_of(allowed)), "blocked": sorted(domains_of(blocked))}
        key = keys.domains(report_id)
        async with self._redis.pipeline(transaction=True) as tx:
            tx.hset(key, mapping={name: orjson.dumps(names) for name, names in value.items()})
            tx.expire(key, self._window_s)
            await tx.execute()

    async def policy(self, report_id: str) -> DomainPolicy:
        """The deployment's policy narrowed by the report's lists, if it has any."""
        raw = await self._redis.hmget(keys.domains(report_id), ["allowed", "blocked"])  # type: ignore[misc]
        allowed, blocked = (_names(value) for value in raw)
        if allowed is None or blocked is None:
            return self.deployment.narrowed(blocked=frozenset(), allowed=NOTHING)
        if not allowed and not blocked:
            return self.deployment
        return self.deployment.narrowed(blocked=blocked, allowed=allowed)


def _names(raw: bytes | None) -> frozenset[str] | None:
    """The list Redis holds; empty when there is none; None when it holds something unreadable."""
    if raw is None:
        return frozenset()
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        return None
    return frozenset(value)
