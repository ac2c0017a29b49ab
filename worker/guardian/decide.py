"""The guardian's verdict on one URL without connecting: what ``check-url`` prints.

It runs the same checks a fetch runs on every hop, in the same order: the raw URL checks and the
address policy on an IP literal (urls.check_url), the deployment's domain lists, then, for a name,
the resolver's rule (every answer judged, one denied answer refuses the name).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Any, NotRequired, TypedDict

from aiohttp.abc import AbstractResolver
from aiohttp.resolver import ThreadedResolver

from worker.errors import DomainNotAllowed, GuardianRefusal, ResearchError
from worker.guardian.connector import GuardedResolver
from worker.guardian.domains import DomainPolicy
from worker.guardian.policy import AddressPolicy
from worker.guardian.urls import check_url
from worker.guardian.verdict import IPAddress


class Decision(TypedDict):
    """The verdict ``check-url`` prints: allow or refuse, why, and (when allowed) where it goes."""

    verdict: str
    kind: str | None
    reason: str
    detail: str
    url: NotRequired[str]
    addresses: NotRequired[list[str]]


async def decide(
    raw_url: str,
    policy: AddressPolicy,
    resolves_to: Sequence[IPAddress] = (),
    resolver: AbstractResolver | None = None,
    domains: DomainPolicy | None = None,
) -> Decision:
    try:
        target = check_url(raw_url, policy)
        # The domain lists come next, before DNS, as in a fetch: a refused host is never resolved.
        refusal = domains.refusal(target.host) if domains is not None else None
        if refusal is not None:
            raise DomainNotAllowed(f"{refusal}, so this deployment does not fetch from it")
        if target.address is not None:
            verdict = policy.classify(target.address)
            addresses = [str(target.address)]
        else:
            inner = _FixedResolver(resolves_to) if resolves_to else (resolver or ThreadedResolver())
            answers = await GuardedResolver(policy, inner).resolve(target.host, target.port)
            addresses = [a["host"] for a in answers]
            verdict = policy.classify(ipaddress.ip_address(addresses[0]))
        return {
            "verdict": "allow",
            "kind": None,
            "reason": verdict.reason,
            "detail": verdict.detail,
            "url": target.url,
            "addresses": addresses,
        }
    except ResearchError as refusal:
        return {
            "verdict": "refuse",
            "kind": refusal.kind,
            "reason": refusal.reason if isinstance(refusal, GuardianRefusal) else refusal.kind,
            "detail": refusal.message,
        }


class _FixedResolver(AbstractResolver):
    """Answers every name with the addresses given on the command line (--resolves-to)."""

    def __init__(self, addresses: Sequence[IPAddress]) -> None:
        self._addresses = list(addresses)

    async def resolve(self, host: str, port: int = 0, family: int = 0) -> list[Any]:
        import socket

        return [
            {
                "hostname": host,
                "host": str(a),
                "port": port,
                "family": socket.AF_INET6 if a.version == 6 else socket.AF_INET,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
            for a in self._addresses
        ]

    async def close(self) -> None:
        return None
